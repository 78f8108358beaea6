// Every tutorial GEMM variant compiles through the whole pipeline for sm_80 and sm_90a, its PTX
// holds the instructions the mma.sync path promises, and ptxas reports no spills.
#include <gtest/gtest.h>

#include "support/TestSupport.hpp"
#include "tessel/kernels/gemm/Matmul.hpp"

namespace {

using tessel::kernels::MatmulConfig;

MatmulConfig knob(int bm, int bn, int bk, int st, int thr, bool swz, tessel::DType t = tessel::DType::f16) {
  MatmulConfig c;
  c.block_M = bm;
  c.block_N = bn;
  c.block_K = bk;
  c.num_stages = st;
  c.threads = thr;
  c.use_swizzle = swz;
  c.dtype = t;
  return c;
}

class TutorialKernels : public ::testing::TestWithParam<std::tuple<MatmulConfig, std::string>> {};

TEST_P(TutorialKernels, CompileWithTensorCoresAndNoSpills) {
  auto [cfg, arch] = GetParam();
  tessel::JitOptions o;
  o.arch = arch;
  auto k = tessel::kernels::make_matmul(2048, 2048, 2048, cfg, o);
  const std::string& ptx = k.ptx();
  // On sm_90a a tile that the wgmma/TMA ring takes (block_K 32 or a multiple of 64) goes there,
  // from the generic passes (the default); the rest, and every sm_80 kernel, is the mma.sync path.
  bool hopper = arch == "sm_90a" && (cfg.block_K == 32 || cfg.block_K % 64 == 0);
  const std::string path = k.info().path;
  EXPECT_EQ(path.substr(0, path.find(',', path.find("persistent"))),
            hopper
                ? "sm90 wgmma block gemm (generic kernel), TMA + mbarrier ring, warp-specialized, persistent"
                : "mma.sync")
      << k.info().hopper_declined;
  if (hopper) {
    EXPECT_NE(ptx.find("wgmma.mma_async"), std::string::npos);
    EXPECT_NE(ptx.find("cp.async.bulk.tensor"), std::string::npos);
  } else {
    EXPECT_NE(ptx.find("mma.sync.aligned.m16n8k16"), std::string::npos);
    EXPECT_NE(ptx.find("ldmatrix.sync.aligned"), std::string::npos);
    EXPECT_NE(ptx.find("cp.async.cg.shared.global"), std::string::npos);
    EXPECT_EQ(k.info().dynamic_smem_bytes, tessel::kernels::matmul_smem_bytes(cfg));
  }
  EXPECT_EQ(k.resources().spill_store_bytes, 0) << k.compile_log();
  EXPECT_EQ(k.resources().spill_load_bytes, 0) << k.compile_log();
  EXPECT_GT(k.resources().registers, 0);
  EXPECT_LE(k.resources().registers, 255);
  std::cout << "[ info ] " << cfg.describe() << " " << arch << ": " << k.resources().registers
            << " registers, " << k.resources().compile_ms << " ms"
            << (k.resources().cache_hit ? " (cache hit)" : "") << "\n";
}

INSTANTIATE_TEST_SUITE_P(
    Knobs, TutorialKernels,
    ::testing::Combine(::testing::Values(knob(64, 64, 32, 2, 128, false), knob(128, 128, 32, 2, 128, false),
                                         knob(128, 128, 32, 2, 128, true), knob(128, 128, 32, 3, 128, false),
                                         knob(128, 128, 64, 2, 256, false), knob(128, 256, 32, 2, 256, false),
                                         knob(128, 256, 32, 3, 256, true, tessel::DType::bf16)),
                       ::testing::Values(std::string("sm_80"), std::string("sm_90a"))));

TEST(MatmulCompile, OddShapesUseTheMaskedScalarPath) {
  tessel::JitOptions o;
  o.arch = "sm_90a";
  auto k = tessel::kernels::make_matmul(17, 33, 65, MatmulConfig{}, o);
  // K = 65 leaves rows of A unaligned: the copy must not use 16-byte cp.async for A.
  EXPECT_NE(k.source().find("tessel::SwizzledLayout<128, 32, 2>, 128, false, tessel::TileExtent::Edge>"),
            std::string::npos)
      << k.source();
  EXPECT_NE(k.ptx().find("mma.sync"), std::string::npos);
}

// Unaligned rows on the mma.sync path: copy_global_to_shared compiles its realigned chunks (two
// 16-byte loads a chunk, funnel shifts) beside the element path, with no spills in the tiles a
// direct unaligned GEMM takes, sm_80 and sm_90a.
// Rows that start off 16 bytes (65x1023x1025: A's rows of 1025 and B's of 1023 elements): on the
// generic schedule, by default a realigned ring (raw words by cp.async with a src-size operand, the shift at
// the iteration's top: funnel shifts, no synchronous 16-byte global loads); under disable_realigned_rings the
// synchronous realigned chunks (ld.global.nc.v4 and the shifts). Neither spills, on sm_80 or sm_90a.
TEST(MatmulCompile, UnalignedRowsCompileRealignedChunksWithoutSpills) {
  for (const std::string arch : {"sm_80", "sm_90a"})
    for (const MatmulConfig& c : {knob(128, 128, 32, 3, 128, false), knob(16, 32, 128, 8, 128, false),
                                  knob(32, 64, 64, 4, 128, false, tessel::DType::bf16),
                                  knob(128, 256, 32, 3, 256, true, tessel::DType::bf16)})
      for (bool rings : {true, false}) {
        SCOPED_TRACE(arch + " " + c.describe() + (rings ? " realigned rings" : " realigned chunks"));
        tessel::JitOptions o;
        o.arch = arch;
        o.disable_realigned_rings = !rings;
        auto k = tessel::kernels::make_matmul(65, 1023, 1025, c, o);
        EXPECT_NE(k.ptx().find("shf.r.wrap"), std::string::npos);
        // The 128-row tiles carry their fragments across K tiles (gemm_mainloop), which keeps the
        // realigned chunks; the small tile takes the generic schedule and so the ring.
        const bool fused = k.source().find("tessel::gemm_mainloop") != std::string::npos;
        EXPECT_EQ(fused, c.block_M == 128);
        if (rings && !fused) {
          EXPECT_NE(k.source().find("tessel::copy_words_to_shared"), std::string::npos);
          EXPECT_NE(k.source().find("tessel::realign_words_to_shared"), std::string::npos);
          EXPECT_NE(k.ptx().find("cp.async.cg.shared.global.L2::128B"), std::string::npos);
          EXPECT_EQ(k.ptx().find("ld.global.nc.v4"), std::string::npos);
        } else {
          EXPECT_EQ(k.source().find("tessel::copy_words_to_shared"), std::string::npos);
          EXPECT_NE(k.ptx().find("ld.global.nc.v4"), std::string::npos);
        }
        EXPECT_EQ(k.resources().spill_store_bytes, 0) << k.compile_log();
        EXPECT_EQ(k.resources().spill_load_bytes, 0) << k.compile_log();
      }
}

TEST(MatmulCompile, SecondJitIsACacheHit) {
  tessel::test::TempDir dir;
  tessel::test::ScopedEnv env("TESSEL_CACHE_DIR", dir.path().string());
  tessel::JitOptions o;
  o.arch = "sm_80";
  auto cold = tessel::kernels::make_matmul(512, 512, 512, MatmulConfig{}, o);
  auto hot = tessel::kernels::make_matmul(512, 512, 512, MatmulConfig{}, o);
  EXPECT_TRUE(hot.resources().cache_hit);
  EXPECT_EQ(hot.source(), cold.source());
  EXPECT_LT(hot.resources().compile_ms, 50.0);
  std::cout << "[ info ] cold " << cold.resources().compile_ms << " ms, hit " << hot.resources().compile_ms
            << " ms\n";
}

}  // namespace

