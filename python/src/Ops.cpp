// The ops' launch paths (tessel.ops calls these with DLPack capsules of torch tensors) and their
// CPU twins on the interpreter. Kernels are compiled once per shape class — today the exact
// shape, dtype and variant, since Tessel has no symbolic shapes yet — and kept in an in-process
// map, so a call with a seen shape costs a map lookup and a launch; jit()'s own memory and disk
// caches sit behind the first compile of a process. The caller (python/tessel/ops.py) has
// checked devices, dtypes, shapes and strides and allocated the outputs with torch.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "Bindings.hpp"
#include "DLPack.hpp"
#include "tessel/interp/Interpreter.hpp"
#include "tessel/kernels/attention/FlashAttention.hpp"
#include "tessel/kernels/gemm/Matmul.hpp"
#include "tessel/kernels/softmax/Softmax.hpp"

namespace nb = nanobind;

namespace tessel::python {

namespace {

enum class OpKind : std::int64_t { matmul, linear, softmax, attention };

using Key = std::vector<std::int64_t>;
struct KeyHash {
  std::size_t operator()(const Key& k) const noexcept {
    std::size_t h = 1469598103934665603ull;
    for (std::int64_t v : k) h = (h ^ static_cast<std::size_t>(v)) * 1099511628211ull;
    return h;
  }
};

// The op cache. Looked up with the GIL held (one thread at a time); compiles release the GIL, so
// two threads may compile one key at once: the first to finish is kept.
std::unordered_map<Key, JitKernel, KeyHash>& op_cache() {
  static std::unordered_map<Key, JitKernel, KeyHash> cache;
  return cache;
}

const JitKernel& cached(const Key& key, const std::function<JitKernel()>& compile) {
  auto& cache = op_cache();
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  JitKernel k;
  {
    nb::gil_scoped_release release;
    k = compile();
  }
  return cache.emplace(key, std::move(k)).first->second;
}

CUstream as_stream(std::uintptr_t s) {
  return reinterpret_cast<CUstream>(s);
}

std::int64_t dtype_key(DType d) {
  return static_cast<std::int64_t>(d);
}

// A [M, K] view of batch entry i of a [batch, M, K] tensor (batch stride 0: broadcast).
Tensor batch_entry(const Tensor& t, std::int64_t i) {
  const auto& sh = t.shape();
  const auto& st = t.strides();
  return Tensor::view_of(t.device_ptr() + static_cast<CUdeviceptr>(i * st[0] * dtype_bytes(t.dtype())),
                         {sh[1], sh[2]}, t.dtype(), {st[1], st[2]});
}

// The library GEMM per shape (kernels::Matmul: rows that are not 16-byte aligned staged through
// padded buffers, skinny shapes split over K, as its plan decides), in its own map beside the op
// cache (counted by op_cache_size, emptied by clear_op_cache). Its scratch comes from the caller
// (tessel.ops.matmul allocates it with torch), so calls on different streams never share it.
std::unordered_map<Key, kernels::Matmul, KeyHash>& matmul_cache() {
  static std::unordered_map<Key, kernels::Matmul, KeyHash> cache;
  return cache;
}

const kernels::Matmul& matmul_op(std::int64_t M, std::int64_t N, std::int64_t K, DType d) {
  const Key key{static_cast<std::int64_t>(OpKind::matmul), M, N, K, dtype_key(d)};
  auto& cache = matmul_cache();
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  std::optional<kernels::Matmul> mm;
  {
    nb::gil_scoped_release release;
    mm.emplace(int(M), int(N), int(K), d);
  }
  return cache.emplace(key, std::move(*mm)).first->second;
}

const JitKernel& matmul_kernel(std::int64_t M, std::int64_t N, std::int64_t K, DType d) {
  return matmul_op(M, N, K, d).kernel();
}

// The scratch bytes tessel.ops.matmul allocates for this shape (0: none); compiles on first use.
std::size_t matmul_workspace_bytes(std::int64_t M, std::int64_t N, std::int64_t K, const std::string& dtype) {
  const std::optional<DType> d = parse_dtype(dtype);
  if (!d) throw nb::value_error(("matmul_workspace_bytes: dtype '" + dtype + "'; legal: f16, bf16").c_str());
  return matmul_op(M, N, K, *d).workspace_bytes();
}

// C = A B for 2-D [M, K] x [K, N] -> [M, N], or batched [b, M, K] x [b, K, N] -> [b, M, N] (a
// batch stride 0 broadcasts): one launch of the 2-D kernel per batch entry, on `stream`.
// `workspace`: None, or a 1-D uint8 device tensor of matmul_workspace_bytes() or more (the same
// for every batch entry: they run one after another on `stream`).
void matmul_into(nb::handle a_obj, nb::handle b_obj, nb::handle c_obj, std::uintptr_t stream,
                 nb::handle ws_obj) {
  Tensor a = device_view(borrow(a_obj, "a"), "a");
  Tensor b = device_view(borrow(b_obj, "b"), "b");
  Tensor c = device_view(borrow(c_obj, "out"), "out");
  std::optional<Borrowed> ws_owner;
  CUdeviceptr ws = 0;
  std::size_t ws_bytes = 0;
  if (!ws_obj.is_none()) {
    ws_owner.emplace(borrow(ws_obj, "workspace"));
    Tensor w = device_view(*ws_owner, "workspace");
    ws = w.device_ptr(), ws_bytes = static_cast<std::size_t>(w.nbytes());
  }
  const bool batched = a.dim() == 3;
  const kernels::Matmul& mm = batched ? matmul_op(a.size(1), b.size(2), a.size(2), a.dtype())
                                      : matmul_op(a.size(0), b.size(1), a.size(1), a.dtype());
  auto run = [&](const Tensor& x, const Tensor& y, const Tensor& z) {
    if (mm.workspace_bytes() == 0) {
      mm(x, y, z, as_stream(stream));
    } else {
      if (ws == 0)
        throw nb::value_error("matmul_into: this shape needs a workspace (matmul_workspace_bytes)");
      mm(x, y, z, as_stream(stream), ws, ws_bytes);
    }
  };
  if (!batched) {
    run(a, b, c);
    return;
  }
  for (std::int64_t i = 0; i < c.size(0); ++i) run(batch_entry(a, i), batch_entry(b, i), batch_entry(c, i));
}

kernels::Activation activation_from(const std::string& a) {
  if (a == "relu") return kernels::Activation::relu;
  if (a == "silu") return kernels::Activation::silu;
  if (a == "none") return kernels::Activation::none;
  throw nb::value_error(("activation: '" + a + "'; the fused epilogue takes none, relu, silu").c_str());
}

// C = act(X Wt + bias): X [M, K], Wt [K, N] (the weight transposed, row-major), bias [N].
void linear_into(nb::handle x_obj, nb::handle wt_obj, nb::handle bias_obj, nb::handle c_obj,
                 const std::string& activation, std::uintptr_t stream) {
  Tensor x = device_view(borrow(x_obj, "x"), "x");
  Tensor wt = device_view(borrow(wt_obj, "weight"), "weight");
  Tensor bias = device_view(borrow(bias_obj, "bias"), "bias");
  Tensor c = device_view(borrow(c_obj, "out"), "out");
  kernels::Activation act = activation_from(activation);
  const std::int64_t M = x.size(0), K = x.size(1), N = wt.size(1);
  const JitKernel& k = cached({static_cast<std::int64_t>(OpKind::linear), M, N, K, dtype_key(x.dtype()),
                               static_cast<std::int64_t>(act)},
                              [&] {
                                auto cfg =
                                    kernels::choose_matmul_config(int(M), int(N), int(K), x.dtype()).config;
                                return kernels::make_matmul_bias_act(int(M), int(N), int(K), cfg, act);
                              });
  k.launch({x, wt, bias, c}, as_stream(stream));
}

// Y = softmax(X) along the last dimension of a 2-D [M, N] tensor.
void softmax_into(nb::handle x_obj, nb::handle y_obj, std::uintptr_t stream) {
  Tensor x = device_view(borrow(x_obj, "x"), "x");
  Tensor y = device_view(borrow(y_obj, "out"), "out");
  const std::int64_t M = x.size(0), N = x.size(1);
  const JitKernel& k = cached({static_cast<std::int64_t>(OpKind::softmax), M, N, dtype_key(x.dtype())},
                              [&] { return kernels::make_softmax(M, N, x.dtype()); });
  k.launch({x, y}, as_stream(stream));
}

kernels::AttentionShape attention_shape(const Tensor& q, const Tensor& k, const Tensor& v) {
  kernels::AttentionShape s;
  s.batch = q.size(0), s.seqlen_q = q.size(1), s.heads = q.size(2), s.dim = q.size(3);
  s.seqlen_k = k.size(1), s.kv_heads = k.size(2);
  s.q_strides = q.strides(), s.k_strides = k.strides(), s.v_strides = v.strides();
  return s;
}

// O, LSE = attention(Q, K, V): Q [B, Sq, H, D], K/V [B, Sk, Hkv, D] with any strides (D
// contiguous), O [B, Sq, H, D] row-major, LSE [B, H, Sq] f32. scale 0: 1/sqrt(D).
void attention_into(nb::handle q_obj, nb::handle k_obj, nb::handle v_obj, nb::handle o_obj,
                    nb::handle lse_obj, bool causal, float scale, std::uintptr_t stream) {
  Tensor q = device_view(borrow(q_obj, "q"), "q");
  Tensor k = device_view(borrow(k_obj, "k"), "k");
  Tensor v = device_view(borrow(v_obj, "v"), "v");
  Tensor o = device_view(borrow(o_obj, "out"), "out");
  Tensor lse = device_view(borrow(lse_obj, "lse"), "lse");
  kernels::AttentionShape s = attention_shape(q, k, v);
  std::uint32_t scale_bits;
  std::memcpy(&scale_bits, &scale, sizeof scale_bits);
  Key key{static_cast<std::int64_t>(OpKind::attention),
          s.batch,
          s.heads,
          s.kv_heads,
          s.seqlen_q,
          s.seqlen_k,
          s.dim,
          dtype_key(q.dtype()),
          causal ? 1 : 0,
          static_cast<std::int64_t>(scale_bits)};
  for (const auto* st : {&s.q_strides, &s.k_strides, &s.v_strides})
    key.insert(key.end(), st->begin(), st->end());
  const JitKernel& kernel = cached(key, [&] {
    kernels::check_attention(s, q.dtype());
    kernels::AttentionOptions o;
    o.causal = causal;
    o.scale = scale;
    return kernels::make_flash_attention(s, q.dtype(), o);
  });
  kernel.launch({q, k, v, o, lse}, as_stream(stream));
}

// ---- the same on the CPU reference interpreter (small tensors: it interprets every element) ----
nb::list to_capsules(std::vector<interp::HostTensor>&& out) {
  nb::list result;
  for (auto& t : out) result.append(host_capsule(std::move(t)));
  return result;
}

nb::object matmul_cpu(nb::handle a_obj, nb::handle b_obj) {
  auto a = host_copy(borrow(a_obj, "a"), "a");
  auto b = host_copy(borrow(b_obj, "b"), "b");
  const auto M = a.shape[0], K = a.shape[1], N = b.shape[1];
  kernels::MatmulConfig cfg;
  cfg.dtype = a.dtype;
  std::vector<interp::HostTensor> out;
  {
    nb::gil_scoped_release release;
    out = interp::run_on_cpu(kernels::matmul_program(int(M), int(N), int(K), cfg), {a, b}, {-1});
  }
  return host_capsule(std::move(out[0]));
}

nb::object linear_cpu(nb::handle x_obj, nb::handle wt_obj, nb::handle bias_obj,
                      const std::string& activation) {
  auto x = host_copy(borrow(x_obj, "x"), "x");
  auto wt = host_copy(borrow(wt_obj, "weight"), "weight");
  auto bias = host_copy(borrow(bias_obj, "bias"), "bias");
  kernels::Activation act = activation_from(activation);
  const auto M = x.shape[0], K = x.shape[1], N = wt.shape[1];
  kernels::MatmulConfig cfg;
  cfg.dtype = x.dtype;
  std::vector<interp::HostTensor> out;
  {
    nb::gil_scoped_release release;
    out = interp::run_on_cpu(kernels::matmul_bias_act_program(int(M), int(N), int(K), cfg, act),
                             {x, wt, bias}, {-1});
  }
  return host_capsule(std::move(out[0]));
}

nb::object softmax_cpu(nb::handle x_obj) {
  auto x = host_copy(borrow(x_obj, "x"), "x");
  const auto M = x.shape[0], N = x.shape[1];
  std::vector<interp::HostTensor> out;
  {
    nb::gil_scoped_release release;
    auto cfg = kernels::default_softmax_config(M, N, x.dtype);
    out = interp::run_on_cpu(kernels::softmax_program(M, N, x.dtype, cfg), {x}, {-1});
  }
  return host_capsule(std::move(out[0]));
}

nb::list attention_cpu(nb::handle q_obj, nb::handle k_obj, nb::handle v_obj, bool causal, float scale) {
  // Row-major [B, S, H, D] host copies of the (possibly strided) views.
  auto q = host_copy(borrow(q_obj, "q"), "q");
  auto k = host_copy(borrow(k_obj, "k"), "k");
  auto v = host_copy(borrow(v_obj, "v"), "v");
  kernels::AttentionShape s;
  s.batch = q.shape[0], s.seqlen_q = q.shape[1], s.heads = q.shape[2], s.dim = q.shape[3];
  s.seqlen_k = k.shape[1], s.kv_heads = k.shape[2];
  std::vector<interp::HostTensor> out;
  {
    nb::gil_scoped_release release;
    kernels::check_attention(s, q.dtype);
    // The cp.async schedule's program (the one every arch runs): the interpreter gives every
    // schedule the same meaning.
    auto cfg = kernels::default_attention_config(s, q.dtype, causal, "sm_80");
    out = interp::run_on_cpu(kernels::attention_program(s, q.dtype, causal, scale, cfg), {q, k, v}, {3, 4});
  }
  return to_capsules(std::move(out));
}

// Everything matmul_into does but the launch (any device): what tessel's overhead benchmark
// times on a machine without a GPU. Compiles the kernel on first use, as the op does.
void matmul_overhead_probe(nb::handle a_obj, nb::handle b_obj, nb::handle c_obj, std::uintptr_t) {
  auto view = [](nb::handle obj, const char* what) {
    Borrowed br = borrow(obj, what);
    const dl::Tensor& t = *br.tensor;
    std::vector<std::int64_t> shape(t.shape, t.shape + t.ndim), strides;
    if (t.strides) strides.assign(t.strides, t.strides + t.ndim);
    return Tensor::view_of(reinterpret_cast<CUdeviceptr>(t.data) + t.byte_offset, std::move(shape),
                           dtype_of(t, what), std::move(strides));
  };
  Tensor a = view(a_obj, "a"), b = view(b_obj, "b"), c = view(c_obj, "out");
  const JitKernel& k = matmul_kernel(a.size(0), b.size(1), a.size(1), a.dtype());
  if (k.name().empty()) throw nb::value_error("internal: unnamed kernel");
}

// The floor under tessel.ops.matmul's per-call cost: `n` launches of the same cached kernel from
// C++ (tensors imported once, no Python in the loop), the CPU microseconds per launch. Needs a
// GPU; n stays below the launch queue's depth in the caller, so the CPU never waits for the GPU.
double matmul_launch_loop_us(nb::handle a_obj, nb::handle b_obj, nb::handle c_obj, std::uintptr_t stream,
                             int n) {
  require_gpu("matmul_launch_loop_us");
  if (n < 1)
    throw nb::value_error(("matmul_launch_loop_us: n = " + std::to_string(n) + "; legal: n >= 1").c_str());
  Tensor a = device_view(borrow(a_obj, "a"), "a");
  Tensor b = device_view(borrow(b_obj, "b"), "b");
  Tensor c = device_view(borrow(c_obj, "out"), "out");
  if (a.dim() != 2) throw nb::value_error("matmul_launch_loop_us: 2-D tensors only");
  const JitKernel& k = matmul_kernel(a.size(0), b.size(1), a.size(1), a.dtype());
  nb::gil_scoped_release release;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) k.launch({a, b, c}, as_stream(stream));
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / n;
}

}  // namespace

