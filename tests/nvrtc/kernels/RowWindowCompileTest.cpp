// The programs of tests/support/RowWindowProgram.hpp through NVRTC and ptxas for both archs: row
// windows (whole 16-byte words where the start is provably aligned), and tiles that start before
// row and column 0 (both edges tested): valid CUDA, no spills.
#include <gtest/gtest.h>

#include "support/RowWindowProgram.hpp"
#include "support/TestSupport.hpp"

namespace {

using tessel::DType;

TEST(RowWindowCompile, WindowsAndNegativeStartsCompile) {
  for (const char* arch : {"sm_80", "sm_90a"})
    for (DType t : {DType::f16, DType::bf16, DType::f32}) {
      SCOPED_TRACE(std::string(arch) + " " + std::string(tessel::dtype_name(t)));
      tessel::JitOptions o;
      o.arch = arch;
      for (bool aligned : {true, false}) {
        auto k = tessel::jit(tessel::test::row_window_program(64, 1023, t, aligned), o);
        EXPECT_EQ(k.resources().spill_store_bytes + k.resources().spill_load_bytes, 0) << k.compile_log();
        if (aligned) {
          EXPECT_NE(k.ptx().find("ld.global.nc.v4"), std::string::npos) << "no 16-byte loads";
          EXPECT_NE(k.ptx().find("st.global.v4"), std::string::npos) << "no 16-byte stores";
        }
      }
      auto s = tessel::jit(tessel::test::shifted_tile_program(13, 50, t), o);
      EXPECT_EQ(s.resources().spill_store_bytes + s.resources().spill_load_bytes, 0) << s.compile_log();
      auto fill = tessel::jit(tessel::test::shifted_fill_program(13, 50, t), o);
      EXPECT_EQ(fill.resources().spill_store_bytes + fill.resources().spill_load_bytes, 0) << fill.compile_log();
    }
}

}  // namespace
