// tessel.Kernel — the view of a compiled kernel (source, PTX, resources, what the compiler
// decided) and its calls — and the library kernels' constructors (compile_matmul, ...), which
// compile without a GPU.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "Bindings.hpp"
#include "DLPack.hpp"
#include "tessel/ir/Printer.hpp"
#include "tessel/kernels/attention/FlashAttention.hpp"
#include "tessel/kernels/gemm/Matmul.hpp"
#include "tessel/kernels/softmax/Softmax.hpp"
#include "tessel/runtime/Driver.hpp"

namespace nb = nanobind;

namespace tessel::python {

namespace {

nb::dict resources_dict(const Resources& r) {
  nb::dict d;
  d["registers"] = r.registers;
  d["spill_store_bytes"] = r.spill_store_bytes;
  d["spill_load_bytes"] = r.spill_load_bytes;
  d["stack_frame_bytes"] = r.stack_frame_bytes;
  d["static_smem_bytes"] = r.static_smem_bytes;
  d["barriers"] = r.barriers;
  d["compile_ms"] = r.compile_ms;
  d["cache_hit"] = r.cache_hit;
  d["arch"] = r.arch;
  return d;
}

nb::dict info_dict(const KernelInfo& i) {
  nb::dict d;
  d["kernel_name"] = i.kernel_name;
  d["threads"] = i.threads;
  d["dynamic_smem_bytes"] = i.dynamic_smem_bytes;
  d["arch"] = i.arch;
  d["instructions"] = i.instructions;
  d["path"] = i.path;
  d["hopper_declined"] = i.hopper_declined;
  d["declined"] = i.declined;
  d["persistent"] = i.persistent;
  d["cluster_size"] = i.cluster_size;
  d["tma_maps"] = i.tma_maps;
  d["mbarriers"] = i.mbarriers;
  d["pingpong"] = i.pingpong;
  d["tile_loads"] = i.tile_loads;
  return d;
}

JitOptions jit_options(const std::string& arch) {
  JitOptions o;
  o.arch = arch;
  return o;
}

// Runs the kernel's program on the interpreter: inputs are CPU tensors (DLPack), outputs come
// back as "dltensor" capsules (tessel/_dlpack.py wraps them).
nb::list run_on_cpu(const JitKernel& k, const nb::args& inputs) {
  std::vector<interp::HostTensor> host;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    std::string what = "input " + std::to_string(i);
    host.push_back(host_copy(borrow(inputs[i], what.c_str()), what.c_str()));
  }
  std::vector<interp::HostTensor> out;
  {
    nb::gil_scoped_release release;
    out = k.run_on_cpu(host);
  }
  nb::list result;
  for (auto& t : out) result.append(host_capsule(std::move(t)));
  return result;
}

std::vector<Tensor> device_views(const nb::args& args, const char* what) {
  std::vector<Tensor> views;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string name = std::string(what) + " " + std::to_string(i);
    views.push_back(device_view(borrow(args[i], name.c_str()), name.c_str()));
  }
  return views;
}

kernels::MatmulConfig matmul_config_for(int M, int N, int K, DType dtype, const std::string& arch) {
  if (arch.empty()) return kernels::choose_matmul_config(M, N, K, dtype).config;
  int sms = gpu_available() ? current_device().sm_count : 132;
  return kernels::default_matmul_config(M, N, K, dtype, arch, sms);
}

kernels::Activation parse_activation(const std::string& a) {
  if (a == "none" || a.empty()) return kernels::Activation::none;
  if (a == "relu") return kernels::Activation::relu;
  if (a == "silu") return kernels::Activation::silu;
  throw nb::value_error(("activation: '" + a + "' is not fused by the GEMM; legal: none, relu, silu").c_str());
}

void check_positive(long long v, const char* what) {
  if (v <= 0) throw nb::value_error((std::string(what) + " must be positive; got " + std::to_string(v)).c_str());
}

}  // namespace

nb::object wrap_kernel(const JitKernel& k) {
  return nb::cast(k);
}

