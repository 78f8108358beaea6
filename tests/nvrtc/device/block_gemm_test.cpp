// BlockGemm (device/tessel/gemm.cuh) under NVRTC:
//  * its ldmatrix addressing and accumulator layout, checked at compile time against the
//    PTX ISA's fragment definitions, for every operand order and several warp shapes;
//  * full pipelined GEMM kernels, written the way the compiler emits them, compile for
//    sm_80 and sm_90a, use the instructions we meant, and do not spill.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nvrtc_compile.hpp"

namespace {

using tessel_device_test::CompileResult;

// The PTX ISA's definitions, restated independently of gemm.cuh:
//   ldmatrix .x4/.x2: thread t addresses row t % 8 of matrix t / 8; lane l's register j
//     holds matrix j's elements (l / 4, 2 (l % 4) + h), h = 0, 1, or with .trans the
//     elements (2 (l % 4) + h, l / 4).
//   mma.m16n8k16 A (row): register j, half h of lane l is A[l/4 + 8 (j % 2)][2 (l % 4) + h + 8 (j / 2)]
//   mma.m16n8k16 B (col): register j, half h of lane l is B[2 (l % 4) + h + 8 j][l / 4]
//   C: element e of lane l is C[l/4 + 8 (e / 2)][2 (l % 4) + e % 2]
// BlockGemm promises (gemm.cuh): A x4 registers are a[0..3]; a B x4 at n8 fragment ni gives
// b[ni][0], b[ni][1], b[ni + 1][0], b[ni + 1][1]; an x2 gives b[ni][0..1].
const char* kFragmentChecks = R"cuda(
#include <tessel/gemm.cuh>
#include <tessel/layout.cuh>
#define HD __host__ __device__  // NVRTC compiles no host-only functions

struct Elem { int row, col; };

// The row addresses of one ldmatrix, as a function of the addressing thread.
template <class G>
struct ALoad {
  int wm, mi, kk;
  HD constexpr tessel::TileCoord operator()(int t) const { return G::a_load_coord(t, wm, mi, kk); }
};
template <class G>
struct BLoad {
  int wn, ni, kk;
  bool x2;  // an x2 load: gemm.cuh passes lane % 16
  HD constexpr tessel::TileCoord operator()(int t) const {
    return G::b_load_coord(x2 ? t % 16 : t, wn, ni, kk);
  }
};

// The tile element that lane l receives in register j, half h.
template <class CoordOf>
HD constexpr Elem ldmatrix_element(CoordOf coord_of, bool trans, int l, int j, int h) {
  if (!trans) {
    const tessel::TileCoord c = coord_of(8 * j + l / 4);
    return Elem{c.row, c.col + 2 * (l % 4) + h};
  }
  const tessel::TileCoord c = coord_of(8 * j + 2 * (l % 4) + h);
  return Elem{c.row, c.col + l / 4};
}

// Every row address is inside the tile and 16-byte aligned with its 8 elements contiguous;
// with CheckBanks, the 8 rows of each matrix fall in 8 different 16-byte bank groups.
template <class Layout, bool CheckBanks, class CoordOf>
HD constexpr bool rows_ok(CoordOf coord_of, int matrices) {
  for (int j = 0; j < matrices; ++j) {
    int banks = 0;
    for (int t = 8 * j; t < 8 * j + 8; ++t) {
      const tessel::TileCoord c = coord_of(t);
      if (c.row < 0 || c.row >= Layout::kRows || c.col < 0 || c.col + 8 > Layout::kCols) return false;
      const int o = Layout::offset(c.row, c.col);
      if (o % 8 != 0) return false;
      for (int e = 1; e < 8; ++e) if (Layout::offset(c.row, c.col + e) != o + e) return false;
      banks |= 1 << (o / 8 % 8);
    }
    if (CheckBanks && banks != 0xff) return false;
  }
  return true;
}

template <class G, bool TransA, bool TransB, class LA, class LB, bool CheckBanks>
HD constexpr bool check_gemm() {
  constexpr int warps_m = G::kBM / G::kWarpM, warps_n = G::kBN / G::kWarpN;
  for (int wm = 0; wm < warps_m; ++wm)
    for (int kk = 0; kk < G::kKSteps; ++kk)
      for (int mi = 0; mi < G::kMmaM; ++mi) {
        const ALoad<G> coord_of{wm, mi, kk};
        if (!rows_ok<LA, CheckBanks>(coord_of, 4)) return false;
        for (int l = 0; l < 32; ++l)
          for (int j = 0; j < 4; ++j)
            for (int h = 0; h < 2; ++h) {
              const Elem got = ldmatrix_element(coord_of, TransA, l, j, h);
              const int m = wm * G::kWarpM + mi * 16 + l / 4 + 8 * (j % 2);
              const int k = kk * 16 + 2 * (l % 4) + h + 8 * (j / 2);
              const Elem want = TransA ? Elem{k, m} : Elem{m, k};
              if (got.row != want.row || got.col != want.col) return false;
            }
      }
  for (int wn = 0; wn < warps_n; ++wn)
    for (int kk = 0; kk < G::kKSteps; ++kk)
      for (int ni = 0; ni < G::kMmaN; ni += 2) {
        const bool x2 = ni + 1 == G::kMmaN;
        const BLoad<G> coord_of{wn, ni, kk, x2};
        if (!rows_ok<LB, CheckBanks>(coord_of, x2 ? 2 : 4)) return false;
        for (int l = 0; l < 32; ++l)
          for (int j = 0; j < (x2 ? 2 : 4); ++j)
            for (int h = 0; h < 2; ++h) {
              // B is "col" for the mma: .trans when the tile is [k][n].
              const Elem got = ldmatrix_element(coord_of, !TransB, l, j, h);
              const int n = wn * G::kWarpN + (ni + j / 2) * 8 + l / 4;
              const int k = kk * 16 + 2 * (l % 4) + h + 8 * (j % 2);
              const Elem want = TransB ? Elem{n, k} : Elem{k, n};
              if (got.row != want.row || got.col != want.col) return false;
            }
      }
  // Accumulators: acc[(mi * kMmaN + ni) * 4 + e] is element e of the C fragment (mi, ni),
  // and together the threads cover the block tile exactly once.
  bool seen[G::kBM * G::kBN] = {};
  for (int w = 0; w < warps_m * warps_n; ++w)
    for (int l = 0; l < 32; ++l)
      for (int i = 0; i < G::kAccPerThread; ++i) {
        const int mi = i / 4 / G::kMmaN, ni = i / 4 % G::kMmaN, e = i % 4;
        const int row = G::acc_row_of(i, w % warps_m, l);
        const int col = (w / warps_m) * G::kWarpN + G::acc_col_in_warp(i, l);
        if (row != (w % warps_m) * G::kWarpM + mi * 16 + l / 4 + 8 * (e / 2)) return false;
        if (col != (w / warps_m) * G::kWarpN + ni * 8 + 2 * (l % 4) + e % 2) return false;
        if (seen[row * G::kBN + col]) return false;
        seen[row * G::kBN + col] = true;
      }
  return true;
}

// Swizzled: the layouts the compiler picks, checked for bank conflicts too. RowMajor: for
// tile widths the swizzle does not cover (mapping only).
template <int BM, int BN, int BK, int WM, int WN, bool TA, bool TB, bool Swizzled>
HD constexpr bool check() {
  using SA = tessel::SwizzledLayout<TA ? BK : BM, TA ? BM : BK, 2>;
  using SB = tessel::SwizzledLayout<TB ? BN : BK, TB ? BK : BN, 2>;
  using RA = tessel::RowMajorLayout<TA ? BK : BM, TA ? BM : BK>;
  using RB = tessel::RowMajorLayout<TB ? BN : BK, TB ? BK : BN>;
  if constexpr (Swizzled) {
    using G = tessel::BlockGemm<tessel::half_t, BM, BN, BK, WM, WN, TA, TB, SA, SB>;
    return check_gemm<G, TA, TB, SA, SB, true>();
  } else {
    using G = tessel::BlockGemm<tessel::half_t, BM, BN, BK, WM, WN, TA, TB, RA, RB>;
    return check_gemm<G, TA, TB, RA, RB, false>();
  }
}

template <int BM, int BN, int BK, int WM, int WN, bool Swizzled = true>
HD constexpr bool check_all_orders() {
  return check<BM, BN, BK, WM, WN, false, false, Swizzled>() &&
         check<BM, BN, BK, WM, WN, false, true, Swizzled>() &&
         check<BM, BN, BK, WM, WN, true, false, Swizzled>() &&
         check<BM, BN, BK, WM, WN, true, true, Swizzled>();
}

static_assert(check_all_orders<128, 128, 32, 2, 2>(), "128x128x32, 2x2 warps");
static_assert(check_all_orders<128, 256, 32, 2, 4>(), "128x256x32, 2x4 warps");
static_assert(check_all_orders<256, 128, 64, 4, 2>(), "256x128x64, 4x2 warps");
static_assert(check_all_orders<64, 64, 16, 1, 4>(), "64x64x16, warp tile 64x16");
static_assert(check_all_orders<64, 64, 32, 1, 8>(), "warp tile 64x8: one n8 fragment (x2 load)");
static_assert(check_all_orders<32, 48, 32, 2, 2, false>(), "warp tile 16x24: x4 + x2 loads");
static_assert(check_all_orders<16, 8, 16, 1, 1>(), "one mma");
)cuda";

