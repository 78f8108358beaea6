// Split-K for skinny GEMMs, as two Tessel programs -- the partial GEMM (each block z of the grid
// multiplies its contiguous share of the K tiles and stores an f32 partial) and the reduction
// that sums the partials into C in the output dtype -- the model that decides when
// kernels::Matmul uses them (plan_split_k, for plan_matmul), and the share counts the autotuner
// times instead (split_k_candidates).
#include "MatmulSplitK.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "passes/HopperPolicy.hpp"

namespace tessel::kernels {

namespace T = tessel;

namespace {

void check_split_shape(const char* what, int M, int N, int K, int splits) {
  if (M <= 0 || N <= 0 || K <= 0)
    throw std::invalid_argument(std::string(what) + ": M, N and K must be positive, not " +
                                std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K));
  if (splits < 1)
    throw std::invalid_argument(std::string(what) + ": splits = " + std::to_string(splits) +
                                " (legal: 1 or more)");
}

}  // namespace

PrimFunc matmul_split_k_program(int M, int N, int K, int splits, const MatmulConfig& c) {
  check_split_shape("matmul_split_k_program", M, N, K, splits);
  const int k_tiles = (K + c.block_K - 1) / c.block_K;
  if (splits > k_tiles)
    throw std::invalid_argument("matmul_split_k_program: splits = " + std::to_string(splits) +
                                " but K = " + std::to_string(K) + " has only " + std::to_string(k_tiles) +
                                " tiles of block_K = " + std::to_string(c.block_K) + " (legal: 1 to " +
                                std::to_string(k_tiles) + ")");
  T::PrimFunc f("matmul_split_k");
  auto A = f.tensor("A", {M, K}, c.dtype);
  auto B = f.tensor("B", {K, N}, c.dtype);
  auto W = f.tensor("W", {splits, M, N}, c.accum_dtype);
  f.body([&] {
    T::Kernel(T::ceildiv(N, c.block_N), T::ceildiv(M, c.block_M), splits, c.threads,
              [&](T::Var bx, T::Var by, T::Var bz) {
                auto A_shared = T::alloc_shared({c.block_M, c.block_K}, c.dtype);
                auto B_shared = T::alloc_shared({c.block_K, c.block_N}, c.dtype);
                auto C_local = T::alloc_fragment({c.block_M, c.block_N}, c.accum_dtype);
                if (c.use_swizzle) T::use_swizzle(c.panel_size);
                // Split z takes K tiles [z * k_tiles / splits, (z + 1) * k_tiles / splits): shares
                // that differ by at most one tile, none empty (splits <= k_tiles).
                Expr first = bz * k_tiles / splits;
                Expr count = (bz + 1) * k_tiles / splits - first;
                T::clear(C_local);
                T::Pipelined(count, c.num_stages, [&](T::Var ko) {
                  T::copy(A(by * c.block_M, (first + ko) * c.block_K), A_shared);
                  T::copy(B((first + ko) * c.block_K, bx * c.block_N), B_shared);
                  T::gemm(A_shared, B_shared, C_local);
                });
                T::copy(C_local, W(bz, by * c.block_M, bx * c.block_N));
              });
  });
  return f;
}

PrimFunc matmul_split_k_reduce_program(int M, int N, int splits, DType dtype, const MatmulSplitKReduce& r) {
  check_split_shape("matmul_split_k_reduce_program", M, N, 1, splits);
  T::PrimFunc f("matmul_split_k_reduce");
  auto W = f.tensor("W", {splits, M, N}, DType::f32);
  auto C = f.tensor("C", {M, N}, dtype);
  f.body([&] {
    T::Kernel(T::ceildiv(N, r.block_N), T::ceildiv(M, r.block_M), r.threads, [&](T::Var bx, T::Var by) {
      auto sum = T::alloc_fragment({r.block_M, r.block_N}, DType::f32);
      auto part = T::alloc_fragment({r.block_M, r.block_N}, DType::f32);
      T::copy(W(0, by * r.block_M, bx * r.block_N), sum);
      T::Serial(splits - 1, [&](T::Var s) {
        T::copy(W(s + 1, by * r.block_M, bx * r.block_N), part);
        T::Parallel(r.block_M, r.block_N, [&](T::Var i, T::Var j) { sum(i, j) = sum(i, j) + part(i, j); });
      });
      T::copy(sum, C(by * r.block_M, bx * r.block_N));
    });
  });
  return f;
}

MatmulSplitKReduce default_split_k_reduce(long long M, long long N) {
  // 8 f32 columns per thread in two 16-byte vectors; a block covers a [rows, 1024 / rows]
  // tile, as few rows as M needs so that a decode GEMM (M = 1) wastes no threads.
  MatmulSplitKReduce r;
  r.threads = 128;
  r.block_M = M >= 4 ? 4 : M >= 2 ? 2 : 1;
  r.block_N = 1024 / r.block_M;
  while (r.block_N > 64 && r.block_N / 2 >= N) r.block_N /= 2;
  return r;
}

