// The library's GEMM for any shape: plan_matmul decides whether rows that are not 16-byte
// aligned are staged through zero-padded aligned buffers and whether K is split
// (MatmulSplitK.cpp; a tuned split first: plan_matmul_for_current_device), and Matmul runs the
// plan (the aligned kernel, or the partial GEMM and its reduction, between the staging copies' kernels on
// the caller's stream).
#include <algorithm>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "Lower.hpp"
#include "MatmulSplitK.hpp"
#include "passes/Passes.hpp"
#include "tessel/autotune/Autotune.hpp"
#include "tessel/kernels/gemm/Matmul.hpp"
#include "tessel/runtime/Driver.hpp"

namespace tessel::kernels {

namespace T = tessel;

namespace {

// The model behind MatmulStaging::automatic (H200 figures, docs/perf-notes.md "Session 10"):
// the element-wise kernel that an unaligned shape gets runs at 52-85 TFLOP/s (issue 17's
// table), the aligned wgmma kernel at 600-800; a staging copy is taken to move 3 TB/s (read and
// write counted) and to cost a few microseconds to start. (The driver's 2-D copies that staged
// until session 34 moved about 0.8 TB/s on an H100 at 8192x50257x4096, perf-notes "Session 33".)
constexpr double kDirectTflops = 80, kAlignedTflops = 600, kCopyBytesPerUs = 3e6, kCopyUs = 3, kLaunchUs = 5;
// Either kernel also streams its operands and output once: the aligned kernel near the DRAM's
// rate (taken as the copies' 3 TB/s), the direct one at 0.6 TB/s -- its best on skinny shapes,
// where the FLOP rate says nothing: an H100 in session 34 (bench/results/2026-12-07-gemm-skinny-
// unaligned-*-s34b-h100.json, bf16) ran the direct 1x50257x4096 at 0.58 TB/s (0.71 ms, staged
// 0.42 ms), 1x4096x4097 at 0.21 (0.16 ms, staged 0.04) and 16x4097x4096 at 0.09 (0.37 ms,
// staged 0.04), when the FLOP-only model had kept all three direct.
constexpr double kDirectBytesPerUs = 0.6e6;
// A kernel whose loop keeps plan_pipelines' generic cp.async schedule -- fewer than 64
// accumulators a thread: default_matmul_config's skinny unaligned tiles on sm_90 (32x64x64 s4,
// 16x32x128 s8), split-K's 16x256x64 partial GEMM -- loads unaligned rows through realigned
// rings, which stay in flight: it streams at 2.6 TB/s (B read once per row of tiles) or takes
// one latency-bound K step after another per wave of resident CTAs, whichever is longer; a step
// costs kRingStepUs, plus kRingRowUs a row and kRingElementUs an element it realigns (A's
// block_M x block_K tile when K is unaligned, B's block_K x block_N when N is). Fitted to an
// H100 (sessions 36-37, bench/results/2026-12-0{7,8}-gemm-skinny-unaligned-*-s3{6,7}*-h100.json;
// launch 5 us, a split's reduction 2 us more): 1x50257x4096 on 32x64x64 161-163 us (2.6 TB/s),
// 64x50257x4096 322 us (B twice); steps of 16x32x128 s8 0.49 us realigning A's 16 x 128
// (1x4096x4097), 1.0 us B's 128 x 32 (16x4097x4096), 1.2 us both (1x4095x4095); of the 16x256x64
// partial GEMM 2.25-2.4 us B's 64 x 256 (16x4097x4096 split 2 and 4), 2.3-2.5 us both
// (1x4095x4095, 1x15x4095). The model says 0.49, 1.0, 1.28, 2.30 and 2.46 us. To be refitted on
// the H200.
constexpr double kRingBytesPerUs = 2.6e6, kRingStepUs = 0.21, kRingRowUs = 0.0024, kRingElementUs = 1.18e-4;
constexpr long long kSmemPerSm = 227 * 1024;  // sm_90's shared memory for the CTAs of one SM

long long round_up(long long x, long long m) {
  return (x + m - 1) / m * m;
}

// A staged dimension is padded past the 16 bytes the copies need, to rows of whole 128-byte
// lines, where that adds at most 1/16 to it: TMA reads and writes tiles 128 bytes a row, and
// rows that start off a line's boundary take two lines each. An H100 in session 33
// (bench/results/2026-12-07-gemm-lmhead-pitch-s33c-h100.json, bf16, same process as cuBLAS):
// 8192 x N x 4096 at N = 50256 (rows of 100512 bytes, 32 past a line) 0.89x cuBLAS against
// 0.99x at N = 50304 (whole lines); 4096 x N x 4096 0.82x against 1.03x.
constexpr long long kLineBytes = 128;
long long staged_extent(long long x, long long elem_bytes) {
  const long long line = round_up(x, kLineBytes / elem_bytes);
  return (line - x) * 16 <= x ? line : round_up(x, 16 / elem_bytes);
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void check_operand(const char* name, const Tensor& t, std::vector<std::int64_t> want, DType dtype) {
  if (t.shape() != want || t.dtype() != dtype || !t.is_contiguous())
    throw std::invalid_argument(std::string("Matmul: ") + name + " is " + t.describe() +
                                "; expected a contiguous " + shape_text(want) + " tensor of " +
                                std::string(dtype_name(dtype)));
}

}  // namespace

bool keeps_generic_schedule(const MatmulConfig& c) {
  return 1LL * c.block_M * c.block_N < 1LL * passes::kGemmMainloopMinAccumulators * c.threads;
}

double realigned_ring_us(long long M, long long N, long long K, DType dtype, const MatmulConfig& c,
                         long long shares, int sm_count) {
  const double e = dtype_bytes(dtype);
  const double a = e * static_cast<double>(M) * static_cast<double>(K);
  const double b = e * static_cast<double>(K) * static_cast<double>(N);
  const double out = shares > 1 ? 0.0 : e * static_cast<double>(M) * static_cast<double>(N);
  const long long row_tiles = (M + c.block_M - 1) / c.block_M;
  const long long ctas = row_tiles * ((N + c.block_N - 1) / c.block_N) * std::max<long long>(1, shares);
  const long long smem =
      matmul_smem_bytes(c) + (1LL * c.block_M * c.block_K + 1LL * c.block_K * c.block_N) * dtype_bytes(dtype);
  const long long resident =
      std::clamp<long long>(kSmemPerSm / std::max<long long>(1, smem), 1, 2048 / c.threads);
  const long long per_wave = std::max<long long>(1, sm_count) * resident;
  const double waves = static_cast<double>((ctas + per_wave - 1) / per_wave);
  const long long k_steps = (K + c.block_K - 1) / c.block_K;
  const double steps = static_cast<double>((k_steps + shares - 1) / std::max<long long>(1, shares));
  const long long align = 16 / dtype_bytes(dtype);
  const bool a_rows = K % align != 0, b_rows = N % align != 0;  // A's rows are K long, B's N
  const double rows = (a_rows ? c.block_M : 0) + (b_rows ? c.block_K : 0);
  const double elements =
      (a_rows ? 1.0 * c.block_M * c.block_K : 0.0) + (b_rows ? 1.0 * c.block_K * c.block_N : 0.0);
  const double step_us = kRingStepUs + kRingRowUs * rows + kRingElementUs * elements;
  return std::max((a + static_cast<double>(row_tiles) * b + out) / kRingBytesPerUs, waves * steps * step_us) +
         kLaunchUs;
}

PrimFunc matmul_staging_copy_program(int rows, int src_cols, int dst_cols, DType dtype,
                                     const MatmulStagingCopy& c) {
  const std::string what = "matmul_staging_copy_program(" + std::to_string(rows) + " rows, " +
                           std::to_string(src_cols) + " -> " + std::to_string(dst_cols) + " columns, " +
                           std::string(dtype_name(dtype)) + ", block_N " + std::to_string(c.block_N) + ", " +
                           std::to_string(c.threads) + " threads)";
  const long long e = dtype_bytes(dtype);
  if (rows <= 0 || src_cols <= 0 || dst_cols <= 0)
    throw std::invalid_argument(what + ": rows and columns must be positive");
  if (16 % e != 0) throw std::invalid_argument(what + ": elements must divide 16 bytes");
  const long long lane_cols = c.threads * (16 / e);
  if (c.threads <= 0 || c.threads > 1024 || c.threads % 32 != 0 || c.block_N <= 0 ||
      c.block_N % lane_cols != 0)
    throw std::invalid_argument(what +
                                ": threads must be a multiple of 32 up to 1024 and block_N a positive "
                                "multiple of threads * " +
                                std::to_string(16 / e) + " = " + std::to_string(lane_cols));
  const long long chunks = (dst_cols + c.block_N - 1) / c.block_N;
  if (chunks * rows > std::numeric_limits<int>::max())
    throw std::invalid_argument(what + ": " + std::to_string(chunks * rows) +
                                " blocks, more than a grid's 2^31 - 1; use a wider block_N");
  T::PrimFunc f("matmul_staging_copy");
  auto Src = f.tensor("Src", {Expr(rows), Expr(src_cols)}, dtype);
  auto Dst = f.tensor("Dst", {Expr(rows), Expr(dst_cols)}, dtype);
  f.body([&] {
    // One block a piece of a row: row-major over (row, piece), so that consecutive blocks read and
    // write consecutive memory.
    T::Kernel(Expr(static_cast<int>(chunks * rows)), c.threads, [&](T::Var bx) {
      auto piece = T::alloc_fragment({1, c.block_N}, dtype);
      Expr row = chunks == 1 ? Expr(bx) : Expr(bx) / static_cast<int>(chunks);
      Expr col = chunks == 1 ? Expr(0) : Expr(bx) % static_cast<int>(chunks) * c.block_N;
      T::copy(Src(row, col), piece);  // columns past src_cols read as zero
      T::copy(piece, Dst(row, col));  // columns past dst_cols not stored
    });
  });
  return f;
}

MatmulStagingCopy default_staging_copy(long long cols, DType dtype) {
  const long long vec = 16 / dtype_bytes(dtype);
  MatmulStagingCopy c;
  c.threads = cols <= 128 * vec ? 128 : 256;
  const long long vectors =
      std::min<long long>(4, std::max<long long>(1, (cols + c.threads * vec - 1) / (c.threads * vec)));
  c.block_N = static_cast<int>(c.threads * vec * vectors);
  return c;
}

const char* matmul_staging_name(MatmulStaging s) {
  switch (s) {
    case MatmulStaging::automatic:
      return "auto";
    case MatmulStaging::always:
      return "always";
    case MatmulStaging::never:
      return "never";
  }
  return "?";
}

namespace {

// plan_matmul's staging decision.
MatmulPlan plan_staging(long long M, long long N, long long K, DType dtype, const std::string& arch,
                        MatmulStaging staging, int sm_count) {
  if (M <= 0 || N <= 0 || K <= 0)
    throw std::invalid_argument("plan_matmul: M, N and K must be positive, not " + std::to_string(M) + "x" +
                                std::to_string(N) + "x" + std::to_string(K));
  if (dtype != DType::f16 && dtype != DType::bf16 && dtype != DType::f32)
    throw std::invalid_argument("plan_matmul: dtype " + std::string(dtype_name(dtype)) +
                                " (legal: f16, bf16, f32)");
  MatmulPlan p;
  p.M = M, p.N = N, p.K = K;
  p.kernel_N = N, p.kernel_K = K;
  const long long e = dtype_bytes(dtype), align = 16 / e;
  const bool k_odd = K % align != 0, n_odd = N % align != 0;
  if (!k_odd && !n_odd) {
    p.why = "rows 16-byte aligned: nothing staged";
    return p;
  }
  const long long Kp = k_odd ? staged_extent(K, e) : K, Np = n_odd ? staged_extent(N, e) : N;
  const bool a = k_odd, b = true, c = n_odd;  // B has K rows and N columns: staged either way
  const double flops = 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  const double bytes =
      2.0 * static_cast<double>(e) * ((a ? M * K : 0) + K * N + (c ? M * N : 0));  // read and written
  const int copies = (a ? 1 : 0) + 1 + (c ? 1 : 0);
  // The GEMM's own stream: A, B and C once.
  const double stream = static_cast<double>(e) * (static_cast<double>(M) * static_cast<double>(K) +
                                                  static_cast<double>(K) * static_cast<double>(N) +
                                                  static_cast<double>(M) * static_cast<double>(N));
  // The direct kernel: default_matmul_config's tiles for the exact shape, on the realigned rings'
  // model where they keep the generic schedule, else at the element-wise rates.
  const MatmulConfig direct = default_matmul_config(M, N, K, dtype, arch, sm_count);
  p.direct_rings = keeps_generic_schedule(direct);
  p.estimate_direct_us =
      p.direct_rings ? realigned_ring_us(M, N, K, dtype, direct, 1, sm_count)
                     : std::max(flops / (kDirectTflops * 1e6), stream / kDirectBytesPerUs) + kLaunchUs;
  p.estimate_staged_us = std::max(flops / (kAlignedTflops * 1e6), stream / kCopyBytesPerUs) +
                         bytes / kCopyBytesPerUs + copies * kCopyUs + kLaunchUs;
  std::ostringstream why;
  const std::string rows = std::string(k_odd ? "K = " + std::to_string(K) : "") +
                           (k_odd && n_odd ? " and " : "") + (n_odd ? "N = " + std::to_string(N) : "") +
                           " not a multiple of " + std::to_string(align) + " " +
                           std::string(dtype_name(dtype)) + " elements";
  if (staging == MatmulStaging::never) {
    p.why = rows + "; staging off (MatmulStaging::never): the element-wise kernel for the exact shape";
    return p;
  }
  if (staging == MatmulStaging::automatic && !(p.estimate_staged_us < p.estimate_direct_us)) {
    why.precision(3);
    why << rows << "; not staged: the model expects " << p.estimate_direct_us << " us direct"
        << (p.direct_rings ? " (realigned rings)" : "") << " against " << p.estimate_staged_us
        << " us staged";
    p.why = why.str();
    return p;
  }
  if (Np > std::numeric_limits<int>::max() || Kp > std::numeric_limits<int>::max()) {
    // The padded kernel's dimensions would not fit the int a kernel's shape is.
    const std::string past = rows + "; padding to " + std::to_string(Np) +
                             " columns and K = " + std::to_string(Kp) +
                             " passes 2^31 - 1, the largest dimension a kernel takes";
    if (staging == MatmulStaging::always) throw std::invalid_argument("plan_matmul: " + past);
    p.why = past + ": not staged";
    return p;
  }
  p.stage_a = a, p.stage_b = b, p.stage_c = c;
  p.kernel_N = Np, p.kernel_K = Kp;
  why << rows << " (" << arch << "); staged: ";
  why << (a ? "A [M, K] -> [M, " + std::to_string(Kp) + "], " : "") << "B [K, N] -> [" << Kp << ", " << Np
      << "]" << (c ? ", C through [M, " + std::to_string(Np) + "]" : "");
  if (staging == MatmulStaging::automatic) {
    why.precision(3);
    why << " (model: " << p.estimate_staged_us << " us staged against " << p.estimate_direct_us
        << " us direct)";
  }
  p.why = why.str();
  return p;
}

}  // namespace

MatmulPlan plan_matmul(long long M, long long N, long long K, DType dtype, const std::string& arch,
                       MatmulStaging staging, int split_k, int sm_count) {
  MatmulPlan p = plan_staging(M, N, K, dtype, arch, staging, sm_count);
  // Split-K runs on the kernel's shape, so after staging has decided it.
  plan_split_k(p, dtype, arch, split_k, sm_count);
  return p;
}

MatmulPlan plan_matmul_for_current_device(long long M, long long N, long long K, DType dtype,
                                          MatmulStaging staging, int split_k, const std::string& arch) {
  const bool gpu = gpu_available();
  const std::string device_arch = gpu ? current_device().arch() : "sm_90a";
  const std::string target = arch.empty() ? device_arch : arch;
  const int sm_count = gpu ? current_device().sm_count : 132;
  MatmulPlan p = plan_staging(M, N, K, dtype, target, staging, sm_count);
  // A stored tune of the kernel's shape timed the split candidates on this GPU, where the model
  // only estimates; it holds for the arch it was measured on, and only a tune whose space held
  // split candidates compared a split with one kernel at all.
  if (split_k == 0 && gpu && target == device_arch &&
      !split_k_candidates(M, p.kernel_N, p.kernel_K, dtype, target).empty()) {
    const auto tuned = autotune::tuned_matmul_config(M, p.kernel_N, p.kernel_K, dtype);
    if (tuned && tuned->split_searched) {
      split_k = tuned->split_k;
      p.split_tuned = true;
    }
  }
  plan_split_k(p, dtype, target, split_k, sm_count);
  return p;
}

struct Matmul::Impl {
  int M = 0, N = 0, K = 0;
  DType dtype = DType::f16;
  MatmulPlan plan;
  MatmulChoice choice;
  JitKernel kernel, reduce;  // split: the partial GEMM and the reduction
  // The staging copies (matmul_staging_copy_program): A in, B in, C out (empty when not staged).
  JitKernel copy_a, copy_b, copy_c;
  // Zero-padded staging buffers, made on the first call: the copies write only the real rows and
  // columns, so the padding stays zero. w: split-K's f32 workspace [split_k, M, kernel_N].
  mutable Tensor a, b, c, w;
  mutable bool allocated = false;
};

Matmul::Matmul(int M, int N, int K, DType dtype, MatmulStaging staging, const JitOptions& options,
               int split_k)
    : impl_(std::make_shared<Impl>()) {
  if (dtype != DType::f16 && dtype != DType::bf16)
    throw std::invalid_argument("Matmul: dtype " + std::string(dtype_name(dtype)) + " (legal: f16, bf16)");
  Impl& m = *impl_;
  m.M = M, m.N = N, m.K = K, m.dtype = dtype;
  m.plan = plan_matmul_for_current_device(M, N, K, dtype, staging, split_k, options.arch);
  if (staging == MatmulStaging::automatic && !m.plan.staged() && m.plan.direct_rings &&
      !jit_switches(options).allow_realigned_rings) {
    // The model ran the exact shape on realigned rings, which these options turn off: its kernel
    // would load the unaligned rows in synchronous chunks (2-9x slower on an H100, session 34),
    // so the shape is staged.
    // (Unless padding would carry a dimension past what a kernel takes: then the chunks it is.)
    const std::string off =
        "realigned rings off (JitOptions::disable_realigned_rings or TESSEL_DISABLE=realigned_rings)";
    try {
      const std::string why = m.plan.why;
      m.plan = plan_matmul_for_current_device(M, N, K, dtype, MatmulStaging::always, split_k, options.arch);
      m.plan.why = off + ", where the model would run the exact shape (" + why + "): staged: " + m.plan.why;
    } catch (const std::invalid_argument&) {
      m.plan.why = off + "; not staged either (the padded shape is too large): " + m.plan.why;
    }
  }
  const int kn = static_cast<int>(m.plan.kernel_N), kk = static_cast<int>(m.plan.kernel_K);
  {
    JitOptions o = options;
    o.out_idx.clear();
    auto copy = [&](int rows, int from, int to) {
      return jit(
          matmul_staging_copy_program(rows, from, to, dtype, default_staging_copy(std::max(from, to), dtype)),
          o);
    };
    if (m.plan.stage_a) m.copy_a = copy(M, K, kk);
    if (m.plan.stage_b) m.copy_b = copy(K, N, kn);  // B's first K rows; rows K..kk stay zero
    if (m.plan.stage_c) m.copy_c = copy(M, kn, N);
  }
  if (m.plan.split()) {
    m.choice = {m.plan.split_config, m.plan.split_tuned};
    JitOptions o = options;
    o.out_idx.clear();
    // The reduction's CTAs wait, resident, while the partial GEMM drains (programmatic dependent
    // launch, sm_90+): 1.1-1.3 us off each ~45 us pair on an H100 (docs/perf-notes.md, session
    // 24). JitOptions::disable_programmatic_launch keeps plain stream order.
    o.programmatic_launch = true;
    m.kernel = jit(matmul_split_k_program(M, kn, kk, m.plan.split_k, m.plan.split_config), o);
    m.reduce = jit(matmul_split_k_reduce_program(M, kn, m.plan.split_k, dtype, m.plan.split_reduce), o);
    return;
  }
  m.choice = choose_matmul_config(M, kn, kk, dtype);
  m.kernel = make_matmul(M, kn, kk, m.choice.config, options);
}

namespace {

// Where each scratch buffer sits in a workspace: byte offsets, each 256-byte aligned (-1: none).
struct WorkspaceLayout {
  long long a = -1, b = -1, c = -1, w = -1, total = 0;
};

WorkspaceLayout workspace_layout(const MatmulPlan& p, long long M, DType dtype) {
  WorkspaceLayout l;
  const long long e = dtype_bytes(dtype);
  auto take = [&](long long bytes) {
    const long long at = l.total;
    l.total += (bytes + 255) / 256 * 256;
    return at;
  };
  if (p.stage_a) l.a = take(M * p.kernel_K * e);
  if (p.stage_b) l.b = take(p.kernel_K * p.kernel_N * e);
  if (p.stage_c) l.c = take(M * p.kernel_N * e);
  if (p.split()) l.w = take(static_cast<long long>(p.split_k) * M * p.kernel_N * 4);
  return l;
}

}  // namespace

std::size_t Matmul::workspace_bytes() const {
  return static_cast<std::size_t>(workspace_layout(impl_->plan, impl_->M, impl_->dtype).total);
}

void Matmul::operator()(const Tensor& A, const Tensor& B, const Tensor& C, CUstream stream,
                        CUdeviceptr workspace, std::size_t workspace_size) const {
  const Impl& m = *impl_;
  const MatmulPlan& p = m.plan;
  const WorkspaceLayout l = workspace_layout(p, m.M, m.dtype);
  if (l.total == 0) return (*this)(A, B, C, stream);
  if (workspace_size < static_cast<std::size_t>(l.total) || workspace % 256 != 0) {
    std::ostringstream why;
    why << "Matmul: the workspace is " << workspace_size << " bytes at 0x" << std::hex
        << static_cast<unsigned long long>(workspace) << std::dec << "; " << describe() << " needs "
        << l.total << " bytes or more, 256-byte aligned (workspace_bytes())";
    throw std::invalid_argument(why.str());
  }
  check_operand("A", A, {m.M, m.K}, m.dtype);
  check_operand("B", B, {m.K, m.N}, m.dtype);
  check_operand("C", C, {m.M, m.N}, m.dtype);
  auto view = [&](long long at, std::vector<std::int64_t> shape, DType t) {
    return at < 0 ? Tensor() : Tensor::view_of(workspace + static_cast<CUdeviceptr>(at), std::move(shape), t);
  };
  Buffers s{view(l.a, {m.M, p.kernel_K}, m.dtype), view(l.b, {p.kernel_K, p.kernel_N}, m.dtype),
            view(l.c, {m.M, p.kernel_N}, m.dtype), view(l.w, {p.split_k, m.M, p.kernel_N}, DType::f32)};
  // The padding must read as zeros: the copies write A's columns K..Kp and B's columns N..Np of
  // its first K rows; B's rows K..Kp are zeroed here.
  ensure_context();
  const long long e = dtype_bytes(m.dtype);
  if (p.stage_b && p.kernel_K > m.K)
    check_cu(driver().cuMemsetD8Async(s.b.device_ptr() + m.K * p.kernel_N * e, 0,
                                      static_cast<std::size_t>((p.kernel_K - m.K) * p.kernel_N * e), stream),
             "cuMemsetD8Async (Matmul's staging padding)");
  run(A, B, C, stream, s);
}

void Matmul::operator()(const Tensor& A, const Tensor& B, const Tensor& C, CUstream stream) const {
  const Impl& m = *impl_;
  check_operand("A", A, {m.M, m.K}, m.dtype);
  check_operand("B", B, {m.K, m.N}, m.dtype);
  check_operand("C", C, {m.M, m.N}, m.dtype);
  const MatmulPlan& p = m.plan;
  if (!p.staged() && !p.split()) {
    run(A, B, C, stream, Buffers{});
    return;
  }
  if (!m.allocated) {
    if (p.stage_a) m.a = Tensor::zeros({m.M, p.kernel_K}, m.dtype);
    if (p.stage_b) m.b = Tensor::zeros({p.kernel_K, p.kernel_N}, m.dtype);
    // C zeroed too, though the kernel writes all of it: compute-sanitizer's initcheck does not see
    // TMA-store writes and reported every read of a never-initialized C as uninitialized (H200,
    // 2026-12-04, 648 reports = every sector of the staged C in two tests); a one-time memset.
    if (p.stage_c) m.c = Tensor::zeros({m.M, p.kernel_N}, m.dtype);
    // The partial GEMM writes every element of W that the reduction reads; no zeros needed.
    if (p.split()) m.w = Tensor::empty({p.split_k, m.M, p.kernel_N}, DType::f32);
    // The zeros must be in place before copies on any stream (a non-blocking one does not wait
    // for the legacy stream's memset).
    ensure_context();
    check_cu(driver().cuCtxSynchronize(), "cuCtxSynchronize (Matmul's staging buffers)");
    m.allocated = true;
  }
  run(A, B, C, stream, Buffers{m.a, m.b, m.c, m.w});
}

void Matmul::run(const Tensor& A, const Tensor& B, const Tensor& C, CUstream stream, const Buffers& s) const {
  const Impl& m = *impl_;
  const MatmulPlan& p = m.plan;
  // The GEMM on the kernel's operands: one kernel, or the partial GEMM into the workspace and
  // its reduction.
  auto gemm = [&](const Tensor& a, const Tensor& b, const Tensor& c) {
    if (!p.split()) {
      m.kernel.launch({a, b, c}, stream);
      return;
    }
    m.kernel.launch({a, b, s.w}, stream);
    m.reduce.launch({s.w, c}, stream);
  };
  if (!p.staged()) {
    gemm(A, B, C);
    return;
  }
  if (p.stage_a) m.copy_a.launch({A, s.a}, stream);
  // B's first K rows (rows K..kernel_K of the staged B are zeros, never written).
  if (p.stage_b) m.copy_b.launch({B, Tensor::view_of(s.b.device_ptr(), {m.K, p.kernel_N}, m.dtype)}, stream);
  gemm(p.stage_a ? s.a : A, p.stage_b ? s.b : B, p.stage_c ? s.c : C);
  if (p.stage_c) m.copy_c.launch({s.c, C}, stream);
}

const MatmulPlan& Matmul::plan() const {
  return impl_->plan;
}
const MatmulConfig& Matmul::config() const {
  return impl_->choice.config;
}
bool Matmul::tuned() const {
  return impl_->choice.tuned;
}
const JitKernel& Matmul::kernel() const {
  return impl_->kernel;
}
const JitKernel& Matmul::reduce_kernel() const {
  return impl_->reduce;
}

std::string Matmul::describe() const {
  const Impl& m = *impl_;
  std::string s = m.choice.config.describe() + " on " + std::to_string(m.M) + "x" +
                  std::to_string(m.plan.kernel_N) + "x" + std::to_string(m.plan.kernel_K);
  if (m.plan.staged()) {
    s += std::string("; ") + (m.plan.stage_a ? "A, " : "") + "B" + (m.plan.stage_c ? ", C" : "") + " staged";
    if (m.plan.kernel_K != m.K)
      s += " (K " + std::to_string(m.K) + " -> " + std::to_string(m.plan.kernel_K) + ")";
    if (m.plan.kernel_N != m.N)
      s += " (N " + std::to_string(m.N) + " -> " + std::to_string(m.plan.kernel_N) + ")";
  }
  if (m.plan.split()) s += "; split-K " + std::to_string(m.plan.split_k);
  return s;
}

}  // namespace tessel::kernels
