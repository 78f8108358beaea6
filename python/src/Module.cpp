// tessel._C: the module, its exceptions and tessel.info(). The Python package (python/tessel/)
// is the public face; this module stays a thin layer over the C++ library.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "Bindings.hpp"
#include "tessel/Error.hpp"
#include "tessel/Version.hpp"
#include "tessel/runtime/Cache.hpp"
#include "tessel/runtime/CacheFolder.hpp"
#include "tessel/runtime/Driver.hpp"
#include "tessel/runtime/Nvrtc.hpp"

namespace nb = nanobind;

namespace tessel::python {

namespace {
PyObject* g_error = nullptr;          // tessel.TesselError(RuntimeError)
PyObject* g_compile_error = nullptr;  // tessel.CompileError(TesselError, ValueError)
PyObject* g_internal_error = nullptr;
PyObject* g_no_gpu_error = nullptr;   // tessel.GPUUnavailableError(TesselError)

nb::dict info() {
  nb::dict d;
  d["version"] = TESSEL_VERSION;
  d["nvrtc_version"] = nvrtc_version();
  d["cuda_headers_version"] = CUDA_VERSION;
  const bool gpu = gpu_available();
  d["gpu_available"] = gpu;
  if (gpu) {
    const DeviceInfo& dev = current_device();
    nb::dict g;
    g["ordinal"] = dev.ordinal;
    g["name"] = dev.name;
    g["compute_capability"] = nb::make_tuple(dev.cc_major, dev.cc_minor);
    g["arch"] = dev.arch();
    g["sm_count"] = dev.sm_count;
    g["smem_optin_per_block"] = dev.smem_optin_per_block;
    g["l2_bytes"] = dev.l2_bytes;
    g["global_mem_bytes"] = dev.global_mem_bytes;
    g["driver_version"] = dev.driver_version;
    d["gpu"] = g;
    d["no_gpu_reason"] = nb::none();
  } else {
    d["gpu"] = nb::none();
    d["no_gpu_reason"] = gpu_unavailable_reason();
  }
  d["arch"] = target_arch("");
  auto dir = cache_directory();
  d["kernel_cache"] = dir ? nb::cast(dir->string()) : nb::none();
  auto refused = dir ? prepare_private_folder(*dir) : std::nullopt;
  d["kernel_cache_refused"] = refused ? nb::cast(*refused) : nb::none();
  return d;
}
}  // namespace

DType parse_dtype_arg(const std::string& name, const char* what) {
  if (auto d = parse_dtype(name)) return *d;
  throw nb::value_error((std::string(what) + ": unknown dtype '" + name +
                         "'; legal: f16 (float16, half), bf16 (bfloat16), f32 (float32, float), f64, i8, u8, "
                         "i32, i64, bool")
                            .c_str());
}

void require_gpu(const char* what) {
  if (gpu_available()) return;
  PyErr_SetString(g_no_gpu_error, (std::string(what) + " needs an NVIDIA GPU: " + gpu_unavailable_reason() +
                                   ". Without one, tessel compiles kernels (compile_*, .source/.ptx/"
                                   ".resources) and runs them on CPU tensors through the interpreter")
                                      .c_str());
  throw nb::python_error();
}

std::string target_arch(const std::string& arch) {
  if (!arch.empty()) return arch;
  return gpu_available() ? current_device().arch() : "sm_90a";
}

}  // namespace tessel::python

NB_MODULE(_C, m) {
  using namespace tessel::python;
  m.doc() = "Tessel's C++ library (compiler, NVRTC JIT, runtime, kernels, autotuner) for Python";
  m.attr("__version__") = TESSEL_VERSION;

  g_error = PyErr_NewExceptionWithDoc("tessel.TesselError", "An error reported by Tessel's C++ library.",
                                      PyExc_RuntimeError, nullptr);
  nb::object bases = nb::make_tuple(nb::handle(g_error), nb::handle(PyExc_ValueError));
  g_compile_error = PyErr_NewExceptionWithDoc(
      "tessel.CompileError", "A program or its arguments cannot be compiled (the message names what is legal).",
      bases.ptr(), nullptr);
  g_internal_error = PyErr_NewExceptionWithDoc(
      "tessel.InternalError", "A broken invariant of Tessel's compiler (a bug: please report it).", g_error, nullptr);
  g_no_gpu_error = PyErr_NewExceptionWithDoc(
      "tessel.GPUUnavailableError", "A call that needs an NVIDIA GPU was made where there is none.", g_error,
      nullptr);
  m.attr("TesselError") = nb::handle(g_error);
  m.attr("CompileError") = nb::handle(g_compile_error);
  m.attr("InternalError") = nb::handle(g_internal_error);
  m.attr("GPUUnavailableError") = nb::handle(g_no_gpu_error);

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const tessel::CompileError& e) {
      PyErr_SetString(g_compile_error, e.what());
    } catch (const tessel::InternalError& e) {
      PyErr_SetString(g_internal_error, e.what());
    } catch (const tessel::Error& e) {
      PyErr_SetString(g_error, e.what());
    }
  });

  m.def("info", &info, "The GPU (or why there is none), NVRTC, the target arch and the kernel cache folder.");
  m.def("gpu_available", &tessel::gpu_available, "True when libcuda loaded and a GPU is there.");
  m.def("gpu_unavailable_reason", &tessel::gpu_unavailable_reason);
  m.def("device_ordinal", [] { return tessel::gpu_available() ? tessel::current_device().ordinal : -1; },
        "The GPU Tessel runs on (0, or $TESSEL_DEVICE); -1 without one.");
  m.def("target_arch", &target_arch, nb::arg("arch") = "");
  bind_kernels(m);
  bind_ops(m);
  bind_tune(m);
}
