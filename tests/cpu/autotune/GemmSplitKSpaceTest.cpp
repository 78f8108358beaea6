// The GEMM space's split_k knob (issue 17): kernels::Matmul's split-K candidates in the space of
// a skinny shape on Hopper and nowhere else, and a space (so a tuning key) unchanged where no
// split applies, so that entries stored before the knob still load.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <vector>

#include "tessel/autotune/Autotune.hpp"

namespace at = tessel::autotune;
using tessel::DType;

namespace {

constexpr at::HardwareLimits kH200{232448, 1024};
const at::DeviceKey kH200Device{"NVIDIA H200", 9, 0, 132, 13000, 13000};

std::vector<int> split_shares(const at::Space& s) {
  std::vector<int> shares;
  for (const at::Config& c : s.enumerate(kH200).kept)
    if (at::gemm_split_k(c) > 1) shares.push_back(at::gemm_split_k(c));
  return shares;
}

std::vector<int> range(int first, int last) {
  std::vector<int> v;
  for (int i = first; i <= last; ++i) v.push_back(i);
  return v;
}

}  // namespace

TEST(AutotuneGemmSplitK, SkinnyShapesOnHopperHaveSplitCandidates) {
  const at::Space s = at::gemm_space("sm_90a", DType::f16, 16, 4096, 4096);
  const auto e = s.enumerate(kH200);
  // 64 K tiles: 2 to 16 shares (at most 16, each at least 4 tiles), all kept on the H200.
  EXPECT_EQ(split_shares(s), range(2, 16));
  for (const at::Config& c : e.kept) {
    if (at::gemm_split_k(c) == 1) {
      EXPECT_FALSE(c.count("split_k")) << "one kernel is the grid without the knob: " << at::describe(c);
      continue;
    }
    // The partial GEMM's tiles, kernels::split_k_config's, unswizzled.
    EXPECT_EQ(at::gemm_config(c, DType::f16).describe(), "16x256x64 s4 t128") << at::describe(c);
    EXPECT_EQ(at::get(c, "panel"), 0);
  }
  // The one-kernel candidates are the grid's and two one-wave tiles (16x32x128
  // and 64x64x64, 8 stages).
  EXPECT_EQ(e.kept.size() - split_shares(s).size(),
            at::gemm_space("sm_90a", DType::f16).enumerate(kH200).kept.size() + 2);
  for (const char* tile : {"16x32x128 s8 t128", "64x64x64 s8 t128"})
    EXPECT_EQ(std::count_if(e.kept.begin(), e.kept.end(),
                            [&](const at::Config& c) { return at::gemm_config(c, DType::f16).describe() == tile; }),
              1)
        << tile;
  EXPECT_EQ(at::describe(e.kept.back()),
            "block_K=64 block_M=16 block_N=256 num_stages=4 panel=0 split_k=16 threads=128");

  // The tiles follow M; bf16 splits too; a short K allows fewer shares.
  EXPECT_EQ(
      at::gemm_config(at::gemm_space("sm_90a", DType::bf16, 32, 4096, 14336).points().back(), DType::bf16)
          .describe(),
      "32x256x64 s4 t128");
  EXPECT_EQ(split_shares(at::gemm_space("sm_90a", DType::bf16, 1, 4096, 4096)), range(2, 16));
  EXPECT_EQ(split_shares(at::gemm_space("sm_90a", DType::f16, 64, 8192, 1024)), range(2, 4));
  EXPECT_EQ(split_shares(at::gemm_space("sm_90", DType::f16, 64, 8192, 512)), range(2, 2));
  EXPECT_EQ(at::gemm_split_k(at::Config{{"block_M", 64}}), 1);
}

TEST(AutotuneGemmSplitK, NoSplitWhereMatmulCannotSplitAndTheKeyStaysTheSame) {
  struct Case {
    long long M, N, K;
    DType dtype;
    const char* arch;
    const char* why;
  };
  for (const Case& c : {Case{4096, 4096, 4096, DType::f16, "sm_90a", "M > 64"},
                        Case{65, 4096, 4096, DType::f16, "sm_90a", "M > 64"},
                        Case{16, 4096, 4096, DType::f32, "sm_90a", "f32"},
                        Case{16, 4096, 4096, DType::f16, "sm_80", "not Hopper"},
                        Case{65, 4095, 4096, DType::f16, "sm_90a", "unaligned, M > 64"},
                        Case{16, 4095, 4096, DType::f16, "sm_80", "unaligned, not Hopper"},
                        Case{16, 4095, 4096, DType::f32, "sm_90a", "unaligned f32"},
                        Case{16, 4096, 448, DType::f16, "sm_90a", "7 K tiles: no share of 4"}}) {
    SCOPED_TRACE(c.why);
    const at::Space s = at::gemm_space(c.arch, c.dtype, c.M, c.N, c.K);
    EXPECT_TRUE(split_shares(s).empty());
    EXPECT_EQ(s.description(), at::gemm_space(c.arch, c.dtype).description());
  }
  // The key `tessel tune gemm` stores under is the one-kernel space's where nothing splits (an
  // entry stored before the knob is found), and its own where the space gained split points.
  EXPECT_EQ(at::tuning_key(at::gemm_split_k_key_parts(4096, 4096, 4096, DType::f16, kH200Device)),
            at::tuning_key(at::gemm_key_parts(4096, 4096, 4096, DType::f16, kH200Device)));
  EXPECT_NE(at::tuning_key(at::gemm_split_k_key_parts(16, 4096, 4096, DType::f16, kH200Device)),
            at::tuning_key(at::gemm_key_parts(16, 4096, 4096, DType::f16, kH200Device)));
}

