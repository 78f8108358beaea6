// The sm_90a device headers (wgmma, mbarrier, tma, hopper_layout, warpgroup_gemm, hopper_gemm) under
// NVRTC:
//  * each compiles alone for sm_90a with a small kernel that uses it, with no warnings;
//  * they follow the device-header rules (includes, static_assert messages, size, no std::);
//  * the 128B-swizzle layout and HopperGemm's accumulator layout are bijections (checked at
//    compile time in the NVRTC source);
//  * instantiated HopperGemm kernels carry wgmma.mma_async, cp.async.bulk.tensor, mbarrier
//    and setmaxnreg in their PTX, and ptxas neither spills nor ignores setmaxnreg.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "nvrtc/device/nvrtc_compile.hpp"

namespace {

using tessel_device_test::CompileResult;

struct HeaderCase {
  const char* header;
  const char* use;
};

const HeaderCase kHopperHeaders[] = {
    {"mbarrier.cuh", R"cuda(
__global__ void k(int* out) {
  __shared__ __align__(8) unsigned long long bar[2];
  const unsigned b = tessel::smem_address(bar);
  if (threadIdx.x == 0) { tessel::mbarrier_init(b, 1); tessel::mbarrier_init(b + 8, 32); }
  tessel::mbarrier_init_fence();
  __syncthreads();
  if (threadIdx.x == 0) tessel::mbarrier_arrive_expect_tx(b, 0);
  tessel::mbarrier_arrive(b + 8);
  tessel::mbarrier_wait_parity(b + 8, 0);
  tessel::fence_proxy_async_shared();
  tessel::named_barrier_sync(1, 32);
  out[threadIdx.x] = tessel::mbarrier_try_wait_parity(b, 0) + tessel::cluster_ctarank();
})cuda"},
    {"tma.cuh", R"cuda(
__global__ void k(const __grid_constant__ tessel::TmaDescriptor m, int x) {
  extern __shared__ __align__(1024) unsigned char s[];
  __shared__ __align__(8) unsigned long long bar;
  const unsigned a = tessel::smem_address(s), b = tessel::smem_address(&bar);
  tessel::tma_prefetch_descriptor(&m);
  tessel::tma_load_2d(a, &m, b, x, 0);
  tessel::tma_load_2d_multicast(a, &m, b, x, 64, 3);
  tessel::tma_store_2d(&m, a, x, 0);
  tessel::tma_store_commit();
  tessel::tma_store_wait_read<0>();
  tessel::tma_store_wait<0>();
})cuda"},
    {"hopper_layout.cuh", R"cuda(
using L = tessel::WgmmaSwizzle128Layout<64, 256, 2>;
static_assert(L::offset(0, 0) == 0 && L::offset(1, 0) == 64 + 8 && L::offset(0, 64) == 64 * 64,
              "swizzle: row 1 chunk 0 sits in physical chunk 1; column 64 starts panel 1");
__global__ void k(float* out) { out[threadIdx.x] = L::offset(threadIdx.x % 64, threadIdx.x); })cuda"},
    {"wgmma.cuh", R"cuda(
__global__ void __launch_bounds__(256, 1) k(float* out, int sd) {
  __shared__ __align__(1024) unsigned char s[128 * 64 * 2 + 64 * 256 * 2];
  const unsigned a = tessel::smem_address(s);
  const unsigned long long da = tessel::wgmma_desc_kmajor_sw128(a);
  const unsigned long long db = tessel::wgmma_desc_mnmajor_sw128(a + 16384, 8192);
  float d256[128] = {}, d64[32] = {}, d96[48] = {};
  unsigned ar[4] = {threadIdx.x, 1u, 2u, 3u};
  if (threadIdx.x >= 128) tessel::setmaxnreg_inc<240>(); else tessel::setmaxnreg_dec<40>();
  tessel::wgmma_fence();
  tessel::wgmma_ss<tessel::half_t, 256, 0, 1>(d256, da, db, sd);
  tessel::wgmma_ss<tessel::bfloat16_t, 64, 0, 0>(d64, da, db, 1);
  tessel::wgmma_rs<tessel::half_t, 96, 1>(d96, ar, db, 0);
  tessel::wgmma_rs<tessel::bfloat16_t, 64, 0>(d64, ar, db, 1);
  tessel::wgmma_commit();
  tessel::wgmma_wait<0>();
  tessel::wgmma_fence_operand(d256);
  float t = 0;
  for (int i = 0; i < 128; ++i) t += d256[i];
  for (int i = 0; i < 32; ++i) t += d64[i];
  for (int i = 0; i < 48; ++i) t += d96[i];
  out[threadIdx.x] = t;
})cuda"},
    {"warpgroup_gemm.cuh", R"cuda(
// Two warpgroups: K-major A, N-major B over two panels (run); A from registers, K-major B (run_rs).
using L128 = tessel::WgmmaSwizzleLayout<128, 64, 2, 128>;
using G = tessel::WarpgroupGemm<tessel::half_t, 128, 128, 64, 2, false, false, L128,
                                tessel::WgmmaSwizzleLayout<64, 128, 2, 128>>;
using R = tessel::WarpgroupGemm<tessel::bfloat16_t, 128, 64, 32, 2, false, true, tessel::RowMajorLayout<128, 32>,
                                tessel::WgmmaSwizzleLayout<64, 32, 2, 64>>;
__global__ void __launch_bounds__(256) k(float* out) {
  extern __shared__ __align__(1024) unsigned char raw[];
  unsigned char* s = tessel::align_shared_1024(raw);
  auto* sa = reinterpret_cast<tessel::half_t*>(s);
  auto* sb = reinterpret_cast<tessel::half_t*>(s + 16384);
  float acc[G::kAccPerThread] = {}, acc2[R::kAccPerThread] = {};
  tessel::fence_proxy_async_shared();
  __syncthreads();
  G::run(sa, sb, acc);
  tessel::bfloat16_t a[R::kARegs];
  for (int i = 0; i < R::kARegs; ++i) a[i] = tessel::bfloat16_t{static_cast<unsigned short>(i)};
  R::run_rs(a, reinterpret_cast<tessel::bfloat16_t*>(s + 32768), acc2);
  float t = 0;
  for (int i = 0; i < G::kAccPerThread; ++i) t += acc[i] * G::acc_row(i);
  for (int i = 0; i < R::kAccPerThread; ++i) t += acc2[i];
  // One warpgroup of two m64 blocks (the 128-row tile of a 128-thread kernel): K-major A, and
  // M-major A over two 64-column panels; A from registers.
  if (threadIdx.x < 128) {
    using G2 = tessel::WarpgroupGemm<tessel::half_t, 128, 128, 64, 1, false, false, L128,
                                     tessel::WgmmaSwizzleLayout<64, 128, 2, 128>>;
    using T2 = tessel::WarpgroupGemm<tessel::half_t, 128, 64, 64, 1, true, true, tessel::WgmmaSwizzleLayout<64, 128, 2, 128>,
                                     tessel::WgmmaSwizzleLayout<64, 64, 2, 128>>;
    using R2 = tessel::WarpgroupGemm<tessel::bfloat16_t, 128, 64, 32, 1, false, true, tessel::RowMajorLayout<128, 32>,
                                     tessel::WgmmaSwizzleLayout<64, 32, 2, 64>>;
    static_assert(G2::kBlocks == 2 && G2::kInterleaved && G2::kAccPerThread == 128 && R2::kARegs == 32,
                  "two m64 blocks: interleaved strips, two D fragments, two A fragments a k16 step");
    float acc3[G2::kAccPerThread] = {}, acc4[T2::kAccPerThread] = {}, acc5[R2::kAccPerThread] = {};
    G2::run(sa, sb, acc3);
    T2::run(sa, sb, acc4);
    tessel::bfloat16_t a2[R2::kARegs];
    for (int i = 0; i < R2::kARegs; ++i) a2[i] = tessel::bfloat16_t{static_cast<unsigned short>(i)};
    R2::run_rs(a2, reinterpret_cast<tessel::bfloat16_t*>(s + 32768), acc5);
    for (int i = 0; i < G2::kAccPerThread; ++i) t += acc3[i] * G2::acc_row(i);
    for (int i = 0; i < T2::kAccPerThread; ++i) t += acc4[i] + acc5[i];
  }
  out[threadIdx.x] = t;
})cuda"},
    {"tma_epilogue.cuh", R"cuda(
// Two warpgroups' 128 x 128 accumulator (the wgmma layout) stored through the staging tile.
using G = tessel::AccumulatorLayout<128, 128, 8, 1>;
extern "C" __global__ void __launch_bounds__(256) k(const __grid_constant__ tessel::TmaDescriptor map, int r0, int c0) {
  extern __shared__ __align__(1024) unsigned char s[];
  float acc[G::kAccPerThread];
  for (int i = 0; i < G::kAccPerThread; ++i) acc[i] = static_cast<float>(G::acc_row(i) * 128 + G::acc_col(i));
  tessel::store_accumulators_tma<tessel::bfloat16_t, G>(acc, reinterpret_cast<tessel::bfloat16_t*>(s), &map, c0, r0);
  tessel::half_t h[G::kAccPerThread];
  for (int i = 0; i < G::kAccPerThread; ++i) h[i] = tessel::from_float<tessel::half_t>(acc[i]);
  tessel::store_accumulators_tma<tessel::half_t, G, tessel::half_t>(h, reinterpret_cast<tessel::half_t*>(s), &map, c0 + 128, r0);
  // A [1, 128, 1, 128] tile of a [B, S, H, D] tensor: columns along axis 0 (D), rows along axis 2 (S).
  tessel::store_accumulators_tma<tessel::half_t, G, tessel::half_t, 4, 0, 2>(h, reinterpret_cast<tessel::half_t*>(s), &map, 0, 3, r0, 1);
  // Two warpgroups of two interleaved m64 blocks each (a 256 x 64 tile).
  using G4 = tessel::AccumulatorLayout<256, 64, 8, 1, true>;
  float acc4[G4::kAccPerThread];
  for (int i = 0; i < G4::kAccPerThread; ++i) acc4[i] = static_cast<float>(G4::acc_row(i));
  tessel::store_accumulators_tma<tessel::half_t, G4>(acc4, reinterpret_cast<tessel::half_t*>(s), &map, c0, r0);
  tessel::drain_tma_stores();
})cuda"},
    {"hopper_gemm.cuh", R"cuda(
using G = tessel::HopperGemm<tessel::half_t, 128, 128, 64, 4, 1>;
extern "C" __global__ void __launch_bounds__(G::kThreads, 1)
    k(const __grid_constant__ tessel::TmaDescriptor a, const __grid_constant__ tessel::TmaDescriptor b,
      tessel::half_t* c, int m, int n, int kk) {
  extern __shared__ __align__(1024) unsigned char s[];
  G::run<tessel::half_t>(&a, &b, c, m, n, kk, 8, s);
})cuda"},
};

std::string read_header(const std::string& name) {
  std::ifstream f(std::string(TESSEL_DEVICE_INCLUDE_DIR) + "/tessel/" + name);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class HopperHeader : public ::testing::TestWithParam<HeaderCase> {};

TEST_P(HopperHeader, CompilesAloneForSm90a) {
  const HeaderCase& c = GetParam();
  const std::string src = std::string("#include <tessel/") + c.header + ">\n" + c.use + "\n";
  const CompileResult r = tessel_device_test::compile(src, "sm_90a");
  ASSERT_TRUE(r.ok) << c.header << ":\n" << r.log;
  EXPECT_EQ(r.log.find("warning"), std::string::npos) << r.log;
  for (const auto& k : r.kernels) {
    EXPECT_EQ(k.spill_store_bytes, 0) << c.header << " " << k.name;
    EXPECT_EQ(k.spill_load_bytes, 0) << c.header << " " << k.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Hopper, HopperHeader, ::testing::ValuesIn(kHopperHeaders), [](const auto& info) {
  std::string h = info.param.header;
  return h.substr(0, h.find('.'));
});

TEST(HopperHeaderRules, IncludesMessagesAndSize) {
  for (const HeaderCase& c : kHopperHeaders) {
    const std::string text = read_header(c.header);
    ASSERT_FALSE(text.empty()) << "cannot read " << c.header;
    SCOPED_TRACE(c.header);
    EXPECT_NE(text.find("#pragma once"), std::string::npos);
    const std::regex include_line(R"(#include\s*([<"])([^>"]+)[>"])");
    for (std::sregex_iterator it(text.begin(), text.end(), include_line), end; it != end; ++it) {
      EXPECT_EQ((*it)[1].str(), "\"") << "system include " << (*it)[2].str();
    }
    for (size_t p = text.find("static_assert("); p != std::string::npos;
         p = text.find("static_assert(", p + 1)) {
      const size_t end = text.find(");", p);
      ASSERT_NE(end, std::string::npos);
      EXPECT_NE(text.substr(p, end - p).find('"'), std::string::npos)
          << "static_assert without a message: " << text.substr(p, end - p);
    }
    // A size guard (every GEMM compile parses these headers); split-K and the TMA-store
    // epilogue took it past 400, multicast clusters past 540 (cold compile 50 ms on the H200
    // machine, bench/results/2026-12-03-compile-*).
    EXPECT_LT(std::count(text.begin(), text.end(), '\n'), 600);
    EXPECT_NE(text.find("namespace tessel {"), std::string::npos);
    EXPECT_EQ(text.find("std::"), std::string::npos);
  }
}

// Layout bijections, evaluated by NVRTC's constexpr engine: every element of the swizzled
// tile has its own slot, and every accumulator (thread, i) of HopperGemm its own tile
// element, the way the compiler's Parallel epilogues will address them.
const char* kLayoutChecks = R"cuda(
#include <tessel/hopper_gemm.cuh>
template <class L>
__host__ __device__ constexpr bool swizzle_is_bijection() {
  bool seen[L::kSize] = {};
  for (int r = 0; r < L::kRows; ++r)
    for (int c = 0; c < L::kCols; ++c) {
      const int o = L::offset(r, c);
      if (o < 0 || o >= L::kSize || seen[o]) return false;
      seen[o] = true;
    }
  return true;
}
template <class G, int BM, int BN>
__host__ __device__ constexpr bool acc_is_bijection() {
  bool seen[BM * BN] = {};
  // Ping-pong: each consumer warpgroup covers the whole tile by itself.
  for (int t = 128; t < (G::kPingPong ? 256 : G::kThreads); ++t)
    for (int i = 0; i < G::kAccPerThread; ++i) {
      const int r = (G::kPingPong ? 0 : (t / 128 - 1) * G::kWgRows) + G::acc_row_in_wg(i, t % 128);
      const int c = G::acc_col_in_wg(i, t % 128);
      if (r < 0 || r >= BM || c < 0 || c >= BN || seen[r * BN + c]) return false;
      if (i % 2 == 0 && G::acc_col_in_wg(i + 1, t % 128) != c + 1) return false;
      seen[r * BN + c] = true;
    }
  return true;
}
static_assert(swizzle_is_bijection<tessel::WgmmaSwizzle128Layout<64, 128, 2>>(), "swizzle 64x128");
static_assert(swizzle_is_bijection<tessel::WgmmaSwizzle128Layout<16, 64, 2>>(), "swizzle 16x64");
static_assert(acc_is_bijection<tessel::HopperGemm<tessel::half_t, 128, 64, 64, 4, 2>, 128, 64>(),
              "acc 128x64 c2");
static_assert(acc_is_bijection<tessel::HopperGemm<tessel::half_t, 128, 128, 64, 4, 1>, 128, 128>(),
              "acc 128x128 c1");
static_assert(acc_is_bijection<tessel::HopperGemm<tessel::half_t, 128, 128, 64, 6, 2, 40, 232, 1, 1>, 128, 128>(),
              "acc 128x128 ping-pong");
// WarpgroupGemm's accumulator (AccumulatorLayout<64 R W, BN, 4 W, 1, R > 1>) against the PTX
// ISA's wgmma D fragment, restated: in the r-th m64 instruction of warpgroup g (rows from 64 (r W +
// g)), element j of lane l of warp w is row 16 w + l / 4 + 8 ((j / 2) % 2), column 8 (j / 4) + 2 (l
// % 4) + j % 2 -- and the threads cover the tile once.
template <int W, int R, int BN>
__host__ __device__ constexpr bool wgmma_acc_matches_ptx() {
  using A = tessel::AccumulatorLayout<64 * R * W, BN, 4 * W, 1, (R > 1)>;
  if (A::kAccPerThread != R * BN / 2) return false;
  bool seen[64 * R * W * BN] = {};
  for (int t = 0; t < 128 * W; ++t)
    for (int i = 0; i < A::kAccPerThread; ++i) {
      const int g = t / 128, w = (t / 32) % 4, l = t % 32, r = i / (BN / 2), j = i % (BN / 2);
      const int row = 64 * (r * W + g) + 16 * w + l / 4 + 8 * ((j / 2) % 2);
      const int col = 8 * (j / 4) + 2 * (l % 4) + j % 2;
      if (A::acc_row_of(i, t / 32, l) != row || A::acc_col_in_warp(i, l) != col || seen[row * BN + col]) return false;
      seen[row * BN + col] = true;
    }
  // Row vectors reduced from it: register q of a thread is the row of its registers i with
  // (i / 4 / (BN / 8)) * 2 + (i % 4) / 2 == q.
  for (int i = 0; i < A::kAccPerThread; ++i) {
    const int q = (i / 4 / (BN / 8)) * 2 + (i % 4) / 2;
    if (A::block_row(q / 2, 1) + 5 / 4 + (q % 2) * 8 != A::acc_row_of(i, 1, 5)) return false;
  }
  return true;
}
static_assert(wgmma_acc_matches_ptx<1, 1, 64>() && wgmma_acc_matches_ptx<2, 1, 128>(), "one m64 block a warpgroup");
static_assert(wgmma_acc_matches_ptx<1, 2, 128>() && wgmma_acc_matches_ptx<2, 2, 64>() && wgmma_acc_matches_ptx<1, 4, 64>(),
              "several m64 blocks a warpgroup: interleaved strips");
static_assert(swizzle_is_bijection<tessel::WgmmaSwizzleLayout<128, 32, 2, 64>>(), "swizzle64 128x32");
static_assert(swizzle_is_bijection<tessel::WgmmaSwizzleLayout<16, 64, 2, 64>>(), "swizzle64 16x64");
// The 64-byte swizzle: row r's 16-byte chunk j sits at chunk j ^ ((r / 2) % 4).
static_assert(tessel::WgmmaSwizzleLayout<16, 32, 2, 64>::byte_offset(2, 0) == 2 * 64 + 16 &&
                  tessel::WgmmaSwizzleLayout<16, 32, 2, 64>::byte_offset(7, 8) == 7 * 64 + 16 * (1 ^ 3),
              "swizzle64 pattern");
__global__ void k(int* o) { o[0] = 1; }
)cuda";

TEST(HopperLayouts, SwizzleAndAccumulatorAreBijections) {
  const CompileResult r = tessel_device_test::compile(kLayoutChecks, "sm_90a");
  EXPECT_TRUE(r.ok) << r.log;
}

// The probe's configurations, instantiated the way generated code will: one extern "C"
// kernel per config calling HopperGemm::run.
std::string gemm_kernel_source(const std::string& type, int bm, int bn, int bk, int stages, int cw,
                               int cluster, int pp) {
  std::ostringstream s;
  s << "#include <tessel/hopper_gemm.cuh>\n"
    << "using G = tessel::HopperGemm<tessel::" << type << ", " << bm << ", " << bn << ", " << bk << ", "
    << stages << ", " << cw << ", 40, 232, " << cluster << ", " << pp << ">;\n"
    << R"cuda(extern "C" __global__ void __launch_bounds__(G::kThreads, 1)
    gemm(const __grid_constant__ tessel::TmaDescriptor a,
         const __grid_constant__ tessel::TmaDescriptor b, tessel::)cuda"
    << type << R"cuda(* c, int m, int n, int k, int panel) {
  extern __shared__ __align__(1024) unsigned char smem[];
  G::run<tessel::)cuda"
    << type << ">(&a, &b, c, m, n, k, panel, smem);\n}\n";
  return s.str();
}

