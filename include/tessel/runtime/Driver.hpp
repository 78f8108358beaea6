// The CUDA driver API, loaded at run time. Tessel never links libcuda: the library, the CLI and
// the cpu/nvrtc test tiers must start (and compile kernels) on a machine without a GPU or
// driver. <cuda.h> is included for its types and declarations only; every call goes through
// the function pointers in `Driver`, looked up by their real exported (versioned) names.
//
// Contexts: Tessel uses the device's primary context, the one cudart, cuBLAS and PyTorch use,
// so pointers and streams pass freely between them in one process.
#pragma once

#include <cuda.h>

#include <memory>
#include <string>

#if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
// cuda.h would rename the members below to their _ptsz/_ptds spellings in this translation
// unit only; the Driver table is filled with the legacy-stream entry points.
#error \
    "Tessel's Driver table assumes the legacy default stream; do not define CUDA_API_PER_THREAD_DEFAULT_STREAM"
#endif

namespace tessel {

// X(member, exported symbol). The member is spelled as the CUDA API spells the call, so
// `driver().cuMemAlloc(...)` reads like driver code; cuda.h's macros rename the member and its
// declared type consistently (cuMemAlloc -> cuMemAlloc_v2), and the string is what libcuda
// exports for that version of the call.
#define TESSEL_DRIVER_FUNCTIONS(X)                        \
  X(cuInit, "cuInit")                                     \
  X(cuDriverGetVersion, "cuDriverGetVersion")             \
  X(cuGetErrorName, "cuGetErrorName")                     \
  X(cuGetErrorString, "cuGetErrorString")                 \
  X(cuDeviceGet, "cuDeviceGet")                           \
  X(cuDeviceGetCount, "cuDeviceGetCount")                 \
  X(cuDeviceGetAttribute, "cuDeviceGetAttribute")         \
  X(cuDeviceGetName, "cuDeviceGetName")                   \
  X(cuDeviceTotalMem, "cuDeviceTotalMem_v2")              \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain") \
  X(cuCtxSetCurrent, "cuCtxSetCurrent")                   \
  X(cuCtxGetCurrent, "cuCtxGetCurrent")                   \
  X(cuCtxSynchronize, "cuCtxSynchronize")                 \
  X(cuModuleLoadData, "cuModuleLoadData")                 \
  X(cuModuleGetFunction, "cuModuleGetFunction")           \
  X(cuModuleUnload, "cuModuleUnload")                     \
  X(cuFuncSetAttribute, "cuFuncSetAttribute")             \
  X(cuFuncGetAttribute, "cuFuncGetAttribute")             \
  X(cuLaunchKernel, "cuLaunchKernel")                     \
  X(cuMemAlloc, "cuMemAlloc_v2")                          \
  X(cuMemFree, "cuMemFree_v2")                            \
  X(cuMemGetInfo, "cuMemGetInfo_v2")                      \
  X(cuMemcpyHtoD, "cuMemcpyHtoD_v2")                      \
  X(cuMemcpyDtoH, "cuMemcpyDtoH_v2")                      \
  X(cuMemcpyDtoD, "cuMemcpyDtoD_v2")                      \
  X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2")            \
  X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2")            \
  X(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2")            \
  X(cuMemcpy2DAsync, "cuMemcpy2DAsync_v2")                \
  X(cuMemsetD8, "cuMemsetD8_v2")                          \
  X(cuMemsetD16, "cuMemsetD16_v2")                        \
  X(cuMemsetD32, "cuMemsetD32_v2")                        \
  X(cuMemsetD8Async, "cuMemsetD8Async")                   \
  X(cuMemsetD2D8Async, "cuMemsetD2D8Async")               \
  X(cuPointerGetAttribute, "cuPointerGetAttribute")       \
  X(cuStreamCreate, "cuStreamCreate")                     \
  X(cuStreamDestroy, "cuStreamDestroy_v2")                \
  X(cuStreamSynchronize, "cuStreamSynchronize")           \
  X(cuEventCreate, "cuEventCreate")                       \
  X(cuEventRecord, "cuEventRecord")                       \
  X(cuEventSynchronize, "cuEventSynchronize")             \
  X(cuEventElapsedTime, "cuEventElapsedTime_v2")          \
  X(cuEventDestroy, "cuEventDestroy_v2")                  \
  X(cuTensorMapEncodeTiled, "cuTensorMapEncodeTiled")

