#include "tools/tessel/GemmBench.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <utility>

#include "tessel/runtime/Driver.hpp"
#include "tools/tessel/Output.hpp"

namespace tessel::cli {

namespace {

void check_cublas(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw RuntimeError(std::string("cuBLAS call ") + what + " failed: " + cublasGetStatusName(status) + ": " +
                     cublasGetStatusString(status));
}

cudaDataType_t cublas_type(DType t) {
  switch (t) {
    case DType::f16:
      return CUDA_R_16F;
    case DType::bf16:
      return CUDA_R_16BF;
    case DType::f32:
      return CUDA_R_32F;
    default:
      throw RuntimeError("the cuBLAS baseline supports f16, bf16 and f32, not " + std::string(dtype_name(t)));
  }
}

}  // namespace

const char* gemm_epilogue_name(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::none:
      return "none";
    case GemmEpilogue::bias:
      return "bias";
    case GemmEpilogue::bias_relu:
      return "bias_relu";
  }
  return "?";
}

GemmInputs make_gemm_inputs(const GemmShape& shape, DType dtype, std::uint64_t seed, GemmEpilogue epilogue) {
  GemmInputs in;
  in.shape = shape;
  in.dtype = dtype;
  in.epilogue = epilogue;
  if (epilogue != GemmEpilogue::none) {
    in.bias = Tensor::empty({shape.N}, dtype);
    in.bias.fill_random(seed + 2);
  }
  in.A = Tensor::empty({shape.M, shape.K}, dtype);
  in.B = Tensor::empty({shape.K, shape.N}, dtype);
  in.C = Tensor::empty({shape.M, shape.N}, dtype);
  in.C_ref = Tensor::empty({shape.M, shape.N}, dtype);
  in.A.fill_random(seed);
  in.B.fill_random(seed + 1);
  return in;
}

const char* l2_flush_name(L2Flush f) {
  return f == L2Flush::clean ? "clean" : "write";
}

GemmBench::GemmBench(L2Flush flush) : flush_mode_(flush) {
  ensure_context();  // cuBLAS then finds the primary context current and shares it
  check_cublas(cublasCreate(&handle_), "cublasCreate");
  // Tessel launches on the legacy default stream; cuBLAS joins it so the two stay ordered.
  check_cublas(cublasSetStream(handle_, nullptr), "cublasSetStream");
  scratch_ = Tensor::empty({kL2FlushBytes}, DType::u8);
  flush_sum_ = Tensor::empty({1}, DType::f32);
}

GemmBench::~GemmBench() {
  lt_plan_.reset();
  if (lt_handle_) (void)cublasLtDestroy(lt_handle_);
  if (handle_) (void)cublasDestroy(handle_);
}

void GemmBench::flush_l2() {
  // A write of the whole scratch buffer evicts the inputs and outputs of the last run from L2.
  ++flush_value_;
  check_cu(driver().cuMemsetD8Async(scratch_.device_ptr(), flush_value_, static_cast<size_t>(kL2FlushBytes),
                                    nullptr),
           "cuMemsetD8Async (L2 flush)");
  if (flush_mode_ == L2Flush::clean) {
    // Read it all back: the dirty lines are written back now, and the L2 is left holding clean
    // lines of the scratch (GemmBench.hpp). Device pointer mode keeps the call asynchronous.
    check_cublas(cublasSetPointerMode(handle_, CUBLAS_POINTER_MODE_DEVICE), "cublasSetPointerMode");
    const cublasStatus_t st = cublasSasum(handle_, static_cast<int>(kL2FlushBytes / 4),
                                          static_cast<const float*>(scratch_.data_ptr()), 1,
                                          static_cast<float*>(flush_sum_.data_ptr()));
    check_cublas(cublasSetPointerMode(handle_, CUBLAS_POINTER_MODE_HOST), "cublasSetPointerMode");
    check_cublas(st, "cublasSasum (L2 flush read)");
  }
}

