// plan_matmul: which operands the library's Matmul stages for rows that are not 16-byte aligned,
// the shape its kernel is compiled for, whether it splits K, and the models' choices (no GPU
// needed).
#include <gtest/gtest.h>

#include <stdexcept>
#include <tuple>
#include <vector>

#include "tessel/kernels/gemm/Matmul.hpp"
#include "tessel/runtime/Driver.hpp"

namespace {

using tessel::DType;
using tessel::kernels::MatmulStaging;
using tessel::kernels::plan_matmul;

TEST(MatmulPlan, AlignedRowsStageNothing) {
  for (auto s : {MatmulStaging::automatic, MatmulStaging::always, MatmulStaging::never}) {
    const auto p = plan_matmul(4096, 4096, 4096, DType::f16, "sm_90a", s);
    EXPECT_FALSE(p.staged());
    EXPECT_EQ(p.kernel_N, 4096);
    EXPECT_EQ(p.kernel_K, 4096);
    EXPECT_NE(p.why.find("aligned"), std::string::npos) << p.why;
  }
  // M is never a row length: any M is fine.
  EXPECT_FALSE(plan_matmul(4095, 4096, 4096, DType::bf16, "sm_90a").staged());
  // f32 rows are aligned at multiples of 4 elements.
  EXPECT_FALSE(plan_matmul(100, 4100, 4100, DType::f32, "sm_90a").staged());
}

TEST(MatmulPlan, OddKStagesAAndB) {
  const auto p = plan_matmul(3072, 3072, 3073, DType::f16, "sm_90a");
  EXPECT_TRUE(p.stage_a);
  EXPECT_TRUE(p.stage_b);
  EXPECT_FALSE(p.stage_c);
  EXPECT_EQ(p.kernel_K, 3136);  // rows of whole 128-byte lines: 2 % more K
  EXPECT_EQ(p.kernel_N, 3072);
  EXPECT_LT(p.estimate_staged_us, p.estimate_direct_us);
  EXPECT_NE(p.why.find("K = 3073 not a multiple of 8 f16 elements"), std::string::npos) << p.why;
}

TEST(MatmulPlan, OddNStagesBAndC) {
  const auto p = plan_matmul(8192, 50257, 4096, DType::bf16, "sm_90a");
  EXPECT_FALSE(p.stage_a);
  EXPECT_TRUE(p.stage_b);
  EXPECT_TRUE(p.stage_c);
  EXPECT_EQ(p.kernel_N, 50304);
  EXPECT_EQ(p.kernel_K, 4096);
  EXPECT_NE(p.why.find("B [K, N] -> [4096, 50304], C through [M, 50304]"), std::string::npos) << p.why;
  const auto both = plan_matmul(12345, 6789, 1011, DType::f16, "sm_90a");
  EXPECT_TRUE(both.stage_a && both.stage_b && both.stage_c);
  EXPECT_EQ(both.kernel_N, 6848);
  EXPECT_EQ(both.kernel_K, 1024);
  // Whole lines where they add at most 1/16 to the dimension, else 16 bytes: 9 -> 16, not 64;
  // 1000 + 1 -> 1024 (+2.3 %); f32 lines are 32 elements.
  EXPECT_EQ(plan_matmul(64, 9, 1001, DType::f16, "sm_90a", MatmulStaging::always).kernel_N, 16);
  EXPECT_EQ(plan_matmul(64, 9, 1001, DType::f16, "sm_90a", MatmulStaging::always).kernel_K, 1024);
  EXPECT_EQ(plan_matmul(64, 520, 1001, DType::f16, "sm_90a", MatmulStaging::always).kernel_N,
            520);  // aligned: as given
  EXPECT_EQ(plan_matmul(64, 513, 4096, DType::f16, "sm_90a", MatmulStaging::always).kernel_N,
            520);  // 576: +12 %
  EXPECT_EQ(plan_matmul(64, 1025, 4096, DType::f16, "sm_90a", MatmulStaging::always).kernel_N,
            1088);  // +6.1 %
  EXPECT_EQ(plan_matmul(64, 1023, 4097, DType::f32, "sm_90a", MatmulStaging::always).kernel_N, 1024);
  EXPECT_EQ(plan_matmul(64, 1023, 4097, DType::f32, "sm_90a", MatmulStaging::always).kernel_K, 4128);
}

TEST(MatmulPlan, SmallProblemsAreNotWorthTheCopiesUnlessForced) {
  const auto p = plan_matmul(7, 9, 63, DType::f16, "sm_90a");
  EXPECT_FALSE(p.staged());
  EXPECT_NE(p.why.find("not staged: the model expects"), std::string::npos) << p.why;
  const auto forced = plan_matmul(7, 9, 63, DType::f16, "sm_90a", MatmulStaging::always);
  EXPECT_TRUE(forced.staged());
  EXPECT_EQ(forced.kernel_N, 16);
  EXPECT_EQ(forced.kernel_K, 64);
  const auto off = plan_matmul(4095, 4095, 4095, DType::f16, "sm_90a", MatmulStaging::never);
  EXPECT_FALSE(off.staged());
  EXPECT_NE(off.why.find("MatmulStaging::never"), std::string::npos) << off.why;
}

TEST(MatmulPlan, BadArgumentsAreNamed) {
  try {
    (void)plan_matmul(0, 4, 4, DType::f16, "sm_90a");
    FAIL() << "no error for M = 0";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("must be positive, not 0x4x4"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)plan_matmul(4, 4, 4, DType::i32, "sm_90a"), std::invalid_argument);
  EXPECT_STREQ(tessel::kernels::matmul_staging_name(MatmulStaging::automatic), "auto");
  // A dimension that padding would carry past what an int holds is refused, not wrapped: not
  // staged when automatic, an error when staging is demanded.
  // (M = 65: 128-row tiles, which the model stages; at M <= 64 the direct ring tiles win anyway.)
  const auto huge = plan_matmul(65, 2147483647, 4096, DType::f16, "sm_90a");
  EXPECT_FALSE(huge.staged());
  EXPECT_EQ(huge.kernel_N, 2147483647LL);
  EXPECT_NE(huge.why.find("padding to 2147483648 columns and K = 4096 passes 2^31 - 1"), std::string::npos)
      << huge.why;
  try {
    (void)plan_matmul(64, 2147483647, 64, DType::f16, "sm_90a", MatmulStaging::always);
    FAIL() << "no error for a padded N past 2^31 - 1";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(
        std::string(e.what()).find("plan_matmul: N = 2147483647 not a multiple of 8 f16 elements; padding to "
                                   "2147483648 columns"),
        std::string::npos)
        << e.what();
  }
}

// Issue 17's skinny shapes on the H200 (132 SMs): where the unsplit grid (64x256 tiles, each
// over a cluster of R CTAs by split_k_clusters) streams B with too few CTAs to reach the DRAM's
// rate, K is split into shares of at least 8 tiles until enough CTAs stream; 8x14336x4096 (112
// CTAs unsplit, but over 2-CTA clusters, which stream at 0.79 of the model's rate where M <= 16:
// measured, session 18) splits in 2; 32x4096x14336 (64 CTAs over 4-CTA clusters, at 0.90:
// session 31) in 5; 64x8192x8192 (128 CTAs of 64x64) comes close enough that the reduction
// would cost more than the split gains.
TEST(MatmulPlan, SkinnyShapesSplitK) {
  struct Want {
    long long M, N, K;
    int split;
    const char* config;
  };
  for (const Want& w :
       {Want{1, 4096, 4096, 1, ""}, Want{16, 4096, 4096, 1, ""},  // one wave of 16x32 tiles (session 20)
        Want{32, 4096, 14336, 5, "32x256x64 s4 t128"}, Want{8, 14336, 4096, 2, "16x256x64 s4 t128"},
        Want{64, 8192, 8192, 1, ""}, Want{16, 14336, 4096, 2, "16x256x64 s4 t128"},
        Want{64, 14336, 4096, 1, ""}}) {  // M = 64: split lost on the H100 (s18)
    for (DType t : {DType::f16, DType::bf16}) {
      SCOPED_TRACE(std::to_string(w.M) + "x" + std::to_string(w.N) + "x" + std::to_string(w.K));
      const auto p = plan_matmul(w.M, w.N, w.K, t, "sm_90a");
      EXPECT_EQ(p.split_k, w.split) << p.why;
      EXPECT_FALSE(p.staged());
      EXPECT_GT(p.estimate_unsplit_us, 0);
      EXPECT_GT(p.estimate_split_us, 0);
      if (w.split == 1) {
        EXPECT_FALSE(p.split());
        EXPECT_EQ(p.workspace_bytes, 0);
        EXPECT_GE(p.estimate_split_us, p.estimate_unsplit_us);
        EXPECT_NE(p.why.find("not split: "), std::string::npos) << p.why;
        continue;
      }
      EXPECT_EQ(p.split_config.describe(), w.config);
      EXPECT_EQ(p.split_config.dtype, t);
      EXPECT_EQ(p.workspace_bytes, 4LL * w.split * w.M * w.N);
      EXPECT_LT(p.estimate_split_us, p.estimate_unsplit_us);
      EXPECT_NE(p.why.find("split-K " + std::to_string(w.split) + ": "), std::string::npos) << p.why;
    }
  }
  const auto decode = plan_matmul(1, 4096, 4096, DType::f16, "sm_90a");
  EXPECT_NE(decode.why.find("rows 16-byte aligned: nothing staged; not split: 128 CTAs (128 tiles of 16x32) stream "
                            "it in 8.19 us, split-K 8 in 10.2 us (model)"),
            std::string::npos)
      << decode.why;
  // Forced, the split still runs its own 16-row tiles.
  const auto forced = plan_matmul(1, 4096, 4096, DType::f16, "sm_90a", MatmulStaging::automatic, 8);
  EXPECT_EQ(forced.split_k, 8);
  EXPECT_EQ(forced.split_config.describe(), "16x256x64 s4 t128");
  const auto wide = plan_matmul(8, 14336, 4096, DType::f16, "sm_90a");
  EXPECT_NE(
      wide.why.find("split-K 2: 56 tiles of 16x256 x 2 shares of 32 K tiles = 112 CTAs on 132 SMs (model: "
                    "31.1 us, against 36.3 us for 112 CTAs of 64x256 tiles over 2-CTA clusters)"),
      std::string::npos)
      << wide.why;
  // The unsplit grid is the one split_k_clusters builds: 4 and 8 CTAs a tile where they fit.
  EXPECT_NE(
      plan_matmul(32, 4096, 14336, DType::f16, "sm_90a")
          .why.find("split-K 5: 16 tiles of 32x256 x 5 shares of 44-45 K tiles = 80 CTAs on 132 SMs "
                    "(model: 32.3 us, against 34.6 us for 64 CTAs of 64x256 tiles over 4-CTA clusters)"),
      std::string::npos);
  EXPECT_NE(plan_matmul(32, 2048, 28672, DType::f16, "sm_90a")
                .why.find("= 80 CTAs on 132 SMs (model: 32.5 us, against 34.8 us for 64 CTAs of 64x256 tiles "
                          "over 8-CTA clusters)"),
            std::string::npos);
  // M = 64 over 4-CTA clusters: the clusters' 64 CTAs stream close enough to the rate (0.90 of
  // it) that five shares' reduction costs more than they gain.
  const auto m64 = plan_matmul(64, 4096, 8192, DType::f16, "sm_90a");
  EXPECT_EQ(m64.split_k, 1) << m64.why;
  EXPECT_NE(m64.why.find("not split: 64 CTAs (16 tiles of 64x256 over 4-CTA clusters) stream it in"),
            std::string::npos)
      << m64.why;
  // Ragged shares are named as a range.
  EXPECT_NE(plan_matmul(8, 14336, 4096, DType::f16, "sm_90a", MatmulStaging::automatic, 3)
                .why.find("split-K 3 (forced): 56 tiles of 16x256 x 3 shares of 21-22 K tiles"),
            std::string::npos);
}

// Skinny 16-bit shapes with an unaligned row run direct on sm_90: small tiles whose unaligned
// loads go through realigned rings (an H100 in session 36: 1x50257x4096 1.5x cuBLAS direct on
// 32x64x64 s4, 0.57x staged; 1x4096x4097 0.90x on 16x32x128 s8, 0.46x staged; 16x4097x4096
// 1.01x against 0.89x). An output of a tile or two stays staged (1x15x4095: one CTA takes 32
// latency-bound K steps, 45 us against 27 staged). 128-row tiles (M > 64, sm_80) keep the
// synchronous chunks and the element-wise model: 4095^3 and 8192x50257x4096 are staged.
TEST(MatmulPlan, SkinnyUnalignedShapesRunDirectOnRings) {
  struct Want {
    long long M, N, K;
    const char* config;  // default_matmul_config's for the exact shape
  };
  for (const Want& w : {Want{1, 50257, 4096, "32x64x64 s4 t128"}, Want{16, 50257, 4096, "32x64x64 s4 t128"},
                        Want{64, 50257, 4096, "32x64x64 s4 t128"}, Want{1, 4096, 4097, "16x32x128 s8 t128"},
                        Want{16, 4097, 4096, "16x32x128 s8 t128"}, Want{1, 4095, 4095, "16x32x128 s8 t128"},
                        Want{7, 4095, 4095, "16x32x128 s8 t128"}}) {
    for (DType t : {DType::f16, DType::bf16}) {
      SCOPED_TRACE(std::to_string(w.M) + "x" + std::to_string(w.N) + "x" + std::to_string(w.K));
      const auto p = plan_matmul(w.M, w.N, w.K, t, "sm_90a");
      EXPECT_FALSE(p.staged()) << p.why;
      EXPECT_LT(p.estimate_direct_us, p.estimate_staged_us) << p.why;
      EXPECT_NE(p.why.find("not staged: the model expects"), std::string::npos) << p.why;
      EXPECT_NE(p.why.find("us direct (realigned rings) against"), std::string::npos) << p.why;
      EXPECT_EQ(tessel::kernels::default_matmul_config(w.M, w.N, w.K, t, "sm_90a", 132).describe(), w.config);
    }
  }
  // The model's direct figures where it was fitted (H100, bf16, sessions 36-37): 161-163 us,
  // 322 us, 21 us, 37 us and 44 us measured; split-K on the rings: 1x4095x4095 split 8 30 us.
  EXPECT_NEAR(plan_matmul(1, 50257, 4096, DType::bf16, "sm_90a").estimate_direct_us, 162, 16);
  EXPECT_NEAR(plan_matmul(64, 50257, 4096, DType::bf16, "sm_90a").estimate_direct_us, 322, 32);
  EXPECT_NEAR(plan_matmul(1, 4096, 4097, DType::bf16, "sm_90a").estimate_direct_us, 21, 4);
  EXPECT_NEAR(plan_matmul(16, 4097, 4096, DType::bf16, "sm_90a").estimate_direct_us, 37, 6);
  EXPECT_NEAR(plan_matmul(1, 4095, 4095, DType::bf16, "sm_90a").estimate_direct_us, 44, 8);
  EXPECT_NEAR(plan_matmul(1, 4095, 4095, DType::bf16, "sm_90a").estimate_split_us, 30, 5);
  const auto tiny = plan_matmul(1, 15, 4095, DType::bf16, "sm_90a");
  EXPECT_TRUE(tiny.staged()) << tiny.why;
  EXPECT_LT(tiny.estimate_staged_us, tiny.estimate_direct_us) << tiny.why;
  // 64x4097x4096: 516 CTAs of 16x32 read B four times (two waves); the model stages it
  // (unmeasured either way).
  EXPECT_EQ(tessel::kernels::default_matmul_config(64, 4097, 4096, DType::f16, "sm_90a", 132).describe(),
            "16x32x128 s8 t128");
  EXPECT_TRUE(plan_matmul(64, 4097, 4096, DType::f16, "sm_90a").staged());
  // The tiles follow sm_count: on 64 SMs the 65 tiles of 32x64 at N = 4097 are a wave.
  EXPECT_EQ(tessel::kernels::default_matmul_config(16, 4097, 4096, DType::f16, "sm_90a", 64).describe(),
            "32x64x64 s4 t128");
  // Not these tiles: M > 64, f32, sm_80 (unmeasured there), aligned rows.
  EXPECT_EQ(tessel::kernels::default_matmul_config(65, 50257, 4096, DType::f16, "sm_90a", 132).block_M, 128);
  EXPECT_EQ(tessel::kernels::default_matmul_config(1, 50257, 4096, DType::f32, "sm_90a", 132).block_M, 128);
  EXPECT_EQ(tessel::kernels::default_matmul_config(1, 50257, 4096, DType::f16, "sm_80", 108).block_M, 128);
  EXPECT_EQ(tessel::kernels::default_matmul_config(1, 50256, 4096, DType::f16, "sm_90a", 132).block_K, 64);
  for (const auto& [M, N, K] : {std::tuple{4095LL, 4095LL, 4095LL}, std::tuple{8192LL, 50257LL, 4096LL}}) {
    const auto p = plan_matmul(M, N, K, DType::bf16, "sm_90a");
    EXPECT_TRUE(p.staged()) << p.why;
  }
  const auto sm80 = plan_matmul(1, 50257, 4096, DType::bf16, "sm_80", MatmulStaging::automatic, 0, 108);
  EXPECT_TRUE(sm80.staged()) << sm80.why;
}

// Split-K on the exact shape of a skinny GEMM whose rows are off 16 bytes (M <= 16, sm_90): the
// partial GEMM's 16x256 tiles load through realigned rings, and the ring model prices it beside
// the direct kernel. An H100 in session 37 (forced splits, bf16): 1x4095x4095 44 us direct, 30 us
// split 8; 1x4096x4097 21 us direct, 17 us split 4 and 8, 25 us split 2 (32 CTAs: counts that
// leave more than half the SMs idle are not taken); the model splits 16x4097x4096 7 ways (119
// CTAs, one wave; split 4 ran 45 us, 2 waves of split 8 49 us, direct 37 us). Bandwidth-bound
// shapes (N = 50257) gain nothing and stay direct; M > 16 (32x256 tiles, gemm_mainloop's
// synchronous chunks) is not split.
TEST(MatmulPlan, SkinnyUnalignedShapesSplitOnRings) {
  struct Want {
    long long M, N, K;
    int split;
  };
  for (const Want& w :
       {Want{1, 4095, 4095, 8}, Want{7, 4095, 4095, 8}, Want{1, 4096, 4097, 5}, Want{16, 4097, 4096, 7},
        Want{1, 50257, 4096, 1}, Want{16, 50257, 4096, 1}, Want{32, 4095, 4095, 1}}) {
    for (DType t : {DType::f16, DType::bf16}) {
      SCOPED_TRACE(std::to_string(w.M) + "x" + std::to_string(w.N) + "x" + std::to_string(w.K));
      const auto p = plan_matmul(w.M, w.N, w.K, t, "sm_90a");
      EXPECT_FALSE(p.staged()) << p.why;
      EXPECT_EQ(p.split_k, w.split) << p.why;
      if (w.split > 1) {
        EXPECT_EQ(p.estimate_unsplit_us, p.estimate_direct_us) << p.why;
        EXPECT_EQ(p.split_config.describe(), "16x256x64 s4 t128");
        EXPECT_LT(p.estimate_split_us, p.estimate_direct_us);
        EXPECT_GE(((w.N + 255) / 256) * w.split, 66) << "half the SMs or more";
        EXPECT_NE(p.why.find("CTAs on 132 SMs, realigned rings (model: "), std::string::npos) << p.why;
        EXPECT_EQ(p.workspace_bytes, 4LL * w.split * w.M * w.N);
      } else if (w.M <= 16) {
        EXPECT_EQ(p.estimate_unsplit_us, p.estimate_direct_us) << p.why;
        EXPECT_NE(p.why.find("not split: the direct kernel takes"), std::string::npos) << p.why;
      } else {
        EXPECT_NE(
            p.why.find("not split: the kernel's rows are not 16-byte aligned and the split's tiles would "
                       "load them in synchronous chunks"),
            std::string::npos)
            << p.why;
      }
    }
  }
  // The tuner may time the splits the model may choose: unaligned rows where M <= 16.
  EXPECT_FALSE(tessel::kernels::split_k_candidates(1, 4095, 4095, DType::bf16, "sm_90a").empty());
  EXPECT_TRUE(tessel::kernels::split_k_candidates(32, 4095, 4095, DType::bf16, "sm_90a").empty());
  EXPECT_TRUE(tessel::kernels::split_k_candidates(1, 4095, 4095, DType::bf16, "sm_80").empty());
}

TEST(MatmulPlan, SplitKOnlyWhereTheModelSaysSo) {
  // Grids that fill the GPU, short K, other GPUs, f32 and M > 64 stay one kernel, and say why.
  struct Case {
    long long M, N, K;
    DType t;
    const char* arch;
    const char* why;
  };
  for (const Case& c :
       {Case{4096, 4096, 4096, DType::f16, "sm_90a", "not split: M > 64"},
        Case{64, 65536, 4096, DType::f16, "sm_90a", "not split: 256 CTAs (256 tiles of 64x256) stream"},
        Case{16, 4096, 512, DType::f16, "sm_90a", "not split: K has fewer than 16 tiles of 64"},
        Case{16, 4096, 4096, DType::f16, "sm_80", "not split: the model is the H200's (sm_90)"},
        Case{16, 4096, 4096, DType::f32, "sm_90a", "not split: split-K takes f16 or bf16"},
        Case{1, 50257, 4096, DType::f16, "sm_90a", "not split: the direct kernel takes"},
        Case{64, 50257, 4096, DType::f16, "sm_90a", "not split: the kernel's rows are not 16-byte"}}) {
    const auto p = plan_matmul(c.M, c.N, c.K, c.t, c.arch);
    EXPECT_EQ(p.split_k, 1) << p.why;
    EXPECT_EQ(p.workspace_bytes, 0);
    EXPECT_NE(p.why.find(c.why), std::string::npos) << p.why;
  }
  // split_k = 1 turns it off; a forced count runs anywhere, on the staged shape when staged.
  const auto off = plan_matmul(1, 4096, 4096, DType::f16, "sm_90a", MatmulStaging::automatic, 1);
  EXPECT_EQ(off.split_k, 1);
  EXPECT_NE(off.why.find("split-K off (split_k = 1)"), std::string::npos) << off.why;
  const auto forced = plan_matmul(4096, 4096, 4096, DType::bf16, "sm_80", MatmulStaging::automatic, 2);
  EXPECT_EQ(forced.split_k, 2);
  EXPECT_EQ(forced.split_config.describe(), "64x256x64 s4 t128");
  const auto staged = plan_matmul(7, 4095, 4095, DType::f16, "sm_90a", MatmulStaging::always, 4);
  EXPECT_TRUE(staged.staged());
  EXPECT_EQ(staged.split_k, 4);
  EXPECT_EQ(staged.workspace_bytes, 4LL * 4 * 7 * 4096);
  // Another GPU's SM count changes the choice: on 64 SMs 1x4096x4096's 64x64 tiles are one full
  // wave (one kernel), on the H200's 132 half of one (16x32 tiles there); 1x1024x8192 (32 tiles of
  // 16x32, half of 64 SMs) splits.
  const auto small_gpu = plan_matmul(1, 4096, 4096, DType::f16, "sm_90a", MatmulStaging::automatic, 0, 64);
  EXPECT_EQ(small_gpu.split_k, 1);
  EXPECT_NE(small_gpu.why.find("not split: 64 CTAs (64 tiles of 64x64)"), std::string::npos) << small_gpu.why;
  EXPECT_GE(plan_matmul(1, 1024, 8192, DType::f16, "sm_90a", MatmulStaging::automatic, 0, 64).split_k, 2);
}

// M <= 64 whose 64-column tiles make one nearly full wave (90-100 % of the SMs) run one CTA per
// 64x64 tile, 8 stages (H200: 64x8192x8192 0.98x cuBLAS against 0.85x for 64x256 tiles over
// 2-CTA clusters); more tiles than SMs, or fewer than 90 %, keep the 64x256 tiles (and the
// split-K model). A skinny A is counted once in the model's bytes (it stays in L2).
TEST(MatmulPlan, OneWaveOf64x64TilesForSkinnyShapes) {
  auto config = [](long long M, long long N, long long K, int sms = 132) {
    return tessel::kernels::default_matmul_config(M, N, K, DType::f16, "sm_90a", sms).describe();
  };
  EXPECT_EQ(config(64, 8192, 8192), "64x64x64 s8 t128");
  EXPECT_EQ(config(16, 7680, 4096), "64x64x64 s8 t128");   // 120 tiles: 91 %
  EXPECT_EQ(config(64, 7552, 4096), "64x256x64 s4 t128 swz");  // 118 tiles: 89 %
  EXPECT_EQ(config(8, 14336, 4096), "64x256x64 s4 t128 swz");  // 224 tiles
  EXPECT_EQ(config(1, 4096, 4096), "16x32x128 s8 t128");  // M <= 16: the next test's rule
  EXPECT_EQ(config(65, 8192, 8192), "128x64x64 s8 t256 swz");  // M > 64: not this rule
  const auto p = plan_matmul(64, 8192, 8192, DType::f16, "sm_90a");
  EXPECT_EQ(p.split_k, 1);
  EXPECT_NE(p.why.find("not split: 128 CTAs (128 tiles of 64x64) stream it in 33 us"), std::string::npos) << p.why;
}

// M <= 16 over a long K (>= 2048), 16-bit, where 32-column panels make one wave (90 % of the SMs
// to two CTAs on each): one CTA per 16x32 tile streams its panel of B through 8 stages of 128-deep
// K steps on mma.sync, unsplit (H100, session 20: 16x4096x4096 1.11-1.12x cuBLAS against 0.91-0.94x
// for split-K 5). The 64x64 one-wave rule comes first; other shapes keep the 64x256 tiles.
TEST(MatmulPlan, OneWaveOf16x32TilesForGemvShapes) {
  auto config = [](long long M, long long N, long long K, DType t = DType::f16, int sms = 132) {
    return tessel::kernels::default_matmul_config(M, N, K, t, "sm_90a", sms).describe();
  };
  EXPECT_EQ(config(1, 4096, 4096), "16x32x128 s8 t128");
  EXPECT_EQ(config(16, 4096, 4096, DType::bf16), "16x32x128 s8 t128");
  EXPECT_EQ(config(16, 3808, 4096), "16x32x128 s8 t128");        // 119 tiles: 90 %
  EXPECT_EQ(config(16, 3776, 4096), "64x256x64 s4 t128 swz");    // 118 tiles: 89 %
  EXPECT_EQ(config(8, 7552, 4096), "16x32x128 s8 t128");         // 236 tiles: two a SM
  EXPECT_EQ(config(8, 8480, 4096), "64x256x64 s4 t128 swz");     // 265 tiles (and 133 of 64x64)
  EXPECT_EQ(config(16, 8192, 4096), "64x64x64 s8 t128");         // the 64x64 wave first
  EXPECT_EQ(config(17, 4096, 4096), "64x256x64 s4 t128 swz");    // M > 16
  EXPECT_EQ(config(16, 4096, 1024), "64x256x64 s4 t128 swz");    // K < 2048
  EXPECT_EQ(config(16, 4096, 4096, DType::f32), "64x256x64 s4 t128 swz");
  EXPECT_EQ(config(16, 4096, 4096, DType::f16, 64), "64x64x64 s8 t128");  // 64 SMs: 64x64 tiles fill them
  // kernels::Matmul runs it unsplit: the model's stream of 128 CTAs beats every split.
  const auto p = plan_matmul(16, 4096, 4096, DType::bf16, "sm_90a");
  EXPECT_FALSE(p.split());
  EXPECT_NE(p.why.find("not split: 128 CTAs (128 tiles of 16x32)"), std::string::npos) << p.why;
  // Tails (the gpu tier runs these): N past the last 32-column panel, K past the last 128-deep
  // step. (Unaligned skinny rows run the direct kernel, not staged: the staging model's call.)
  for (const auto& [m, n, k] : {std::tuple{16, 4064, 2048}, std::tuple{16, 4000, 3000}, std::tuple{9, 3968, 4104}}) {
    const auto q = plan_matmul(m, n, k, DType::f16, "sm_90a");
    SCOPED_TRACE(q.why);
    EXPECT_FALSE(q.split());
    EXPECT_FALSE(q.staged());
    EXPECT_EQ(tessel::kernels::default_matmul_config(m, n, k, DType::f16, "sm_90a", 132).describe(),
              "16x32x128 s8 t128");
  }
}

TEST(MatmulPlan, IllegalSplitKIsNamed) {
  auto message = [](long long K, int split_k, DType t = DType::f16) {
    try {
      (void)plan_matmul(16, 4096, K, t, "sm_90a", MatmulStaging::automatic, split_k);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(
      message(4096, -1),
      "Matmul: split_k = -1 (legal: 0 = automatic, 1 = off, 2 to 64 shares of K = 4096's 64 tiles of 64)");
  EXPECT_EQ(
      message(4096, 65),
      "Matmul: split_k = 65 (legal: 0 = automatic, 1 = off, 2 to 64 shares of K = 4096's 64 tiles of 64)");
  EXPECT_EQ(message(40, 2), "Matmul: split_k = 2 (legal: 0 = automatic, 1 = off (K = 40 is one tile of 64))");
  EXPECT_EQ(message(4096, 2, DType::f32),
            "Matmul: split_k = 2 with dtype f32 (split-K takes f16 or bf16; legal here: 0, 1)");
  try {
    (void)plan_matmul(16, 4096, 4096, DType::f16, "sm_90a", MatmulStaging::automatic, 0, 0);
    FAIL() << "no error for 0 SMs";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("sm_count = 0 (legal: 1 or more)"), std::string::npos) << e.what();
  }
}

// What `tessel tune gemm` times: where the automatic split may apply, 2 to min(16, K tiles / 4)
// shares -- beyond the model's own range of shares of 8 tiles -- and nothing elsewhere.
TEST(MatmulPlan, SplitKCandidatesAreWhereTheAutomaticSplitMayApply) {
  using tessel::kernels::split_k_candidates;
  auto range = [](int first, int last) {
    std::vector<int> v;
    for (int i = first; i <= last; ++i) v.push_back(i);
    return v;
  };
  EXPECT_EQ(split_k_candidates(16, 4096, 4096, DType::f16, "sm_90a"), range(2, 16));
  EXPECT_EQ(split_k_candidates(1, 4096, 4096, DType::bf16, "sm_90"), range(2, 16));
  EXPECT_EQ(split_k_candidates(64, 8192, 1024, DType::f16, "sm_90a"), range(2, 4));
  EXPECT_EQ(split_k_candidates(64, 8192, 960, DType::f16, "sm_90a"), range(2, 3)) << "15 tiles";
  EXPECT_EQ(split_k_candidates(64, 8192, 512, DType::f16, "sm_90a"), range(2, 2));
  for (const auto& [M, N, K, t, arch] : {std::tuple{16LL, 4096LL, 448LL, DType::f16, "sm_90a"},
                                         std::tuple{65LL, 4096LL, 4096LL, DType::f16, "sm_90a"},
                                         std::tuple{16LL, 4096LL, 4096LL, DType::f32, "sm_90a"},
                                         std::tuple{16LL, 4096LL, 4096LL, DType::f16, "sm_80"},
                                         std::tuple{17LL, 4095LL, 4096LL, DType::f16, "sm_90a"},
                                         std::tuple{32LL, 4096LL, 4092LL, DType::f16, "sm_90a"}})
    EXPECT_TRUE(split_k_candidates(M, N, K, t, arch).empty()) << M << "x" << N << "x" << K << " " << arch;
  // Rows off 16 bytes: where the partial GEMM's tiles load them through realigned rings (M <= 16).
  EXPECT_EQ(split_k_candidates(16, 4095, 4096, DType::f16, "sm_90a"), range(2, 16));
  EXPECT_EQ(split_k_candidates(1, 4096, 4001, DType::bf16, "sm_90a"), range(2, 15)) << "63 tiles of 64";
  // The tiles of each share count are the partial GEMM's, split_k_config's.
  EXPECT_EQ(
      tessel::kernels::split_k_config(16, DType::f16).describe(),
      plan_matmul(16, 4096, 4096, DType::f16, "sm_90a", MatmulStaging::automatic, 3).split_config.describe());
}

// Without a GPU there is no tuning cache to consult: the plan is plan_matmul's for sm_90a and
// 132 SMs, and its split is the model's.
TEST(MatmulPlan, ThePlanForThisProcessWithoutAGpuIsTheModels) {
  if (tessel::gpu_available()) GTEST_SKIP() << "a GPU is present: its tuning cache may hold a split";
  for (int split_k : {0, 1, 3}) {
    const auto here = tessel::kernels::plan_matmul_for_current_device(16, 4096, 4096, DType::f16,
                                                                      MatmulStaging::automatic, split_k);
    const auto model = plan_matmul(16, 4096, 4096, DType::f16, "sm_90a", MatmulStaging::automatic, split_k);
    EXPECT_EQ(here.split_k, model.split_k);
    EXPECT_EQ(here.why, model.why);
    EXPECT_FALSE(here.split_tuned);
  }
}

}  // namespace
