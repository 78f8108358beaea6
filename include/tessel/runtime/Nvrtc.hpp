// Generated CUDA C++ -> PTX + cubin with NVRTC, with the device headers (device/tessel/*.cuh)
// handed over from memory. NVRTC needs no GPU, so this works on any machine with libnvrtc.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tessel/Error.hpp"

namespace tessel {

struct CompileOptions {
  std::string arch = "sm_90a";  // NVRTC's --gpu-architecture; DeviceInfo::arch() for the local GPU
  std::vector<std::string> extra_flags{};
  std::string program_name = "tessel_kernel.cu";  // appears in NVRTC's log and the line info
  // Seconds the compile may take; 0: no limit. Not part of the cache key (it does not change
  // the output). NVRTC checks it through nvrtcSetFlowCallback at points between its phases, so
  // a compile stops at the first such point past the limit, not at the limit itself: one long
  // phase (a big ptxas run) still runs to its end.
  double time_limit_s = 0;
};

// What ptxas reported for the kernel (-1 / 0 when the log did not say).
struct Resources {
  int registers = -1;
  int spill_store_bytes = 0, spill_load_bytes = 0, stack_frame_bytes = 0;
  int static_smem_bytes = 0;
  int barriers = 0;
  double compile_ms = 0;  // time spent getting the kernel, cache look-ups included
  bool cache_hit = false;
  std::string arch{};
};

struct CompiledKernel {
  std::string source{}, ptx{}, log{};
  std::vector<char> cubin{};
  std::string lowered_name{};  // the symbol to pass to cuModuleGetFunction
  Resources resources{};
};

// The generated code failed to compile. Tessel's callers report it as an internal error; the
// message holds NVRTC's full log.
class NvrtcError : public RuntimeError {
 public:
  NvrtcError(const std::string& program_name, const std::string& stage, const std::string& log);
  const std::string& log() const { return log_; }

 private:
  std::string log_;
};

// A compile stopped by CompileOptions::time_limit_s.
class CompileTimeLimitError : public RuntimeError {
 public:
  using RuntimeError::RuntimeError;
};

// Compiles `source`, whose `kernel_name` is a __global__ function (extern "C" or not: the
// name goes through NVRTC's name expressions). Thread-safe: each call has its own program.
// Flags: -std=c++17 --gpu-architecture=<arch> -default-device --ptxas-options=-v -lineinfo
// -DTESSEL_NVRTC, then extra_flags. No --use_fast_math: exact expf matters.
CompiledKernel nvrtc_compile(const std::string& source, const std::string& kernel_name,
                             const CompileOptions& options);

// The NVRTC flags nvrtc_compile passes (part of the cache key).
std::vector<std::string> nvrtc_flags(const CompileOptions& options);

// NVRTC's version as major*1000 + minor*10 (13.0 -> 13000), like CUDA_VERSION.
int nvrtc_version();

// The targets Tessel compiles for with this NVRTC: every real arch NVRTC supports from sm_80 on
// (the generated code needs Ampere's mma.sync, ldmatrix and cp.async) and the arch-specific
// sm_XXa of 9.0 and later: "sm_80", "sm_86", ..., "sm_90", "sm_90a", "sm_100", "sm_100a", ...
const std::vector<std::string>& tessel_archs();
// nullopt when `arch` is one of tessel_archs(); otherwise why not, with the legal list:
// "'sm_12' is not a target Tessel compiles for with NVRTC 13.0; legal: sm_80, sm_86, ...".
std::optional<std::string> why_not_arch(const std::string& arch);

// Reads ptxas -v output. With `function_name`, only the block for that entry function counts
// (a program may hold several kernels); without it, or when the name is absent, the first.
Resources parse_ptxas_log(const std::string& log, const std::string& function_name = "");

}  // namespace tessel
