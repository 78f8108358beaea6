#include "tessel/runtime/Driver.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <utility>

#include "tessel/Error.hpp"

namespace tessel {

namespace {

// Everything learned while loading the driver, decided once per process: a missing GPU is not
// going to appear later, and retrying dlopen/cuInit on every call would only cost time.
struct DriverState {
  Driver driver;
  bool available = false;
  std::string reason;
  CUdevice device = 0;
  int ordinal = 0;
  CUcontext primary = nullptr;
};

void* find_symbol(void* lib, const char* name) {
  void* p = dlsym(lib, name);
  // cuEventElapsedTime_v2 is new in CUDA 12.8; older drivers export only the original, which
  // has the same signature.
  if (!p && std::string(name) == "cuEventElapsedTime_v2") p = dlsym(lib, "cuEventElapsedTime");
  return p;
}

int selected_ordinal(std::string& error) {
  const char* env = std::getenv("TESSEL_DEVICE");
  if (!env || !*env) return 0;
  char* end = nullptr;
  long v = std::strtol(env, &end, 10);
  if (*end != '\0' || v < 0 || v > 1024) {
    error = std::string("TESSEL_DEVICE='") + env + "' is not a device ordinal (0, 1, ...)";
    return -1;
  }
  return static_cast<int>(v);
}

void load(DriverState& s) {
  // The handle is never closed: function pointers into it live as long as the process.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* err = dlerror();
    s.reason = std::string("libcuda.so.1 not found: ") + (err ? err : "dlopen failed");
    return;
  }
  Driver& d = s.driver;
#define TESSEL_DRIVER_LOAD(name, symbol)                                                        \
  d.name = reinterpret_cast<decltype(d.name)>(find_symbol(lib, symbol));                        \
  if (!d.name) {                                                                                \
    s.reason = "libcuda.so.1 has no symbol " symbol " (the driver is older than Tessel needs)"; \
    return;                                                                                     \
  }
  TESSEL_DRIVER_FUNCTIONS(TESSEL_DRIVER_LOAD)
#undef TESSEL_DRIVER_LOAD
  d.cuMemAllocAsync = reinterpret_cast<decltype(d.cuMemAllocAsync)>(dlsym(lib, "cuMemAllocAsync"));
  d.cuMemFreeAsync = reinterpret_cast<decltype(d.cuMemFreeAsync)>(dlsym(lib, "cuMemFreeAsync"));
  d.cuLaunchKernelEx = reinterpret_cast<decltype(d.cuLaunchKernelEx)>(dlsym(lib, "cuLaunchKernelEx"));

  if (CUresult r = d.cuInit(0); r != CUDA_SUCCESS) {
    s.reason = "cuInit failed: " + cu_error_text(r);
    return;
  }
  int count = 0;
  if (CUresult r = d.cuDeviceGetCount(&count); r != CUDA_SUCCESS) {
    s.reason = "cuDeviceGetCount failed: " + cu_error_text(r);
    return;
  }
  std::string env_error;
  s.ordinal = selected_ordinal(env_error);
  if (s.ordinal < 0) {
    s.reason = env_error;
    return;
  }
  if (count == 0) {
    s.reason = "no CUDA device found (cuDeviceGetCount returned 0)";
    return;
  }
  if (s.ordinal >= count) {
    s.reason = "TESSEL_DEVICE=" + std::to_string(s.ordinal) + " but only " + std::to_string(count) +
               " CUDA device(s) exist";
    return;
  }
  if (CUresult r = d.cuDeviceGet(&s.device, s.ordinal); r != CUDA_SUCCESS) {
    s.reason = "cuDeviceGet(" + std::to_string(s.ordinal) + ") failed: " + cu_error_text(r);
    return;
  }
  // Retained once and never released: the primary context must outlive every Tensor and
  // module, including those destroyed during static destruction.
  if (CUresult r = d.cuDevicePrimaryCtxRetain(&s.primary, s.device); r != CUDA_SUCCESS) {
    s.reason = "cuDevicePrimaryCtxRetain failed: " + cu_error_text(r);
    return;
  }
  s.available = true;
}

DriverState& state() {
  // Leaked on purpose: Tensors freed during static destruction still need the table.
  static DriverState* s = [] {
    auto* st = new DriverState();
    load(*st);
    return st;
  }();
  return *s;
}

// The loaded table even when cuInit failed, so that error names can still be looked up.
const Driver* loaded_table() {
  const DriverState& s = state();
  return s.driver.cuGetErrorName ? &s.driver : nullptr;
}

}  // namespace

bool gpu_available() {
  return state().available;
}

std::string gpu_unavailable_reason() {
  return state().available ? std::string() : state().reason;
}

Driver& driver() {
  DriverState& s = state();
  if (!s.available) throw RuntimeError("no GPU available: " + s.reason);
  return s.driver;
}

CUcontext primary_context() {
  driver();
  return state().primary;
}

