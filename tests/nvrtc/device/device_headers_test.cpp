// Device headers (device/tessel/*.cuh) under NVRTC: each compiles alone for every target,
// follows the header rules, and their index math is checked at compile time against the
// PTX ISA's definitions (shared-memory banks, ldmatrix and mma fragments), so that these
// properties hold without a GPU.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "nvrtc_compile.hpp"

namespace {

using tessel_device_test::CompileResult;

std::string read_header(const std::string& name) {
  std::ifstream in(std::string(TESSEL_DEVICE_INCLUDE_DIR) + "/tessel/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Each header with a kernel that instantiates what it declares, so that template bodies are
// compiled too, not only parsed.
struct HeaderCase {
  const char* header;
  const char* use;
};

const HeaderCase kHeaderCases[] = {
    {"types.cuh", R"cuda(
__global__ void k(float* f, tessel::half_t* h, tessel::bfloat16_t* b, unsigned* u) {
  tessel::int8_t i8 = 1; tessel::int64_t i64 = 2; tessel::uint8_t u8 = 3; tessel::int32_t i32 = 4;
  h[0] = tessel::from_float<tessel::half_t>(f[0]);
  b[0] = tessel::from_float<tessel::bfloat16_t>(f[1]);
  f[2] = tessel::to_float(h[1]) + tessel::to_float(b[1]) + tessel::to_float(f[3]) +
         (float)tessel::to_float(2.0) + tessel::to_float(i32) + i8 + i64 + u8;
  f[4] = tessel::from_float<float>(f[5]) + (float)tessel::from_float<double>(f[6]) +
         tessel::from_float<int>(f[7]) + tessel::infinity_f32() + tessel::nan_f32() +
         tessel::from_float<tessel::int8_t>(f[0]) + tessel::from_float<tessel::uint8_t>(f[0]) +
         tessel::from_float<tessel::int64_t>(f[0]) + tessel::from_float<tessel::uint32_t>(f[0]) +
         tessel::to_float(i64) + tessel::to_float(u8) + tessel::to_float(i8) + tessel::to_float(1u);
  u[0] = tessel::pack2<tessel::half_t>(f[8], f[9]) ^ tessel::pack2<tessel::bfloat16_t>(f[8], f[9]);
})cuda"},
    {"smem.cuh", R"cuda(
__global__ void k(unsigned* out) {
  __shared__ int s[32];
  out[0] = tessel::smem_address(s + threadIdx.x);
})cuda"},
    {"layout.cuh", R"cuda(
static_assert(tessel::SwizzledLayout<128, 32, 2>::kSize == 4096, "kSize has no padding");
static_assert(tessel::RowMajorLayout<4, 8>::offset(1, 2) == 10, "row-major");
__global__ void k(int* out) {
  out[0] = tessel::SwizzledLayout<32, 256, 2>::offset(threadIdx.x, 8) +
           tessel::PreferredSharedLayout<16, 12, 2>::offset(1, 1);
})cuda"},
    {"cp_async.cuh", R"cuda(
__global__ void k(const int4* g) {
  __shared__ int4 s[32];
  tessel::cp_async_16(&s[threadIdx.x], g + threadIdx.x, threadIdx.x < 7);
  tessel::cp_async_commit();
  tessel::cp_async_wait<1>();
  tessel::cp_async_wait_all();
})cuda"},
    {"copy.cuh", R"cuda(
// copy.cuh is element-type agnostic; unsigned short stands in for a 16-bit float.
using T = unsigned short;
using L = tessel::SwizzledLayout<64, 32, 2>;
using R = tessel::RowMajorLayout<17, 5>;
__global__ void k(const T* g, T* o, float* f, long long ld, int rv, int cv) {
  __shared__ __align__(16) T s[64 * 32];
  __shared__ float t[17 * 5];
  tessel::copy_global_to_shared<T, 64, 32, L, 128, true>(s, g, ld, rv, cv);
  tessel::copy_global_to_shared<T, 64, 32, L, 96, true>(s, g, ld, rv, cv);
  tessel::copy_global_to_shared<T, 64, 32, L, 128, false>(s, g, ld, rv, cv);
  tessel::copy_global_to_shared<float, 17, 5, R, 64, false>(t, f, ld, rv, cv);
  __syncthreads();
  tessel::copy_shared_to_global<T, 64, 32, L, 128, true>(o, s, ld, rv, cv);
  tessel::copy_shared_to_global<float, 17, 5, R, 64>(f, t, ld, rv, cv);
})cuda"},
    {"copy_realigned.cuh", R"cuda(
// Any 16-bit or 32-bit element type, any layout with an offset(r, c).
struct L {
  static constexpr int kRows = 64, kCols = 32;
  __device__ static int offset(int r, int c) { return r * 32 + c; }
};
__global__ void k(const unsigned short* g, const float* f, long long ld, int rv, int cv) {
  __shared__ __align__(16) unsigned short s[64 * 32];
  __shared__ __align__(16) float t[8 * 16];
  tessel::copy_detail::copy_chunks_realigned<unsigned short, 64, 32, L, 128>(s, g, ld, rv, cv);
  tessel::copy_detail::copy_chunks_realigned<float, 8, 16, L, 32>(t, f, ld, rv, cv);
  // A realigned ring's halves: raw words by cp.async (not a whole number of passes of the block
  // over 64 x 5 words), then the shift into a 64 x 32 tile.
  __shared__ __align__(16) unsigned short w[64 * tessel::raw_words_cols<unsigned short>(32)];
  tessel::copy_words_to_shared<unsigned short, 64, 32, 96>(w, g, ld, rv, cv);
  tessel::cp_async_commit();
  tessel::cp_async_wait<0>();
  __syncthreads();
  tessel::realign_words_to_shared<unsigned short, 64, 32, L, 96>(s, w, g, ld);
})cuda"},
    {"mma.cuh", R"cuda(
__global__ void k(float* out) {
  __shared__ __align__(16) unsigned short s[16 * 16];
  unsigned a[4], b2[2], b4[4];
  tessel::ldmatrix_x4(a, s + (threadIdx.x % 16) * 16);
  tessel::ldmatrix_x4_trans(b4, s + (threadIdx.x % 16) * 16);
  tessel::ldmatrix_x2(b2, s + (threadIdx.x % 16) * 16);
  tessel::ldmatrix_x2_trans(b2, tessel::smem_address(s + (threadIdx.x % 16) * 16));
  float d[4] = {0, 0, 0, 0};
  tessel::mma_m16n8k16<tessel::half_t>(d, a, b2);
  tessel::mma_m16n8k16<tessel::bfloat16_t>(d, a, b2);
  out[threadIdx.x] = d[0] + d[1] + d[2] + d[3] + b4[0];
})cuda"},
    {"gemm.cuh", R"cuda(
// gemm.cuh takes any type with the Layout interface (layout.cuh); a minimal one here.
template <int Rows, int Cols>
struct Plain {
  static constexpr int kRows = Rows, kCols = Cols, kSize = Rows * Cols, kRowPeriod = 1,
                       kRowPitch = Cols;
  __host__ __device__ static constexpr int offset(int r, int c) { return r * Cols + c; }
};
using G = tessel::BlockGemm<tessel::half_t, 64, 64, 32, 2, 2, false, true, Plain<64, 32>,
                            Plain<64, 32>>;
__global__ void k(float* out) {
  __shared__ __align__(16) tessel::half_t sa[64 * 32], sb[64 * 32];
  float acc[G::kAccPerThread] = {};
  G::run(sa, sb, acc);
  for (int i = 0; i < G::kAccPerThread; ++i) out[G::acc_row(i) * 64 + G::acc_col(i)] = acc[i];
})cuda"},
    {"accumulator.cuh", R"cuda(
// Register i of the 64x32 A tile over 4 warps: the rows and k columns of the mma A fragment.
using A = tessel::AccumulatorLayout<64, 32, 4, 1>;
static_assert(A::kAccPerThread == 16 && A::acc_row_of(2, 0, 5) == 9 && A::acc_col_in_warp(5, 3) == 15,
              "AccumulatorLayout: e = 2 is 8 rows down; register 5 is n8 block 1, column 2 * 3 + 1");
__global__ void k(const tessel::half_t* in, float* out) {
  tessel::half_t a[A::kAccPerThread];
  for (int i = 0; i < A::kAccPerThread; ++i) a[i] = in[A::acc_row(i) * 32 + A::acc_col(i)];
  unsigned r[4];
  tessel::pack_a_operand<tessel::half_t, 2>(a, 0, 1, r);
  out[threadIdx.x] = static_cast<float>(r[0] ^ r[3]);
})cuda"},
    {"epilogue.cuh", R"cuda(
// A stand-in for BlockGemm: the epilogue only needs the accumulator layout.
struct FakeGemm {
  static constexpr int kBM = 32, kBN = 32, kThreads = 128, kAccPerThread = 8;
  __device__ static int acc_row(int i) { return (threadIdx.x / 4) % 32; }
  __device__ static int acc_col(int i) { return (threadIdx.x % 4) * 8 + i; }
};
__global__ void k(tessel::half_t* c, float* f, long long ld, int rv, int cv) {
  extern __shared__ __align__(16) unsigned char scratch[];
  float acc[8] = {};
  tessel::store_accumulators<tessel::half_t, FakeGemm, true>(acc, c, ld, rv, cv);
  tessel::store_accumulators<float, FakeGemm, false>(acc, f, ld, rv, cv);
  tessel::store_accumulators_via_shared<tessel::half_t, FakeGemm, true>(
      acc, reinterpret_cast<tessel::half_t*>(scratch), c, ld, rv, cv);
  // wgmma-shaped tiles (warps along M in 16-row strips: one m64 block a warpgroup, and two
  // interleaved), 16-byte stores after the quad transpose.
  float wide[32] = {}, wide2[64] = {};
  tessel::store_accumulators_wide<tessel::bfloat16_t, tessel::AccumulatorLayout<64, 64, 4, 1>>(
      wide, reinterpret_cast<tessel::bfloat16_t*>(c), ld, rv, cv);
  tessel::store_accumulators_wide<tessel::half_t, tessel::AccumulatorLayout<128, 64, 4, 1, true>>(
      wide2, c, ld, rv, cv);
})cuda"},
    {"block.cuh", R"cuda(
__global__ void k(int* out) {
  int x = 0, y = 0;
  tessel::rasterize(8, blockIdx.x, blockIdx.y, gridDim.x, gridDim.y, x, y);
  tessel::barrier();
  out[y * gridDim.x + x] = 1;
})cuda"},
    {"tessel.cuh", R"cuda(
__global__ void k(float* out) { out[0] = tessel::to_float(tessel::half_t{0x3c00}); })cuda"},
};

class EachHeader : public ::testing::TestWithParam<std::tuple<HeaderCase, std::string>> {};

TEST_P(EachHeader, CompilesAloneWithoutWarnings) {
  const HeaderCase& c = std::get<0>(GetParam());
  const std::string& arch = std::get<1>(GetParam());
  const std::string src = std::string("#include <tessel/") + c.header + ">\n" + c.use + "\n";
  const CompileResult r = tessel_device_test::compile(src, arch);
  ASSERT_TRUE(r.ok) << c.header << " for " << arch << ":\n" << r.log;
  EXPECT_EQ(r.log.find("warning"), std::string::npos) << r.log;
  EXPECT_FALSE(r.ptx.empty());
  for (const auto& k : r.kernels) {
    EXPECT_EQ(k.spill_store_bytes, 0) << c.header << " " << k.name;
    EXPECT_EQ(k.spill_load_bytes, 0) << c.header << " " << k.name;
  }
}

INSTANTIATE_TEST_SUITE_P(DeviceHeaders, EachHeader,
                         ::testing::Combine(::testing::ValuesIn(kHeaderCases),
                                            ::testing::ValuesIn(tessel_device_test::arches())),
                         [](const auto& info) {
                           std::string h = std::get<0>(info.param).header;
                           h = h.substr(0, h.find('.'));
                           return h + "_" + std::get<1>(info.param);
                         });

// The rules every header follows (STYLE.md, device headers): only each other as includes,
// every static_assert with a message, small files, everything in namespace tessel.
TEST(DeviceHeaderRules, IncludesMessagesAndSize) {
  for (const HeaderCase& c : kHeaderCases) {
    const std::string text = read_header(c.header);
    ASSERT_FALSE(text.empty()) << "cannot read " << c.header;
    SCOPED_TRACE(c.header);
    EXPECT_NE(text.find("#pragma once"), std::string::npos);
    const std::regex include_line(R"(#include\s*([<"])([^>"]+)[>"])");
    for (std::sregex_iterator it(text.begin(), text.end(), include_line), end; it != end; ++it) {
      EXPECT_EQ((*it)[1].str(), "\"") << "system include " << (*it)[2].str();
      const std::string inc = (*it)[2].str();
      EXPECT_TRUE(inc.size() > 4 && inc.substr(inc.size() - 4) == ".cuh" &&
                  inc.find('/') == std::string::npos)
          << "includes " << inc;
    }
    for (size_t p = text.find("static_assert("); p != std::string::npos;
         p = text.find("static_assert(", p + 1)) {
      const size_t end = text.find(");", p);
      ASSERT_NE(end, std::string::npos);
      EXPECT_NE(text.substr(p, end - p).find('"'), std::string::npos)
          << "static_assert without a message: " << text.substr(p, end - p);
    }
    EXPECT_LT(std::count(text.begin(), text.end(), '\n'), 400);
    if (std::string(c.header) != "tessel.cuh") {
      EXPECT_NE(text.find("namespace tessel {"), std::string::npos);
    }
    EXPECT_EQ(text.find("std::"), std::string::npos);
  }
}

void expect_compiles(const std::string& src) {
  for (const std::string& arch : tessel_device_test::arches()) {
    const CompileResult r = tessel_device_test::compile(src, arch);
    EXPECT_TRUE(r.ok) << arch << ":\n" << r.log;
  }
}

// Shared-memory layouts, checked at compile time. Banks: a wavefront serves 128 bytes, i.e.
// 8 groups of 4 banks, one per 16-byte chunk position; an access of 8 chunks is
// conflict-free iff the chunks sit in 8 different positions (byte offset / 16 % 8).
const char* kLayoutChecks = R"cuda(
#include <tessel/layout.cuh>
#define HD __host__ __device__  // NVRTC compiles no host-only functions

template <class L, int ElemBytes>
HD constexpr int bank_group(int r, int c) { return (L::offset(r, c) * ElemBytes / 16) % 8; }

// offset() is a permutation of [0, kSize).
template <class L>
HD constexpr bool is_bijection() {
  bool seen[L::kSize] = {};
  for (int r = 0; r < L::kRows; ++r)
    for (int c = 0; c < L::kCols; ++c) {
      const int o = L::offset(r, c);
      if (o < 0 || o >= L::kSize || seen[o]) return false;
      seen[o] = true;
    }
  return true;
}

// 16-byte chunks stay whole and aligned; rows stay rows; the kRowPeriod promise holds.
template <class L, int ElemBytes>
HD constexpr bool chunks_whole() {
  constexpr int e = 16 / ElemBytes;
  for (int r = 0; r < L::kRows; ++r)
    for (int c = 0; c < L::kCols; c += e) {
      if (L::offset(r, c) % e != 0) return false;
      if (L::offset(r, c) / L::kCols != r) return false;
      for (int i = 1; i < e; ++i)
        if (L::offset(r, c + i) != L::offset(r, c) + i) return false;
      if (r + L::kRowPeriod < L::kRows &&
          L::offset(r + L::kRowPeriod, c) != L::offset(r, c) + L::kRowPeriod * L::kRowPitch)
        return false;
    }
  return true;
}

// ldmatrix: 8 consecutive rows (first one a multiple of 8), same chunk column.
template <class L, int ElemBytes>
HD constexpr bool ldmatrix_conflict_free() {
  constexpr int e = 16 / ElemBytes;
  for (int r0 = 0; r0 + 8 <= L::kRows; r0 += 8)
    for (int c = 0; c < L::kCols; c += e) {
      int mask = 0;
      for (int i = 0; i < 8; ++i) mask |= 1 << bank_group<L, ElemBytes>(r0 + i, c);
      if (mask != 0xff) return false;
    }
  return true;
}

// cp.async: 8 threads write 8 consecutive chunks of the row-major chunk sequence.
template <class L, int ElemBytes>
HD constexpr bool cp_async_conflict_free() {
  constexpr int e = 16 / ElemBytes;
  constexpr int chunks_per_row = L::kCols / e;
  for (int first = 0; first + 8 <= L::kRows * chunks_per_row; first += 8) {
    int mask = 0;
    for (int i = first; i < first + 8; ++i)
      mask |= 1 << bank_group<L, ElemBytes>(i / chunks_per_row, (i % chunks_per_row) * e);
    if (mask != 0xff) return false;
  }
  return true;
}

template <int Rows, int Cols, int ElemBytes>
HD constexpr bool check() {
  using L = tessel::SwizzledLayout<Rows, Cols, ElemBytes>;
  return is_bijection<L>() && chunks_whole<L, ElemBytes>() &&
         ldmatrix_conflict_free<L, ElemBytes>() && cp_async_conflict_free<L, ElemBytes>();
}

static_assert(check<128, 32, 2>(), "64-byte rows (A tile 128x32 f16)");
static_assert(check<256, 32, 2>(), "64-byte rows, tall");
static_assert(check<32, 128, 2>(), "256-byte rows (B tile 32x128 f16)");
static_assert(check<32, 256, 2>(), "512-byte rows (B tile 32x256 f16)");
static_assert(check<128, 64, 2>(), "128-byte rows (A tile 128x64 f16)");
static_assert(check<64, 256, 2>(), "512-byte rows (B tile 64x256 f16)");
static_assert(check<64, 16, 2>(), "32-byte rows");
static_assert(check<64, 8, 2>(), "16-byte rows");
static_assert(check<16, 192, 2>(), "384-byte rows (not a power of two)");
static_assert(check<32, 32, 4>(), "f32, 128-byte rows");
static_assert(check<32, 16, 1>(), "i8, 16-byte rows");
static_assert(tessel::swizzle_supported(32, 2) && !tessel::swizzle_supported(24, 2) &&
              !tessel::swizzle_supported(12, 2), "swizzle_supported agrees with the layout");
static_assert(tessel::RowMajorLayout<5, 7>::offset(4, 6) == 34, "row-major");
)cuda";

TEST(DeviceLayout, SwizzleIsBijectiveAndBankConflictFree) {
  expect_compiles(kLayoutChecks);
}

// rasterize is a bijection of the grid onto itself, also for partial last panels.
const char* kRasterizeChecks = R"cuda(
#include <tessel/block.cuh>
#define HD __host__ __device__  // NVRTC compiles no host-only functions
HD constexpr bool bijective(int panel, int gx, int gy) {
  bool seen[64 * 64] = {};
  for (int by = 0; by < gy; ++by)
    for (int bx = 0; bx < gx; ++bx) {
      int x = -1, y = -1;
      tessel::rasterize(panel, bx, by, gx, gy, x, y);
      if (x < 0 || x >= gx || y < 0 || y >= gy || seen[y * gx + x]) return false;
      seen[y * gx + x] = true;
    }
  return true;
}
HD constexpr bool all() {
  const int grids[][2] = {{1, 1}, {1, 7}, {7, 1}, {16, 32}, {7, 5}, {13, 9}, {64, 3}, {5, 64}};
  const int panels[] = {-1, 0, 1, 2, 3, 4, 8, 10, 100};
  for (auto g : grids)
    for (int p : panels)
      if (!bijective(p, g[0], g[1])) return false;
  return true;
}
static_assert(all(), "rasterize must be a bijection");
// Row-major inside a panel: block 1 is the next column, block `panel` wraps to the next row.
HD constexpr int x_of(int bx, int by) { int x = 0, y = 0; tessel::rasterize(4, bx, by, 10, 6, x, y); return x; }
HD constexpr int y_of(int bx, int by) { int x = 0, y = 0; tessel::rasterize(4, bx, by, 10, 6, x, y); return y; }
static_assert(x_of(1, 0) == 1 && y_of(1, 0) == 0, "second block: next column");
static_assert(x_of(4, 0) == 0 && y_of(4, 0) == 1, "fifth block: next row of panel 0");
static_assert(x_of(4, 2) == 4 && y_of(4, 2) == 0, "block 24: first of panel 1");
static_assert(x_of(8, 4) == 8 && y_of(8, 4) == 0 && x_of(9, 4) == 9 && x_of(0, 5) == 8 &&
              y_of(0, 5) == 1, "last panel is 2 wide");
// raster_x / raster_y (a persistent kernel's tile t) are rasterize of t's launch-order (x, y).
HD constexpr bool raster_xy_agree() {
  for (int t = 0; t < 60; ++t)
    if (tessel::raster_x(4, t, 10, 6) != x_of(t % 10, t / 10) || tessel::raster_y(4, t, 10, 6) != y_of(t % 10, t / 10))
      return false;
  return true;
}
static_assert(raster_xy_agree(), "raster_x / raster_y follow rasterize");
)cuda";