void GemmBench::cublas_gemm(const GemmInputs& in, const Tensor& C_out) {
  if (in.epilogue != GemmEpilogue::none) return cublaslt_gemm(in, C_out);
  // Row-major C[M,N] = A[M,K] B[K,N] is column-major C^T[N,M] = B^T[N,K] A^T[K,M]: hand cuBLAS
  // B as its first operand and A as its second, with leading dimensions N, K and N.
  const float alpha = 1.0f, beta = 0.0f;
  const cudaDataType_t t = cublas_type(in.dtype);
  const int M = in.shape.M, N = in.shape.N, K = in.shape.K;
  check_cublas(
      cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha, in.B.data_ptr(), t, N, in.A.data_ptr(),
                   t, K, &beta, C_out.data_ptr(), t, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      "cublasGemmEx");
}

void GemmBench::compute_reference(GemmInputs& in) {
  ref_host_.clear();
  in.C_ref.fill(std::numeric_limits<double>::quiet_NaN());
  cublas_gemm(in, in.C_ref);
  check_cu(driver().cuCtxSynchronize(), "cuCtxSynchronize (after cuBLAS)");
}

void GemmBench::launch_tessel(const JitKernel& kernel, const GemmInputs& in) {
  if (in.epilogue != GemmEpilogue::none) {
    kernel.launch({in.A, in.B, in.bias, in.C}, nullptr);
  } else {
    kernel.launch({in.A, in.B, in.C}, nullptr);
  }
}

// Row-major C = A * B + bias is column-major C^T = B^T A^T + bias, the bias (length N) added to
// every column of C^T: cuBLASLt's bias epilogue, which adds a length-rows vector to each column.
// The descriptors and the heuristic's algorithm are made once per shape, dtype, epilogue and bias
// (host work between the timing events would count as GPU time).
struct GemmBench::LtPlan {
  std::string key;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~LtPlan() {
    if (c) (void)cublasLtMatrixLayoutDestroy(c);
    if (b) (void)cublasLtMatrixLayoutDestroy(b);
    if (a) (void)cublasLtMatrixLayoutDestroy(a);
    if (op) (void)cublasLtMatmulDescDestroy(op);
  }
};

void GemmBench::cublaslt_gemm(const GemmInputs& in, const Tensor& C_out) {
  constexpr std::size_t kWorkspace = 32u << 20;
  if (!lt_handle_) {
    check_cublas(cublasLtCreate(&lt_handle_), "cublasLtCreate");
    lt_workspace_ = Tensor::empty({static_cast<std::int64_t>(kWorkspace)}, DType::u8);
  }
  const std::uint64_t M = in.shape.M, N = in.shape.N, K = in.shape.K;
  const std::string key = in.shape.describe() + std::string(dtype_name(in.dtype)) +
                          gemm_epilogue_name(in.epilogue) + std::to_string(in.bias.device_ptr());
  if (!lt_plan_ || lt_plan_->key != key) {
    auto plan = std::make_unique<LtPlan>();
    plan->key = key;
    const cudaDataType_t t = cublas_type(in.dtype);
    check_cublas(cublasLtMatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                 "cublasLtMatmulDescCreate");
    const cublasLtEpilogue_t epi =
        in.epilogue == GemmEpilogue::bias_relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
    check_cublas(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)),
                 "cublasLtMatmulDescSetAttribute(EPILOGUE)");
    const void* bias = in.bias.data_ptr();
    check_cublas(
        cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
        "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
    check_cublas(cublasLtMatrixLayoutCreate(&plan->a, t, N, K, N), "cublasLtMatrixLayoutCreate(B^T)");
    check_cublas(cublasLtMatrixLayoutCreate(&plan->b, t, K, M, K), "cublasLtMatrixLayoutCreate(A^T)");
    check_cublas(cublasLtMatrixLayoutCreate(&plan->c, t, N, M, N), "cublasLtMatrixLayoutCreate(C^T)");
    cublasLtMatmulPreference_t pref = nullptr;
    check_cublas(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    cublasLtMatmulHeuristicResult_t best{};
    int found = 0;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                             &kWorkspace, sizeof(kWorkspace));
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulAlgoGetHeuristic(lt_handle_, plan->op, plan->a, plan->b, plan->c, plan->c, pref, 1,
                                          &best, &found);
    (void)cublasLtMatmulPreferenceDestroy(pref);
    check_cublas(st, "cublasLtMatmulAlgoGetHeuristic");
    if (found == 0) throw RuntimeError("cuBLASLt has no algorithm for this GEMM with a bias epilogue");
    plan->algo = best.algo;
    lt_plan_ = std::move(plan);
  }
  const float alpha = 1, beta = 0;
  check_cublas(cublasLtMatmul(lt_handle_, lt_plan_->op, &alpha, in.B.data_ptr(), lt_plan_->a, in.A.data_ptr(),
                              lt_plan_->b, &beta, C_out.data_ptr(), lt_plan_->c, C_out.data_ptr(),
                              lt_plan_->c, &lt_plan_->algo, lt_workspace_.data_ptr(), kWorkspace, nullptr),
               "cublasLtMatmul");
}

