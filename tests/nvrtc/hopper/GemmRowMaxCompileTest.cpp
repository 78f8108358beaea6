// A user's GEMM kernel with a row reduction and an epilogue on 128-row tiles and 128 threads
// (gemm_row_max_program) through NVRTC and ptxas: on sm_90a with gemm_from_passes, one consumer
// warpgroup issuing two m64 wgmmas a k16 step (8 a 64-deep K tile) from a TMA ring, its
// accumulator, row maxima and epilogue in interleaved 16-row strips; on sm_90a without it and on
// sm_80, mma.sync. No spills.
#include <gtest/gtest.h>

#include "support/GemmRowMaxProgram.hpp"
#include "support/TestSupport.hpp"

namespace {

namespace T = tessel;

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

TEST(GemmRowMax, CompilesForEveryTarget) {
  for (const char* arch : {"sm_90a", "sm_80"})
    for (bool from_passes : {false, true})
      for (T::DType dt : {T::DType::f16, T::DType::bf16}) {
        SCOPED_TRACE(std::string(arch) + (from_passes ? " gemm_from_passes " : " ") +
                     std::string(T::dtype_name(dt)));
        T::JitOptions o;
        o.arch = arch;
        o.gemm_from_passes = from_passes;
        auto k = T::jit(T::test::gemm_row_max_program(1000, 64, 1024, dt), o);
        const std::string& ptx = k.ptx();
        if (std::string(arch) == "sm_90a" && from_passes) {
          EXPECT_EQ(k.info().path.rfind(
                        "sm90 wgmma block gemm (generic kernel), TMA + mbarrier ring, warp-specialized", 0),
                    0u)
              << k.info().path;
          EXPECT_NE(k.source().find("tessel::AccumulatorLayout<128, 64, 4, 1, true>::template reduce_rows"),
                    std::string::npos);
          EXPECT_EQ(count(ptx, "wgmma.mma_async.sync.aligned.m64n64k16"), 8u);
          EXPECT_NE(ptx.find("cp.async.bulk.tensor.2d"), std::string::npos);
          EXPECT_EQ(ptx.find("mma.sync"), std::string::npos);
        } else {
          EXPECT_NE(ptx.find("mma.sync"), std::string::npos) << k.info().path;
          EXPECT_EQ(ptx.find("wgmma"), std::string::npos) << k.info().path;
        }
        EXPECT_EQ(k.resources().spill_store_bytes, 0) << k.compile_log();
        EXPECT_EQ(k.resources().spill_load_bytes, 0) << k.compile_log();
      }
}

// Few row tiles over a long K (4 tiles, K = 8192): under gemm_from_passes each tile's K loop is
// split over a 4-CTA cluster (split_k_clusters), the row reduction and the Parallel nest in rank 0
// after the hand-off.
TEST(GemmRowMax, FewTilesSplitOverAClusterBeforeTheRowReduction) {
  for (T::DType dt : {T::DType::f16, T::DType::bf16}) {
    T::JitOptions o;
    o.arch = "sm_90a";
    o.gemm_from_passes = true;
    auto k = T::jit(T::test::gemm_row_max_program(500, 64, 8192, dt), o);
    EXPECT_NE(k.info().path.find("split-K over 4-CTA clusters"), std::string::npos) << k.info().path;
    const std::string& src = k.source();
    const size_t reduce = src.find("tessel::cluster_reduce_to_rank0<64, 128, 4>(");
    ASSERT_NE(reduce, std::string::npos) << src;
    EXPECT_LT(reduce, src.find("reduce_rows")) << src;
    EXPECT_NE(k.ptx().find("st.shared::cluster.v4.f32"), std::string::npos);
    EXPECT_EQ(k.resources().spill_store_bytes, 0) << k.compile_log();
    EXPECT_EQ(k.resources().spill_load_bytes, 0) << k.compile_log();
  }
}

}  // namespace
