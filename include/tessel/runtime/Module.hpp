// A compiled kernel loaded on the GPU and launchable. Modules are cached per (cubin hash,
// context) for the life of the process: constructing a LoadedKernel for a kernel that is
// already loaded is a hash and a map look-up, not a cuModuleLoadData.
#pragma once

#include <cuda.h>

#include <memory>
#include <string>

#include "tessel/runtime/Nvrtc.hpp"

namespace tessel {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

class LoadedKernel {
 public:
  LoadedKernel() = default;
  // Loads kernel.cubin into the primary context (made current first) and looks up
  // kernel.lowered_name. Throws RuntimeError when there is no GPU or the driver refuses.
  explicit LoadedKernel(const CompiledKernel& kernel);

  // Launches on `stream` with `args` as cuLaunchKernel takes them (one pointer per kernel
  // parameter). Dynamic shared memory above 48 KB is opted into first; more than the device
  // allows (static + dynamic > DeviceInfo::smem_optin_per_block) is a RuntimeError naming the
  // kernel, the bytes asked for and the cap. `programmatic`: with the programmatic-stream-
  // serialization attribute (cuLaunchKernelEx), so that the kernel may start before the previous
  // kernel on the stream completes -- for kernels that wait for it at entry
  // (griddepcontrol.wait, JitOptions::programmatic_launch); a plain launch on a device before
  // sm_90 or a driver without cuLaunchKernelEx.
  void launch(Dim3 grid, Dim3 block, int dynamic_smem_bytes, CUstream stream, void** args,
              bool programmatic = false) const;

  bool loaded() const { return state_ != nullptr; }
  CUfunction function() const;
  const std::string& name() const;
  // From cuFuncGetAttribute: what the driver will actually use.
  int num_registers() const;
  int local_bytes_per_thread() const;  // stack + spills
  int static_smem_bytes() const;
  int max_threads_per_block() const;

  struct State;  // shared by every LoadedKernel of one (cubin, context, function)

 private:
  std::shared_ptr<State> state_;
};

// Convenience: compile_cached + LoadedKernel.
LoadedKernel load_kernel(const std::string& source, const std::string& kernel_name,
                         const CompileOptions& options);

}  // namespace tessel