void bind_kernels(nb::module_& m) {
  nb::class_<JitKernel>(m, "Kernel",
                        "A compiled Tessel kernel: its generated CUDA C++ (source), PTX, resources and what the "
                        "compiler decided (info); call it on CUDA tensors, or run its program on CPU tensors.")
      .def_prop_ro("name", &JitKernel::name)
      .def_prop_ro("source", &JitKernel::source, "The generated CUDA C++.")
      .def_prop_ro("ptx", &JitKernel::ptx)
      .def_prop_ro("compile_log", &JitKernel::compile_log)
      .def_prop_ro("resources", [](const JitKernel& k) { return resources_dict(k.resources()); },
                   "Registers, spills, static shared memory, barriers, compile ms, cache hit, arch.")
      .def_prop_ro("info", [](const JitKernel& k) { return info_dict(k.info()); },
                   "Launch shape and the path the compiler took (wgmma, TMA, ...), and why not when declined.")
      .def_prop_ro("ir", [](const JitKernel& k) { return ir::to_string(k.program()); }, "The program's IR text.")
      .def_prop_ro("lowered_ir", &JitKernel::lowered_ir, "The IR after lowering (what codegen saw).")
      .def(
          "__call__",
          [](const JitKernel& k, const nb::args& inputs, std::uintptr_t stream) {
            require_gpu("Kernel.__call__");
            std::vector<Tensor> views = device_views(inputs, "input");
            std::vector<Tensor> out = k.call(views, reinterpret_cast<CUstream>(stream));
            nb::list result;
            for (const Tensor& t : out) result.append(device_capsule(t));
            return result;
          },
          nb::arg("inputs"), nb::kw_only(), nb::arg("stream") = 0,
          "Launches on CUDA tensors (DLPack) for the inputs; allocates the outputs with Tessel's allocator and "
          "returns them as DLPack capsules (tessel.Kernel's Python wrapper converts them).")
      .def(
          "launch",
          [](const JitKernel& k, const nb::args& args, std::uintptr_t stream) {
            require_gpu("Kernel.launch");
            std::vector<Tensor> views = device_views(args, "argument");
            k.launch(views, reinterpret_cast<CUstream>(stream));
          },
          nb::arg("args"), nb::kw_only(), nb::arg("stream") = 0,
          "Launches with every parameter given (outputs too) on `stream` (a CUstream as an int; 0: legacy "
          "default stream). Nothing is allocated.")
      .def("run_on_cpu", &run_on_cpu, nb::arg("inputs"),
           "The program on the CPU reference interpreter: CPU tensors in, DLPack capsules out.");

  m.def(
      "compile_matmul",
      [](int M, int N, int K, const std::string& dtype, const std::string& arch) {
        check_positive(M, "M"), check_positive(N, "N"), check_positive(K, "K");
        DType d = parse_dtype_arg(dtype, "dtype");
        nb::gil_scoped_release release;
        if (arch.empty()) return kernels::make_matmul(M, N, K, d);
        return kernels::make_matmul(M, N, K, matmul_config_for(M, N, K, d, arch), jit_options(arch));
      },
      nb::arg("M"), nb::arg("N"), nb::arg("K"), nb::arg("dtype") = "f16", nb::arg("arch") = "");
  m.def(
      "compile_linear",
      [](int M, int N, int K, const std::string& dtype, const std::string& activation, const std::string& arch) {
        check_positive(M, "M"), check_positive(N, "N"), check_positive(K, "K");
        DType d = parse_dtype_arg(dtype, "dtype");
        kernels::Activation act = parse_activation(activation);
        nb::gil_scoped_release release;
        return kernels::make_matmul_bias_act(M, N, K, matmul_config_for(M, N, K, d, arch), act, 1.0f,
                                             jit_options(arch));
      },
      nb::arg("M"), nb::arg("N"), nb::arg("K"), nb::arg("dtype") = "f16", nb::arg("activation") = "none",
      nb::arg("arch") = "");
  m.def(
      "compile_softmax",
      [](long long M, long long N, const std::string& dtype, const std::string& arch) {
        check_positive(M, "M"), check_positive(N, "N");
        DType d = parse_dtype_arg(dtype, "dtype");
        nb::gil_scoped_release release;
        if (arch.empty()) return kernels::make_softmax(M, N, d);
        return kernels::make_softmax(M, N, d, kernels::default_softmax_config(M, N, d), jit_options(arch));
      },
      nb::arg("M"), nb::arg("N"), nb::arg("dtype") = "f16", nb::arg("arch") = "");
  m.def(
      "compile_flash_attention",
      [](long long batch, long long heads, long long kv_heads, long long seqlen_q, long long seqlen_k, long long dim,
         const std::string& dtype, bool causal, float scale, const std::string& arch) {
        kernels::AttentionShape s;
        s.batch = batch, s.heads = heads, s.kv_heads = kv_heads, s.seqlen_q = seqlen_q, s.seqlen_k = seqlen_k,
        s.dim = dim;
        DType d = parse_dtype_arg(dtype, "dtype");
        kernels::AttentionOptions o;
        o.causal = causal;
        o.scale = scale;
        o.jit = jit_options(arch);
        nb::gil_scoped_release release;
        kernels::check_attention(s, d);
        return kernels::make_flash_attention(s, d, o);
      },
      nb::arg("batch"), nb::arg("heads"), nb::arg("kv_heads"), nb::arg("seqlen_q"), nb::arg("seqlen_k"),
      nb::arg("dim"), nb::arg("dtype") = "bf16", nb::arg("causal") = false, nb::arg("scale") = 0.0f,
      nb::arg("arch") = "");
}

}  // namespace tessel::python