// Pure compile-time evaluation, the same for every target: one arch is enough.
TEST(BlockGemmFragments, MatchPtxDefinitionsAndAreConflictFree) {
  const CompileResult r = tessel_device_test::compile(kFragmentChecks, "sm_80");
  EXPECT_TRUE(r.ok) << r.log;
}

// A pipelined GEMM kernel written the way the compiler emits one (see
// tools/probes/gemm_probe.cu for the annotated version that runs on a GPU): Pipe = false is
// today's emission (BlockGemm::run per K tile), Pipe = true the software-pipelined one
// (BlockGemm::load_first / run_pipelined, fragments carried across K tiles).
const char* kGemmKernel = R"cuda(
#include <tessel/tessel.cuh>

template <class T, int BM, int BN, int BK, int WM, int WN, int Stages, bool TA, bool TB,
          bool Vec, bool Staged, bool Pipe>
__global__ void __launch_bounds__(32 * WM * WN, 1)
    gemm(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, int M, int N, int K) {
  using LA = tessel::SwizzledLayout<TA ? BK : BM, TA ? BM : BK, sizeof(T)>;
  using LB = tessel::SwizzledLayout<TB ? BN : BK, TB ? BK : BN, sizeof(T)>;
  using G = tessel::BlockGemm<T, BM, BN, BK, WM, WN, TA, TB, LA, LB>;
  constexpr int kThreads = 32 * WM * WN;
  extern __shared__ __align__(128) unsigned char smem[];
  T* sA = reinterpret_cast<T*>(smem);
  T* sB = sA + Stages * LA::kSize;
  int bx = 0, by = 0;
  tessel::rasterize(8, blockIdx.x, blockIdx.y, gridDim.x, gridDim.y, bx, by);
  const int m0 = by * BM, n0 = bx * BN, k_tiles = (K + BK - 1) / BK;
  auto issue = [&](int kt, int s) {
    const int k0 = kt * BK;
    if constexpr (!TA) tessel::copy_global_to_shared<T, BM, BK, LA, kThreads, Vec>(sA + s * LA::kSize, A + (long long)m0 * K + k0, K, M - m0, K - k0);
    else tessel::copy_global_to_shared<T, BK, BM, LA, kThreads, Vec>(sA + s * LA::kSize, A + (long long)k0 * M + m0, M, K - k0, M - m0);
    if constexpr (!TB) tessel::copy_global_to_shared<T, BK, BN, LB, kThreads, Vec>(sB + s * LB::kSize, B + (long long)k0 * N + n0, N, K - k0, N - n0);
    else tessel::copy_global_to_shared<T, BN, BK, LB, kThreads, Vec>(sB + s * LB::kSize, B + (long long)n0 * K + k0, K, N - n0, K - k0);
  };
  float acc[G::kAccPerThread];
  for (int i = 0; i < G::kAccPerThread; ++i) acc[i] = 0.0f;
  for (int s = 0; s < Stages - 1; ++s) {
    if (s < k_tiles) issue(s, s);
    tessel::cp_async_commit();
  }
  int rs = 0, ws = Stages - 1;
  if constexpr (!Pipe) {
    for (int kt = 0; kt < k_tiles; ++kt) {
      tessel::cp_async_wait<Stages - 2>();
      tessel::barrier();
      if (kt + Stages - 1 < k_tiles) issue(kt + Stages - 1, ws);
      tessel::cp_async_commit();
      G::run(sA + rs * LA::kSize, sB + rs * LB::kSize, acc);
      rs = rs + 1 == Stages ? 0 : rs + 1;
      ws = ws + 1 == Stages ? 0 : ws + 1;
    }
  } else {
    tessel::cp_async_wait<Stages - 2>();
    tessel::barrier();
    typename G::Fragments frag[2];
    G::load_first(frag, sA, sB);
    for (int kt = 0; kt < k_tiles; ++kt) {
      const int ns = rs + 1 == Stages ? 0 : rs + 1;
      G::run_pipelined(frag, sA + rs * LA::kSize, sB + rs * LB::kSize, sA + ns * LA::kSize,
                       sB + ns * LB::kSize, acc,
                       [&] { tessel::cp_async_wait<Stages - 2>(); tessel::barrier(); },
                       [&] {
                         if (kt + Stages - 1 < k_tiles) issue(kt + Stages - 1, ws);
                         tessel::cp_async_commit();
                       });
      rs = ns;
      ws = ws + 1 == Stages ? 0 : ws + 1;
    }
  }
  tessel::cp_async_wait<0>();
  tessel::barrier();
  if constexpr (Staged)
    tessel::store_accumulators_via_shared<T, G, true>(acc, reinterpret_cast<T*>(smem), C + (long long)m0 * N + n0, N, M - m0, N - n0);
  else
    tessel::store_accumulators<T, G, Vec>(acc, C + (long long)m0 * N + n0, N, M - m0, N - n0);
}
)cuda";