namespace {

// The model's constants (plan_matmul's comment in Matmul.hpp says the model).
constexpr int kSplitBlockK = 64;
constexpr int kMinTilesPerShare = 8;  // shorter shares spend more of their time filling the pipeline
constexpr int kMaxSplits = 16;
constexpr long long kMaxAutoM = 64;
// split_k_candidates: shares down to half the model's minimum, where only a measurement can
// tell whether filling the pipeline more often costs more than the extra CTAs bring.
constexpr int kMinTunedTilesPerShare = kMinTilesPerShare / 2;
// The DRAM rate a grid of n CTAs streaming 64x256 tiles through a 4-stage ring reaches on the
// H200: min(kDram, kRateScale * n / (n + kHalfCtas)) TB/s, fitted to issue 17's unsplit skinny
// GEMMs (bench/results/2026-12-04-gemm-issue17-s11-h200.json, bytes read plus the flushed L2's
// write-back): 32 CTAs 2.8 TB/s, 64 CTAs 3.8, 112 CTAs 3.9; cuBLAS 3.8-4.3 on the same shapes.
constexpr double kDramBytesPerUs = 4.1e6, kRateScale = 6.09e6, kHalfCtas = 38.4;
// The reduction: its launch behind the partial GEMM and a DRAM round trip.
constexpr double kReduceUs = 2;
// A grid whose tiles split their K loop over a cluster (split_k_clusters, by default; the
// template's 2-CTA clusters under TESSEL_DISABLE=gemm_from_passes) streams at a fraction of the
// rate above for its CTAs:
// - 2-CTA clusters where M <= 16: 0.79. 8x14336x4096 on the H200 ran 36.4 us on 112 such CTAs
//   (the template's; 3.2 TB/s) where the fit says 28.7 us (3.9 TB/s), and split-K 2 ran 33.1 us
//   in the same process (bench/results/2026-12-05-gemm-skinny-default-s18-h200.json and the log
//   beside it); on an H100 split-K 2 beat it by 4 % at M = 8 and 3 % at M = 16 but lost by
//   3.5 % at M = 64, whose split tiles are 64 rows (2026-12-05-gemm-14336-*-s18c-h100.json):
//   2-CTA clusters of more rows stream at the fit's rate.
// - 4- and 8-CTA clusters: 0.90. 32x4096x14336 (16 tiles over 4-CTA clusters: 64 CTAs) ran
//   48.5 us against split-K 5's 45.5 us in the same process, an H100 in session 31
//   (2026-12-07-gemm-skinny-split-{1,auto}-s31b-h100.json); the fit says 31.1 us for 64 CTAs and
//   32.3 us for the split, so the clusters take 31.1 / (32.3 * 48.5 / 45.5) = 0.90 of the rate.
//   One shape on an H100: to be refitted on the H200.
constexpr double kClusterSplitRate = 0.79;
constexpr long long kClusterSplitRateMaxM = 16;
constexpr double kWideClusterSplitRate = 0.90;
// An operand this small is read from DRAM once however many tiles re-read it (a quarter of the
// H200's 50 MB L2, leaving room for the streamed operand's lines in flight).
constexpr double kL2ResidentBytes = 12.0 * 1024 * 1024;

long long ceil_div(long long a, long long b) {
  return (a + b - 1) / b;
}

// Microseconds to stream `bytes` with `ctas` CTAs resident (at most one per SM: the rings take
// 139-164 KB of shared memory).
double stream_us(double bytes, long long ctas, int sm_count) {
  const double n = static_cast<double>(std::min<long long>(ctas, sm_count));
  return bytes / std::min(kDramBytesPerUs, kRateScale * n / (n + kHalfCtas));
}

}  // namespace

MatmulConfig split_k_config(long long M, DType dtype) {
  MatmulConfig c;
  c.dtype = dtype;
  // The fewest rows that cover M (one warp's 16 rows at a time, up to 64): the tile streams
  // 64 x 256 of B per K step whatever M is, and rows past M only cost tensor-core time.
  c.block_M = M <= 16 ? 16 : M <= 32 ? 32 : 64;
  c.block_N = 256;
  c.block_K = kSplitBlockK;
  c.num_stages = 4;
  c.threads = 128;
  return c;
}