void GemmBench::launch_cublas(const GemmInputs& in) {
  cublas_gemm(in, in.C_ref);
}

double GemmBench::check(const JitKernel& kernel, GemmInputs& in) {
  return check([&] { launch_tessel(kernel, in); }, in);
}

double GemmBench::check(const std::function<void()>& run, GemmInputs& in) {
  in.C.fill(std::numeric_limits<double>::quiet_NaN());
  run();
  check_cu(driver().cuCtxSynchronize(), "cuCtxSynchronize (after the Tessel kernel)");
  const std::size_t n = static_cast<std::size_t>(in.C_ref.numel());
  if (in.C.numel() != in.C_ref.numel() || in.C.dtype() != in.C_ref.dtype())
    throw RuntimeError("GemmBench::check: C and C_ref differ in size or type");
  const int eb = dtype_bytes(in.C.dtype());
  const unsigned threads = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  // Runs f(begin, end, slot) over [0, n) in one chunk per thread.
  auto parallel = [&](const std::function<void(std::size_t, std::size_t, unsigned)>& f) {
    std::vector<std::thread> pool;
    const std::size_t chunk = (n + threads - 1) / threads;
    for (unsigned t = 0; t < threads; ++t) {
      const std::size_t b = std::min(n, t * chunk), e = std::min(n, b + chunk);
      pool.emplace_back(f, b, e, t);
    }
    for (auto& th : pool) th.join();
  };
  if (ref_host_.size() != n || ref_ptr_ != static_cast<unsigned long long>(in.C_ref.device_ptr())) {
    ref_ptr_ = static_cast<unsigned long long>(in.C_ref.device_ptr());
    std::vector<unsigned char> bytes(n * static_cast<std::size_t>(eb));
    in.C_ref.copy_to_host(bytes.data());
    ref_host_.resize(n);
    std::vector<double> norms(threads, 0.0);
    parallel([&](std::size_t b, std::size_t e, unsigned slot) {
      double s = 0;
      for (std::size_t i = b; i < e; ++i) {
        ref_host_[i] = static_cast<float>(load_host_element(bytes.data() + i * eb, in.C_ref.dtype()));
        s += static_cast<double>(ref_host_[i]) * ref_host_[i];
      }
      norms[slot] = s;
    });
    ref_norm_ = 0;
    for (double s : norms) ref_norm_ += s;
  }
  out_bytes_.resize(n * static_cast<std::size_t>(eb));
  in.C.copy_to_host(out_bytes_.data());
  std::vector<double> diffs(threads, 0.0);
  std::vector<char> nan(threads, 0);
  parallel([&](std::size_t b, std::size_t e, unsigned slot) {
    double s = 0;
    for (std::size_t i = b; i < e; ++i) {
      const double o = load_host_element(out_bytes_.data() + i * eb, in.C.dtype());
      if (std::isnan(o) || std::isnan(ref_host_[i])) {
        nan[slot] = 1;
        return;
      }
      const double d = o - ref_host_[i];
      s += d * d;
    }
    diffs[slot] = s;
  });
  double diff = 0;
  for (unsigned t = 0; t < threads; ++t) {
    if (nan[t]) return std::numeric_limits<double>::quiet_NaN();
    diff += diffs[t];
  }
  if (ref_norm_ == 0) return std::numeric_limits<double>::quiet_NaN();
  return std::sqrt(diff) / std::sqrt(ref_norm_);
}

