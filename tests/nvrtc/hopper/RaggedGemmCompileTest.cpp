// A ring loop whose trip count is read from a tensor (ragged_k_gemm_program) through NVRTC and
// ptxas: on sm_90a with gemm_from_passes, a TMA + mbarrier ring with a producer warpgroup that
// reads the trip count itself, persistent with the ring's position carried from tile to tile;
// on sm_90a without it and on sm_80, the mma.sync main loop (cp.async). No spills.
// verify_pipelines checks the ring's protocol for several values of the trip count (before, such
// a program was an InternalError on sm_90a).
#include <gtest/gtest.h>

#include "support/RaggedGemmProgram.hpp"
#include "support/TestSupport.hpp"

namespace {

namespace T = tessel;

TEST(RaggedRing, CompilesForEveryTarget) {
  for (const char* arch : {"sm_90a", "sm_80"})
    for (bool from_passes : {false, true}) {
      SCOPED_TRACE(std::string(arch) + (from_passes ? " gemm_from_passes" : ""));
      T::JitOptions o;
      o.arch = arch;
      o.gemm_from_passes = from_passes;
      auto k = T::jit(T::test::ragged_k_gemm_program(1000, 600, 1000), o);
      const std::string& ptx = k.ptx();
      if (std::string(arch) == "sm_90a" && from_passes) {
        EXPECT_EQ(k.info().path.rfind("sm90 wgmma block gemm (generic kernel), TMA + mbarrier ring, warp-specialized, persistent", 0), 0u)
            << k.info().path;
        EXPECT_NE(ptx.find("cp.async.bulk.tensor.2d"), std::string::npos);
        EXPECT_NE(ptx.find("mbarrier.try_wait"), std::string::npos);
        EXPECT_NE(ptx.find("wgmma.mma_async"), std::string::npos);
        EXPECT_NE(ptx.find("setmaxnreg"), std::string::npos);
      } else {
        EXPECT_NE(ptx.find("cp.async.cg.shared.global"), std::string::npos) << k.info().path;
        EXPECT_NE(ptx.find("mma.sync"), std::string::npos) << k.info().path;
      }
      EXPECT_EQ(k.resources().spill_store_bytes, 0);
      EXPECT_EQ(k.resources().spill_load_bytes, 0);
    }
}

}  // namespace