std::vector<int> split_k_candidates(long long M, long long N, long long K, DType dtype,
                                    const std::string& arch) {
  const bool sixteen_bit = dtype == DType::f16 || dtype == DType::bf16;
  if (!sixteen_bit || arch.rfind("sm_90", 0) != 0 || M < 1 || M > kMaxAutoM || N < 1 || K < 1) return {};
  // 16-byte rows (8 elements of a 16-bit dtype), or rows off 16 bytes that the partial GEMM's
  // tiles load through realigned rings (M <= 16), as plan_split_k takes them.
  if ((N % 8 != 0 || K % 8 != 0) && !keeps_generic_schedule(split_k_config(M, dtype))) return {};
  std::vector<int> shares;
  const long long most = std::min<long long>(kMaxSplits, ceil_div(K, kSplitBlockK) / kMinTunedTilesPerShare);
  for (long long s = 2; s <= most; ++s) shares.push_back(static_cast<int>(s));
  return shares;
}

void plan_split_k(MatmulPlan& p, DType dtype, const std::string& arch, int split_k, int sm_count) {
  const long long k_tiles = ceil_div(p.kernel_K, kSplitBlockK);
  const std::string legal =
      "legal: 0 = automatic, 1 = off" +
      (k_tiles >= 2 ? ", 2 to " + std::to_string(k_tiles) + " shares of K = " + std::to_string(p.kernel_K) +
                          "'s " + std::to_string(k_tiles) + " tiles of " + std::to_string(kSplitBlockK)
                    : std::string(" (K = ") + std::to_string(p.kernel_K) + " is one tile of " +
                          std::to_string(kSplitBlockK) + ")");
  if (split_k < 0 || split_k > k_tiles)
    throw std::invalid_argument("Matmul: split_k = " + std::to_string(split_k) + " (" + legal + ")");
  if (sm_count < 1)
    throw std::invalid_argument("plan_matmul: sm_count = " + std::to_string(sm_count) +
                                " (legal: 1 or more)");
  const std::string sep = p.why.empty() ? "" : "; ";
  const bool sixteen_bit = dtype == DType::f16 || dtype == DType::bf16;
  if (split_k >= 2 && !sixteen_bit)
    throw std::invalid_argument("Matmul: split_k = " + std::to_string(split_k) + " with dtype " +
                                std::string(dtype_name(dtype)) +
                                " (split-K takes f16 or bf16; legal here: 0, 1)");
  if (split_k == 1) {
    p.why += sep + (p.split_tuned
                        ? "split-K off (tuned: `tessel tune gemm` timed one kernel faster than every split)"
                        : "split-K off (split_k = 1)");
    return;
  }
  const MatmulConfig split = split_k_config(p.M, dtype);
  const long long split_tiles = ceil_div(p.M, split.block_M) * ceil_div(p.kernel_N, split.block_N);
  // The unsplit kernel's grid: default_matmul_config's tiles (64x256 for M <= 64 on sm_90), each
  // tile's K loop split over the cluster of R CTAs split_k_clusters gives it (HopperPolicy.hpp;
  // R = 1: no split).
  const MatmulConfig whole = default_matmul_config(p.M, p.kernel_N, p.kernel_K, dtype, arch, sm_count);
  const long long whole_tiles = ceil_div(p.M, whole.block_M) * ceil_div(p.kernel_N, whole.block_N);
  // (Rows off 16 bytes take no TMA, so no clusters: the direct kernel's tiles are its CTAs.)
  const bool aligned = p.kernel_K % 8 == 0 && p.kernel_N % 8 == 0;
  const int cluster_ranks = arch.rfind("sm_90", 0) == 0 && aligned
                                ? passes::split_k_cluster_ranks(whole_tiles, p.kernel_K, sm_count)
                                : 1;
  const long long whole_ctas = whole_tiles * cluster_ranks;
  const double cluster_rate = cluster_ranks >= 4                                   ? kWideClusterSplitRate
                              : cluster_ranks == 2 && p.M <= kClusterSplitRateMaxM ? kClusterSplitRate
                                                                                   : 1.0;
  const std::string over_clusters =
      cluster_ranks > 1 ? " over " + std::to_string(cluster_ranks) + "-CTA clusters" : std::string();
  // The bytes every grid reads from DRAM: B once, A once per column tile -- or once in all when A
  // is small enough to stay in L2 between the column tiles' reads (a skinny A: 64 x 8192 f16 is
  // 1 MB; 64 column tiles would count it 64 times, which the DRAM never sees).
  const double e = dtype_bytes(dtype);
  const double a_bytes = e * static_cast<double>(p.M * p.kernel_K);
  const auto operand_bytes = [&](long long block_N) {
    const double a_reads = a_bytes <= kL2ResidentBytes ? 1.0 : static_cast<double>(ceil_div(p.kernel_N, block_N));
    return a_bytes * a_reads + e * static_cast<double>(p.kernel_K * p.kernel_N);
  };
  p.estimate_unsplit_us = stream_us(operand_bytes(whole.block_N), whole_ctas, sm_count) / cluster_rate;
  // The kernel's rows off 16 bytes (not staged): both the direct kernel and the split's partial
  // GEMM load them through realigned rings where their tiles keep the generic schedule (the
  // partial GEMM's 16x256 tiles, M <= 16); the ring model prices both, the direct one as
  // plan_staging did.
  const bool ring_split = !aligned && keeps_generic_schedule(split);
  if (ring_split) p.estimate_unsplit_us = p.estimate_direct_us;
  // Split s ways: the longest share sets the time; the partials are written and read back.
  const auto split_us = [&](long long s) {
    const double partials = 2.0 * 4.0 * static_cast<double>(s * p.M * p.kernel_N) / kDramBytesPerUs;
    if (ring_split)
      return realigned_ring_us(p.M, p.kernel_N, p.kernel_K, dtype, split, s, sm_count) + kReduceUs + partials;
    const double longest = static_cast<double>(ceil_div(k_tiles, s) * s) / static_cast<double>(k_tiles);
    return stream_us(operand_bytes(split.block_N) * longest, split_tiles * s, sm_count) + kReduceUs +
           partials;
  };
  std::ostringstream why;
  why.precision(3);
  int chosen = split_k;
  if (split_k == 0) {
    const char* not_here = !sixteen_bit                  ? "split-K takes f16 or bf16"
                           : arch.rfind("sm_90", 0) != 0 ? "the model is the H200's (sm_90)"
                           : p.M > kMaxAutoM             ? "M > 64 fills the GPU with its own tiles"
                           : !aligned && !ring_split
                               ? "the kernel's rows are not 16-byte aligned and the split's "
                                 "tiles would load them in synchronous chunks"
                           : k_tiles < 2 * kMinTilesPerShare ? "K has fewer than 16 tiles of 64"
                                                             : nullptr;
    if (not_here) {
      p.why += sep + "not split: " + not_here;
      return;
    }
    // The fastest share count, the fewest among equals. On realigned rings, only counts that put
    // CTAs on half the SMs or more (where there are such): the ring model's DRAM rate was fitted on
    // 64 CTAs and more, and fewer stream slower than it says -- 1x4096x4097 split 2 (32 CTAs) ran
    // 25 us against 17 us for split 4 (64 CTAs) and 21 us direct, an H100 in session 37, where the
    // model had them equal.
    const long long most = std::min<long long>(kMaxSplits, k_tiles / kMinTilesPerShare);
    long long first = 2;
    if (ring_split)
      first = std::clamp<long long>(ceil_div(std::max(1, sm_count / 2), split_tiles), 2,
                                    std::max<long long>(2, most));
    chosen = static_cast<int>(first);
    for (long long s = first + 1; s <= most; ++s)
      if (split_us(s) < split_us(chosen)) chosen = static_cast<int>(s);
    p.estimate_split_us = split_us(chosen);
    if (!(p.estimate_split_us < p.estimate_unsplit_us)) {
      if (ring_split)
        why << sep << "not split: the direct kernel takes " << p.estimate_unsplit_us << " us, split-K "
            << chosen << " on realigned rings " << p.estimate_split_us << " us (model)";
      else
        why << sep << "not split: " << whole_ctas << " CTAs (" << whole_tiles << " tiles of " << whole.block_M
            << "x" << whole.block_N << over_clusters << ") stream it in " << p.estimate_unsplit_us
            << " us, split-K " << chosen << " in " << p.estimate_split_us << " us (model)";
      p.why += why.str();
      return;
    }
  } else {
    p.estimate_split_us = split_us(split_k);
  }
  p.split_k = chosen;
  p.split_config = split;
  p.split_reduce = default_split_k_reduce(p.M, p.kernel_N);
  p.workspace_bytes = 4LL * chosen * p.M * p.kernel_N;
  why << sep << "split-K " << chosen
      << (split_k == 0    ? ""
          : p.split_tuned ? " (tuned: `tessel tune gemm` timed it fastest)"
                          : " (forced)")
      << ": " << split_tiles << " tiles of " << split.block_M << "x" << split.block_N << " x " << chosen
      << " shares of " << k_tiles / chosen
      << (k_tiles % chosen ? "-" + std::to_string(k_tiles / chosen + 1) : "")
      << " K tiles = " << split_tiles * chosen << " CTAs on " << sm_count << " SMs"
      << (ring_split ? ", realigned rings" : "") << " (model: " << p.estimate_split_us << " us, against "
      << p.estimate_unsplit_us << " us for " << whole_ctas << " CTAs of " << whole.block_M << "x"
      << whole.block_N << " tiles" << over_clusters << "); f32 workspace " << p.workspace_bytes << " B";
  p.why += why.str();
}

}  // namespace tessel::kernels