struct GemmCase {
  const char* name;
  const char* type;
  int bm, bn, bk, warps_m, warps_n, stages;
  bool vectorized, staged;
  bool pipelined = false;
};

std::string instantiate(const GemmCase& c, bool ta, bool tb) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "template __global__ void gemm<tessel::%s, %d, %d, %d, %d, %d, %d, %s, %s, %s, "
                "%s, %s>(const tessel::%s*, const tessel::%s*, tessel::%s*, int, int, int);\n",
                c.type, c.bm, c.bn, c.bk, c.warps_m, c.warps_n, c.stages, ta ? "true" : "false",
                tb ? "true" : "false", c.vectorized ? "true" : "false", c.staged ? "true" : "false",
                c.pipelined ? "true" : "false", c.type, c.type, c.type);
  return buf;
}

class GemmKernel : public ::testing::TestWithParam<std::tuple<GemmCase, std::string>> {};

// One NVRTC program per case holds the four operand orders (NN, NT, TN, TT).
TEST_P(GemmKernel, CompilesWithTensorCoreInstructionsAndNoSpills) {
  const GemmCase& c = std::get<0>(GetParam());
  const std::string& arch = std::get<1>(GetParam());
  std::string src = kGemmKernel;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) src += instantiate(c, ta, tb);
  const CompileResult r = tessel_device_test::compile(src, arch);
  ASSERT_TRUE(r.ok) << r.log;
  EXPECT_EQ(r.log.find("warning"), std::string::npos) << r.log;

  EXPECT_GE(tessel_device_test::count(r.ptx, "mma.sync.aligned.m16n8k16.row.col.f32"), 4);
  EXPECT_GE(tessel_device_test::count(r.ptx, "ldmatrix.sync.aligned.m8n8.x4.shared.b16"), 1);
  EXPECT_GE(tessel_device_test::count(r.ptx, "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"), 1);
  EXPECT_GE(tessel_device_test::count(r.ptx, std::string("mma.sync.aligned.m16n8k16.row.col.f32.") +
                                                 (std::string(c.type) == "half_t" ? "f16.f16" : "bf16.bf16")),
            4);
  if (c.vectorized) {
    EXPECT_GE(tessel_device_test::count(r.ptx, "cp.async.cg.shared.global"), 4);
    EXPECT_GE(tessel_device_test::count(r.ptx, "cp.async.wait_group"), 4);
  }
  EXPECT_GE(tessel_device_test::count(r.ptx, "cp.async.commit_group"), 4);

  ASSERT_EQ(r.kernels.size(), 4u) << r.log;
  for (const auto& k : r.kernels) {
    EXPECT_EQ(k.spill_store_bytes, 0) << k.name << "\n" << r.log;
    EXPECT_EQ(k.spill_load_bytes, 0) << k.name << "\n" << r.log;
    EXPECT_EQ(k.stack_bytes, 0) << k.name << "\n" << r.log;
    EXPECT_GT(k.registers, 0) << k.name;
  }
  std::printf("[ %s %s ] %.2f s for 4 kernels, registers:", c.name, arch.c_str(), r.seconds);
  for (const auto& k : r.kernels) std::printf(" %d", k.registers);
  std::printf("\n");
}

