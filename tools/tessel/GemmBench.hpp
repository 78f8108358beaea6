// Measuring a Tessel GEMM against cuBLAS on the GPU, the way GPU.md asks: the same inputs in one
// process, cuBLAS called as cublasGemmEx (f32 compute) on row-major data by swapping operands,
// outputs poisoned with NaN before every checked run, CUDA events, warm-up, L2 flushed before
// every timed launch (see L2Flush), medians of interleaved repeats.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "tessel/Jit.hpp"
#include "tessel/runtime/Tensor.hpp"
#include "tools/tessel/GemmConfigs.hpp"

namespace tessel::cli {

// A relative Frobenius error at or below this counts as correct (the tutorial's bar).
inline constexpr double kGemmTolerance = 2e-2;

// What is applied to A * B before the store. None: the plain GEMM against cublasGemmEx; the
// others: Tessel's fused linear layer (kernels::make_matmul_bias_act) against cuBLASLt's fused
// epilogue (CUBLASLT_EPILOGUE_BIAS / RELU_BIAS), C = [relu](A * B + bias).
enum class GemmEpilogue { none, bias, bias_relu };
const char* gemm_epilogue_name(GemmEpilogue e);  // "none", "bias", "bias_relu"

struct GemmInputs {
  GemmShape shape;
  DType dtype = DType::f16;
  GemmEpilogue epilogue = GemmEpilogue::none;
  Tensor A, B;      // random in [-1, 1)
  Tensor bias;      // length N, random in [-1, 1); defined when there is an epilogue
  Tensor C, C_ref;  // Tessel's output, cuBLAS's output
};

// Fresh random inputs (seeded) and allocated outputs. Needs a GPU.
GemmInputs make_gemm_inputs(const GemmShape& shape, DType dtype, std::uint64_t seed,
                            GemmEpilogue epilogue = GemmEpilogue::none);

struct Timing {
  std::vector<double> ms;  // one per repeat, in order
  double median_ms = 0;
};

// How the L2 is emptied of the last run's data before a timed run. `write`: a 256 MiB scratch
// write -- it leaves the L2 full of dirty lines, written back to DRAM while the next run reads,
// which costs a short memory-bound kernel (a decode GEMM streaming 32 MB) up to half its time,
// for cuBLAS and Tessel alike. `clean` (the default): the same write, then a read of the whole
// scratch (cublasSasum, result left on the device), so the L2 holds clean lines of data no run
// uses and the write-back is over before the timed run starts.
enum class L2Flush { clean, write };
const char* l2_flush_name(L2Flush f);  // "clean", "write"

class GemmBench {
 public:
  // cuBLAS handle and the L2 scratch buffer; throws RuntimeError without a GPU.
  explicit GemmBench(L2Flush flush = L2Flush::clean);
  ~GemmBench();
  GemmBench(const GemmBench&) = delete;
  GemmBench& operator=(const GemmBench&) = delete;

  // C_out = A * B with cuBLAS (row-major); with in.epilogue, [relu](A * B + bias) with cuBLASLt.
  void cublas_gemm(const GemmInputs& in, const Tensor& C_out);
  // Poisons in.C_ref, runs cuBLAS into it.
  void compute_reference(GemmInputs& in);
  // Poisons in.C, launches `kernel` into it, returns ||C - C_ref||_F / ||C_ref||_F (NaN if any
  // output element is NaN, so an unwritten tile cannot pass). Compared on the host on all cores
  // against the reference kept from the last compute_reference (or read now if there was none).
  double check(const JitKernel& kernel, GemmInputs& in);
  // The same for any run that writes in.C from in.A and in.B (the library's Matmul).
  double check(const std::function<void()>& run, GemmInputs& in);

  // Unchecked launches for timing: Tessel into in.C (A, B[, bias], C), cuBLAS into in.C_ref.
  void launch_tessel(const JitKernel& kernel, const GemmInputs& in);
  void launch_cublas(const GemmInputs& in);

  // Times `run` alone: `warmup` untimed runs, then `repeats` timed ones, L2 flushed before each.
  Timing time(const std::function<void()>& run, int warmup, int repeats);
  // Times `a` and `b` rep by rep, alternating which goes first.
  std::pair<Timing, Timing> time_interleaved(const std::function<void()>& a, const std::function<void()>& b,
                                             int warmup, int repeats);
  // The same for any number of sides: `warmup` rounds of every side in order, then `repeats`
  // rounds of timed runs, L2 flushed before each, round i starting with runs[i % n] and going on
  // in order (with two sides, the alternation above). One Timing per side, in the order of `runs`.
  std::vector<Timing> time_interleaved(const std::vector<std::function<void()>>& runs, int warmup,
                                       int repeats);

  static constexpr std::int64_t kL2FlushBytes = 256LL << 20;

 private:
  void flush_l2();
  L2Flush flush_mode_ = L2Flush::clean;
  Tensor flush_sum_;  // cublasSasum's result (device pointer mode)
  // The reference on the host as floats, read once per compute_reference (a tune checks every
  // candidate against it; reading and converting 235 M elements each time took ~1 s).
  std::vector<float> ref_host_;
  double ref_norm_ = 0;
  unsigned long long ref_ptr_ = 0;  // the C_ref it was read from
  std::vector<unsigned char> out_bytes_;
  void cublaslt_gemm(const GemmInputs& in, const Tensor& C_out);
  cublasHandle_t handle_ = nullptr;
  cublasLtHandle_t lt_handle_ = nullptr;  // made on the first epilogue case
  Tensor lt_workspace_;
  struct LtPlan;
  std::unique_ptr<LtPlan> lt_plan_;
  Tensor scratch_;
  unsigned char flush_value_ = 0;
};

// ||out - ref||_F / ||ref||_F over the host copies; NaN when `out` holds a NaN or ref is zero.
double relative_frobenius_error(const Tensor& out, const Tensor& ref);

// A second opinion that does not trust cuBLAS: `samples` entries of A*B (with the epilogue) (the same ones
// for every call with the same seed) computed in float64 on the host from the device inputs, and the relative
// Frobenius error of `out` over them. Tessel and cuBLAS both accumulate in f32 along K, so they may agree bit
// for bit (error 0 against each other); this shows both are also right.
inline constexpr int kF64Samples = 1024;
double sampled_f64_error(const GemmInputs& in, const Tensor& out, int samples = kF64Samples);

}  // namespace tessel::cli
