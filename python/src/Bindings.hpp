// The pieces of tessel._C, one function per file that adds its part to the module.
#pragma once

#include <nanobind/nanobind.h>

#include <string>

#include "tessel/DType.hpp"
#include "tessel/Jit.hpp"

namespace tessel::python {

void bind_kernels(nanobind::module_& m);  // Kernels.cpp: the compiled-kernel view, compile_*
void bind_ops(nanobind::module_& m);      // Ops.cpp: the ops' launch paths and the op cache
void bind_tune(nanobind::module_& m);     // Tune.cpp: the autotuner

// "f16" / "bfloat16" / "float32" ... -> DType; ValueError naming `what` and the legal spellings.
DType parse_dtype_arg(const std::string& name, const char* what);
// Throws tessel.GPUUnavailableError (a RuntimeError) saying why there is no GPU and what still
// works without one.
void require_gpu(const char* what);
// The arch a compile-only call targets: `arch` when given, the GPU's own, else sm_90a.
std::string target_arch(const std::string& arch);

// The Python view of a compiled kernel (tessel.Kernel).
nanobind::object wrap_kernel(const JitKernel& k);

}  // namespace tessel::python
