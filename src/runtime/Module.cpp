#include "tessel/runtime/Module.hpp"

#include <atomic>
#include <map>
#include <mutex>
#include <string_view>
#include <tuple>

#include "tessel/Error.hpp"
#include "tessel/runtime/Cache.hpp"
#include "tessel/runtime/Driver.hpp"

namespace tessel {

struct LoadedKernel::State {
  std::string name;
  CUfunction function = nullptr;
  int num_registers = 0, local_bytes = 0, static_smem = 0, max_threads = 0;
  // The function's current dynamic-smem limit (the driver's default is 48 KB minus the static
  // smem). Raised under the mutex; launches only read it, so the common case takes no lock.
  std::atomic<int> max_dynamic_smem_set{0};
  std::mutex attribute_mutex;
};

namespace {

// Modules are never unloaded: kernels are few and small, and unloading during static
// destruction would race the driver's own shutdown.
struct ModuleRegistry {
  std::mutex mutex;
  std::map<std::pair<std::string, CUcontext>, CUmodule> modules;  // (cubin sha256, context)
  std::map<std::tuple<std::string, CUcontext, std::string>, std::shared_ptr<LoadedKernel::State>> functions;
};

ModuleRegistry& registry() {
  static ModuleRegistry* r = new ModuleRegistry();
  return *r;
}

int function_attribute(Driver& d, CUfunction f, CUfunction_attribute a, const char* what) {
  int v = 0;
  check_cu(d.cuFuncGetAttribute(&v, a, f), what);
  return v;
}

std::string dims(const Dim3& d) {
  // Appended piecewise: g++ 12 raises a false -Wrestrict on "(" + std::to_string(...).
  std::string out = "(";
  out.append(std::to_string(d.x)).append(", ").append(std::to_string(d.y)).append(", ");
  out.append(std::to_string(d.z)).append(")");
  return out;
}

}  // namespace

LoadedKernel::LoadedKernel(const CompiledKernel& kernel) {
  ensure_context();
  Driver& d = driver();
  if (kernel.cubin.empty())
    throw RuntimeError("cannot load kernel '" + kernel.lowered_name + "': the compiled kernel has no cubin");
  CUcontext context = nullptr;
  check_cu(d.cuCtxGetCurrent(&context), "cuCtxGetCurrent");
  const std::string hash = sha256_hex(std::string_view(kernel.cubin.data(), kernel.cubin.size()));

  ModuleRegistry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto fkey = std::make_tuple(hash, context, kernel.lowered_name);
  if (auto it = r.functions.find(fkey); it != r.functions.end()) {
    state_ = it->second;
    return;
  }
  CUmodule module = nullptr;
  if (auto it = r.modules.find({hash, context}); it != r.modules.end()) {
    module = it->second;
  } else {
    check_cu(d.cuModuleLoadData(&module, kernel.cubin.data()),
             "cuModuleLoadData(" + kernel.lowered_name + ")");
    r.modules.emplace(std::make_pair(hash, context), module);
  }
  auto state = std::make_shared<State>();
  state->name = kernel.lowered_name;
  check_cu(d.cuModuleGetFunction(&state->function, module, kernel.lowered_name.c_str()),
           "cuModuleGetFunction(" + kernel.lowered_name + ")");
  CUfunction f = state->function;
  state->num_registers = function_attribute(d, f, CU_FUNC_ATTRIBUTE_NUM_REGS, "cuFuncGetAttribute(NUM_REGS)");
  state->local_bytes =
      function_attribute(d, f, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, "cuFuncGetAttribute(LOCAL_SIZE_BYTES)");
  state->static_smem =
      function_attribute(d, f, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, "cuFuncGetAttribute(SHARED_SIZE_BYTES)");
  state->max_threads = function_attribute(d, f, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                                          "cuFuncGetAttribute(MAX_THREADS_PER_BLOCK)");
  state->max_dynamic_smem_set = function_attribute(d, f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                   "cuFuncGetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
  r.functions.emplace(fkey, state);
  state_ = std::move(state);
}

void LoadedKernel::launch(Dim3 grid, Dim3 block, int dynamic_smem_bytes, CUstream stream, void** args,
                          bool programmatic) const {
  if (!state_) throw RuntimeError("launch of a LoadedKernel that holds no kernel");
  State& s = *state_;
  if (dynamic_smem_bytes < 0)
    throw RuntimeError("kernel '" + s.name + "': negative dynamic shared memory (" +
                       std::to_string(dynamic_smem_bytes) + " bytes)");
  ensure_context();
  Driver& d = driver();
  if (dynamic_smem_bytes > s.max_dynamic_smem_set.load(std::memory_order_acquire)) {
    const int cap = current_device().smem_optin_per_block;
    if (s.static_smem + dynamic_smem_bytes > cap)
      throw RuntimeError("kernel '" + s.name + "' asks for " + std::to_string(dynamic_smem_bytes) +
                         " bytes of dynamic shared memory (+ " + std::to_string(s.static_smem) +
                         " static = " + std::to_string(s.static_smem + dynamic_smem_bytes) + " bytes), but " +
                         current_device().name + " allows at most " + std::to_string(cap) +
                         " bytes of shared memory per block");
    std::lock_guard<std::mutex> lock(s.attribute_mutex);
    if (dynamic_smem_bytes > s.max_dynamic_smem_set.load(std::memory_order_relaxed)) {
      check_cu(d.cuFuncSetAttribute(s.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                    dynamic_smem_bytes),
               "cuFuncSetAttribute(" + s.name + ", MAX_DYNAMIC_SHARED_SIZE_BYTES, " +
                   std::to_string(dynamic_smem_bytes) + ")");
      s.max_dynamic_smem_set.store(dynamic_smem_bytes, std::memory_order_release);
    }
  }
  if (programmatic && d.cuLaunchKernelEx && current_device().cc_major >= 9) {
    CUlaunchAttribute attribute{};
    attribute.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attribute.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig config{};
    config.gridDimX = grid.x, config.gridDimY = grid.y, config.gridDimZ = grid.z;
    config.blockDimX = block.x, config.blockDimY = block.y, config.blockDimZ = block.z;
    config.sharedMemBytes = static_cast<unsigned>(dynamic_smem_bytes);
    config.hStream = stream;
    config.attrs = &attribute;
    config.numAttrs = 1;
    CUresult r = d.cuLaunchKernelEx(&config, s.function, args, nullptr);
    if (r != CUDA_SUCCESS)
      check_cu(r, "cuLaunchKernelEx(" + s.name + ", grid " + dims(grid) + ", block " + dims(block) + ", " +
                      std::to_string(dynamic_smem_bytes) + " bytes dynamic smem, programmatic stream serialization)");
    return;
  }
  CUresult r = d.cuLaunchKernel(s.function, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                                static_cast<unsigned>(dynamic_smem_bytes), stream, args, nullptr);
  if (r != CUDA_SUCCESS)
    check_cu(r, "cuLaunchKernel(" + s.name + ", grid " + dims(grid) + ", block " + dims(block) + ", " +
                    std::to_string(dynamic_smem_bytes) + " bytes dynamic smem)");
}

CUfunction LoadedKernel::function() const {
  return state_ ? state_->function : nullptr;
}

const std::string& LoadedKernel::name() const {
  static const std::string empty;
  return state_ ? state_->name : empty;
}

int LoadedKernel::num_registers() const {
  return state_ ? state_->num_registers : 0;
}
int LoadedKernel::local_bytes_per_thread() const {
  return state_ ? state_->local_bytes : 0;
}
int LoadedKernel::static_smem_bytes() const {
  return state_ ? state_->static_smem : 0;
}
int LoadedKernel::max_threads_per_block() const {
  return state_ ? state_->max_threads : 0;
}

LoadedKernel load_kernel(const std::string& source, const std::string& kernel_name,
                         const CompileOptions& options) {
  return LoadedKernel(compile_cached(source, kernel_name, options));
}

}  // namespace tessel
