// tessel.tune: the C++ autotuner (include/tessel/autotune/Autotune.hpp) for the library's GEMM,
// softmax and attention. With a GPU it searches, checks each candidate (sampled outputs against
// float64 on the host; attention with the library's own check) and stores the winner in the
// tuning cache that the ops' kernels consult — the same entry `tessel tune` writes. Without a GPU
// (compile_only) it enumerates the space, compiles every kept candidate in parallel and reports
// registers, spills and shared memory.
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>

#include <cmath>
#include <memory>
#include <thread>

#include "Bindings.hpp"
#include "tessel/autotune/Autotune.hpp"
#include "tessel/autotune/CostModel.hpp"
#include "tessel/runtime/Driver.hpp"

namespace nb = nanobind;
namespace at = tessel::autotune;

namespace tessel::python {

namespace {

// Relative error of sampled outputs against a float64 reference computed from host copies.
double relative(double err2, double ref2) {
  return ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
}

at::Callbacks gemm_callbacks(int M, int N, int K, DType d) {
  auto a = std::make_shared<Tensor>(Tensor::empty({M, K}, d));
  auto b = std::make_shared<Tensor>(Tensor::empty({K, N}, d));
  auto c = std::make_shared<Tensor>(Tensor::empty({M, N}, d));
  a->fill_random(1), b->fill_random(2);
  auto ha = std::make_shared<std::vector<double>>(a->to_host_f64());
  auto hb = std::make_shared<std::vector<double>>(b->to_host_f64());
  at::Callbacks cb;
  cb.run = [=](const JitKernel& k) { k.launch({*a, *b, *c}); };
  cb.check = [=](const JitKernel& k, std::string& why) {
    c->fill(std::nan(""));
    k.launch({*a, *b, *c});
    check_cu(driver().cuCtxSynchronize(), "cuCtxSynchronize");
    const std::vector<double> hc = c->to_host_f64();
    double err2 = 0, ref2 = 0;
    for (int s = 0; s < 256; ++s) {  // a fixed spread of sampled entries, corners included
      const long long i = (s * 7919LL) % M, j = (s * 104729LL + s / 16) % N;
      double want = 0;
      for (int k2 = 0; k2 < K; ++k2) want += (*ha)[i * K + k2] * (*hb)[static_cast<long long>(k2) * N + j];
      const double got = hc[i * N + j];
      err2 += (got - want) * (got - want), ref2 += want * want;
    }
    const double err = relative(err2, ref2);
    if (std::isfinite(err) && err <= 1e-2) return true;
    why = "relative error " + std::to_string(err) + " on 256 sampled entries against float64 (tolerance 1e-2)";
    return false;
  };
  return cb;
}

at::Callbacks softmax_callbacks(long long M, long long N, DType d) {
  auto x = std::make_shared<Tensor>(Tensor::empty({M, N}, d));
  auto y = std::make_shared<Tensor>(Tensor::empty({M, N}, d));
  x->fill_random(1, -6, 6);
  auto hx = std::make_shared<std::vector<double>>(x->to_host_f64());
  at::Callbacks cb;
  cb.run = [=](const JitKernel& k) { k.launch({*x, *y}); };
  cb.check = [=](const JitKernel& k, std::string& why) {
    y->fill(std::nan(""));
    k.launch({*x, *y});
    check_cu(driver().cuCtxSynchronize(), "cuCtxSynchronize");
    const std::vector<double> hy = y->to_host_f64();
    double err2 = 0, ref2 = 0;
    for (long long s = 0; s < std::min<long long>(M, 64); ++s) {
      const long long r = (s * 7919LL) % M;
      double mx = -INFINITY, sum = 0;
      for (long long j = 0; j < N; ++j) mx = std::max(mx, (*hx)[r * N + j]);
      for (long long j = 0; j < N; ++j) sum += std::exp((*hx)[r * N + j] - mx);
      for (long long j = 0; j < N; ++j) {
        const double want = std::exp((*hx)[r * N + j] - mx) / sum, got = hy[r * N + j];
        err2 += (got - want) * (got - want), ref2 += want * want;
      }
    }
    const double tol = d == DType::f32 ? 1e-5 : 1e-2, err = relative(err2, ref2);
    if (std::isfinite(err) && err <= tol) return true;
    why = "relative error " + std::to_string(err) + " on 64 sampled rows against float64";
    return false;
  };
  return cb;
}

nb::dict row_dict(const at::Row& r) {
  nb::dict d;
  d["config"] = r.config;
  d["status"] = at::status_name(r.status);
  d["reason"] = r.reason;
  d["ms"] = r.ms;
  d["repeats"] = r.repeats;
  d["registers"] = r.registers;
  d["compile_ms"] = r.compile_ms;
  d["spill_bytes"] = r.spill_bytes;
  d["smem_bytes"] = r.smem_bytes;
  return d;
}

long long get_int(const nb::dict& shape, const char* name, long long fallback = -1) {
  if (!shape.contains(name)) {
    if (fallback >= 0) return fallback;
    throw nb::value_error((std::string("tune: the shape needs '") + name + "'").c_str());
  }
  long long v = nb::cast<long long>(shape[name]);
  if (v <= 0) throw nb::value_error((std::string("tune: ") + name + " must be positive").c_str());
  return v;
}

nb::dict tune(const std::string& kernel, const nb::dict& shape, const std::string& dtype_name,
              const std::string& strategy_name, int budget, int repeats, bool compile_only, bool use_cache) {
  const DType dtype = parse_dtype_arg(dtype_name, "dtype");
  const auto strategy = at::parse_strategy(strategy_name);
  if (!strategy) throw nb::value_error(("strategy: '" + strategy_name + "'; legal: halving, random, exhaustive").c_str());
  const bool gpu = gpu_available();
  if (!compile_only) require_gpu("tessel.tune (compile_only=True works without one)");
  const std::string arch = target_arch("");
  JitOptions jo;
  jo.arch = arch;

  at::Space space;
  at::Factory factory;
  std::function<at::Callbacks()> prepare;
  std::function<at::KeyParts(const at::DeviceKey&)> key;
  std::function<double(const at::Config&)> cost_model;
  if (kernel == "gemm") {
    if (dtype != DType::f16 && dtype != DType::bf16) throw nb::value_error("tune gemm: dtype must be f16 or bf16");
    const int M = int(get_int(shape, "M")), N = int(get_int(shape, "N")), K = int(get_int(shape, "K"));
    space = at::gemm_space(arch, dtype);
    factory = at::gemm_factory(M, N, K, dtype, jo);
    prepare = [=] { return gemm_callbacks(M, N, K, dtype); };
    key = [=](const at::DeviceKey& dev) { return at::gemm_key_parts(M, N, K, dtype, dev); };
    cost_model = at::gemm_cost_model(M, N, K, arch, gpu ? current_device().sm_count : 132);
  } else if (kernel == "softmax") {
    if (dtype != DType::f16 && dtype != DType::bf16 && dtype != DType::f32)
      throw nb::value_error("tune softmax: dtype must be f16, bf16 or f32");
    const long long M = get_int(shape, "M"), N = get_int(shape, "N");
    space = at::softmax_space(arch, M, N, dtype);
    factory = at::softmax_factory(M, N, dtype, jo);
    prepare = [=] { return softmax_callbacks(M, N, dtype); };
    key = [=](const at::DeviceKey& dev) { return at::softmax_key_parts(M, N, dtype, dev); };
  } else if (kernel == "attention") {
    if (dtype != DType::f16 && dtype != DType::bf16) throw nb::value_error("tune attention: dtype must be f16 or bf16");
    kernels::AttentionShape s;
    s.batch = get_int(shape, "batch", 1), s.heads = get_int(shape, "heads");
    s.kv_heads = get_int(shape, "kv_heads", s.heads), s.seqlen_q = get_int(shape, "seqlen_q");
    s.seqlen_k = get_int(shape, "seqlen_k", s.seqlen_q), s.dim = get_int(shape, "dim");
    const bool causal = shape.contains("causal") && nb::cast<bool>(shape["causal"]);
    kernels::check_attention(s, dtype);
    space = at::attention_space(arch, s, dtype, causal);
    factory = at::attention_factory(s, dtype, causal, jo);
    prepare = [=] { return at::attention_callbacks(s, dtype, causal, 1); };
    key = [=](const at::DeviceKey& dev) { return at::attention_key_parts(s, dtype, causal, dev); };
  } else {
    throw nb::value_error(("tune: kernel '" + kernel + "'; legal: gemm, softmax, attention").c_str());
  }

  at::HardwareLimits limits;
  if (gpu) limits = {current_device().smem_optin_per_block, current_device().max_threads_per_block};
  nb::dict result;
  result["kernel"] = kernel;
  result["arch"] = arch;
  nb::gil_scoped_release release;
  const auto e = space.enumerate(limits);
  if (compile_only) {
    // budget > 0: the first `budget` kept candidates only (a quick look at a space).
    std::vector<at::Config> configs = e.kept;
    if (budget > 0 && configs.size() > static_cast<std::size_t>(budget)) configs.resize(budget);
    const at::CompileReport r = at::compile_all(factory, configs);
    nb::gil_scoped_acquire acquire;
    nb::list rows;
    for (const at::Row& row : r.rows) rows.append(row_dict(row));
    result["compile_only"] = true;
    result["candidates"] = e.kept.size();
    result["compiled"] = configs.size();
    result["pruned"] = e.pruned.size();
    result["compile_seconds"] = r.seconds;
    result["table"] = rows;
    return result;
  }
  at::Options opts;
  opts.search.strategy = *strategy;
  opts.search.budget = budget;
  if (repeats > 0) opts.search.repeats = repeats;
  opts.limits = limits;
  if (*strategy == at::Strategy::halving && cost_model) opts.cost_model = cost_model;
  if (use_cache) {
    const auto device = at::current_device_key();
    if (device) opts.cache_key = at::tuning_key(key(*device));
  }
  const at::Result r = at::autotune(factory, space, prepare, opts);
  nb::gil_scoped_acquire acquire;
  nb::list rows;
  for (const at::Row& row : r.table) rows.append(row_dict(row));
  result["compile_only"] = false;
  result["found"] = r.found;
  result["from_cache"] = r.from_cache;
  result["config"] = r.config;
  result["ms"] = r.ms;
  result["compiled"] = r.compiled;
  result["compile_seconds"] = r.compile_seconds;
  result["timed_full"] = r.timed_full;
  result["table"] = rows;
  result["kernel_object"] = r.found ? wrap_kernel(r.kernel) : nb::none();
  return result;
}

}  // namespace

void bind_tune(nb::module_& m) {
  m.def("tune", &tune, nb::arg("kernel"), nb::arg("shape"), nb::arg("dtype") = "f16",
        nb::arg("strategy") = "halving", nb::arg("budget") = 0, nb::arg("repeats") = 0,
        nb::arg("compile_only") = false, nb::arg("use_cache") = true);
}

}  // namespace tessel::python