// Skinny 16-bit shapes with a row off 16 bytes on Hopper run on the exact shape (kernels::Matmul,
// session 37): the small tiles that load through realigned rings, each once, in a space (and so a
// key) of their own, and where M <= 16 the split-K candidates (the partial GEMM's 16x256 tiles
// load through rings too) with the one-wave 64x64x64 s8 point beside them; M = 64's split tiles
// would not, so no split there.
TEST(AutotuneGemmSplitK, SkinnyUnalignedShapesOnHopperHaveRingTiles) {
  for (const auto& [M, N, K] : {std::array{16LL, 4095LL, 4096LL}, std::array{1LL, 50257LL, 4096LL},
                                std::array{64LL, 4096LL, 4097LL}}) {
    for (DType t : {DType::f16, DType::bf16}) {
      SCOPED_TRACE(std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K));
      const at::Space s = at::gemm_space("sm_90a", t, M, N, K);
      const auto e = s.enumerate(kH200);
      const std::vector<int> shares = split_shares(s);
      EXPECT_EQ(shares, M <= 16 ? range(2, 16) : std::vector<int>{});
      EXPECT_NE(s.description(), at::gemm_space("sm_90a", t).description());
      EXPECT_EQ(e.kept.size(), at::gemm_space("sm_90a", t).enumerate(kH200).kept.size() + 3 +
                                   (M <= 16 ? 1 : 0) + shares.size());
      for (const char* tile : {"32x64x64 s4 t128", "16x32x128 s8 t128", "16x64x64 s4 t128"})
        EXPECT_EQ(
            std::count_if(e.kept.begin(), e.kept.end(),
                          [&](const at::Config& c) { return at::gemm_config(c, t).describe() == tile; }),
            1)
            << tile;
    }
  }
  EXPECT_NE(at::tuning_key(at::gemm_split_k_key_parts(1, 50257, 4096, DType::bf16, kH200Device)),
            at::tuning_key(at::gemm_key_parts(1, 50257, 4096, DType::bf16, kH200Device)));
}

TEST(AutotuneGemmSplitK, WhyNotInASpaceWhosePointsDifferInKnobs) {
  const at::Space s = at::gemm_space("sm_90a", DType::f16, 16, 4096, 4096);
  const std::string in = "the space 'gemm sm_90a f16'";
  const at::Config split{{"block_K", 64}, {"block_M", 16}, {"block_N", 256}, {"num_stages", 4},
                         {"panel", 0},    {"split_k", 5},  {"threads", 128}};
  EXPECT_EQ(s.why_not(split), std::nullopt);
  // One kernel lacks split_k, as every grid point does: an off-grid one is just not a point.
  const at::Config off_grid{{"block_K", 32},   {"block_M", 128}, {"block_N", 128},
                            {"num_stages", 6}, {"panel", 0},     {"threads", 128}};
  EXPECT_EQ(s.why_not(off_grid), "is not a point of " + in);
  for (int bad : {0, -3, 1, 17, 64}) {
    at::Config c = split;
    c["split_k"] = bad;
    EXPECT_EQ(s.why_not(c), "is not a point of " + in) << bad;
  }
  at::Config other_tiles = split;
  other_tiles["block_M"] = 64;
  EXPECT_EQ(s.why_not(other_tiles), "is not a point of " + in);
  at::Config no_tiles = split;
  no_tiles.erase("block_M");
  EXPECT_EQ(s.why_not(no_tiles), "lacks the knob block_M of " + in);
  EXPECT_EQ(at::gemm_space("sm_80", DType::f16, 16, 4096, 4096).why_not(split),
            "has a knob split_k the space 'gemm sm_80 f16' does not have");
}