TEST(DeviceBlock, RasterizeIsABijection) {
  expect_compiles(kRasterizeChecks);
}

// Wrong uses fail with a message that says what is legal.
struct ErrorCase {
  const char* source;
  const char* message;
};

class DeviceHeaderErrors : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(DeviceHeaderErrors, StaticAssertSaysWhatIsLegal) {
  const CompileResult r = tessel_device_test::compile(GetParam().source, "sm_80");
  ASSERT_FALSE(r.ok) << GetParam().source;
  EXPECT_NE(r.log.find(GetParam().message), std::string::npos) << r.log;
}

const ErrorCase kErrorCases[] = {
    {"#include <tessel/layout.cuh>\nstatic_assert(tessel::SwizzledLayout<8, 24, 2>::kSize > 0, "
     "\"instantiate\");",
     "use RowMajorLayout"},
    {"#include <tessel/types.cuh>\n__global__ void k(char* p) { p[0] = "
     "tessel::from_float<char>(1.0f); }",
     "T must be half_t, bfloat16_t, float, double or int"},
    {"#include <tessel/gemm.cuh>\n#include <tessel/layout.cuh>\nusing G = tessel::BlockGemm<tessel::half_t, "
     "96, 64, 32, 4, 2, "
     "false, false, tessel::SwizzledLayout<96, 32, 2>, tessel::SwizzledLayout<32, 64, 2>>;\n"
     "static_assert(G::kAccPerThread > 0, \"instantiate\");",
     "BM must be a multiple of 16 * WarpsM"},
    {"#include <tessel/gemm.cuh>\n#include <tessel/layout.cuh>\nusing G = tessel::BlockGemm<float, 64, 64, "
     "32, 2, 2, false, "
     "false, tessel::SwizzledLayout<64, 32, 2>, tessel::SwizzledLayout<32, 64, 2>>;\n"
     "static_assert(G::kAccPerThread > 0, \"instantiate\");",
     "TIn must be half_t or bfloat16_t"},
    {"#include <tessel/gemm.cuh>\n#include <tessel/layout.cuh>\nusing G = tessel::BlockGemm<tessel::half_t, "
     "64, 64, 32, 2, 2, "
     "true, false, tessel::SwizzledLayout<64, 32, 2>, tessel::SwizzledLayout<32, 64, 2>>;\n"
     "static_assert(G::kAccPerThread > 0, \"instantiate\");",
     "LayoutA must describe the A tile"},
    {"#include <tessel/gemm.cuh>\n#include <tessel/layout.cuh>\nusing G = tessel::BlockGemm<tessel::half_t, "
     "64, 64, 24, 2, 2, "
     "false, false, tessel::RowMajorLayout<64, 24>, tessel::RowMajorLayout<24, 64>>;\n"
     "static_assert(G::kAccPerThread > 0, \"instantiate\");",
     "BK must be a multiple of 16"},
};

INSTANTIATE_TEST_SUITE_P(DeviceHeaders, DeviceHeaderErrors, ::testing::ValuesIn(kErrorCases));

}  // namespace
