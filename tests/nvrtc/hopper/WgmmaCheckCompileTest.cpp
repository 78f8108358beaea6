// The gpu tier's wgmma check kernel (support/WgmmaCheckKernel.hpp) compiles for sm_90a in every
// variant it runs, with wgmma in its PTX and no spills, so that a failure on the GPU machine
// is about the instruction's layouts, not the test's source.
#include <gtest/gtest.h>

#include "support/WgmmaCheckKernel.hpp"
#include "tessel/runtime/Nvrtc.hpp"

namespace tessel {
namespace {

TEST(WgmmaCheckKernel, CompilesInEveryVariant) {
  for (bool f16 : {true, false})
    for (int n : {64, 128, 256})
      for (int trans_b : {0, 1})
        for (bool from_regs : {true, false}) {
          SCOPED_TRACE(std::string(f16 ? "f16" : "bf16") + " N=" + std::to_string(n) +
                       " trans_b=" + std::to_string(trans_b) + (from_regs ? " rs" : " ss"));
          CompileOptions o;
          o.arch = "sm_90a";
          o.extra_flags = test::wgmma_check_flags(f16, n, trans_b, from_regs);
          const CompiledKernel k = nvrtc_compile(test::kWgmmaCheckKernel, "wgmma_check", o);
          const std::string op = "wgmma.mma_async.sync.aligned.m64n" + std::to_string(n) + "k16.f32." +
                                 (f16 ? "f16.f16" : "bf16.bf16");
          EXPECT_NE(k.ptx.find(op), std::string::npos) << op;
          EXPECT_EQ(k.resources.spill_store_bytes, 0) << k.log;
        }
}

}  // namespace
}  // namespace tessel