struct Driver {
#define TESSEL_DRIVER_MEMBER(name, symbol) decltype(&::name) name = nullptr;
  TESSEL_DRIVER_FUNCTIONS(TESSEL_DRIVER_MEMBER)
#undef TESSEL_DRIVER_MEMBER
  // Optional (nullptr when the driver lacks them): stream-ordered allocation.
  decltype(&::cuMemAllocAsync) cuMemAllocAsync = nullptr;
  decltype(&::cuMemFreeAsync) cuMemFreeAsync = nullptr;
  // Optional: launches with attributes (programmatic dependent launch, LoadedKernel::launch).
  decltype(&::cuLaunchKernelEx) cuLaunchKernelEx = nullptr;
};

// True when libcuda loaded, cuInit succeeded and the selected device exists. Never throws.
bool gpu_available();
// Why gpu_available() is false ("libcuda.so.1 not found: ...", "cuInit failed:
// CUDA_ERROR_NO_DEVICE (...)"); empty when a GPU is available.
std::string gpu_unavailable_reason();
// The loaded driver; throws RuntimeError carrying gpu_unavailable_reason() when there is none.
Driver& driver();
// Makes the selected device's primary context current on the calling thread (cheap when it
// already is). Every runtime entry point that touches the device calls it.
void ensure_context();
// The primary context of the selected device (retained once for the life of the process).
CUcontext primary_context();

// Throws RuntimeError "CUDA driver call <what> failed: <name>: <string>" unless ok.
void check_cu(CUresult result, const char* what);
void check_cu(CUresult result, const std::string& what);
// "CUDA_ERROR_OUT_OF_MEMORY: out of memory" (works without a driver: then "CUresult <n>").
std::string cu_error_text(CUresult result);

struct DeviceInfo {
  int ordinal = 0;
  std::string name{};
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int smem_optin_per_block = 0;  // the most one block may have, after cuFuncSetAttribute
  int smem_per_block = 0;        // without opting in (48 KB)
  int max_threads_per_block = 0;
  int regs_per_block = 0;
  long long l2_bytes = 0;
  long long global_mem_bytes = 0;
  int driver_version = 0;  // e.g. 13000
  // The NVRTC target for this device: "sm_90a" on Hopper (wgmma and setmaxnreg need the
  // arch-specific target), "sm_80", "sm_89", "sm_100a", "sm_120", ...
  std::string arch() const;
};

// The arch() rule above, as a function of the compute capability (testable without a GPU).
std::string arch_for_compute_capability(int major, int minor);

// Device 0, or $TESSEL_DEVICE. Queried once; throws like driver() when there is no GPU.
const DeviceInfo& current_device();

// A CUstream. Default-constructed: the legacy default stream (nullptr), which is what
// synchronous Tessel calls use. Stream::create() owns a new stream and destroys it with the
// last copy; Stream::wrap() borrows one owned elsewhere (PyTorch's, cuBLAS's).
class Stream {
 public:
  Stream() = default;
  static Stream create(bool non_blocking = true);
  static Stream wrap(CUstream stream);

  CUstream get() const { return stream_; }
  operator CUstream() const { return stream_; }  // NOLINT: a Stream is usable where a CUstream is
  bool owning() const { return owner_ != nullptr; }
  void synchronize() const;

 private:
  std::shared_ptr<CUstream_st> owner_;
  CUstream stream_ = nullptr;
};

// Times GPU work on one stream with a pair of CUDA events. Not copyable.
class EventTimer {
 public:
  EventTimer();
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  EventTimer(EventTimer&& other) noexcept;
  EventTimer& operator=(EventTimer&& other) noexcept;

  void start(CUstream stream = nullptr);
  void stop(CUstream stream = nullptr);
  // Waits for the stop event, then returns the time between start and stop in milliseconds.
  float elapsed_ms() const;

 private:
  void destroy() noexcept;
  CUevent start_ = nullptr;
  CUevent stop_ = nullptr;
};

}  // namespace tessel