namespace {

tessel::kernels::MatmulConfig hopper_config() {
  tessel::kernels::MatmulConfig c;
  c.block_M = 128;
  c.block_N = 256;
  c.block_K = 64;
  c.num_stages = 4;
  c.threads = 256;
  c.use_swizzle = true;
  c.panel_size = 16;
  return c;
}

TEST(HopperPath, TutorialGemmGetsTmaWgmmaAndWarpSpecialization) {
  tessel::JitOptions o;
  o.gemm_from_passes = false;  // select_hopper_gemm's template
  o.arch = "sm_90a";
  auto k = tessel::kernels::make_matmul(4096, 4096, 4096, hopper_config(), o);
  for (const char* needle : {"wgmma.mma_async", "cp.async.bulk.tensor", "mbarrier", "setmaxnreg"})
    EXPECT_NE(k.ptx().find(needle), std::string::npos) << needle;
  EXPECT_EQ(k.ptx().find("mma.sync"), std::string::npos);
  EXPECT_EQ(k.resources().spill_store_bytes, 0) << k.compile_log();
  EXPECT_EQ(k.info().path, "sm90 TMA + wgmma, warp-specialized, persistent");
  EXPECT_EQ(k.info().threads, 384);  // a producer warpgroup beside the author's two
  EXPECT_TRUE(k.info().persistent);
}

// JitOptions::gemm_from_passes: the same program through the generic passes (TMA ring, producer
// warp or warpgroup, asynchronous wgmma), for the tile shapes the tutorial's knobs give.
struct PassesCase {
  int bm, bn, bk, stages, threads;
  tessel::DType dtype;
};

class GemmFromPasses : public ::testing::TestWithParam<PassesCase> {};

TEST_P(GemmFromPasses, CompilesToTmaRingsAndWgmmaWithoutSpills) {
  const PassesCase& p = GetParam();
  tessel::kernels::MatmulConfig c = hopper_config();
  c.block_M = p.bm, c.block_N = p.bn, c.block_K = p.bk, c.num_stages = p.stages, c.threads = p.threads;
  c.dtype = p.dtype;
  tessel::JitOptions o;
  o.arch = "sm_90a";
  o.gemm_from_passes = true;
  auto k = tessel::kernels::make_matmul(4096, 4096, 4096, c, o);
  SCOPED_TRACE(c.describe());
  for (const char* needle : {"wgmma.mma_async", "cp.async.bulk.tensor", "mbarrier.try_wait"})
    EXPECT_NE(k.ptx().find(needle), std::string::npos) << needle;
  // Two consumer warpgroups move registers from the producer warpgroup; one gets a producer warp.
  EXPECT_EQ(k.ptx().find("setmaxnreg") != std::string::npos, p.threads == 256);
  EXPECT_EQ(k.ptx().find("mma.sync"), std::string::npos);
  EXPECT_EQ(k.resources().spill_store_bytes, 0) << k.compile_log();
  EXPECT_EQ(k.resources().spill_load_bytes, 0) << k.compile_log();
  // 4096^2 has more tiles than SMs at every tile size here: persistent (persist_tiles); every
  // ring here leaves room for the staging tile: the TMA-store epilogue (plan_tma_stores).
  EXPECT_EQ(k.info().path,
            "sm90 wgmma block gemm (generic kernel), TMA + mbarrier ring, warp-specialized, persistent, "
            "TMA-store epilogue");
  for (const char* needle : {"stmatrix.sync.aligned.m8n8.x4.shared.b16",
                             "cp.async.bulk.tensor.2d.global.shared::cta", "cp.async.bulk.wait_group.read"})
    EXPECT_NE(k.ptx().find(needle), std::string::npos) << needle;
  EXPECT_EQ(k.info().threads, p.threads + (p.threads == 128 ? 32 : 128));
  EXPECT_TRUE(k.info().persistent);
  EXPECT_NE(k.source().find("for (int tile_i = 0;"), std::string::npos);
}

// split_k_clusters: few tiles over a long K on clusters of 2, 4 and 8 CTAs (56 tiles at
// 1024x896x8192, 24 at 384x1024x8192 and at 380x1000x8200 -- an odd share of K tiles, ragged edges
// -- 8 at 128x1024x16384), the partial sums through distributed shared memory; one and two
// consumer warpgroups.
TEST(GemmFromPassesSplitK, ClustersHandOffThroughDistributedSharedMemoryWithoutSpills) {
  struct Shape {
    int M, N, K, threads, ranks;
  };
  for (Shape sh :
       {Shape{1024, 896, 8192, 128, 2}, Shape{384, 1024, 8192, 128, 4}, Shape{380, 1000, 8200, 128, 4},
        Shape{256, 1536, 16384, 256, 4}, Shape{128, 1024, 16384, 128, 8}, Shape{512, 1024, 8192, 128, 2}})
    for (tessel::DType dtype : {tessel::DType::f16, tessel::DType::bf16}) {
      tessel::kernels::MatmulConfig c = hopper_config();
      c.block_M = 128, c.block_N = 128, c.block_K = 64, c.num_stages = sh.threads == 128 ? 5 : 4;
      c.threads = sh.threads;
      c.dtype = dtype;
      tessel::JitOptions o;
      o.arch = "sm_90a";
      o.gemm_from_passes = true;
      auto k = tessel::kernels::make_matmul(sh.M, sh.N, sh.K, c, o);
      SCOPED_TRACE(std::to_string(sh.M) + "x" + std::to_string(sh.N) + "x" + std::to_string(sh.K) + " " +
                   c.describe());
      const std::string clusters = "split-K over " + std::to_string(sh.ranks) + "-CTA clusters";
      EXPECT_NE(k.info().path.find(clusters), std::string::npos) << k.info().path;
      EXPECT_EQ(k.info().cluster_size, sh.ranks);
      EXPECT_FALSE(k.info().persistent);
      for (const char* needle :
           {"wgmma.mma_async", "cp.async.bulk.tensor", "mapa.shared::cluster", "st.shared::cluster.v4.f32",
            "mbarrier.arrive.release.cluster.shared::cluster", "mbarrier.try_wait.parity.acquire.cluster",
            "barrier.cluster.arrive"})
        EXPECT_NE(k.ptx().find(needle), std::string::npos) << needle;
      const std::string dims = "__cluster_dims__(" + std::to_string(sh.ranks) + ", 1, 1)";
      EXPECT_NE(k.source().find(dims), std::string::npos);
      EXPECT_EQ(k.resources().spill_store_bytes, 0) << k.compile_log();
      EXPECT_EQ(k.resources().spill_load_bytes, 0) << k.compile_log();
    }
}

// multicast_cluster_loads: use_cluster(2, 1) (A shared) and (1, 2) (B shared) from the passes,
// one and two consumer warpgroups: the shared tile's half loaded by each CTA with
// .multicast::cluster, the stage released in both CTAs, 2-CTA clusters, no spills.
TEST(GemmFromPassesMulticast, SharedTilesLoadOnceIntoBothCtasWithoutSpills) {
  struct Shape {
    int M, N, K, bm, bn, stages, threads, x, y;
  };
  for (Shape sh :
       {Shape{4096, 4096, 4096, 128, 256, 3, 256, 2, 1}, Shape{2048, 2048, 2048, 128, 256, 3, 256, 1, 2},
        Shape{128, 8192, 8192, 128, 64, 8, 256, 2, 1}, Shape{1100, 1000, 1032, 128, 128, 5, 128, 1, 2}})
    for (tessel::DType dtype : {tessel::DType::f16, tessel::DType::bf16}) {
      tessel::kernels::MatmulConfig c = hopper_config();
      c.block_M = sh.bm, c.block_N = sh.bn, c.block_K = 64, c.num_stages = sh.stages, c.threads = sh.threads;
      c.cluster_x = sh.x, c.cluster_y = sh.y;
      c.dtype = dtype;
      tessel::JitOptions o;
      o.arch = "sm_90a";
      o.gemm_from_passes = true;
      auto k = tessel::kernels::make_matmul(sh.M, sh.N, sh.K, c, o);
      SCOPED_TRACE(std::to_string(sh.M) + "x" + std::to_string(sh.N) + "x" + std::to_string(sh.K) + " " +
                   c.describe());
      const std::string shared = sh.x == 2 ? ", A tiles" : ", B tiles";
      EXPECT_NE(k.info().path.find(shared + " multicast over 2-CTA clusters"), std::string::npos)
          << k.info().path;
      EXPECT_NE(k.info().path.find("generic kernel"), std::string::npos) << k.info().path;
      EXPECT_EQ(k.info().cluster_size, 2);
      EXPECT_TRUE(k.info().persistent);
      for (const char* needle :
           {"wgmma.mma_async", "mbarrier::complete_tx::bytes.multicast::cluster", "mapa.shared::cluster",
            "mbarrier.arrive.shared::cluster.b64", "barrier.cluster.arrive", "%cluster_ctarank"})
        EXPECT_NE(k.ptx().find(needle), std::string::npos) << needle;
      EXPECT_NE(k.source().find("__cluster_dims__(2, 1, 1)"), std::string::npos);
      EXPECT_EQ(k.resources().spill_store_bytes, 0) << k.compile_log();
      EXPECT_EQ(k.resources().spill_load_bytes, 0) << k.compile_log();
    }
}

INSTANTIATE_TEST_SUITE_P(TutorialKnobs, GemmFromPasses,
                         ::testing::Values(PassesCase{128, 256, 64, 3, 256, tessel::DType::f16},
                                           PassesCase{128, 256, 64, 3, 256, tessel::DType::bf16},
                                           PassesCase{128, 128, 64, 4, 256, tessel::DType::f16},
                                           PassesCase{128, 256, 32, 4, 256, tessel::DType::bf16},
                                           PassesCase{64, 256, 64, 4, 128, tessel::DType::f16},
                                           PassesCase{64, 128, 64, 6, 128, tessel::DType::bf16},
                                           // One consumer warpgroup over 128 rows: two m64 wgmmas a k16 step.
                                           PassesCase{128, 128, 64, 5, 128, tessel::DType::f16},
                                           PassesCase{128, 64, 64, 8, 128, tessel::DType::bf16},
                                           PassesCase{256, 64, 64, 4, 256, tessel::DType::f16}),
                         [](const ::testing::TestParamInfo<PassesCase>& info) {
                           const PassesCase& p = info.param;
                           return std::to_string(p.bm) + "x" + std::to_string(p.bn) + "x" +
                                  std::to_string(p.bk) + "s" + std::to_string(p.stages) + "t" +
                                  std::to_string(p.threads) + "_" + std::string(tessel::dtype_name(p.dtype));
                         });

TEST(HopperPath, EachSwitchFallsBackToMmaSync) {
  for (int which = 0; which < 3; ++which) {
    tessel::JitOptions o;
    o.gemm_from_passes = false;  // select_hopper_gemm's template
    o.arch = "sm_90a";
    o.disable_tma = which == 0;
    o.disable_wgmma = which == 1;
    o.disable_warp_specialization = which == 2;
    auto k = tessel::kernels::make_matmul(1024, 1024, 1024, hopper_config(), o);
    EXPECT_NE(k.ptx().find("mma.sync"), std::string::npos) << which;
    EXPECT_EQ(k.ptx().find("wgmma"), std::string::npos) << which;
    EXPECT_EQ(k.info().path, "mma.sync");
    EXPECT_NE(k.info().hopper_declined.find("turned off by JitOptions"), std::string::npos);
  }
}

// Grids of at most half the SMs' tiles with K >= 4096 (>= 16 K tiles) split each tile's K loop over a 2-CTA
// cluster; the switch (or many tiles) keeps one CTA per tile.
TEST(HopperPath, FewTilesSplitKOverClusters) {
  tessel::JitOptions o;
  o.gemm_from_passes = false;  // select_hopper_gemm's template
  o.arch = "sm_90a";
  auto c = hopper_config();
  c.block_N = 128;
  auto split = tessel::kernels::make_matmul(128, 8192, 8192, c, o);
  EXPECT_EQ(split.info().path, "sm90 TMA + wgmma, warp-specialized, persistent, split-K over 2-CTA clusters");
  EXPECT_EQ(split.info().cluster_size, 2);
  EXPECT_NE(split.source().find("__cluster_dims__(2, 1, 1)"), std::string::npos) << split.source();
  for (const char* needle :
       {"mapa.shared::cluster", "st.shared::cluster.v4.f32",
        "mbarrier.arrive.release.cluster.shared::cluster", "mbarrier.try_wait.parity.acquire.cluster"})
    EXPECT_NE(split.ptx().find(needle), std::string::npos) << needle;
  EXPECT_EQ(split.resources().spill_store_bytes, 0) << split.compile_log();
  // The ring (4 x 32 KB) and the 64 KB f32 reduction buffer.
  EXPECT_EQ(split.info().dynamic_smem_bytes, 1024 + 4 * 32768 + 64 + 16 + 65536);

  o.disable_split_k = true;
  auto whole = tessel::kernels::make_matmul(128, 8192, 8192, c, o);
  // Unsplit, the 4 stages leave room for the TMA-store epilogue's staging tile.
  EXPECT_EQ(whole.info().path, "sm90 TMA + wgmma, warp-specialized, persistent, TMA-store epilogue");
  EXPECT_EQ(whole.info().cluster_size, 1);
  EXPECT_EQ(whole.source().find("__cluster_dims__"), std::string::npos);

  o.disable_split_k = false;
  EXPECT_EQ(tessel::kernels::make_matmul(4096, 4096, 4096, c, o).info().cluster_size, 1);  // 1024 tiles
  EXPECT_EQ(tessel::kernels::make_matmul(128, 8192, 512, c, o).info().cluster_size, 1);    // 8 K tiles
  EXPECT_EQ(tessel::kernels::make_matmul(1024, 1024, 1024, c, o).info().cluster_size, 1);  // K < 4096
  c.num_stages = 6;  // 6 x 32 KB + 64 KB do not fit in 227 KB: no split
  EXPECT_EQ(tessel::kernels::make_matmul(128, 8192, 8192, c, o).info().cluster_size, 1);
}

// use_cluster(2, 1) / (1, 2): 2-CTA clusters loading the shared A / B tile once with a multicast
// TMA (each CTA half of it), no split-K; the switch ignores the hint; a B cluster needs two
// 64-column panels per tile to share, and clusters are 2 CTAs.
TEST(HopperPath, UseClusterMulticastsTheSharedOperand) {
  tessel::JitOptions o;
  o.gemm_from_passes = false;  // select_hopper_gemm's template
  o.arch = "sm_90a";
  auto c = hopper_config();
  c.block_N = 64;
  c.num_stages = 8;
  c.cluster_x = 2;
  auto a = tessel::kernels::make_matmul(128, 8192, 8192, c, o);
  EXPECT_EQ(
      a.info().path,
      "sm90 TMA + wgmma, warp-specialized, persistent, A multicast over 2-CTA clusters, TMA-store epilogue");
  EXPECT_EQ(a.info().cluster_size, 2);
  EXPECT_NE(a.source().find("__cluster_dims__(2, 1, 1)"), std::string::npos) << a.source();
  EXPECT_NE(
      a.source().find("tessel::HopperGemm<tessel::half_t, 128, 64, 64, 8, 2, 40, 232, 1, 0, 1, 1, 1, 2>"),
      std::string::npos)
      << a.source();
  EXPECT_NE(a.ptx().find("mbarrier::complete_tx::bytes.multicast::cluster"), std::string::npos);
  // Each consumer warp releases a stage in both CTAs of the pair.
  EXPECT_NE(a.ptx().find("mbarrier.arrive.shared::cluster.b64"), std::string::npos);
  EXPECT_EQ(a.resources().spill_store_bytes, 0) << a.compile_log();
  // 8 stages of (128 + 64) x 64 f16, their barriers, the 128 x 64 staging tile.
  EXPECT_EQ(a.info().dynamic_smem_bytes, 1024 + 8 * 24576 + 128 * 64 * 2 + 8 * 16);
  EXPECT_NE(tessel::kernels::matmul_program(128, 8192, 8192, c).script().find("use_cluster(2, 1)"),
            std::string::npos);

  c.block_N = 128, c.num_stages = 5, c.cluster_x = 1, c.cluster_y = 2;
  auto b = tessel::kernels::make_matmul(1000, 1000, 1000, c, o);
  EXPECT_NE(b.info().path.find("B multicast over 2-CTA clusters"), std::string::npos) << b.info().path;
  EXPECT_NE(b.source().find("128, 128, 64, 5, 2, 40, 232, 2, 0, 1, 1, 1>"), std::string::npos) << b.source();

  o.disable_multicast = true;
  auto off = tessel::kernels::make_matmul(1000, 1000, 1000, c, o);
  EXPECT_EQ(off.info().cluster_size, 1);
  EXPECT_EQ(off.source().find("__cluster_dims__"), std::string::npos);
  o.disable_multicast = false;

  c.block_N = 64;  // one B panel: nothing to split between the two CTAs
  try {
    (void)tessel::kernels::make_matmul(1000, 1000, 1000, c, o);
    ADD_FAILURE() << "use_cluster(1, 2) with block_N = 64 was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("use_cluster"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("block_N = 64"), std::string::npos) << e.what();
  }
  c.cluster_x = 2;
  try {
    (void)tessel::kernels::make_matmul(1000, 1000, 1000, c, o);
    ADD_FAILURE() << "use_cluster(2, 2) was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("legal: (1, 1), (2, 1)"), std::string::npos) << e.what();
  }
}

// use_cluster is a hint: the mma.sync GEMM (sm_80) and a kernel that is not a GEMM compile
// without clusters, and the hint shows in their IR.
TEST(HopperPath, UseClusterIsIgnoredWhereItCannotApply) {
  tessel::JitOptions o;
  o.gemm_from_passes = false;  // select_hopper_gemm's template
  o.arch = "sm_80";
  auto c = hopper_config();
  c.num_stages = 2;  // 96 KB: fits sm_80's shared memory
  c.cluster_x = 2;
  auto mma = tessel::kernels::make_matmul(1000, 1000, 1000, c, o);
  EXPECT_EQ(mma.info().path, "mma.sync");
  EXPECT_EQ(mma.info().cluster_size, 1);
  EXPECT_EQ(mma.source().find("__cluster_dims__"), std::string::npos);

  namespace T = tessel;
  T::PrimFunc f("scale_rows");
  auto X = f.tensor("X", {256, 128}, T::f16);
  auto Y = f.tensor("Y", {256, 128}, T::f16);
  f.body([&] {
    T::Kernel(256 / 64, 128, [&](T::Var bx) {
      T::use_cluster(2, 1);
      auto x = T::alloc_fragment({64, 128}, T::f32);
      T::copy(X(bx * 64, 0), x);
      T::Parallel(64, 128, [&](T::Var i, T::Var j) { x(i, j) = x(i, j) * 2.0f; });
      T::copy(x, Y(bx * 64, 0));
    });
  });
  EXPECT_NE(f.script().find("use_cluster(2, 1)"), std::string::npos) << f.script();
  for (const char* arch : {"sm_80", "sm_90a"}) {
    o.arch = arch;
    auto k = T::jit(f, o);
    EXPECT_EQ(k.info().cluster_size, 1) << arch;
    EXPECT_EQ(k.source().find("__cluster_dims__"), std::string::npos) << arch;
  }
}

// 16-bit outputs go through a swizzled staging tile and TMA stores when it fits beside the ring;
// the switch keeps the direct register -> global stores.
TEST(HopperPath, TmaStoreEpilogueWhenTheStagingTileFits) {
  tessel::JitOptions o;
  o.gemm_from_passes = false;  // select_hopper_gemm's template
  o.arch = "sm_90a";
  auto c = hopper_config();  // 128x256x64, 4 stages: 192 KB of ring, no room for 64 KB more
  auto four = tessel::kernels::make_matmul(4096, 4096, 4096, c, o);
  EXPECT_EQ(four.info().path, "sm90 TMA + wgmma, warp-specialized, persistent");
  EXPECT_EQ(four.ptx().find("cp.async.bulk.tensor.2d.global.shared::cta"), std::string::npos);
  c.num_stages = 3;
  auto three = tessel::kernels::make_matmul(4096, 4096, 4096, c, o);
  EXPECT_EQ(three.info().path, "sm90 TMA + wgmma, warp-specialized, persistent, TMA-store epilogue");
  EXPECT_NE(three.ptx().find("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group"), std::string::npos);
  EXPECT_NE(three.ptx().find("cp.async.bulk.wait_group.read"), std::string::npos);
  // The staging tile is written with stmatrix (no quad-transpose shuffles).
  EXPECT_NE(three.ptx().find("stmatrix.sync.aligned.m8n8.x4.shared.b16"), std::string::npos);
  EXPECT_NE(three.source().find("tmap_C"), std::string::npos);
  EXPECT_EQ(three.info().dynamic_smem_bytes, 1024 + 3 * 49152 + 128 * 256 * 2 + 48);
  EXPECT_EQ(three.resources().spill_store_bytes, 0) << three.compile_log();
  o.disable_tma_store = true;
  auto direct = tessel::kernels::make_matmul(4096, 4096, 4096, c, o);
  EXPECT_EQ(direct.info().path, "sm90 TMA + wgmma, warp-specialized, persistent");
  EXPECT_EQ(direct.source().find("tmap_C"), std::string::npos);
}

// TESSEL_DISABLE takes exact names (tma_store does not turn TMA loads off) and rejects others.
TEST(HopperPath, DisableEnvironmentNamesFeaturesExactly) {
  tessel::JitOptions o;
  o.gemm_from_passes = false;  // select_hopper_gemm's template
  o.arch = "sm_90a";
  auto c = hopper_config();
  c.num_stages = 3;
  {
    tessel::test::ScopedEnv env("TESSEL_DISABLE", "tma_store");
    auto k = tessel::kernels::make_matmul(4096, 4096, 4096, c, o);
    EXPECT_EQ(k.info().path, "sm90 TMA + wgmma, warp-specialized, persistent");
  }
  {
    tessel::test::ScopedEnv env("TESSEL_DISABLE", "split_k, tma");
    EXPECT_EQ(tessel::kernels::make_matmul(4096, 4096, 4096, c, o).info().path, "mma.sync");
  }
  {
    tessel::test::ScopedEnv env("TESSEL_DISABLE", "wgma");
    try {
      (void)tessel::kernels::make_matmul(4096, 4096, 4096, c, o);
      ADD_FAILURE() << "a misspelt feature was accepted";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("TESSEL_DISABLE names 'wgma'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("tma_store"), std::string::npos) << e.what();
    }
  }
}

// A bias + activation epilogue rides along on every Hopper store path (direct, TMA store, after
// the split-K sum) and still compiles without spills; sm_80 runs it on the mma.sync fragment.
TEST(HopperPath, ParallelEpilogueIsFusedOnEveryStorePath) {
  using tessel::kernels::Activation;
  tessel::JitOptions o;
  o.gemm_from_passes = false;  // select_hopper_gemm's template
  o.arch = "sm_90a";
  struct Want {
    int M, N, K;
    tessel::kernels::MatmulConfig c;
    Activation act;
    const char* path;
  };
  auto c4 = hopper_config(), c3 = hopper_config(), split = hopper_config();
  c3.num_stages = 3;
  split.block_N = 128, split.num_stages = 5, split.threads = 128;
  const char* base = "sm90 TMA + wgmma, warp-specialized, persistent";
  for (const Want& w :
       {Want{4096, 4096, 4096, c4, Activation::relu, ", fused Parallel epilogue"},
        Want{4096, 4096, 4096, c3, Activation::silu, ", TMA-store epilogue, fused Parallel epilogue"},
        Want{128, 8192, 8192, split, Activation::relu,
             ", split-K over 2-CTA clusters, fused Parallel epilogue"}}) {
    SCOPED_TRACE(w.c.describe() + " " + tessel::kernels::activation_name(w.act));
    auto k = tessel::kernels::make_matmul_bias_act(w.M, w.N, w.K, w.c, w.act, 0.5f, o);
    EXPECT_EQ(k.info().path, std::string(base) + w.path) << k.info().hopper_declined;
    EXPECT_NE(k.ptx().find("wgmma.mma_async"), std::string::npos);
    EXPECT_EQ(k.ptx().find("mma.sync"), std::string::npos);
    EXPECT_EQ(k.resources().spill_store_bytes, 0) << k.compile_log();
    if (w.act == Activation::silu) {
      EXPECT_NE(k.ptx().find("ex2.approx"), std::string::npos);
    }
  }
  o.arch = "sm_80";
  auto c80 = hopper_config();
  c80.block_K = 32, c80.num_stages = 3;
  auto ampere = tessel::kernels::make_matmul_bias_act(1000, 1000, 1000, c80, Activation::relu, 1.0f, o);
  EXPECT_EQ(ampere.info().path, "mma.sync");
  EXPECT_EQ(ampere.resources().spill_store_bytes, 0) << ampere.compile_log();
}

// The built-in table's configs for issue 5's seven shapes (what `tessel bench gemm` measured
// against cuBLAS, docs/perf-notes.md "Session 6") take the sm_90a path with the TMA-store
// epilogue, one CTA per tile (no split-K, no cluster), and compile without spills.
TEST(HopperPath, IssueShapesDefaultConfigs) {
  struct Want {
    int M, N, K;
    const char* config;
  };
  for (const Want& w :
       {Want{2048, 2048, 2048, "128x128x64 s5 t256 swz"}, Want{4096, 4096, 4096, "128x256x64 s3 t256 swz"},
        Want{8192, 8192, 8192, "128x256x64 s3 t256 swz"}, Want{8192, 28672, 8192, "128x256x64 s3 t256 swz"},
        Want{16384, 4096, 1024, "128x256x64 s3 t256 swz"}, Want{128, 8192, 8192, "128x64x64 s8 t256 swz"},
        Want{1024, 1024, 1024, "64x128x64 s6 t128 swz"}}) {
    SCOPED_TRACE(std::to_string(w.M) + "x" + std::to_string(w.N) + "x" + std::to_string(w.K));
    const auto c = tessel::kernels::default_matmul_config(w.M, w.N, w.K, tessel::DType::f16, "sm_90a", 132);
    EXPECT_EQ(c.describe(), w.config);
    tessel::JitOptions o;
    o.gemm_from_passes = false;  // select_hopper_gemm's template
    o.arch = "sm_90a";
    auto k = tessel::kernels::make_matmul(w.M, w.N, w.K, c, o);
    EXPECT_EQ(k.info().path, "sm90 TMA + wgmma, warp-specialized, persistent, TMA-store epilogue");
    EXPECT_EQ(k.info().cluster_size, 1);
    EXPECT_NE(k.ptx().find("stmatrix.sync.aligned.m8n8.x4.shared.b16"), std::string::npos);
    EXPECT_EQ(k.resources().spill_store_bytes, 0) << k.compile_log();
  }
}

// A split-K Matmul launches its pair as programmatic dependents by default: both kernels wait at
// entry for the grid before them and let the next one start (griddepcontrol in their PTX), so the
// reduction may launch while the partial GEMM finishes; with JitOptions::
// disable_programmatic_launch neither has griddepcontrol.
TEST(MatmulSplitK, ProgrammaticLaunchOfThePair) {
  for (bool on : {false, true}) {
    tessel::JitOptions o;
    o.arch = "sm_90a";
    o.disable_programmatic_launch = !on;
    tessel::kernels::Matmul mm(1, 2048, 8192, tessel::DType::f16, tessel::kernels::MatmulStaging::automatic, o);
    ASSERT_TRUE(mm.plan().split()) << mm.plan().why;
    for (const tessel::JitKernel* k : {&mm.kernel(), &mm.reduce_kernel()}) {
      SCOPED_TRACE(std::string(on ? "on " : "off ") + k->info().kernel_name);
      EXPECT_EQ(k->ptx().find("griddepcontrol.wait") != std::string::npos, on);
      EXPECT_EQ(k->ptx().find("griddepcontrol.launch_dependents") != std::string::npos, on);
      EXPECT_EQ(k->resources().spill_store_bytes, 0);
    }
  }
}

// Issue 17's skinny shape whose 64x64 tiles make one wave (64x8192x8192, 128 tiles): the
// default is 64x64x64 s8 t128 on the sm_90a template, one CTA per tile, no cluster, no spills.
TEST(HopperPath, OneWaveSkinnyDefault) {
  for (tessel::DType t : {tessel::DType::f16, tessel::DType::bf16}) {
    const auto c = tessel::kernels::default_matmul_config(64, 8192, 8192, t, "sm_90a", 132);
    EXPECT_EQ(c.describe(), "64x64x64 s8 t128");
    tessel::JitOptions o;
    o.gemm_from_passes = false;  // select_hopper_gemm's template
    o.arch = "sm_90a";
    tessel::kernels::Matmul mm(64, 8192, 8192, t, tessel::kernels::MatmulStaging::automatic, o);
    EXPECT_EQ(mm.plan().split_k, 1) << mm.plan().why;
    EXPECT_EQ(mm.config().describe(), "64x64x64 s8 t128");
    const tessel::JitKernel& k = mm.kernel();
    EXPECT_NE(k.info().path.find("sm90 TMA + wgmma"), std::string::npos) << k.info().path << " "
                                                                          << k.info().hopper_declined;
    EXPECT_EQ(k.info().cluster_size, 1);
    EXPECT_EQ(k.resources().spill_store_bytes + k.resources().spill_load_bytes, 0) << k.compile_log();
  }
}

TEST(HopperPath, DeclinedShapesSayWhy) {
  tessel::JitOptions o;
  o.gemm_from_passes = false;  // select_hopper_gemm's template
  o.arch = "sm_90a";
  // The tutorial's own 128x128x32 takes the Hopper path (64-byte swizzle for A's 32-wide rows).
  auto tutorial = tessel::kernels::make_matmul(2048, 2048, 2048, tessel::kernels::MatmulConfig{}, o);
  EXPECT_EQ(tutorial.info().path, "sm90 TMA + wgmma, warp-specialized, persistent, TMA-store epilogue")
      << tutorial.info().hopper_declined;
  tessel::kernels::MatmulConfig k16;
  k16.block_K = 16;
  auto narrow = tessel::kernels::make_matmul(2048, 2048, 2048, k16, o);
  EXPECT_EQ(narrow.info().path, "mma.sync");
  EXPECT_NE(narrow.info().hopper_declined.find("block_K is not 32"), std::string::npos)
      << narrow.info().hopper_declined;
  auto odd = tessel::kernels::make_matmul(17, 33, 65, hopper_config(), o);
  EXPECT_NE(odd.info().hopper_declined.find("TMA needs 16-byte row strides"), std::string::npos)
      << odd.info().hopper_declined;
  o.arch = "sm_80";
  auto two_stages = hopper_config();
  two_stages.num_stages = 2;  // 4 stages of 128x256x64 exceed sm_80's 163 KB
  auto ampere = tessel::kernels::make_matmul(2048, 2048, 2048, two_stages, o);
  EXPECT_EQ(ampere.info().path, "mma.sync");
}

}  // namespace

namespace {

// The library's Matmul for unaligned rows compiles the aligned kernel for the padded shape (the
// sm_90a TMA path), and keeps the exact shape when it does not stage; no GPU needed to build it.
TEST(MatmulStaging, UnalignedRowsCompileTheAlignedKernel) {
  tessel::JitOptions o;
  o.arch = "sm_90a";
  tessel::kernels::Matmul staged(4095, 4095, 4095, tessel::DType::f16,
                                 tessel::kernels::MatmulStaging::automatic, o);
  EXPECT_TRUE(staged.plan().staged()) << staged.plan().why;
  EXPECT_EQ(staged.plan().kernel_K, 4096);
  EXPECT_NE(staged.kernel().info().path.find("TMA"), std::string::npos) << staged.kernel().info().path;
  EXPECT_NE(staged.describe().find("on 4095x4096x4096; A, B, C staged (K 4095 -> 4096) (N 4095 -> 4096)"),
            std::string::npos)
      << staged.describe();
  tessel::kernels::Matmul direct(4095, 4095, 4095, tessel::DType::f16, tessel::kernels::MatmulStaging::never,
                                 o);
  EXPECT_FALSE(direct.plan().staged());
  EXPECT_EQ(direct.kernel().info().path.find("TMA"), std::string::npos) << direct.kernel().info().path;
  EXPECT_THROW(tessel::kernels::Matmul(64, 64, 64, tessel::DType::f32), std::invalid_argument);
}

// Skinny 16-bit shapes with an unaligned row (M <= 64, sm_90a): the library's Matmul runs them
// on the exact shape -- direct on default_matmul_config's small tiles, or split-K's 16x256 partial
// GEMM where the ring model says so (M <= 16) -- whose unaligned operand loads through a
// realigned ring (cp.async of raw words, the shift at the iteration's top), with no spills; an
// output of one tile is staged.
TEST(MatmulStaging, SkinnyUnalignedShapesRunOnRealignedRings) {
  tessel::JitOptions o;
  o.arch = "sm_90a";
  struct Want {
    int M, N, K;
    const char* config;
    int split;
  };
  for (const Want& w :
       {Want{1, 50257, 4096, "32x64x64 s4 t128", 1}, Want{64, 50257, 4096, "32x64x64 s4 t128", 1},
        Want{16, 4097, 4096, "16x256x64 s4 t128", 7}, Want{1, 4095, 4095, "16x256x64 s4 t128", 8}}) {
    SCOPED_TRACE(std::to_string(w.M) + "x" + std::to_string(w.N) + "x" + std::to_string(w.K));
    tessel::kernels::Matmul mm(w.M, w.N, w.K, tessel::DType::bf16, tessel::kernels::MatmulStaging::automatic,
                               o);
    EXPECT_FALSE(mm.plan().staged()) << mm.plan().why;
    EXPECT_EQ(mm.plan().split_k, w.split) << mm.plan().why;
    EXPECT_EQ(mm.workspace_bytes(),
              w.split > 1 ? static_cast<std::size_t>((4LL * w.split * w.M * w.N + 255) / 256 * 256) : 0u);
    EXPECT_EQ(mm.config().describe(), w.config);
    const tessel::JitKernel& k = mm.kernel();
    EXPECT_NE(k.source().find("tessel::copy_words_to_shared"), std::string::npos);
    EXPECT_NE(k.source().find("tessel::realign_words_to_shared"), std::string::npos);
    EXPECT_NE(k.ptx().find("cp.async.cg.shared.global"), std::string::npos);
    EXPECT_EQ(k.ptx().find("ld.global.nc.v4"), std::string::npos);
    EXPECT_EQ(k.resources().spill_store_bytes + k.resources().spill_load_bytes, 0) << k.compile_log();
  }
  tessel::kernels::Matmul tiny(1, 15, 4095, tessel::DType::bf16, tessel::kernels::MatmulStaging::automatic,
                               o);
  EXPECT_TRUE(tiny.plan().staged()) << tiny.plan().why;
  // With the realigned rings turned off (the option, or TESSEL_DISABLE), the exact shape's kernel
  // would load in synchronous chunks: the shape is staged instead, and the plan says why.
  for (bool by_env : {false, true}) {
    SCOPED_TRACE(by_env ? "TESSEL_DISABLE=realigned_rings" : "JitOptions::disable_realigned_rings");
    tessel::JitOptions off = o;
    off.disable_realigned_rings = !by_env;
    tessel::test::ScopedEnv env("TESSEL_DISABLE",
                                by_env ? std::optional<std::string>("realigned_rings") : std::nullopt);
    tessel::kernels::Matmul mm(1, 50257, 4096, tessel::DType::bf16, tessel::kernels::MatmulStaging::automatic,
                               off);
    EXPECT_TRUE(mm.plan().staged()) << mm.plan().why;
    EXPECT_EQ(
        mm.plan().why.rfind("realigned rings off (JitOptions::disable_realigned_rings or "
                            "TESSEL_DISABLE=realigned_rings), where the model would run the exact shape (",
                            0),
        0u)
        << mm.plan().why;
    EXPECT_EQ(mm.kernel().source().find("tessel::copy_words_to_shared"), std::string::npos);
  }
}

// The scratch a caller provides instead of Matmul's own buffers: each staged buffer and split-K's
// f32 partials, 256-byte aligned one after another; none for an aligned shape.
TEST(MatmulStaging, WorkspaceBytesCoverEveryBuffer) {
  tessel::JitOptions o;
  o.arch = "sm_90a";
  using S = tessel::kernels::MatmulStaging;
  auto up = [](long long b) { return static_cast<std::size_t>((b + 255) / 256 * 256); };
  tessel::kernels::Matmul staged(4095, 4095, 4095, tessel::DType::f16, S::automatic, o, 1);
  ASSERT_TRUE(staged.plan().stage_a && staged.plan().stage_b && staged.plan().stage_c) << staged.plan().why;
  EXPECT_EQ(staged.workspace_bytes(), up(4095LL * 4096 * 2) + up(4096LL * 4096 * 2) + up(4095LL * 4096 * 2));
  tessel::kernels::Matmul aligned(256, 256, 256, tessel::DType::f16, S::automatic, o, 1);
  EXPECT_EQ(aligned.workspace_bytes(), 0u);
  tessel::kernels::Matmul split(1, 4096, 4096, tessel::DType::bf16, S::automatic, o, 4);
  ASSERT_EQ(split.plan().split_k, 4) << split.plan().why;
  EXPECT_EQ(split.workspace_bytes(), up(4LL * 1 * 4096 * 4));
  // Too small or misaligned: an error naming the need (checked before any tensor is looked at).
  tessel::Tensor none;
  try {
    split(none, none, none, nullptr, 256, 1024);
    ADD_FAILURE() << "a 1024-byte workspace was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("Matmul: the workspace is 1024 bytes at 0x100; "), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("needs 65536 bytes or more, 256-byte aligned"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(split(none, none, none, nullptr, 257, 1 << 20), std::invalid_argument);
}

}  // namespace

namespace {

// Split-K for issue 17's skinny shapes: kernels::Matmul compiles the partial GEMM and the
// reduction. The partial GEMM (a 3-D grid) comes from the generic passes: at 64 rows its loop's
// sole gemm takes wgmma on a TMA ring (infer_layouts' MainLoopGemmScan under gemm_from_passes);
// under 64 rows it keeps the mma.sync main loop, its shared tiles ldmatrix tiles, which TMA does
// not write (plan_tma_copies), so its loads are cp.async. No spills; the reduction loads W in
// 16-byte vectors.
TEST(MatmulSplitK, SkinnyShapesCompileThePartialGemmAndTheReduction) {
  struct Want {
    int M, N, K, split;
  };
  // The plan's counts (MatmulPlan.SkinnyShapesSplitK); 8x14336x4096 (split 2 by the plan) and
  // 64x8192x8192 (unsplit) forced to 4.
  for (const Want& w : {Want{1, 2048, 8192, 16}, Want{16, 3072, 4096, 8}, Want{32, 4096, 14336, 5},
                        Want{8, 14336, 4096, 4}, Want{64, 8192, 8192, 4}}) {
    for (tessel::DType t : {tessel::DType::f16, tessel::DType::bf16}) {
      SCOPED_TRACE(std::to_string(w.M) + "x" + std::to_string(w.N) + "x" + std::to_string(w.K) + " " +
                   std::string(tessel::dtype_name(t)));
      tessel::JitOptions o;
      o.arch = "sm_90a";
      tessel::kernels::Matmul mm(w.M, w.N, w.K, t, tessel::kernels::MatmulStaging::automatic, o,
                                 w.N >= 8192 ? w.split : 0);
      ASSERT_EQ(mm.plan().split_k, w.split) << mm.plan().why;
      EXPECT_NE(mm.describe().find("; split-K " + std::to_string(w.split)), std::string::npos)
          << mm.describe();
      const tessel::JitKernel& partial = mm.kernel();
      EXPECT_EQ(partial.info().hopper_declined, "");  // the template is not asked (gemm_from_passes)
      if (mm.config().block_M >= 64) {
        // 64 rows: the generic passes' wgmma on a TMA ring over the block's share of K, a
        // producer warp beside the consumer warpgroup.
        EXPECT_EQ(partial.info().path.rfind("sm90 wgmma block gemm (generic kernel), TMA + mbarrier ring", 0),
                  0u)
            << partial.info().path;
        for (const char* needle : {"wgmma.mma_async", "cp.async.bulk.tensor", "mbarrier.try_wait"})
          EXPECT_NE(partial.ptx().find(needle), std::string::npos) << needle;
      } else {
        EXPECT_EQ(partial.info().path, "mma.sync");
        for (const char* needle :
             {"mma.sync.aligned.m16n8k16", "ldmatrix.sync.aligned", "cp.async.cg.shared.global"})
          EXPECT_NE(partial.ptx().find(needle), std::string::npos) << needle;
        EXPECT_EQ(partial.info().threads, 128);
        EXPECT_EQ(partial.info().dynamic_smem_bytes, tessel::kernels::matmul_smem_bytes(mm.config()));
      }
      EXPECT_EQ(partial.resources().spill_store_bytes, 0) << partial.compile_log();
      EXPECT_EQ(partial.resources().spill_load_bytes, 0) << partial.compile_log();
      const tessel::JitKernel& reduce = mm.reduce_kernel();
      EXPECT_EQ(reduce.info().path, "CUDA cores (no gemm)");
      EXPECT_NE(reduce.ptx().find("ld.global.nc.v4.u32"), std::string::npos);  // 4 f32 of W
      EXPECT_EQ(reduce.resources().spill_store_bytes, 0) << reduce.compile_log();
      std::cout << "[ info ] " << mm.describe() << ": partial " << partial.resources().registers
                << " registers, " << partial.info().dynamic_smem_bytes << " B smem; reduction "
                << reduce.resources().registers << " registers\n";
    }
  }
}

// The one-wave 16x32 tile that `tessel tune gemm` tries for M <= 16 (a candidate, not the
// default: on the H200 it measured 0.88x split-K at 1x4096x4096 and 1.00-1.05x at 16x4096x4096,
// session 17): one kernel, cp.async into 8 stages of 128 K elements, mma.sync, no spills.
TEST(MatmulSplitK, OneWaveOf16x32TilesCompiles) {
  for (int M : {1, 16})
    for (tessel::DType t : {tessel::DType::f16, tessel::DType::bf16}) {
      SCOPED_TRACE(std::to_string(M) + "x4096x4096 " + std::string(tessel::dtype_name(t)));
      tessel::JitOptions o;
      o.arch = "sm_90a";
      tessel::kernels::MatmulConfig c;
      c.dtype = t;
      c.block_M = 16, c.block_N = 32, c.block_K = 128, c.num_stages = 8, c.threads = 128, c.use_swizzle = false;
      const tessel::JitKernel k = tessel::kernels::make_matmul(M, 4096, 4096, c, o);
      EXPECT_EQ(k.info().path, "mma.sync");
      for (const char* needle : {"mma.sync.aligned.m16n8k16", "cp.async.cg.shared.global"})
        EXPECT_NE(k.ptx().find(needle), std::string::npos) << needle;
      EXPECT_EQ(k.info().dynamic_smem_bytes, tessel::kernels::matmul_smem_bytes(c));
      EXPECT_EQ(k.resources().spill_store_bytes + k.resources().spill_load_bytes, 0) << k.compile_log();
    }
}

// Forced and off: split_k = 1 keeps the one sm_90a GEMM kernel (the passes' split over clusters
// takes this shape: 8 tiles, K = 8192, clusters of 4); a forced count on sm_80 compiles
// the same two programs; a staged shape splits the padded kernel.
TEST(MatmulSplitK, ForcedOffAndStaged) {
  tessel::JitOptions o;
  o.arch = "sm_90a";
  tessel::kernels::Matmul off(1, 2048, 8192, tessel::DType::f16, tessel::kernels::MatmulStaging::automatic, o,
                              1);
  EXPECT_FALSE(off.plan().split());
  EXPECT_EQ(
      off.kernel().info().path,
      "sm90 wgmma block gemm (generic kernel), TMA + mbarrier ring, warp-specialized, split-K over 4-CTA "
      "clusters, TMA-store epilogue");
  EXPECT_EQ(off.describe().find("split-K"), std::string::npos) << off.describe();
  tessel::kernels::Matmul staged(7, 4095, 4095, tessel::DType::bf16, tessel::kernels::MatmulStaging::always,
                                 o, 4);
  EXPECT_NE(
      staged.describe().find("on 7x4096x4096; A, B, C staged (K 4095 -> 4096) (N 4095 -> 4096); split-K 4"),
      std::string::npos)
      << staged.describe();
  EXPECT_EQ(staged.kernel().resources().spill_store_bytes, 0) << staged.kernel().compile_log();
  o.arch = "sm_80";
  tessel::kernels::Matmul ampere(16, 4096, 4096, tessel::DType::f16,
                                 tessel::kernels::MatmulStaging::automatic, o, 8);
  EXPECT_EQ(ampere.plan().split_k, 8);
  EXPECT_EQ(ampere.kernel().info().path, "mma.sync");
  EXPECT_EQ(ampere.kernel().resources().spill_store_bytes, 0) << ampere.kernel().compile_log();
  try {
    tessel::kernels::Matmul bad(16, 4096, 4096, tessel::DType::f16, tessel::kernels::MatmulStaging::automatic,
                                o, 100);
    FAIL() << "split_k = 100 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("Matmul: split_k = 100 (legal: 0 = automatic, 1 = off, 2 to 64"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace

namespace {

// Matmul's staging copies, compiled for sm_90a and sm_80: a source whose rows are not 16-byte
// aligned is read in aligned 16-byte words shifted into place in registers; a destination whose
// rows are not aligned is written through a shared span in 16-byte chunks (pieces of a long row
// too); aligned rows move as whole vectors. No spills. A staged Matmul compiles one copy for
// each staged operand.
TEST(MatmulStaging, CopiesMoveSixteenByteWordsOnBothSides) {
  using tessel::kernels::default_staging_copy;
  using tessel::kernels::matmul_staging_copy_program;
  struct Case {
    int rows, from, to;
    bool realigned_loads, span_stores;
  };
  for (const std::string arch : {"sm_90a", "sm_80"})
    for (const Case& c : {Case{8192, 50257, 50304, true, false}, Case{8192, 50304, 50257, false, true},
                          Case{4095, 4095, 4096, true, false}, Case{4095, 4096, 4095, false, true},
                          Case{12345, 1011, 1024, true, false}}) {
      SCOPED_TRACE(arch + " " + std::to_string(c.rows) + " rows " + std::to_string(c.from) + " -> " +
                   std::to_string(c.to));
      tessel::JitOptions o;
      o.arch = arch;
      auto k = tessel::jit(
          matmul_staging_copy_program(c.rows, c.from, c.to, tessel::DType::bf16,
                                      default_staging_copy(std::max(c.from, c.to), tessel::DType::bf16)),
          o);
      const std::string& src = k.source();
      EXPECT_EQ(src.find("tessel::load_global_words_realigned") != std::string::npos, c.realigned_loads)
          << src;
      EXPECT_EQ(src.find("tessel::copy_shared_span_to_global") != std::string::npos, c.span_stores) << src;
      EXPECT_EQ(k.resources().spill_store_bytes, 0) << k.compile_log();
      EXPECT_EQ(k.resources().spill_load_bytes, 0) << k.compile_log();
    }
  tessel::JitOptions o;
  o.arch = "sm_90a";
  tessel::kernels::Matmul staged(8192, 50257, 4096, tessel::DType::bf16,
                                 tessel::kernels::MatmulStaging::always, o);
  ASSERT_TRUE(staged.plan().stage_b && staged.plan().stage_c && !staged.plan().stage_a) << staged.plan().why;
  EXPECT_EQ(staged.plan().kernel_N, 50304);
}

}  // namespace
