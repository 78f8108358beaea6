// The tutorial GEMM on the GPU against cuBLAS (large shapes) and a float64 CPU reference (small
// ones), f16 and bf16, outputs poisoned with NaN before every run.
#include <cublas_v2.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <random>

#include "support/TestSupport.hpp"
#include "tessel/kernels/gemm/Matmul.hpp"
#include "tessel/runtime/Driver.hpp"

namespace {

using tessel::DType;
using tessel::Tensor;
using tessel::kernels::MatmulConfig;

// C = A * B (row-major) with cuBLAS: in column-major terms C^T = B^T * A^T.
void cublas_gemm(const Tensor& a, const Tensor& b, Tensor& c, int M, int N, int K) {
  static cublasHandle_t handle = [] {
    cublasHandle_t h;
    EXPECT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
    return h;
  }();
  float alpha = 1, beta = 0;
  cudaDataType t = a.dtype() == DType::f16 ? CUDA_R_16F : CUDA_R_16BF;
  ASSERT_EQ(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha, b.data_ptr(), t, N, a.data_ptr(),
                         t, K, &beta, c.data_ptr(), t, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_SUCCESS);
}

struct Case {
  int M, N, K;
  MatmulConfig cfg;
};

void run_case(const Case& c, DType dtype, const tessel::JitOptions& options = {}) {
  MatmulConfig cfg = c.cfg;
  cfg.dtype = dtype;
  SCOPED_TRACE("M=" + std::to_string(c.M) + " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K) + " " +
               cfg.describe() + " " + std::string(tessel::dtype_name(dtype)));
  auto kernel = tessel::kernels::make_matmul(c.M, c.N, c.K, cfg, options);
  static std::mt19937_64 seeds(std::random_device{}());
  Tensor a = Tensor::empty({c.M, c.K}, dtype), b = Tensor::empty({c.K, c.N}, dtype);
  a.fill_random(seeds());
  b.fill_random(seeds());
  Tensor out = Tensor::empty({c.M, c.N}, dtype);
  out.fill(std::nan(""));
  kernel.launch({a, b, out});
  tessel::check_cu(tessel::driver().cuCtxSynchronize(), "cuCtxSynchronize");
  std::vector<double> got = out.to_host_f64();
  std::vector<double> ref;
  // Large cases check against cuBLAS, unless TESSEL_TEST_F64_REFERENCE is set: then float64 on
  // the CPU always, so that no cuBLAS kernel runs (compute-sanitizer's racecheck, scripts/gpu-s21.sh:
  // with its --kernel-name filter it faulted in cuBLAS's kernels on an H100, session 28; without
  // it, it reports hazards inside them).
  if (1LL * c.M * c.N * c.K <= (1LL << 27) || std::getenv("TESSEL_TEST_F64_REFERENCE") != nullptr) {
    ref = tessel::test::reference_gemm(a.to_host_f64(), b.to_host_f64(), c.M, c.N, c.K);
  } else {
    Tensor r = Tensor::empty({c.M, c.N}, dtype);
    r.fill(std::nan(""));
    cublas_gemm(a, b, r, c.M, c.N, c.K);
    tessel::check_cu(tessel::driver().cuCtxSynchronize(), "cuCtxSynchronize");
    ref = r.to_host_f64();
  }
  double err = tessel::test::rel_error(got, ref);
  EXPECT_LE(err, 2e-2) << "relative Frobenius error " << err;
  // A second run on the same inputs must give the same bits (no races).
  Tensor again = Tensor::empty({c.M, c.N}, dtype);
  again.fill(std::nan(""));
  kernel.launch({a, b, again});
  tessel::check_cu(tessel::driver().cuCtxSynchronize(), "cuCtxSynchronize");
  EXPECT_EQ(again.to_host_f64(), got) << "two runs on the same inputs differ";
}

MatmulConfig knob(int bm, int bn, int bk, int st, int thr, bool swz) {
  MatmulConfig c;
  c.block_M = bm;
  c.block_N = bn;
  c.block_K = bk;
  c.num_stages = st;
  c.threads = thr;
  c.use_swizzle = swz;
  return c;
}

std::string case_name(const Case& c, DType t) {
  return std::to_string(c.M) + "x" + std::to_string(c.N) + "x" + std::to_string(c.K) + "_" +
         std::to_string(c.cfg.block_M) + "x" + std::to_string(c.cfg.block_N) + "x" +
         std::to_string(c.cfg.block_K) + "s" + std::to_string(c.cfg.num_stages) + "t" +
         std::to_string(c.cfg.threads) + (c.cfg.use_swizzle ? "swz" : "") +
         (c.cfg.cluster_x * c.cfg.cluster_y > 1
              ? "c" + std::to_string(c.cfg.cluster_x) + "x" + std::to_string(c.cfg.cluster_y)
              : "") +
         "_" + std::string(tessel::dtype_name(t));
}
struct ShapeName {
  template <class P>
  std::string operator()(const ::testing::TestParamInfo<P>& info) const {
    std::string n = case_name(std::get<0>(info.param), std::get<1>(info.param));
    if constexpr (std::tuple_size_v<P> == 3) n += "_off" + std::to_string(std::get<2>(info.param));
    return n;
  }
};

class MatmulShapes : public ::testing::TestWithParam<std::tuple<Case, DType>> {};

TEST_P(MatmulShapes, MatchesReference) {
  TESSEL_REQUIRE_GPU();
  run_case(std::get<0>(GetParam()), std::get<1>(GetParam()));
}

const MatmulConfig kDefault = knob(128, 128, 32, 3, 128, false);

INSTANTIATE_TEST_SUITE_P(
    Shapes, MatmulShapes,
    ::testing::Combine(::testing::Values(Case{2048, 2048, 2048, kDefault}, Case{4096, 4096, 4096, kDefault},
                                         Case{1000, 1000, 1000, kDefault}, Case{17, 33, 65, kDefault},
                                         Case{1, 4096, 4096, kDefault}, Case{4096, 1, 4096, kDefault},
                                         Case{4096, 4096, 8, kDefault}, Case{300, 200, 40, kDefault},
                                         Case{2048, 2048, 2048, knob(128, 256, 32, 3, 256, true)}),
                       ::testing::Values(DType::f16, DType::bf16)),
    ShapeName());

INSTANTIATE_TEST_SUITE_P(
    TutorialKnobs, MatmulShapes,
    ::testing::Combine(::testing::Values(Case{2048, 2048, 2048, knob(64, 64, 32, 2, 128, false)},
                                         Case{2048, 2048, 2048, knob(128, 128, 32, 2, 128, false)},
                                         Case{2048, 2048, 2048, knob(128, 128, 32, 2, 128, true)},
                                         Case{2048, 2048, 2048, knob(128, 128, 32, 3, 128, false)},
                                         Case{2048, 2048, 2048, knob(128, 128, 64, 2, 256, false)},
                                         Case{2048, 2048, 2048, knob(128, 256, 32, 2, 256, false)}),
                       ::testing::Values(DType::f16)),
    ShapeName());

// The kernel for an exact shape whose rows start off 16 bytes (K or N odd, no staging): A's and
// B's tiles go through a realigned ring where the loop takes the generic schedule (plan_pipelines:
// raw aligned 16-byte words by cp.async, shifted into the tile at each iteration's top) and, with
// JitOptions::disable_realigned_rings, through copy_global_to_shared's realigned chunks (aligned words
// shifted in registers, the last chunks of the last column tile and rows past the edge element by element).
// Every element against float64 within 1e-2 of its |A||B| magnitude (a wrong shift or a chunk off by one
// shows, where a Frobenius norm could hide a few elements), outputs poisoned, f16 and bf16,
// several tiles and thread counts; the two paths fill the same tiles, so their outputs are
// bit-identical.
TEST(MatmulUnalignedDirect, EveryElementMatchesFloat64) {
  TESSEL_REQUIRE_GPU();
  static std::mt19937_64 seeds(std::random_device{}());
  const MatmulConfig tiles[] = {knob(128, 128, 32, 3, 128, false), knob(16, 32, 128, 8, 128, false),
                                knob(64, 64, 32, 4, 128, false), knob(128, 256, 32, 3, 256, true),
                                knob(16, 64, 64, 2, 128, false)};
  struct Shape {
    int M, N, K;
  };
  for (DType dtype : {DType::f16, DType::bf16})
    for (const MatmulConfig& t : tiles)
      for (const Shape& sh : {Shape{1, 50257, 40}, Shape{17, 4097, 130}, Shape{65, 1023, 1025},
                              Shape{3, 1001, 257}, Shape{130, 9, 7}, Shape{2, 15, 4095}}) {
        MatmulConfig cfg = t;
        cfg.dtype = dtype;
        SCOPED_TRACE(std::to_string(sh.M) + "x" + std::to_string(sh.N) + "x" + std::to_string(sh.K) + " " +
                     cfg.describe() + " " + std::string(tessel::dtype_name(dtype)));
        Tensor a = Tensor::empty({sh.M, sh.K}, dtype), b = Tensor::empty({sh.K, sh.N}, dtype);
        a.fill_random(seeds());
        b.fill_random(seeds());
        std::vector<double> av = a.to_host_f64(), bv = b.to_host_f64();
        const std::vector<double> ref = tessel::test::reference_gemm(av, bv, sh.M, sh.N, sh.K);
        for (double& x : av) x = std::abs(x);
        for (double& x : bv) x = std::abs(x);
        const std::vector<double> mag = tessel::test::reference_gemm(av, bv, sh.M, sh.N, sh.K);
        std::vector<std::vector<std::uint16_t>> bits;
        for (bool rings : {true, false}) {
          SCOPED_TRACE(rings ? "realigned rings" : "realigned chunks (disable_realigned_rings)");
          tessel::JitOptions o;
          o.disable_realigned_rings = !rings;
          auto kernel = tessel::kernels::make_matmul(sh.M, sh.N, sh.K, cfg, o);
          const bool words = kernel.source().find("tessel::copy_words_to_shared") != std::string::npos;
          const bool fused = kernel.source().find("tessel::gemm_mainloop") != std::string::npos;
          EXPECT_EQ(words, rings && cfg.num_stages > 1 && !fused);
          Tensor out = Tensor::empty({sh.M, sh.N}, dtype);
          out.fill(std::nan(""));
          kernel.launch({a, b, out});
          tessel::check_cu(tessel::driver().cuCtxSynchronize(), "cuCtxSynchronize");
          const std::vector<double> got = out.to_host_f64();
          for (size_t i = 0; i < got.size(); ++i)
            if (!(std::abs(got[i] - ref[i]) <= 1e-2 * mag[i] + 1e-6)) {
              ADD_FAILURE() << "C[" << i / sh.N << ", " << i % sh.N << "] = " << got[i] << ", float64 "
                            << ref[i] << " (|A||B| " << mag[i] << ")";
              break;
            }
          bits.push_back(out.to_host<std::uint16_t>());
        }
        EXPECT_TRUE(bits[0] == bits[1]) << "the realigned ring and the realigned chunks differ";
      }
}

// Warp tiles of one or two m16n8 blocks (skinny configs) spread a K tile's k steps over
// independent accumulator chains (BlockGemm's KChains, chosen by infer_layouts): with the chains
// and without (JitOptions::disable_gemm_chains), M below the tile, N and K tails (the last K tile
// zero-filled, so the chains that see it add zeros), against float64, reruns bit-identical.
class AccumulatorChains : public ::testing::TestWithParam<std::tuple<Case, DType, bool>> {};

TEST_P(AccumulatorChains, MatchReference) {
  TESSEL_REQUIRE_GPU();
  tessel::JitOptions o;
  o.disable_gemm_chains = std::get<2>(GetParam());
  run_case(std::get<0>(GetParam()), std::get<1>(GetParam()), o);
}

INSTANTIATE_TEST_SUITE_P(
    SkinnyTiles, AccumulatorChains,
    ::testing::Combine(::testing::Values(Case{1, 4096, 4096, knob(16, 32, 128, 8, 128, false)},
                                         Case{7, 1000, 1000, knob(16, 32, 128, 8, 128, false)},
                                         Case{16, 4000, 65, knob(16, 32, 128, 4, 128, false)},
                                         Case{9, 1023, 1025, knob(16, 64, 64, 4, 128, false)},
                                         Case{33, 520, 4104, knob(16, 64, 32, 3, 128, false)}),
                       ::testing::Values(DType::f16, DType::bf16), ::testing::Bool()),
    [](const ::testing::TestParamInfo<std::tuple<Case, DType, bool>>& info) {
      return case_name(std::get<0>(info.param), std::get<1>(info.param)) +
             (std::get<2>(info.param) ? "_one_chain" : "_chains");
    });

// The sm_90a path (TMA + wgmma, warp-specialized, persistent) where the tile allows it, and the
// same configs with each feature turned off (the mma.sync fallback).
MatmulConfig hopper(int bm, int bn, int st, int thr, int panel) {
  MatmulConfig c = knob(bm, bn, 64, st, thr, panel > 0);
  c.panel_size = panel;
  return c;
}

class HopperShapes : public ::testing::TestWithParam<std::tuple<Case, DType, int>> {};

TEST_P(HopperShapes, MatchesReference) {
  TESSEL_REQUIRE_GPU();
  if (tessel::current_device().arch() != "sm_90a") GTEST_SKIP() << "SKIPPED: not an sm_90a GPU";
  auto [c, dtype, off] = GetParam();
  tessel::JitOptions o;
  o.gemm_from_passes = false;  // select_hopper_gemm's template; the passes' kernel: FromPasses/*
  o.disable_tma = off == 1;
  o.disable_wgmma = off == 2;
  o.disable_warp_specialization = off == 3;
  o.disable_split_k = off == 4;
  o.disable_tma_store = off == 5;
  MatmulConfig cfg = c.cfg;
  cfg.dtype = dtype;
  auto k = tessel::kernels::make_matmul(c.M, c.N, c.K, cfg, o);
  bool tma_legal = c.K % 8 == 0 && c.N % 8 == 0;
  // Shapes TMA cannot take stay generic kernels; their main loop is BlockGemm's gemm_mainloop
  // (mma.sync), measured faster there than the generic kernels' wgmma.
  EXPECT_EQ(k.info().path == "mma.sync", (off != 0 && off < 4) || !tma_legal) << k.info().hopper_declined;
  run_case(c, dtype, o);
}

// Few tiles and a long K loop: each tile's K loop split over a 2-CTA cluster (rank 1's partial
// sums handed to rank 0 through distributed shared memory). run_case checks the result and
// that a second run gives the same bits; off = 4 is the same config without the split.
class SplitKShapes : public ::testing::TestWithParam<std::tuple<Case, DType, int>> {};

TEST_P(SplitKShapes, MatchesReference) {
  TESSEL_REQUIRE_GPU();
  if (tessel::current_device().arch() != "sm_90a") GTEST_SKIP() << "SKIPPED: not an sm_90a GPU";
  auto [c, dtype, off] = GetParam();
  tessel::JitOptions o;
  o.gemm_from_passes = false;  // the template's split; the passes': FromPasses/GemmFromPassesShapes
  o.disable_split_k = off == 4;
  MatmulConfig cfg = c.cfg;
  cfg.dtype = dtype;
  auto k = tessel::kernels::make_matmul(c.M, c.N, c.K, cfg, o);
  EXPECT_EQ(k.info().cluster_size, off == 4 ? 1 : 2) << k.info().path;
  run_case(c, dtype, o);
}

INSTANTIATE_TEST_SUITE_P(
    SplitK, SplitKShapes,
    ::testing::Combine(::testing::Values(Case{128, 8192, 8192, hopper(128, 128, 4, 256, 16)},
                                         Case{1024, 1024, 4096, hopper(128, 128, 5, 256, 16)},
                                         // one consumer warpgroup, an odd number of K tiles
                                         Case{256, 384, 4160, hopper(128, 128, 4, 128, 0)},
                                         // ragged M and N, a partial last K tile
                                         Case{200, 136, 4168, hopper(128, 128, 3, 256, 0)},
                                         // one tile, many K tiles; 64-row tiles
                                         Case{64, 256, 8192, hopper(64, 256, 4, 128, 0)},
                                         // a 5 x 5 grid of tiles, panel rasterization
                                         Case{640, 640, 4096, hopper(128, 128, 4, 256, 4)}),
                       ::testing::Values(DType::f16, DType::bf16), ::testing::Values(0)),
    ShapeName());

INSTANTIATE_TEST_SUITE_P(
    SplitKOff, SplitKShapes,
    ::testing::Combine(::testing::Values(Case{200, 136, 4168, hopper(128, 128, 3, 256, 0)},
                                         Case{128, 8192, 8192, hopper(128, 128, 4, 256, 16)}),
                       ::testing::Values(DType::f16), ::testing::Values(4)),
    ShapeName());

// use_cluster: 2-CTA clusters of adjacent tiles that load the A (c2x1) or B (c1x2) tile they
// share once, through TMA multicast. Odd tile counts leave a cluster's second tile past the
// matrix (zero-filled loads, clipped stores); off = 6 ignores the hint (TESSEL_DISABLE=multicast).
MatmulConfig clustered(int bm, int bn, int st, int thr, int panel, int x, int y) {
  MatmulConfig c = hopper(bm, bn, st, thr, panel);
  c.cluster_x = x;
  c.cluster_y = y;
  return c;
}

class MulticastShapes : public ::testing::TestWithParam<std::tuple<Case, DType, int>> {};

TEST_P(MulticastShapes, MatchesReference) {
  TESSEL_REQUIRE_GPU();
  if (tessel::current_device().arch() != "sm_90a") GTEST_SKIP() << "SKIPPED: not an sm_90a GPU";
  auto [c, dtype, off] = GetParam();
  tessel::JitOptions o;
  o.disable_multicast = off == 6;
  // 7: the generic passes' kernel (JitOptions::gemm_from_passes), multicast by
  // multicast_cluster_loads instead of the template.
  o.gemm_from_passes = off == 7;
  MatmulConfig cfg = c.cfg;
  cfg.dtype = dtype;
  auto k = tessel::kernels::make_matmul(c.M, c.N, c.K, cfg, o);
  EXPECT_EQ(k.info().cluster_size, off == 6 ? 1 : 2) << k.info().path;
  EXPECT_NE(k.info().path.find(off == 6 ? "persistent" : "multicast over 2-CTA clusters"), std::string::npos)
      << k.info().path;
  EXPECT_EQ(k.info().path.find("generic kernel") != std::string::npos, off == 7) << k.info().path;
  run_case(c, dtype, o);
}

// The template's clusters (select_hopper_gemm) and the passes' (multicast_cluster_loads, under
// gemm_from_passes) on the same cases.
std::vector<Case> multicast_cases() {
  return {Case{128, 8192, 8192, clustered(128, 64, 8, 256, 16, 2, 1)},
          // 3 x 3 tiles: the last cluster of each row half past N
          Case{300, 136, 1000, clustered(128, 64, 4, 256, 0, 2, 1)},
          Case{17, 40, 72, clustered(128, 64, 4, 256, 0, 2, 1)},
          // one consumer warpgroup, 64-row tiles, 32 rows per CTA
          Case{200, 520, 2000, clustered(64, 128, 6, 128, 4, 2, 1)},
          // B shared down columns; 3 tile rows (odd), TMA store
          Case{300, 520, 1000, clustered(128, 128, 4, 256, 0, 1, 2)},
          Case{2048, 2048, 2048, clustered(128, 256, 3, 256, 8, 1, 2)},
          Case{1000, 1000, 1000, clustered(128, 256, 3, 256, 8, 2, 1)},
          // 9 tile columns along an x cluster, 9 tile rows along a y one (the passes' extra block
          // skips the epilogue), odd swizzle panels, one consumer warpgroup over 128 rows
          Case{1000, 1064, 1032, clustered(128, 128, 5, 256, 5, 2, 1)},
          Case{1100, 1000, 1032, clustered(128, 128, 5, 128, 3, 1, 2)},
          Case{4096, 4096, 4096, clustered(128, 256, 4, 256, 16, 2, 1)}};
}

INSTANTIATE_TEST_SUITE_P(Multicast, MulticastShapes,
                         ::testing::Combine(::testing::ValuesIn(multicast_cases()),
                                            ::testing::Values(DType::f16, DType::bf16), ::testing::Values(0)),
                         ShapeName());
INSTANTIATE_TEST_SUITE_P(FromPasses, MulticastShapes,
                         ::testing::Combine(::testing::ValuesIn(multicast_cases()),
                                            ::testing::Values(DType::f16, DType::bf16), ::testing::Values(7)),
                         ShapeName());

// The passes' multicast kernel on a few persistent blocks (an odd cap is rounded down to whole
// clusters), each cluster looping over many pairs of tiles; and not persistent (0), one tile a
// block, the even swizzle panel remapping the launch's blocks.
TEST(GemmFromPassesMulticast, FewBlocksLoopOverManyTiles) {
  TESSEL_REQUIRE_GPU();
  if (tessel::current_device().arch() != "sm_90a") GTEST_SKIP() << "SKIPPED: not an sm_90a GPU";
  for (int ctas : {2, 3, 6, 0}) {
    tessel::JitOptions o;
    o.gemm_from_passes = true;
    o.max_persistent_ctas = ctas;
    o.disable_persistent_tiles = ctas == 0;
    SCOPED_TRACE("max_persistent_ctas " + std::to_string(ctas));
    for (const Case& c : {Case{300, 520, 1000, clustered(128, 64, 4, 256, 0, 2, 1)},
                          Case{300, 520, 1000, clustered(128, 128, 3, 256, 0, 1, 2)},
                          Case{1000, 1000, 1000, clustered(128, 128, 5, 256, 4, 2, 1)}}) {
      auto k = tessel::kernels::make_matmul(c.M, c.N, c.K, c.cfg, o);
      EXPECT_EQ(k.info().cluster_size, 2) << k.info().path;
      EXPECT_EQ(k.info().persistent, ctas != 0) << k.info().path;
      run_case(c, DType::f16, o);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(MulticastOff, MulticastShapes,
                         ::testing::Combine(::testing::Values(Case{300, 136, 1000,
                                                                   clustered(128, 64, 4, 256, 0, 2, 1)}),
                                            ::testing::Values(DType::f16), ::testing::Values(6)),
                         ShapeName());

// Persistent grids capped at a few CTAs, so that each CTA (or 2-CTA cluster) loops over many
// tiles: the split-K hand-off's barrier phases and the TMA-store epilogue's staging reuse across
// tiles, which full grids on the H200 do not reach (split-K is chosen only when every cluster
// gets one tile).
TEST(HopperPersistent, FewCtasLoopOverManyTiles) {
  TESSEL_REQUIRE_GPU();
  if (tessel::current_device().arch() != "sm_90a") GTEST_SKIP() << "SKIPPED: not an sm_90a GPU";
  for (int ctas : {2, 6}) {
    tessel::JitOptions o;
    o.gemm_from_passes = false;  // the template's persistence; the passes': GemmFromPassesPersistent
    o.max_persistent_ctas = ctas;
    SCOPED_TRACE("max_persistent_ctas " + std::to_string(ctas));
    // split-K: 6 tiles of 128x128, K = 4160 (65 K tiles); 1 or 3 clusters
    auto split = tessel::kernels::make_matmul(300, 200, 4160, hopper(128, 128, 4, 256, 0), o);
    EXPECT_EQ(split.info().cluster_size, 2);
    run_case(Case{300, 200, 4160, hopper(128, 128, 4, 256, 0)}, DType::f16, o);
    // TMA store, ragged edges: 32 tiles of 128x256 over 2 or 6 CTAs
    run_case(Case{1000, 1000, 1000, hopper(128, 256, 3, 256, 8)}, DType::bf16, o);
    // Multicast clusters looping over tiles (the ring's phases run on across them), both kinds
    run_case(Case{300, 520, 1000, clustered(128, 64, 4, 256, 0, 2, 1)}, DType::f16, o);
    run_case(Case{300, 520, 1000, clustered(128, 128, 3, 256, 0, 1, 2)}, DType::f16, o);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Hopper, HopperShapes,
    ::testing::Combine(::testing::Values(Case{2048, 2048, 2048, hopper(128, 256, 4, 256, 16)},
                                         Case{4096, 4096, 4096, hopper(128, 256, 4, 256, 16)},
                                         Case{1000, 1000, 1000, hopper(128, 128, 6, 128, 0)},
                                         Case{1, 4096, 4096, hopper(64, 256, 4, 128, 0)},
                                         Case{4096, 1, 4096, hopper(128, 128, 4, 256, 0)},
                                         Case{4096, 4096, 8, hopper(128, 256, 4, 256, 16)},
                                         Case{17, 33, 65, hopper(128, 128, 4, 256, 0)},
                                         Case{300, 200, 1000, hopper(128, 128, 3, 256, 0)},
                                         Case{512, 512, 64, hopper(128, 128, 2, 128, 0)},
                                         Case{8192, 28672, 8192, hopper(128, 256, 4, 256, 8)},
                                         // TMA-store epilogue (3 stages leave room for the
                                         // staging tile): ragged edges clipped by TMA
                                         Case{1000, 1000, 1000, hopper(128, 256, 3, 256, 8)},
                                         Case{2048, 2048, 2048, hopper(128, 256, 3, 256, 16)}),
                       ::testing::Values(DType::f16, DType::bf16), ::testing::Values(0)),
    ShapeName());

INSTANTIATE_TEST_SUITE_P(HopperFeaturesOff, HopperShapes,
                         ::testing::Combine(::testing::Values(Case{1000, 1000, 1000,
                                                                   hopper(128, 128, 4, 256, 0)}),
                                            ::testing::Values(DType::f16), ::testing::Values(1, 2, 3, 5)),
                         ShapeName());

// JitOptions::gemm_from_passes: the tutorial program compiled by the generic passes (TMA ring,
// producer warp(group), asynchronous wgmma) instead of the template, on the Hopper cases above
// plus tails in every dimension; shapes TMA cannot load keep gemm_mainloop (mma.sync).
class GemmFromPassesShapes : public ::testing::TestWithParam<std::tuple<Case, DType>> {};

TEST_P(GemmFromPassesShapes, MatchesReference) {
  TESSEL_REQUIRE_GPU();
  if (tessel::current_device().arch() != "sm_90a") GTEST_SKIP() << "SKIPPED: not an sm_90a GPU";
  auto [c, dtype] = GetParam();
  tessel::JitOptions o;
  o.gemm_from_passes = true;
  MatmulConfig cfg = c.cfg;
  cfg.dtype = dtype;
  auto k = tessel::kernels::make_matmul(c.M, c.N, c.K, cfg, o);
  // The ring needs TMA-legal rows and a wgmma gemm: whole m64 blocks for every consumer warpgroup
  // (BM = 64 x warpgroups x blocks), at most 128 accumulator registers a thread with several.
  const bool tma_legal = c.K % 8 == 0 && c.N % 8 == 0;
  const int strip = 16 * (cfg.threads / 32), blocks = cfg.block_M / strip;
  const bool ring = tma_legal && cfg.block_M % strip == 0 && (blocks == 1 || blocks * cfg.block_N <= 256);
  EXPECT_EQ(k.info().path.find("TMA + mbarrier ring") != std::string::npos, ring) << k.info().path;
  // Few tiles (at most half the SMs) over a K loop of 4096 or more: each tile's K loop split over a
  // cluster of 2, 4 or 8 CTAs (split_k_clusters), when a ring tile's stages hold the f32 accumulator.
  const long long tiles =
      1LL * ((c.M + cfg.block_M - 1) / cfg.block_M) * ((c.N + cfg.block_N - 1) / cfg.block_N);
  const long long depth = 1LL * ((c.K + cfg.block_K - 1) / cfg.block_K) * cfg.block_K;
  const long long ring_tile = 2LL * cfg.num_stages * std::max(cfg.block_M, cfg.block_N) * cfg.block_K;
  const bool split = ring && 2 * tiles <= tessel::current_device().sm_count && depth >= 4096 &&
                     4LL * cfg.block_M * cfg.block_N <= ring_tile;
  EXPECT_EQ(k.info().path.find("split-K over ") != std::string::npos, split) << k.info().path;
  // Persistent (persist_tiles) whenever it is a ring and not split: the blocks loop over the tiles
  // (one each when the grid is one wave).
  EXPECT_EQ(k.info().persistent, ring && !split) << k.info().path;
  run_case(c, dtype, o);
  // The same with the roles and warpgroup indices broadcast from lane 0 (JitOptions::uniform_roles).
  o.uniform_roles = true;
  run_case(c, dtype, o);
}

// The persistent kernel with few blocks, each looping over many tiles (their ring phases run on
// across tiles), and with persistence off.
TEST(GemmFromPassesPersistent, FewBlocksLoopOverManyTiles) {
  TESSEL_REQUIRE_GPU();
  if (tessel::current_device().arch() != "sm_90a") GTEST_SKIP() << "SKIPPED: not an sm_90a GPU";
  for (int ctas : {1, 3, 7, 0})
    for (DType dtype : {DType::f16, DType::bf16}) {
      tessel::JitOptions o;
      o.gemm_from_passes = true;
      o.max_persistent_ctas = ctas;
      o.disable_persistent_tiles = ctas == 0;
      SCOPED_TRACE("max_persistent_ctas " + std::to_string(ctas));
      const Case c{1000, 2056, 520, hopper(128, 128, 3, 256, 4)};
      MatmulConfig cfg = c.cfg;
      cfg.dtype = dtype;
      EXPECT_EQ(tessel::kernels::make_matmul(c.M, c.N, c.K, cfg, o).info().persistent, ctas != 0);
      run_case(c, dtype, o);
    }
}

INSTANTIATE_TEST_SUITE_P(
    FromPasses, GemmFromPassesShapes,
    ::testing::Combine(::testing::Values(Case{2048, 2048, 2048, hopper(128, 256, 3, 256, 8)},
                                         Case{4096, 4096, 4096, hopper(128, 256, 4, 256, 16)},
                                         Case{1000, 1000, 1000, hopper(128, 128, 6, 128, 0)},
                                         Case{1, 4096, 4096, hopper(64, 256, 4, 128, 0)},
                                         Case{4096, 1, 4096, hopper(128, 128, 4, 256, 0)},
                                         Case{4096, 4096, 8, hopper(128, 256, 4, 256, 16)},
                                         Case{17, 33, 65, hopper(128, 128, 4, 256, 0)},
                                         Case{300, 200, 1000, hopper(128, 128, 3, 256, 0)},
                                         Case{1023, 1025, 1032, hopper(128, 256, 3, 256, 8)},
                                         // 4 stages: no room for the staging tile, 16-byte
                                         // register stores, ragged in M and N
                                         Case{1000, 1000, 1000, hopper(128, 256, 4, 256, 8)},
                                         Case{65, 1032, 63, hopper(64, 128, 4, 128, 0)},
                                         Case{9, 7, 1023, hopper(64, 128, 4, 128, 0)},
                                         Case{2047, 2048, 4104, knob(128, 256, 32, 4, 256, true)},
                                         Case{8192, 28672, 8192, hopper(128, 256, 4, 256, 8)},
                                         // One consumer warpgroup over two or four m64 blocks
                                         // (interleaved strips), TMA-store and register epilogues.
                                         Case{1000, 1000, 1000, hopper(128, 128, 5, 128, 0)},
                                         Case{4096, 4096, 4096, hopper(128, 128, 5, 128, 8)},
                                         Case{129, 1032, 4104, hopper(128, 64, 8, 128, 0)},
                                         // 7 stages leave no room for the staging tile: 16-byte
                                         // register stores of both blocks.
                                         Case{129, 1032, 4104, hopper(128, 128, 7, 128, 0)},
                                         Case{2000, 200, 520, hopper(256, 64, 4, 128, 0)},
                                         Case{1000, 2056, 1000, hopper(256, 64, 4, 256, 0)},
                                         // Few tiles, long K: split over clusters of 4 (the first
                                         // three), 2 and 8 CTAs (one and two consumer warpgroups;
                                         // odd shares of K tiles, the last partial, ragged M and N;
                                         // one row; 32 tiles: clusters of 2, as 4 may not all fit).
                                         Case{384, 1024, 8192, hopper(128, 128, 5, 128, 0)},
                                         Case{380, 1000, 8200, hopper(128, 128, 5, 128, 0)},
                                         Case{256, 1536, 16384, hopper(128, 128, 4, 256, 0)},
                                         Case{500, 1000, 8200, hopper(128, 128, 5, 128, 0)},
                                         Case{200, 300, 5000, hopper(128, 128, 4, 256, 0)},
                                         Case{1, 1000, 4160, hopper(64, 128, 6, 128, 0)},
                                         Case{128, 1024, 16384, hopper(128, 128, 5, 128, 0)},
                                         Case{100, 704, 20000, hopper(128, 128, 5, 128, 0)},
                                         Case{1024, 896, 8192, hopper(128, 128, 5, 128, 0)}),
                       ::testing::Values(DType::f16, DType::bf16)),
    ShapeName());

// C = act(alpha * A B + bias) with the Parallel epilogue fused into the Hopper kernel (each store
// path: direct, TMA store, split-K; ragged edges where the bias must not be read past N), the
// same program on the mma.sync path, against float64 on the CPU; poisoned outputs, two runs
// bit-identical.
struct EpilogueCase {
  Case c;
  DType dtype;
  tessel::kernels::Activation act;
  bool mma_sync;             // JitOptions::disable_wgmma
  int max_ctas;              // JitOptions::max_persistent_ctas (0: all SMs)
  bool from_passes = false;  // JitOptions::gemm_from_passes: the generic passes' kernel
};

class EpilogueShapes : public ::testing::TestWithParam<EpilogueCase> {};

TEST_P(EpilogueShapes, MatchesFloat64) {
  TESSEL_REQUIRE_GPU();
  if (tessel::current_device().arch() != "sm_90a") GTEST_SKIP() << "SKIPPED: not an sm_90a GPU";
  using tessel::kernels::Activation;
  const EpilogueCase& e = GetParam();
  const Case& c = e.c;
  MatmulConfig cfg = c.cfg;
  cfg.dtype = e.dtype;
  tessel::JitOptions o;
  o.disable_wgmma = e.mma_sync;
  o.max_persistent_ctas = e.max_ctas;
  o.gemm_from_passes = e.from_passes;
  const float alpha = 0.5f;
  auto kernel = tessel::kernels::make_matmul_bias_act(c.M, c.N, c.K, cfg, e.act, alpha, o);
  SCOPED_TRACE(case_name(c, e.dtype) + " " + tessel::kernels::activation_name(e.act) + " " +
               kernel.info().path);
  EXPECT_EQ(kernel.info().path.find("fused Parallel epilogue") != std::string::npos,
            !e.mma_sync && !e.from_passes)
      << kernel.info().hopper_declined;
  static std::mt19937_64 seeds(std::random_device{}());
  Tensor a = Tensor::empty({c.M, c.K}, e.dtype), b = Tensor::empty({c.K, c.N}, e.dtype);
  Tensor bias = Tensor::empty({c.N}, e.dtype);
  a.fill_random(seeds());
  b.fill_random(seeds());
  bias.fill_random(seeds());
  std::vector<double> ref = tessel::test::reference_gemm(a.to_host_f64(), b.to_host_f64(), c.M, c.N, c.K);
  std::vector<double> bh = bias.to_host_f64();
  for (int r = 0; r < c.M; ++r)
    for (int col = 0; col < c.N; ++col) {
      double& v = ref[static_cast<size_t>(r) * c.N + col];
      v = alpha * v + bh[col];
      if (e.act == Activation::relu) v = std::max(v, 0.0);
      if (e.act == Activation::silu) v = v / (1.0 + std::exp(-v));
    }
  std::vector<double> first;
  for (int run = 0; run < 2; ++run) {
    Tensor out = Tensor::empty({c.M, c.N}, e.dtype);
    out.fill(std::nan(""));
    kernel.launch({a, b, bias, out});
    tessel::check_cu(tessel::driver().cuCtxSynchronize(), "cuCtxSynchronize");
    std::vector<double> got = out.to_host_f64();
    if (run == 0) {
      double err = tessel::test::rel_error(got, ref);
      EXPECT_LE(err, 1e-2) << "relative Frobenius error " << err;
      first = std::move(got);
    } else {
      EXPECT_EQ(got, first) << "two runs on the same inputs differ";
    }
  }
}

std::vector<EpilogueCase> epilogue_cases() {
  using tessel::kernels::Activation;
  const Case tma_store{1000, 1000, 1000, hopper(128, 256, 3, 256, 8)};  // 16-bit out, staging fits
  const Case direct{1000, 1000, 1000, hopper(128, 256, 4, 256, 8)};     // 4 stages: direct stores
  const Case split{300, 200, 4160, hopper(128, 128, 4, 256, 0)};        // split-K, ragged
  const Case one_wg{200, 136, 4168, hopper(64, 128, 4, 128, 0)};        // one consumer, 64-row tiles
  return {{tma_store, DType::f16, Activation::relu, false, 0},
          {tma_store, DType::bf16, Activation::silu, false, 0},
          {direct, DType::f16, Activation::silu, false, 0},
          {direct, DType::bf16, Activation::none, false, 0},
          {split, DType::f16, Activation::silu, false, 0},
          {split, DType::bf16, Activation::relu, false, 2},
          {one_wg, DType::f16, Activation::relu, false, 0},
          {tma_store, DType::f16, Activation::relu, false, 3},
          {Case{1000, 1000, 1000, knob(128, 128, 32, 3, 128, false)}, DType::f16, Activation::silu, true, 0},
          // The generic passes' kernel: the epilogue's 16-bit tile through the staging tile and
          // TMA (3 stages), register stores (4 stages), persistent on few blocks; few tiles over
          // K >= 4096 split over 2-CTA clusters (split_k_clusters: the epilogue in rank 0 only),
          // on one consumer warpgroup and on two.
          {tma_store, DType::f16, Activation::relu, false, 0, true},
          {tma_store, DType::bf16, Activation::silu, false, 3, true},
          {direct, DType::f16, Activation::silu, false, 2, true},
          {one_wg, DType::bf16, Activation::relu, false, 0, true},
          {split, DType::f16, Activation::silu, false, 0, true},
          {split, DType::bf16, Activation::relu, false, 0, true}};
}

INSTANTIATE_TEST_SUITE_P(BiasAct, EpilogueShapes, ::testing::ValuesIn(epilogue_cases()),
                         [](const ::testing::TestParamInfo<EpilogueCase>& info) {
                           const EpilogueCase& e = info.param;
                           return case_name(e.c, e.dtype) + "_" + tessel::kernels::activation_name(e.act) +
                                  (e.mma_sync ? "_mmasync" : "") +
                                  (e.max_ctas ? "_ctas" + std::to_string(e.max_ctas) : "") +
                                  (e.from_passes ? "_passes" : "");
                         });

TEST(MatmulArguments, WrongShapeDtypeAndCountAreReported) {
  TESSEL_REQUIRE_GPU();
  auto kernel = tessel::kernels::make_matmul(64, 64, 64);
  Tensor a = Tensor::empty({64, 64}, DType::f16), bad = Tensor::empty({32, 64}, DType::f16);
  Tensor wrong_type = Tensor::empty({64, 64}, DType::f32);
  try {
    kernel(a, bad);
    FAIL() << "no error for a wrong shape";
  } catch (const tessel::RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("argument 1 (B) has shape [32, 64]; expected [64, 64]"),
              std::string::npos)
        << e.what();
  }
  try {
    kernel(a, wrong_type);
    FAIL() << "no error for a wrong dtype";
  } catch (const tessel::RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("has dtype f32; expected f16"), std::string::npos) << e.what();
  }
  try {
    kernel(a);
    FAIL() << "no error for a missing argument";
  } catch (const tessel::RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("expected 2 input tensors"), std::string::npos) << e.what();
  }
}

}  // namespace

namespace {

// The library's Matmul on unaligned rows, staged and not, against float64 (small) or cuBLAS
// (large), outputs poisoned; the staged run twice on fresh inputs (the staging buffers' padding
// must stay zero), and its errors for wrong tensors.
struct StagingCase {
  int M, N, K;
  tessel::kernels::MatmulStaging staging;
  int staged = -1;         // the plan must stage (1), run direct (0), or either (-1)
  bool sm90_only = false;  // `staged` holds on sm_90 (the model's choice elsewhere is not checked)
};

// mm(a, b, out) on the object's own buffers, or on a caller's workspace whose every byte is 0xff
// (NaN in f16 and bf16; as tessel.ops.matmul passes torch's scratch), so that scratch the call
// does not write before reading shows in C.
void run_matmul(const tessel::kernels::Matmul& mm, const Tensor& a, const Tensor& b, const Tensor& out,
                bool caller_workspace) {
  if (!caller_workspace) {
    mm(a, b, out);
    return;
  }
  Tensor ws =
      Tensor::empty({std::max<std::int64_t>(1, static_cast<std::int64_t>(mm.workspace_bytes()))}, DType::u8);
  tessel::check_cu(tessel::driver().cuMemsetD8(ws.device_ptr(), 0xff, ws.nbytes()), "cuMemsetD8");
  mm(a, b, out, nullptr, ws.device_ptr(), mm.workspace_bytes());
}

class MatmulStagingShapes : public ::testing::TestWithParam<std::tuple<StagingCase, DType>> {};

TEST_P(MatmulStagingShapes, MatchesReference) {
  TESSEL_REQUIRE_GPU();
  const auto [c, dtype] = GetParam();
  tessel::kernels::Matmul mm(c.M, c.N, c.K, dtype, c.staging);
  SCOPED_TRACE(mm.describe() + ": " + mm.plan().why);
  if (c.staged >= 0 && (!c.sm90_only || tessel::current_device().arch().rfind("sm_90", 0) == 0)) {
    EXPECT_EQ(mm.plan().staged(), c.staged == 1) << mm.plan().why;
  }
  static std::mt19937_64 seeds(std::random_device{}());
  // Rounds 0 and 1 on the object's own buffers; round 2 on a caller's workspace whose every byte
  // is 0xff (NaN in f16 and bf16), so padding that is not zeroed on the call shows in C.
  for (int round = 0; round < 3; ++round) {
    Tensor a = Tensor::empty({c.M, c.K}, dtype), b = Tensor::empty({c.K, c.N}, dtype);
    a.fill_random(seeds());
    b.fill_random(seeds());
    Tensor out = Tensor::empty({c.M, c.N}, dtype);
    out.fill(std::nan(""));
    run_matmul(mm, a, b, out, /*caller_workspace=*/round == 2);
    tessel::check_cu(tessel::driver().cuCtxSynchronize(), "cuCtxSynchronize");
    std::vector<double> ref;
    if (1LL * c.M * c.N * c.K <= (1LL << 27)) {
      ref = tessel::test::reference_gemm(a.to_host_f64(), b.to_host_f64(), c.M, c.N, c.K);
    } else {
      Tensor r = Tensor::empty({c.M, c.N}, dtype);
      r.fill(std::nan(""));
      cublas_gemm(a, b, r, c.M, c.N, c.K);
      tessel::check_cu(tessel::driver().cuCtxSynchronize(), "cuCtxSynchronize");
      ref = r.to_host_f64();
    }
    const double err = tessel::test::rel_error(out.to_host_f64(), ref);
    EXPECT_LE(err, 2e-2) << "round " << round << ": relative Frobenius error " << err;
  }
}

std::vector<StagingCase> staging_cases() {
  using S = tessel::kernels::MatmulStaging;
  std::vector<StagingCase> out;
  for (int m : {1, 65, 1025})
    for (int n : {7, 9, 63, 1023})
      for (int k : {9, 65, 1025}) out.push_back({m, n, k, S::always, 1});
  // The large unaligned shapes, which the model stages.
  out.push_back({4095, 4095, 4095, S::automatic, 1});
  out.push_back({3072, 3072, 3073, S::automatic, 1});
  out.push_back({6144, 6143, 6144, S::automatic, 1});
  out.push_back({1000, 1000, 1000, S::always, 0});  // aligned: nothing staged
  // Skinny shapes with an unaligned row on sm_90 run direct on realigned rings (session 37),
  // elsewhere as the model says; an output of one tile is staged.
  for (const auto& [m, n, k] :
       {std::array{1, 50257, 4096}, std::array{16, 50257, 4096}, std::array{64, 50257, 4096},
        std::array{1, 4096, 4097}, std::array{16, 4097, 4096}, std::array{7, 4095, 4095}})
    out.push_back({m, n, k, S::automatic, 0, true});
  out.push_back({33, 1023, 1025, S::automatic});  // near the model's tie: either
  out.push_back({1, 15, 4095, S::automatic, 1, true});
  // Rows longer than a staging copy's block (8192 elements): B and C copied in pieces, then A.
  out.push_back({257, 50257, 72, S::always});
  out.push_back({64, 72, 20001, S::always});
  return out;
}

std::string staging_name(const ::testing::TestParamInfo<std::tuple<StagingCase, DType>>& info) {
  const StagingCase& c = std::get<0>(info.param);
  return std::to_string(c.M) + "x" + std::to_string(c.N) + "x" + std::to_string(c.K) + "_" +
         tessel::kernels::matmul_staging_name(c.staging) + "_" +
         std::string(tessel::dtype_name(std::get<1>(info.param)));
}

INSTANTIATE_TEST_SUITE_P(Unaligned, MatmulStagingShapes,
                         ::testing::Combine(::testing::ValuesIn(staging_cases()),
                                            ::testing::Values(DType::f16, DType::bf16)),
                         staging_name);

// The staging copies alone (matmul_staging_copy_program) against the host: every element of a
// poisoned destination is the source's or, past the source's columns, zero -- bit for bit, rows
// unaligned on either side, long rows in pieces, the last row ending at the tensor's end.
TEST(MatmulStagingCopyGpu, CopiesEveryRowExactly) {
  TESSEL_REQUIRE_GPU();
  static std::mt19937_64 seeds(std::random_device{}());
  struct Case {
    int rows, from, to;
  };
  for (DType t : {DType::f16, DType::bf16})
    for (const Case& c :
         {Case{3, 50257, 50304}, Case{3, 50304, 50257}, Case{17, 1011, 1024}, Case{17, 1024, 1011},
          Case{5, 7, 64}, Case{5, 64, 7}, Case{33, 4095, 4096}, Case{33, 4096, 4095}}) {
      SCOPED_TRACE(std::to_string(c.rows) + " rows " + std::to_string(c.from) + " -> " +
                   std::to_string(c.to) + " " + std::string(tessel::dtype_name(t)));
      auto k = tessel::jit(tessel::kernels::matmul_staging_copy_program(
          c.rows, c.from, c.to, t, tessel::kernels::default_staging_copy(std::max(c.from, c.to), t)));
      Tensor src = Tensor::empty({c.rows, c.from}, t), dst = Tensor::empty({c.rows, c.to}, t);
      src.fill_random(seeds());
      dst.fill(std::nan(""));
      k.launch({src, dst});
      tessel::check_cu(tessel::driver().cuCtxSynchronize(), "cuCtxSynchronize");
      const std::vector<double> s = src.to_host_f64(), d = dst.to_host_f64();
      for (int r = 0; r < c.rows; ++r)
        for (int j = 0; j < c.to; ++j) {
          const double want = j < c.from ? s[static_cast<size_t>(r) * c.from + j] : 0.0;
          const double got = d[static_cast<size_t>(r) * c.to + j];
          if (!(got == want)) {
            ADD_FAILURE() << "Dst[" << r << ", " << j << "] = " << got << ", expected " << want;
            return;
          }
        }
    }
}

TEST(MatmulStagingArguments, WrongTensorsAreNamed) {
  TESSEL_REQUIRE_GPU();
  tessel::kernels::Matmul mm(65, 63, 9, DType::f16, tessel::kernels::MatmulStaging::always);
  Tensor a = Tensor::zeros({65, 9}, DType::f16), b = Tensor::zeros({9, 63}, DType::f16);
  Tensor bad_b = Tensor::zeros({63, 9}, DType::f16), c = Tensor::zeros({65, 63}, DType::f16);
  try {
    mm(a, bad_b, c);
    FAIL() << "no error for B of the wrong shape";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("Matmul: B is"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[9, 63]"), std::string::npos) << e.what();
  }
  try {
    mm(a, b, Tensor::zeros({65, 63}, DType::bf16));
    FAIL() << "no error for C of the wrong dtype";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("Matmul: C is"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[65, 63] tensor of f16"), std::string::npos) << e.what();
  }
}

}  // namespace

namespace {

// Split-K: kernels::Matmul's partial GEMM and reduction on issue 17's skinny shapes (the split
// the plan chooses) and on small ragged shapes (forced shares that the K tiles do not divide, K
// and N tails, staged and not), f16 and bf16, outputs poisoned, against float64 on every row of
// sampled columns; each shape three times on fresh inputs: twice on the object's own workspace
// (reused), then on a caller's workspace whose every byte is 0xff (as tessel.ops.matmul passes
// torch's scratch), so partials that are not written on the call show in C. With from_passes, the
// partial GEMM comes from the generic passes (JitOptions::gemm_from_passes): at 64 rows its gemm
// takes wgmma on a TMA ring over each block's share of K.
struct SplitKCase {
  int M, N, K;
  int split_k;       // as Matmul takes it: 0 automatic
  int expect_split;  // what the plan must choose
  bool from_passes = false;
  bool plain_order = false;  // JitOptions::disable_programmatic_launch: the pair in plain stream order
                             // (by default Matmul launches it as programmatic dependents)
  bool sm90_132 = false;     // expect_split is the model's for an sm_90 GPU of 132 SMs
};

class MatmulSplitKShapes : public ::testing::TestWithParam<std::tuple<SplitKCase, DType>> {};

TEST_P(MatmulSplitKShapes, MatchesFloat64) {
  TESSEL_REQUIRE_GPU();
  const auto [c, dtype] = GetParam();
  if (c.from_passes && tessel::current_device().arch() != "sm_90a")
    GTEST_SKIP() << "SKIPPED: not an sm_90a GPU";
  if (c.sm90_132 &&
      (tessel::current_device().arch().rfind("sm_90", 0) != 0 || tessel::current_device().sm_count != 132))
    GTEST_SKIP() << "SKIPPED: the expected split is the model's for an sm_90 GPU of 132 SMs";
  tessel::JitOptions o;
  o.gemm_from_passes = c.from_passes;
  o.disable_programmatic_launch = c.plain_order;
  tessel::kernels::Matmul mm(c.M, c.N, c.K, dtype, tessel::kernels::MatmulStaging::automatic, o, c.split_k);
  SCOPED_TRACE(mm.describe() + ": " + mm.plan().why + "; " + mm.kernel().info().path);
  ASSERT_EQ(mm.plan().split_k, c.expect_split) << mm.plan().why;
  if (c.from_passes) {
    EXPECT_NE(mm.kernel().info().path.find("TMA + mbarrier ring"), std::string::npos);
  }
  static std::mt19937_64 seeds(std::random_device{}());
  // Every row, 61 random columns and the last one.
  std::vector<int> cols{c.N - 1};
  for (int j = 0; j < 61; ++j) cols.push_back(static_cast<int>(seeds() % static_cast<unsigned>(c.N)));
  for (int round = 0; round < 3; ++round) {
    Tensor a = Tensor::empty({c.M, c.K}, dtype), b = Tensor::empty({c.K, c.N}, dtype);
    a.fill_random(seeds());
    b.fill_random(seeds());
    Tensor out = Tensor::empty({c.M, c.N}, dtype);
    out.fill(std::nan(""));
    run_matmul(mm, a, b, out, /*caller_workspace=*/round == 2);
    tessel::check_cu(tessel::driver().cuCtxSynchronize(), "cuCtxSynchronize");
    const std::vector<double> av = a.to_host_f64(), bv = b.to_host_f64(), cv = out.to_host_f64();
    std::vector<double> got, ref;
    for (int i = 0; i < c.M; ++i)
      for (int j : cols) {
        double dot = 0;
        for (int k = 0; k < c.K; ++k)
          dot += av[static_cast<size_t>(i) * c.K + k] * bv[static_cast<size_t>(k) * c.N + j];
        ref.push_back(dot);
        got.push_back(cv[static_cast<size_t>(i) * c.N + j]);
      }
    const double err = tessel::test::rel_error(got, ref);
    EXPECT_LE(err, 1e-2) << "round " << round << ": relative Frobenius error " << err
                         << " over sampled entries";
  }
}

std::vector<SplitKCase> split_k_cases() {
  // Issue 17's skinny shapes, automatic (MatmulPlan.SkinnyShapesSplitK says why these counts;
  // 8x14336x4096 splits in 2, 64x8192x8192 stays one kernel, 1 / 16 x 4096 x 4096 one wave of
  // 16x32 tiles since session 20), and those forced to split; one-wave shapes.
  std::vector<SplitKCase> out{{1, 4096, 4096, 0, 1},  {16, 4096, 4096, 0, 1}, {1, 4096, 4096, 8, 8},
                              {16, 4096, 4096, 5, 5}, {1, 2048, 8192, 0, 16},
                              {16, 3072, 4096, 0, 8}, {13, 4000, 1000, 0, 1}, {32, 4096, 14336, 0, 5},
                              {8, 14336, 4096, 0, 2}, {8, 14336, 4096, 4, 4}, {64, 8192, 8192, 0, 1},
                              {64, 8192, 8192, 4, 4},
                              // One wave of 64x64 tiles (the default for M <= 64 where N / 64 fills
                              // 90-100 % of the SMs), M below the tile and not a multiple of 8.
                              {16, 7680, 4096, 0, 1}, {1, 8192, 4096, 0, 1}, {13, 8000, 1000, 0, 1},
                              // One wave of 16x32 tiles (M <= 16): a partial last panel, K past the
                              // last 128-deep step (MatmulPlan.OneWaveOf16x32TilesForGemvShapes).
                              {16, 4064, 2048, 0, 1}, {16, 4000, 3000, 0, 1}, {9, 3968, 4104, 0, 1}};
  // Small ragged shapes, forced: 3 shares where the (staged) K has 3 or more tiles of 64.
  for (int m : {1, 7, 65})
    for (int n : {9, 63, 1023})
      for (int k : {65, 1025}) {
        const int kernel_k = (k + 7) / 8 * 8, tiles = (kernel_k + 63) / 64;
        out.push_back({m, n, k, std::min(3, tiles), std::min(3, tiles)});
      }
  out.push_back({9, 1000, 200, 3, 3});  // aligned, 4 K tiles in shares of 1, 1, 2, the last one 8 wide
  // Rows off 16 bytes, not staged, split automatically on realigned rings (M <= 16, session 37;
  // MatmulPlan.SkinnyUnalignedShapesSplitOnRings says why these counts, for 132 SMs).
  for (const auto& [m, n, k, s] : {std::array{1, 4095, 4095, 8}, std::array{7, 4095, 4095, 8},
                                   std::array{1, 4096, 4097, 5}, std::array{16, 4097, 4096, 7}})
    out.push_back({m, n, k, 0, s, false, false, true});
  // The partial GEMM from the generic passes: 64-row tiles on the ring, a ragged M.
  out.push_back({64, 4096, 4096, 5, 5, true});
  out.push_back({61, 1000, 3000, 3, 3, true});
  // The pair in plain stream order (not as programmatic dependents, Matmul's default since session
  // 24): the same results, staged or not, three rounds in a row.
  out.push_back({1, 2048, 8192, 0, 16, false, true});
  out.push_back({7, 1023, 1025, 3, 3, false, true});
  return out;
}

std::string split_k_name(const ::testing::TestParamInfo<std::tuple<SplitKCase, DType>>& info) {
  const SplitKCase& c = std::get<0>(info.param);
  return std::to_string(c.M) + "x" + std::to_string(c.N) + "x" + std::to_string(c.K) + "_split" +
         (c.split_k == 0 ? std::string("auto") : std::to_string(c.split_k)) + "_" +
         std::string(tessel::dtype_name(std::get<1>(info.param))) + (c.from_passes ? "_passes" : "") +
         (c.plain_order ? "_plain" : "");
}

INSTANTIATE_TEST_SUITE_P(SkinnyAndRagged, MatmulSplitKShapes,
                         ::testing::Combine(::testing::ValuesIn(split_k_cases()),
                                            ::testing::Values(DType::f16, DType::bf16)),
                         split_k_name);

}  // namespace