Timing GemmBench::time(const std::function<void()>& run, int warmup, int repeats) {
  for (int i = 0; i < warmup; ++i) run();
  check_cu(driver().cuCtxSynchronize(), "cuCtxSynchronize (after warm-up)");
  Timing t;
  EventTimer timer;
  for (int i = 0; i < repeats; ++i) {
    flush_l2();
    timer.start(nullptr);
    run();
    timer.stop(nullptr);
    t.ms.push_back(timer.elapsed_ms());
  }
  t.median_ms = median(t.ms);
  return t;
}

std::pair<Timing, Timing> GemmBench::time_interleaved(const std::function<void()>& a,
                                                      const std::function<void()>& b, int warmup,
                                                      int repeats) {
  std::vector<Timing> t = time_interleaved(std::vector<std::function<void()>>{a, b}, warmup, repeats);
  return {std::move(t[0]), std::move(t[1])};
}

std::vector<Timing> GemmBench::time_interleaved(const std::vector<std::function<void()>>& runs, int warmup,
                                                int repeats) {
  const std::size_t n = runs.size();
  for (int i = 0; i < warmup; ++i)
    for (const auto& run : runs) run();
  check_cu(driver().cuCtxSynchronize(), "cuCtxSynchronize (after warm-up)");
  std::vector<Timing> t(n);
  std::vector<EventTimer> timers(n);
  for (int i = 0; i < repeats; ++i) {
    // Rotate the order so that no side always goes first (two sides: they alternate).
    for (std::size_t j = 0; j < n; ++j) {
      const std::size_t which = (static_cast<std::size_t>(i) + j) % n;
      flush_l2();
      timers[which].start(nullptr);
      runs[which]();
      timers[which].stop(nullptr);
    }
    for (std::size_t s = 0; s < n; ++s) t[s].ms.push_back(timers[s].elapsed_ms());
  }
  for (Timing& side : t) side.median_ms = median(side.ms);
  return t;
}

double relative_frobenius_error(const Tensor& out, const Tensor& ref) {
  const std::vector<double> o = out.to_host_f64();
  const std::vector<double> r = ref.to_host_f64();
  if (o.size() != r.size()) throw RuntimeError("relative_frobenius_error: tensors of different sizes");
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < o.size(); ++i) {
    if (std::isnan(o[i]) || std::isnan(r[i])) return std::numeric_limits<double>::quiet_NaN();
    const double d = o[i] - r[i];
    diff += d * d;
    norm += r[i] * r[i];
  }
  if (norm == 0) return std::numeric_limits<double>::quiet_NaN();
  return std::sqrt(diff) / std::sqrt(norm);
}

double sampled_f64_error(const GemmInputs& in, const Tensor& out, int samples) {
  const std::vector<double> a = in.A.to_host_f64(), b = in.B.to_host_f64(), c = out.to_host_f64();
  const std::vector<double> bias = in.bias.defined() ? in.bias.to_host_f64() : std::vector<double>{};
  const std::int64_t M = in.shape.M, N = in.shape.N, K = in.shape.K;
  std::uint64_t state = 0x2545f4914f6cdd1dull;  // xorshift64: fixed entries, every machine alike
  auto next = [&state] {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return state;
  };
  double diff = 0, norm = 0;
  for (int s = 0; s < samples; ++s) {
    const std::int64_t m = static_cast<std::int64_t>(next() % static_cast<std::uint64_t>(M));
    const std::int64_t n = static_cast<std::int64_t>(next() % static_cast<std::uint64_t>(N));
    double want = 0;
    for (std::int64_t k = 0; k < K; ++k) want += a[m * K + k] * b[k * N + n];
    if (in.epilogue != GemmEpilogue::none) want += bias[n];
    if (in.epilogue == GemmEpilogue::bias_relu) want = std::max(want, 0.0);
    const double got = c[m * N + n];
    if (!std::isfinite(got)) return std::numeric_limits<double>::quiet_NaN();
    diff += (got - want) * (got - want);
    norm += want * want;
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace tessel::cli