void bind_ops(nb::module_& m) {
  m.def("matmul_into", &matmul_into, nb::arg("a"), nb::arg("b"), nb::arg("out"), nb::arg("stream"),
        nb::arg("workspace").none() = nb::none());
  m.def("matmul_workspace_bytes", &matmul_workspace_bytes, nb::arg("M"), nb::arg("N"), nb::arg("K"),
        nb::arg("dtype"),
        "Scratch bytes tessel.ops.matmul allocates for this GEMM (kernels::Matmul's plan).");
  m.def("linear_into", &linear_into, nb::arg("x"), nb::arg("weight_t"), nb::arg("bias"), nb::arg("out"),
        nb::arg("activation"), nb::arg("stream"));
  m.def("softmax_into", &softmax_into, nb::arg("x"), nb::arg("out"), nb::arg("stream"));
  m.def("attention_into", &attention_into, nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("out"),
        nb::arg("lse"), nb::arg("causal"), nb::arg("scale"), nb::arg("stream"));
  m.def("matmul_cpu", &matmul_cpu, nb::arg("a"), nb::arg("b"));
  m.def("linear_cpu", &linear_cpu, nb::arg("x"), nb::arg("weight_t"), nb::arg("bias"), nb::arg("activation"));
  m.def("softmax_cpu", &softmax_cpu, nb::arg("x"));
  m.def("attention_cpu", &attention_cpu, nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("causal"),
        nb::arg("scale"));
  m.def("matmul_overhead_probe", &matmul_overhead_probe, nb::arg("a"), nb::arg("b"), nb::arg("out"),
        nb::arg("stream"));
  m.def("matmul_launch_loop_us", &matmul_launch_loop_us, nb::arg("a"), nb::arg("b"), nb::arg("out"),
        nb::arg("stream"), nb::arg("n"));
  m.def(
      "op_cache_size", [] { return op_cache().size() + matmul_cache().size(); },
      "Kernels the ops compiled in this process.");
  m.def(
      "clear_op_cache",
      [] {
        op_cache().clear();
        matmul_cache().clear();
      },
      "Forgets the ops' kernels (jit()'s memory and disk caches keep theirs).");
}

}  // namespace tessel::python
