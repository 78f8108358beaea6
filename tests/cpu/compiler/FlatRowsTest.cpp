// The flat-rows layout (infer_layouts): tiles whose rows are not whole 16-byte vectors but whose
// rows x columns are, held as the run they are in memory -- which tiles take it, what the passes
// emit for them (whole aligned words, the reductions' device call, no per-element guard), the
// errors for tiles no layout takes, and the interpreter's numbers for the same programs.
#include <gtest/gtest.h>

#include <random>

#include "Lower.hpp"
#include "codegen/CodegenCuda.hpp"
#include "support/LoweringSupport.hpp"
#include "support/SoftmaxReference.hpp"
#include "support/TestSupport.hpp"
#include "tessel/interp/Interpreter.hpp"
#include "tessel/kernels/softmax/Softmax.hpp"
#include "tessel/tessel.hpp"

namespace {

namespace T = tessel;
using tessel::DType;
using tessel::test::compile_error_of;
using tessel::test::sm90;
using tessel::test::stage_text;

tessel::LoweredFunc lower_softmax(long long M, long long N, DType t, const std::string& config) {
  return tessel::lower(
      tessel::kernels::softmax_program(M, N, t, tessel::kernels::parse_softmax_config(config)).ir(), sm90(), true);
}

std::string source_of(long long M, long long N, DType t, const std::string& config) {
  return tessel::codegen::generate_cuda(lower_softmax(M, N, t, config));
}

TEST(FlatRowsLayout, OddWidthTilesAsWideAsTheRowTakeIt) {
  auto lowered = lower_softmax(4096, 127, DType::f16, "rows:t256:r64:bn127");
  const std::string layouts = stage_text(lowered, "infer_layouts");
  // 64 x 127 f16 = 1016 words of 8 over 256 threads: a run of 4 words each; row vectors 2 a thread.
  EXPECT_NE(layouts.find("flat rows, a run of 4 words of 8 a thread, 32 registers per thread"), std::string::npos)
      << layouts;
  EXPECT_NE(layouts.find("row vector beside flat rows, the 2 rows of a thread's run, 2 registers per thread"),
            std::string::npos)
      << layouts;
  const std::string src = tessel::codegen::generate_cuda(lowered);
  EXPECT_NE(src.find("tessel::reduce_flat_rows<tessel::ReduceMaxOp, 32, 256, 64, 127>"), std::string::npos) << src;
  EXPECT_NE(src.find("tessel::reduce_flat_rows<tessel::ReduceSumOp, 32, 256, 64, 127>"), std::string::npos) << src;
  // Whole aligned words in and out (4096 rows: every block's run is whole), no span, no masked
  // path, and no test at all in the element-wise nests: no per-element guard (they touch only
  // registers), no warp-uniform form (a warp's 32 runs of 32 cover 8 rows of 127: a row
  // boundary in every warp).
  EXPECT_NE(src.find("tessel::load_vector_or_zeros<tessel::half_t, 8, float>"), std::string::npos) << src;
  EXPECT_NE(src.find("tessel::store_row_vector_whole<tessel::half_t, 8, float>"), std::string::npos) << src;
  EXPECT_EQ(src.find("span"), std::string::npos) << src;
  EXPECT_EQ(src.find("tessel::load_row_vector<"), std::string::npos) << src;
  EXPECT_EQ(src.find("if ("), std::string::npos) << src;
  // The row vector beside the tile: the run's first row while the register is in the run's head,
  // a whole row-only subexpression selected at once (m * log2 e computed per thread, not per
  // element).
  EXPECT_NE(src.find("((l < (127 - ((tx * 32) % 127))) ? (fragment_1[0] * 1.4426950216293335f) : (fragment_1[1] * "
                     "1.4426950216293335f))"),
            std::string::npos)
      << src;
  // Rows longer than a warp's runs (8 x 2051 f16 over 512 threads, runs of 40): most warps hold
  // no row boundary, and those take a copy of each nest that reads the first register alone.
  const std::string wide = source_of(64, 2051, DType::f16, "rows:t512:r8:bn2051");
  EXPECT_NE(wide.find("if (tessel::warp_all(((2051 - ((tx * 40) % 2051)) >= 40)))"), std::string::npos) << wide;
  EXPECT_NE(wide.find("tessel::fast_exp2(((fragment_0[l] * 1.4426950216293335f) - (fragment_1[0] * 1.4426950216293335f)))"),
            std::string::npos)
      << wide;
}

TEST(FlatRowsLayout, ARaggedLastBlockTakesTheMaskedWordsAtItsRunsEnd) {
  // 4097 rows: the last block has one row, 127 elements -- its run ends inside a word.
  const std::string src = source_of(4097, 127, DType::f16, "rows:t256:r64:bn127");
  EXPECT_NE(src.find("tessel::load_row_vector<tessel::half_t, 8, float>"), std::string::npos) << src;
  EXPECT_NE(src.find("tessel::store_row_vector<tessel::half_t, 8, float>"), std::string::npos) << src;
  EXPECT_NE(src.find("% 8) == 0)"), std::string::npos) << src;  // the block's test of its run
  // f32 rows (4-element words), bf16 1023 (one run of 4 words a thread over 8 rows).
  EXPECT_NE(source_of(100, 127, DType::f32, "rows:t256:r32:bn127").find("reduce_flat_rows<tessel::ReduceMaxOp, 16, 256, 32, 127>"),
            std::string::npos);
  EXPECT_NE(source_of(100, 1023, DType::bf16, "rows:t256:r8:bn1023").find("reduce_flat_rows<tessel::ReduceSumOp, 32, 256, 8, 1023>"),
            std::string::npos);
}

TEST(FlatRowsLayout, TilesNoLayoutTakesAreErrorsThatSayWhatIsLegal) {
  // 3 x 127 f16: 381 elements, not whole 8-element words (and rows of 127 are not whole vectors).
  std::string msg = compile_error_of([] { lower_softmax(64, 127, DType::f16, "rows:t256:r3:bn127"); });
  EXPECT_NE(msg.find("cannot lay out fragment_0 [3, 127] for a reduction over dim 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("whose rows x columns are a multiple of 8 with more than 8 columns and at most 8 vectors a thread"),
            std::string::npos)
      << msg;
  // 8 x 127 f16 over 32 threads: a run of 4 words a thread -- but 7 x 127 is not whole words.
  EXPECT_EQ(compile_error_of([] { lower_softmax(64, 127, DType::f16, "rows:t32:r8:bn127"); }), "<no error>");
  msg = compile_error_of([] { lower_softmax(64, 127, DType::f16, "rows:t32:r7:bn127"); });
  EXPECT_NE(msg.find("cannot lay out fragment_0 [7, 127]"), std::string::npos) << msg;
}

TEST(FlatRowsLayout, ARowVectorWrittenInsideTheTilesNestIsAnError) {
  T::PrimFunc f("flat_store");
  auto X = f.tensor("X", {64, 127}, T::f16);
  auto Y = f.tensor("Y", {64, 127}, T::f16);
  f.body([&] {
    T::Kernel(1, 256, [&](T::Var) {
      auto x = T::alloc_fragment({64, 127}, T::f32);
      auto m = T::alloc_fragment({64}, T::f32);
      T::copy(X(0, 0), x);
      T::reduce_max(x, m, 1);
      T::Parallel(64, 127, [&](T::Var i, T::Var j) { m(i) = m(i) + x(i, j); });
      T::copy(x, Y(0, 0));
    });
  });
  const std::string msg = compile_error_of([&] { tessel::lower(f.ir(), sm90()); });
  EXPECT_NE(msg.find("stores to row vector fragment_1 inside a nest over a tile laid out as flat rows"),
            std::string::npos)
      << msg;
}

// One row vector fed by reductions of tiles laid out differently (flat rows and row-blocked
// rows) cannot hold both layouts: an error naming it.
TEST(FlatRowsLayout, ReductionsOfDifferentlyLaidOutTilesIntoOneVectorAreAnError) {
  T::PrimFunc f("two_layouts");
  auto X = f.tensor("X", {64, 127}, T::f16);
  auto Z = f.tensor("Z", {64, 128}, T::f16);
  auto Y = f.tensor("Y", {64}, T::f32);
  f.body([&] {
    T::Kernel(1, 256, [&](T::Var) {
      auto x = T::alloc_fragment({64, 127}, T::f32);
      auto z = T::alloc_fragment({64, 128}, T::f32);
      auto m = T::alloc_fragment({64}, T::f32);
      T::copy(X(0, 0), x);
      T::copy(Z(0, 0), z);
      T::reduce_max(x, m, 1);
      T::reduce_max(z, m, 1, false);
      T::copy(m, Y(0));
    });
  });
  const std::string msg = compile_error_of([&] { tessel::lower(f.ir(), sm90()); });
  EXPECT_NE(msg.find("fragment_2 receives reductions of tiles laid out differently"), std::string::npos) << msg;
}

// The programs above on the interpreter against float64 (the same IR the flat layout lowers:
// the layout changes where elements live, not what the program computes).
TEST(FlatRowsLayout, TheInterpreterRunsTheSamePrograms) {
  struct Case {
    long long M, N;
    DType t;
    const char* config;
  };
  for (const Case& c : {Case{130, 127, DType::f16, "rows:t256:r64:bn127"}, Case{70, 129, DType::bf16, "rows:t256:r64:bn129"},
                        Case{9, 1023, DType::f16, "rows:t256:r8:bn1023"}, Case{33, 127, DType::f32, "rows:t256:r32:bn127"},
                        Case{300, 9, DType::f16, "rows:t256:r224:bn9"}}) {
    SCOPED_TRACE(std::to_string(c.M) + "x" + std::to_string(c.N) + " " + c.config);
    std::mt19937_64 seeds(std::random_device{}());
    auto x = tessel::interp::HostTensor::random(c.t, {c.M, c.N}, seeds(), -4, 4);
    auto prog = tessel::kernels::softmax_program(c.M, c.N, c.t, tessel::kernels::parse_softmax_config(c.config));
    EXPECT_NE(stage_text(tessel::lower(prog.ir(), sm90(), true), "infer_layouts").find("flat rows"),
              std::string::npos);
    auto y = tessel::interp::run_on_cpu(prog, {x}, {-1});
    const double err = tessel::test::rel_error(y[0].to_values(), tessel::test::reference_softmax(x.to_values(), c.M, c.N));
    EXPECT_LE(err, c.t == DType::f32 ? 1e-5 : 1e-2) << "relative error " << err;
  }
}

}  // namespace
