// The tutorial's tensor-core GEMM, C = A * B (row-major A[M,K], B[K,N], C[M,N]), in Tessel.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tessel/Frontend.hpp"
#include "tessel/Jit.hpp"
#include "tessel/runtime/Tensor.hpp"

namespace tessel::kernels {

struct MatmulConfig {
  int block_M = 128, block_N = 128, block_K = 32;
  int num_stages = 3;
  int threads = 128;
  bool use_swizzle = false;
  int panel_size = 10;
  // use_cluster(cluster_x, cluster_y): on sm_90a, 2-CTA clusters that share the A (x) or B (y)
  // tile through TMA multicast; (1, 1) none.
  int cluster_x = 1, cluster_y = 1;
  DType dtype = DType::f16;
  DType accum_dtype = DType::f32;
  std::string describe() const;  // "128x128x32 s3 t128 swz", " c2x1" with a cluster
};

// The built-in per-shape config (tuned entries take its place: choose_matmul_config). On sm_90a
// with 16-byte rows it picks tiles the warp-specialized wgmma path takes (block_K 64, 128 or 256
// threads); for 16-bit rows off 16 bytes with M <= 64 on sm_90, small mma.sync tiles whose loads
// go through realigned rings (32x64x64 s4 when N gives a wave of them, else 16x32x128 s8);
// elsewhere 128-row mma.sync tiles. `sm_count` sizes the tiles so that small problems still fill
// the GPU.
MatmulConfig default_matmul_config(long long M, long long N, long long K, DType dtype,
                                   const std::string& arch, int sm_count);

// Shared memory the config's pipeline needs: (bM*bK + bK*bN) * elem * stages.
long long matmul_smem_bytes(const MatmulConfig& c);

// The program itself (what `tessel dump` shows); make_matmul jits it.
PrimFunc matmul_program(int M, int N, int K, const MatmulConfig& c);
JitKernel make_matmul(int M, int N, int K, const MatmulConfig& c = {}, const JitOptions& options = {});

// A linear layer: C = act(alpha * A * B + bias), bias a length-N vector added to every row, in
// the inputs' dtype. The tutorial GEMM with an element-wise Parallel epilogue on its accumulator;
// on sm_90a the epilogue is fused into the wgmma kernel (applied in registers before the store),
// elsewhere it runs on the mma.sync accumulator fragment. Parameters: A, B, bias, C.
enum class Activation { none, relu, silu };
const char* activation_name(Activation a);  // "none", "relu", "silu"
PrimFunc matmul_bias_act_program(int M, int N, int K, const MatmulConfig& c, Activation act,
                                 float alpha = 1.0f);
JitKernel make_matmul_bias_act(int M, int N, int K, const MatmulConfig& c, Activation act, float alpha = 1.0f,
                               const JitOptions& options = {});

// Split-K (kernels/gemm/MatmulSplitK.cpp), for skinny GEMMs whose tile grid leaves most SMs
// idle: the partial GEMM runs on a ceildiv(N, block_N) x ceildiv(M, block_M) x splits grid, block
// z multiplying its contiguous share of the ceildiv(K, block_K) K tiles (shares differ by at most
// one tile) and storing its f32 partial into W [splits, M, N]. Parameters: A, B, W. Throws
// std::invalid_argument unless 1 <= splits <= the K tiles.
PrimFunc matmul_split_k_program(int M, int N, int K, int splits, const MatmulConfig& c);
// The reduction's tiles: a block of `threads` sums a [block_M, block_N] tile of W over the splits.
struct MatmulSplitKReduce {
  int block_M = 4, block_N = 256, threads = 128;
};
// C = sum over z of W[z] in `dtype` (f32 adds in the split order). Parameters: W, C.
PrimFunc matmul_split_k_reduce_program(int M, int N, int splits, DType dtype, const MatmulSplitKReduce& r);
// The reduction's tiles for an M x N output: as few rows as M has (up to 4), 1024 elements.
MatmulSplitKReduce default_split_k_reduce(long long M, long long N);

// Matmul's staging copies: a block of `threads` copies a [1, block_N] piece of one row.
struct MatmulStagingCopy {
  int block_N = 2048, threads = 256;
};
// Dst [rows, dst_cols] from Src [rows, src_cols], row by row: Dst[r, c] = Src[r, c] for
// c < min(src_cols, dst_cols), and 0 for src_cols <= c < dst_cols (a staged row's padding).
// Parameters: Src, Dst. Rows whose starts are not 16-byte aligned on either side still move in
// 16-byte accesses: loads realigned in registers, stores through a shared span (the copy op's
// paths). Throws std::invalid_argument for a non-positive size, a dtype whose elements do not
// divide 16 bytes, block_N not a positive multiple of threads * (16 / element bytes), or more
// than 2^31 - 1 blocks.
PrimFunc matmul_staging_copy_program(int rows, int src_cols, int dst_cols, DType dtype,
                                     const MatmulStagingCopy& c);
// The copy's tiles for rows of `cols` elements: 256 threads (128 for rows of at most 128
// vectors), each with up to four 16-byte vectors of a row.
MatmulStagingCopy default_staging_copy(long long cols, DType dtype);
// The partial GEMM's tiles for M rows: 16x256x64 / 32x256x64 / 64x256x64 (by M), 4 stages,
// 128 threads.
MatmulConfig split_k_config(long long M, DType dtype);
// The share counts `tessel tune gemm` times for an M x N x K kernel shape (the autotuner's
// split_k knob): where the automatic split may apply -- sm_90, f16 or bf16, M <= 64, rows
// 16-byte aligned, or M <= 16 with rows off 16 bytes (the partial GEMM's 16x256 tiles load them
// through realigned rings) -- 2 to min(16, K's tiles of 64 / 4). Shares of at least 4 K tiles, half the
// model's minimum, so that the tuner also times the splits the model rules out. Empty elsewhere
// (and where K has fewer than 8 tiles).
std::vector<int> split_k_candidates(long long M, long long N, long long K, DType dtype,
                                    const std::string& arch);

// The config a default entry point compiles, and whether the tuning cache gave it.
struct MatmulChoice {
  MatmulConfig config{};
  bool tuned = false;
};
// The tuning cache's entry for this shape, dtype and GPU when `tessel tune gemm` stored one,
// else default_matmul_config for the GPU (sm_90a and 132 SMs without one). An entry whose winner
// splits K is not a one-kernel config (only Matmul runs it): the default then. Never throws for
// want of a GPU or a cache.
MatmulChoice choose_matmul_config(int M, int N, int K, DType dtype);
// make_matmul with choose_matmul_config's config (the kernel for exactly this shape; for rows
// that are not 16-byte aligned prefer Matmul below, which can stage them).
JitKernel make_matmul(int M, int N, int K, DType dtype);

// Rows whose length is not a multiple of 16 bytes (K or N not a multiple of 8 in f16/bf16)
// keep a GEMM off TMA and cp.async's 16-byte copies: the kernel for such a shape runs on
// element-wise copies at a fraction of the tensor cores' speed. Staging copies the operands
// into zero-padded buffers whose rows are aligned (A [M, Kp], B [Kp, Np]; C through [M, Np]
// when N is unaligned), runs the aligned kernel on (M, Np, Kp) and copies C's columns back --
// each copy a Tessel kernel (matmul_staging_copy_program) on the caller's stream.
enum class MatmulStaging {
  automatic,  // stage when plan_matmul's estimate says it is faster
  always,     // stage whenever a row is unaligned
  never,      // the kernel for the exact shape
};
const char* matmul_staging_name(MatmulStaging s);  // "auto", "always", "never"

struct MatmulPlan {
  bool stage_a = false, stage_b = false, stage_c = false;
  long long M = 0, N = 0, K = 0;                          // the problem
  long long kernel_N = 0, kernel_K = 0;                   // the shape the kernel is compiled for
  double estimate_direct_us = 0, estimate_staged_us = 0;  // plan_matmul's model (auto)
  // Split-K (split_k > 1): the partial GEMM with split_config's tiles over split_k shares of K,
  // then the reduction, on the kernel's shape; the f32 workspace W [split_k, M, kernel_N] takes
  // workspace_bytes. The model's estimates, split (the chosen count) and unsplit.
  int split_k = 1;
  MatmulConfig split_config{};
  MatmulSplitKReduce split_reduce{};
  long long workspace_bytes = 0;
  double estimate_split_us = 0, estimate_unsplit_us = 0;
  // split_k (1 or n) is the tuning cache's, which timed it, not the model's
  // (plan_matmul_for_current_device).
  bool split_tuned = false;
  // The model priced the direct kernel (the exact shape's) on realigned rings -- its tiles keep
  // the generic cp.async schedule -- rather than on the synchronous chunks.
  bool direct_rings = false;
  std::string why;  // what is staged and why (or why not); then what split-K does and why
  bool staged() const { return stage_a || stage_b || stage_c; }
  bool split() const { return split_k > 1; }
};

// Decides staging and split-K for an M x N x K GEMM in `dtype` (f16, bf16 or f32) on `arch`
// with `sm_count` SMs.
//
// Staging, automatic: staged when an unaligned row would take the GEMM off the 16-byte copy
// paths and the model says the staged run is faster. Direct, on default_matmul_config's tiles
// for the exact shape: where they keep the generic cp.async schedule (fewer than 64 accumulators
// a thread: the skinny tiles for M <= 64 on sm_90), whose unaligned loads go through realigned
// rings, A and C once and B once per row of tiles at 2.6 TB/s, or per wave of resident CTAs
// its K steps at 0.21 us plus 2.4 ns a row and 0.12 ns an element a step realigns, whichever
// is longer (an H100, sessions 36-37); elsewhere 2MNK at 80 TFLOP/s (the
// element-wise kernel's rate on the H200) or A, B and C streamed once at 0.6 TB/s (the chunks'
// best on skinny shapes, an H100), whichever is longer. Staged: 2MNK at 600 TFLOP/s or A, B and
// C at 3 TB/s, plus the staged bytes (read and written) at 3 TB/s plus 3 us per copy. A staged dimension (K
// where A's rows are unaligned, N where C's are) is padded to rows of whole 128-byte lines (64 16-bit
// elements) where that adds at most 1/16 to it, else to 16 bytes: TMA moves tiles 128 bytes a row.
//
// Split-K, `split_k`: 0 automatic, 1 off, n >= 2 that many shares (at most the K tiles of 64).
// Automatic, on sm_90 for M <= 64 whose kernel rows are 16-byte aligned (as given or staged):
// a skinny GEMM streams its operands once, at a DRAM rate set by how many CTAs stream at once
// (at most one per SM): min(4.1, 6.09 n / (n + 38.4)) TB/s for n CTAs, fitted to the H200's
// unsplit skinny GEMMs (32 CTAs 2.8 TB/s, 64 3.8, 112 3.9). Unsplit, n is the default kernel's
// tiles (64x256), R times that where split_k_clusters splits each tile's K loop over a cluster
// of R = 2, 4 or 8 CTAs, which streams at 0.79 of that rate (R = 2, M <= 16: measured on the
// H200) or 0.90 (R >= 4: one shape on an H100); split s ways, s times the 16x256 / 32x256 / 64x256 tiles (by
// M), each share at least 8 K tiles, the longest share setting the time, plus 2 us for the reduction and the
// f32 partials written and read back. Split when the fastest share count (the fewest among equals) beats the
// unsplit estimate. Split-K combines with staging: it runs on the staged (aligned) shape. Rows
// off 16 bytes that are not staged (M <= 16, sm_90): the split's 16x256 partial GEMM loads them
// through realigned rings too, and the ring model prices both it (s times the tiles, each share's
// K steps) and the direct kernel; split when it is faster (1x4095x4095 split 8: 30 us against 44
// direct on an H100, session 37).
//
// Throws std::invalid_argument for a non-positive dimension, another dtype, or an illegal
// split_k (naming the legal range).
MatmulPlan plan_matmul(long long M, long long N, long long K, DType dtype, const std::string& arch,
                       MatmulStaging staging = MatmulStaging::automatic, int split_k = 0, int sm_count = 132);

// What Matmul plans in this process: plan_matmul on `arch` (empty: the GPU's, sm_90a without one)
// with the GPU's SM count (132 without one); and automatic split-K (split_k 0) takes the tuning
// cache's split first: where the kernel's shape has split_k_candidates and `tessel tune gemm`
// stored a winner for it on this GPU (having timed those candidates beside the one-kernel
// configs), split_k is the winner's -- n shares, or 1 when a single kernel won -- and
// split_tuned is set; elsewhere the model decides. Throws as plan_matmul does.
MatmulPlan plan_matmul_for_current_device(long long M, long long N, long long K, DType dtype,
                                          MatmulStaging staging = MatmulStaging::automatic, int split_k = 0,
                                          const std::string& arch = "");

// Matmul's split-K unless the caller says otherwise: 0, plan_matmul's automatic choice. On the
// H200 (docs/perf-notes.md, session 12) it split 1x4096x4096 8 ways and 16x4096x4096 and
// 32x4096x14336 5 ways, 1.30-1.42x faster than unsplit (0.94-1.02x cuBLAS), and kept
// 8x14336x4096 and 64x8192x8192 unsplit.
inline constexpr int kMatmulDefaultSplitK = 0;

// The library's GEMM for any M, N, K: C = A * B, row-major, A [M, K], B [K, N], C [M, N], all
// contiguous tensors of `dtype`. The kernels are compiled on construction: unsplit, the config
// from choose_matmul_config for the kernel's shape (the tuning cache or the default); split, the
// plan's partial GEMM and reduction. The staging buffers and the split-K workspace, when the plan
// needs them, are allocated on the first call and reused. Calls on one object are not
// thread-safe (they share those buffers). `split_k` as plan_matmul takes it (0 automatic, 1 off,
// n that many shares; default kMatmulDefaultSplitK, automatic); the plan is
// plan_matmul_for_current_device's (automatic split-K takes a tuned split first) -- staged
// after all where automatic staging would run the exact shape on realigned rings that `options`
// (disable_realigned_rings) or TESSEL_DISABLE=realigned_rings turn off.
class Matmul {
 public:
  Matmul(int M, int N, int K, DType dtype, MatmulStaging staging = MatmulStaging::automatic,
         const JitOptions& options = {}, int split_k = kMatmulDefaultSplitK);
  // Checks the tensors (std::invalid_argument naming the argument, its shape or dtype and what
  // is expected) and runs on `stream` (the default stream when null). Asynchronous.
  void operator()(const Tensor& A, const Tensor& B, const Tensor& C, CUstream stream = nullptr) const;
  // The same with the caller's scratch memory in place of the object's own buffers: `workspace`
  // (device memory of at least workspace_bytes(), 256-byte aligned, kept by the caller until the
  // work on `stream` is done; ignored when workspace_bytes() is 0). The staging buffers' padding
  // is zeroed on `stream` on every call, so the memory may come uninitialized from an allocator
  // (PyTorch's caching allocator, for tessel.ops.matmul). Calls with different workspaces may run
  // concurrently on different streams. std::invalid_argument when the workspace is too small or
  // misaligned.
  void operator()(const Tensor& A, const Tensor& B, const Tensor& C, CUstream stream, CUdeviceptr workspace,
                  std::size_t workspace_size) const;
  // Bytes of scratch the plan needs (staging buffers, split-K's f32 partials), 0 when none.
  std::size_t workspace_bytes() const;

  const MatmulPlan& plan() const;
  // The GEMM kernel's config: the partial GEMM's when split.
  const MatmulConfig& config() const;
  bool tuned() const;  // the config came from the tuning cache
  // The GEMM kernel (split: the partial GEMM); reduce_kernel() the split's reduction (empty unsplit).
  const JitKernel& kernel() const;
  const JitKernel& reduce_kernel() const;
  // "128x256x64 s3 t256 swz on 4095x4096x4096; A, B staged (K 4095 -> 4096)",
  // "16x256x64 s4 t128 on 1x4096x4096; split-K 8"
  std::string describe() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
  struct Buffers {
    Tensor a, b, c, w;  // staged A, B, C and split-K's partials (undefined when not needed)
  };
  void run(const Tensor& A, const Tensor& B, const Tensor& C, CUstream stream, const Buffers& s) const;
};

}  // namespace tessel::kernels