void ensure_context() {
  Driver& d = driver();
  CUcontext current = nullptr;
  check_cu(d.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  if (current != state().primary) check_cu(d.cuCtxSetCurrent(state().primary), "cuCtxSetCurrent");
}

std::string cu_error_text(CUresult result) {
  const Driver* d = loaded_table();
  const char* name = nullptr;
  const char* text = nullptr;
  if (d) {
    if (d->cuGetErrorName(result, &name) != CUDA_SUCCESS) name = nullptr;
    if (d->cuGetErrorString(result, &text) != CUDA_SUCCESS) text = nullptr;
  }
  std::string out = name ? name : "CUresult " + std::to_string(static_cast<int>(result));
  if (text) out += std::string(": ") + text;
  return out;
}

void check_cu(CUresult result, const char* what) {
  if (result == CUDA_SUCCESS) return;
  throw RuntimeError(std::string("CUDA driver call ") + what + " failed: " + cu_error_text(result));
}

void check_cu(CUresult result, const std::string& what) {
  check_cu(result, what.c_str());
}

std::string arch_for_compute_capability(int major, int minor) {
  std::string arch = "sm_" + std::to_string(major) + std::to_string(minor);
  // Hopper's wgmma/setmaxnreg and Blackwell's tcgen05 exist only in the arch-specific targets;
  // other generations need nothing beyond the plain target.
  if (major == 9 || major == 10) arch += "a";
  return arch;
}

std::string DeviceInfo::arch() const {
  return arch_for_compute_capability(cc_major, cc_minor);
}

const DeviceInfo& current_device() {
  static std::once_flag once;
  static DeviceInfo info;
  std::call_once(once, [] {
    Driver& d = driver();
    DriverState& s = state();
    CUdevice dev = s.device;
    auto attr = [&](CUdevice_attribute a, const char* what) {
      int v = 0;
      check_cu(d.cuDeviceGetAttribute(&v, a, dev), what);
      return v;
    };
    DeviceInfo i;
    i.ordinal = s.ordinal;
    char name[256] = {};
    check_cu(d.cuDeviceGetName(name, sizeof(name) - 1, dev), "cuDeviceGetName");
    i.name = name;
    i.cc_major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "cuDeviceGetAttribute(cc major)");
    i.cc_minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "cuDeviceGetAttribute(cc minor)");
    i.sm_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "cuDeviceGetAttribute(SM count)");
    i.smem_optin_per_block =
        attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "cuDeviceGetAttribute(smem opt-in)");
    i.smem_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, "cuDeviceGetAttribute(smem)");
    i.max_threads_per_block =
        attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "cuDeviceGetAttribute(max threads)");
    i.regs_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, "cuDeviceGetAttribute(registers)");
    i.l2_bytes = attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "cuDeviceGetAttribute(L2 size)");
    size_t total = 0;
    check_cu(d.cuDeviceTotalMem(&total, dev), "cuDeviceTotalMem");
    i.global_mem_bytes = static_cast<long long>(total);
    check_cu(d.cuDriverGetVersion(&i.driver_version), "cuDriverGetVersion");
    info = std::move(i);
  });
  return info;
}

// --- Stream --------------------------------------------------------------------------------

Stream Stream::create(bool non_blocking) {
  ensure_context();
  CUstream s = nullptr;
  check_cu(driver().cuStreamCreate(&s, non_blocking ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT),
           "cuStreamCreate");
  Stream out;
  out.stream_ = s;
  // Destruction errors are ignored: a deleter must not throw, and at process exit the driver
  // may already be shutting down.
  out.owner_ = std::shared_ptr<CUstream_st>(s, [](CUstream p) { (void)state().driver.cuStreamDestroy(p); });
  return out;
}

Stream Stream::wrap(CUstream stream) {
  Stream out;
  out.stream_ = stream;
  return out;
}

void Stream::synchronize() const {
  ensure_context();
  check_cu(driver().cuStreamSynchronize(stream_), "cuStreamSynchronize");
}

// --- EventTimer ----------------------------------------------------------------------------

EventTimer::EventTimer() {
  ensure_context();
  check_cu(driver().cuEventCreate(&start_, CU_EVENT_DEFAULT), "cuEventCreate");
  if (CUresult r = driver().cuEventCreate(&stop_, CU_EVENT_DEFAULT); r != CUDA_SUCCESS) {
    destroy();
    check_cu(r, "cuEventCreate");
  }
}

EventTimer::~EventTimer() {
  destroy();
}

EventTimer::EventTimer(EventTimer&& other) noexcept
    : start_(std::exchange(other.start_, nullptr)), stop_(std::exchange(other.stop_, nullptr)) {}

EventTimer& EventTimer::operator=(EventTimer&& other) noexcept {
  if (this != &other) {
    destroy();
    start_ = std::exchange(other.start_, nullptr);
    stop_ = std::exchange(other.stop_, nullptr);
  }
  return *this;
}

void EventTimer::destroy() noexcept {
  if (!start_ && !stop_) return;
  Driver& d = state().driver;
  if (start_) (void)d.cuEventDestroy(start_);
  if (stop_) (void)d.cuEventDestroy(stop_);
  start_ = stop_ = nullptr;
}

void EventTimer::start(CUstream stream) {
  check_cu(driver().cuEventRecord(start_, stream), "cuEventRecord(start)");
}

void EventTimer::stop(CUstream stream) {
  check_cu(driver().cuEventRecord(stop_, stream), "cuEventRecord(stop)");
}

float EventTimer::elapsed_ms() const {
  Driver& d = driver();
  check_cu(d.cuEventSynchronize(stop_), "cuEventSynchronize");
  float ms = 0;
  check_cu(d.cuEventElapsedTime(&ms, start_, stop_), "cuEventElapsedTime");
  return ms;
}

}  // namespace tessel