struct GemmCase {
  const char* type;
  int bm, bn, stages, cw, cluster;
  int bk = 64, pp = 0;
};

class HopperGemmPtx : public ::testing::TestWithParam<GemmCase> {};

TEST_P(HopperGemmPtx, HasHopperInstructionsAndNoSpills) {
  const GemmCase& g = GetParam();
  const CompileResult r = tessel_device_test::compile(
      gemm_kernel_source(g.type, g.bm, g.bn, g.bk, g.stages, g.cw, g.cluster, g.pp), "sm_90a");
  ASSERT_TRUE(r.ok) << r.log;
  EXPECT_GT(tessel_device_test::count(r.ptx, "wgmma.mma_async"), 0);
  EXPECT_GT(tessel_device_test::count(r.ptx, "cp.async.bulk.tensor"), 0);
  EXPECT_GT(tessel_device_test::count(r.ptx, "mbarrier.try_wait"), 0);
  EXPECT_GT(tessel_device_test::count(r.ptx, "mbarrier.arrive"), 0);
  EXPECT_GT(tessel_device_test::count(r.ptx, "setmaxnreg.inc"), 0);
  EXPECT_GT(tessel_device_test::count(r.ptx, "setmaxnreg.dec"), 0);
  if (g.cluster > 1) {
    EXPECT_GT(tessel_device_test::count(r.ptx, ".multicast::cluster"), 0);
  }
  EXPECT_EQ(r.log.find("C7508"), std::string::npos) << "ptxas ignored setmaxnreg:\n" << r.log;
  EXPECT_EQ(r.log.find("warning"), std::string::npos) << r.log;
  ASSERT_EQ(r.kernels.size(), 1u) << r.log;
  EXPECT_EQ(r.kernels[0].spill_store_bytes, 0) << r.log;
  EXPECT_EQ(r.kernels[0].spill_load_bytes, 0) << r.log;
  EXPECT_EQ(r.kernels[0].stack_bytes, 0) << r.log;
}

INSTANTIATE_TEST_SUITE_P(Hopper, HopperGemmPtx,
                         ::testing::Values(GemmCase{"half_t", 128, 256, 4, 2, 1},
                                           GemmCase{"bfloat16_t", 128, 256, 4, 2, 1},
                                           GemmCase{"half_t", 256, 128, 4, 2, 2},
                                           GemmCase{"bfloat16_t", 128, 128, 6, 1, 1},
                                           GemmCase{"half_t", 128, 128, 3, 1, 1, 32, 0},
                                           GemmCase{"bfloat16_t", 128, 256, 8, 2, 1, 32, 0},
                                           GemmCase{"half_t", 128, 128, 6, 2, 1, 64, 1},
                                           GemmCase{"bfloat16_t", 128, 192, 5, 2, 1, 64, 1}),
                         [](const auto& info) {
                           const GemmCase& g = info.param;
                           return std::string(g.type).substr(0, 4) + "_" + std::to_string(g.bm) + "x" +
                                  std::to_string(g.bn) + "_c" + std::to_string(g.cw) + "_cl" +
                                  std::to_string(g.cluster) + "_k" + std::to_string(g.bk) +
                                  (g.pp ? "_pp" : "");
                         });

}  // namespace