const GemmCase kGemmCases[] = {
    {"f16_128x128x32_2x2_s3", "half_t", 128, 128, 32, 2, 2, 3, true, false},
    {"bf16_128x128x32_2x2_s3", "bfloat16_t", 128, 128, 32, 2, 2, 3, true, false},
    {"f16_128x256x32_2x4_s3", "half_t", 128, 256, 32, 2, 4, 3, true, false},
    {"bf16_128x256x32_2x4_s3", "bfloat16_t", 128, 256, 32, 2, 4, 3, true, false},
    // The scalar (unaligned) copy path and the staged epilogue.
    {"f16_128x128x32_2x2_s3_scalar", "half_t", 128, 128, 32, 2, 2, 3, false, false},
    {"f16_128x256x64_2x4_s3_staged", "half_t", 128, 256, 64, 2, 4, 3, true, true},
    // The software-pipelined main loop (the measured best: 128x256x64, staged epilogue).
    {"f16_128x256x64_2x4_s3_pipe_staged", "half_t", 128, 256, 64, 2, 4, 3, true, true, true},
    {"bf16_128x128x64_2x2_s3_pipe", "bfloat16_t", 128, 128, 64, 2, 2, 3, true, false, true},
    {"f16_128x128x32_2x2_s3_pipe_scalar", "half_t", 128, 128, 32, 2, 2, 3, false, false, true},
};

INSTANTIATE_TEST_SUITE_P(DeviceHeaders, GemmKernel,
                         ::testing::Combine(::testing::ValuesIn(kGemmCases),
                                            ::testing::ValuesIn(tessel_device_test::arches())),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param).name) + "_" + std::get<1>(info.param);
                         });

}  // namespace
