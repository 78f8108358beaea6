// The SASS loop reader behind `tessel dump --sass-loops`, on nvdisasm-shaped text: loops found by
// their branches back (predicated or not, to a label that names the next instruction), ranges
// that overlap without nesting (a wait's retry placed after the code it returns to), opcodes
// counted without their modifiers or guard predicates, and text without loops.
#include <gtest/gtest.h>

#include "tools/tessel/SassLoops.hpp"

namespace {

using tessel::cli::format_sass_loops;
using tessel::cli::sass_loops;

const char* kSass = R"(
        /*0000*/                   MOV R1, c[0x0][0x28] ;
.L_x_1:
        /*0010*/                   FFMA R2, R3, R4, R5 ;
        /*0020*/                   MUFU.EX2 R6, R2 ;
.L_x_2:
        /*0030*/                   FMNMX.NAN R7, R6, R7, !PT ;
        /*0040*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R8 ;
        /*0050*/              @!P0 BRA `(.L_x_9) ;
.L_x_3:
        /*0060*/                   FMNMX.NAN R7, R6, R7, !PT ;
        /*0070*/               @P1 BRA `(.L_x_2) ;
        /*0080*/                   BRA `(.L_x_1) ;
        /*0090*/                   EXIT ;
.L_x_9:
        /*00a0*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R8 ;
        /*00b0*/              @!P0 BRA `(.L_x_9) ;
        /*00c0*/                   BRA `(.L_x_3) ;
)";

TEST(SassLoops, BranchesBackMakeLoops) {
  const auto loops = sass_loops(kSass);
  ASSERT_EQ(loops.size(), 4u) << format_sass_loops(loops);
  // 0x10-0x80: the outer loop, with the inner one inside it.
  EXPECT_EQ(loops[0].start, 0x10);
  EXPECT_EQ(loops[0].end, 0x80);
  EXPECT_EQ(loops[0].instructions, 8);
  EXPECT_FALSE(loops[0].innermost);
  EXPECT_EQ(loops[0].opcodes.at("FMNMX"), 2);
  EXPECT_EQ(loops[0].opcodes.at("MUFU"), 1);
  EXPECT_EQ(loops[0].opcodes.at("BRA"), 3);
  // 0x30-0x70: the inner loop; the forward branch to the retry does not make one.
  EXPECT_EQ(loops[1].start, 0x30);
  EXPECT_EQ(loops[1].end, 0x70);
  EXPECT_EQ(loops[1].instructions, 5);
  EXPECT_TRUE(loops[1].innermost);
  EXPECT_EQ(loops[1].opcodes.count("FFMA"), 0u);
  // 0x60-0xc0: the retry's way back overlaps the inner loop without nesting in it.
  EXPECT_EQ(loops[2].start, 0x60);
  EXPECT_EQ(loops[2].end, 0xc0);
  EXPECT_FALSE(loops[2].innermost);  // the retry's own loop lies inside it
  // 0xa0-0xb0: the wait's retry.
  EXPECT_EQ(loops[3].start, 0xa0);
  EXPECT_EQ(loops[3].instructions, 2);
  EXPECT_TRUE(loops[3].innermost);
  EXPECT_EQ(loops[3].opcodes.at("SYNCS"), 1);
  const std::string text = format_sass_loops(loops);
  EXPECT_NE(text.find("loop 0x30-0x70: 5 instructions, innermost: BRA 2 FMNMX 2 SYNCS 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("loop 0x10-0x80: 8 instructions: BRA 3 FMNMX 2 FFMA 1 MUFU 1 SYNCS 1\n"),
            std::string::npos)
      << text;
}

TEST(SassLoops, TextWithoutLoops) {
  EXPECT_TRUE(sass_loops("").empty());
  EXPECT_TRUE(sass_loops("        /*0000*/                   EXIT ;\n").empty());
  EXPECT_EQ(format_sass_loops({}), "no loops (no branch back to an earlier instruction)\n");
  // A branch forward, and one to a label nothing defines, make no loop.
  EXPECT_TRUE(
      sass_loops(
          ".L_x_1:\n  /*0000*/  BRA `(.L_x_2) ;\n  /*0010*/  BRA `(.L_x_7) ;\n.L_x_2:\n  /*0020*/  EXIT ;\n")
          .empty());
}

TEST(SassLoops, ManyOpcodesAreCutAtSixteen) {
  std::string sass = ".L_x_1:\n";
  for (int i = 0; i < 20; ++i) {
    char line[80];
    std::snprintf(line, sizeof line, "        /*%04x*/  OP%02d R1, R2 ;\n", i * 16, i);
    sass += line;
  }
  sass += "        /*0140*/  BRA `(.L_x_1) ;\n";
  const std::string text = format_sass_loops(sass_loops(sass));
  EXPECT_NE(text.find("21 instructions, innermost:"), std::string::npos) << text;
  EXPECT_NE(text.find("(+5 other opcodes)"), std::string::npos) << text;
}

}  // namespace
