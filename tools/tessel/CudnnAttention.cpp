// The cuDNN SDPA baseline (see the header). The only translation unit that includes the cuDNN
// frontend: its headers take most of this file's compile time, so nothing else includes them.
#include "tools/tessel/CudnnAttention.hpp"

#include <cmath>
#include <map>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "tessel/Error.hpp"
#include "tessel/runtime/Driver.hpp"

#if defined(TESSEL_HAVE_CUDNN_FRONTEND)
#include <dlfcn.h>
#include <link.h>

#include <cstring>

#include <cudnn_frontend.h>

// The frontend's dynamic-loading mode resolves every cuDNN call through this handle, which the
// program owns (cudnn_frontend_shim.h declares it extern).
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}  // namespace cudnn_frontend
#endif

namespace tessel::cli {

namespace {

void require(bool ok, const std::string& message) {
  if (!ok) throw RuntimeError("cuDNN attention: " + message);
}

// The checks cuDNN would make with a less helpful message, and the ones it cannot make (it never
// sees Tessel's shapes).
void check_tensors(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& stats) {
  for (const Tensor* t : {&q, &k, &v, &o})
    require(t->defined() && t->dim() == 4 && t->strides()[3] == 1,
            "Q, K, V and O must be 4-D [B, S, H, D] with a contiguous D, not " + t->describe());
  require(q.dtype() == DType::f16 || q.dtype() == DType::bf16,
          "takes f16 or bf16 inputs, not " + std::string(dtype_name(q.dtype())));
  for (const Tensor* t : {&k, &v, &o})
    require(t->dtype() == q.dtype(), "Q, K, V and O must share one dtype; got " + t->describe());
  const std::int64_t B = q.size(0), Sq = q.size(1), H = q.size(2);
  require(k.shape() == v.shape(), "K and V must have one shape: " + k.describe() + " vs " + v.describe());
  require(k.size(0) == B && k.size(3) == q.size(3), "K's batch and head dim must match Q's: " + k.describe());
  require(k.size(2) >= 1 && H % k.size(2) == 0,
          "K/V heads must divide Q's " + std::to_string(H) + " heads: " + k.describe());
  require(o.shape() == q.shape(), "O must have Q's shape: " + o.describe());
  require(stats.defined() && stats.dtype() == DType::f32 &&
              (stats.shape() == std::vector<std::int64_t>{B, H, Sq} ||
               stats.shape() == std::vector<std::int64_t>{B, H, Sq, 1}),
          "stats must be f32 [B, H, Sq] or [B, H, Sq, 1], not " + stats.describe());
}

}  // namespace

#if defined(TESSEL_HAVE_CUDNN_FRONTEND)

namespace fe = cudnn_frontend;

namespace {

// A tensor as cuDNN describes it: dims [B, H, S, D] and the
// strides of the same elements. Tessel's tensors are [B, S, H, D]; only the order of the middle
// two dimensions differs.
struct Bhsd {
  std::vector<std::int64_t> dims, strides;
};

Bhsd to_bhsd(const Tensor& t) {
  const auto& n = t.shape();
  const auto& s = t.strides();
  return {{n[0], n[2], n[1], n[3]}, {s[0], s[2], s[1], s[3]}};
}

enum Uid : std::int64_t { kQ = 1, kK, kV, kO, kStats };

struct GraphKey {
  std::vector<std::int64_t> q, k, v, o, stats;  // dims then strides, cuDNN order
  bool causal;
  DType dtype;
  float scale;
  auto tie() const { return std::tie(q, k, v, o, stats, causal, dtype, scale); }
  bool operator<(const GraphKey& other) const { return tie() < other.tie(); }
};

struct BuiltGraph {
  std::shared_ptr<fe::graph::Graph> graph;
  Tensor workspace;  // allocated once, at build time
};

std::vector<std::int64_t> dims_and_strides(const Bhsd& b) {
  std::vector<std::int64_t> r = b.dims;
  r.insert(r.end(), b.strides.begin(), b.strides.end());
  return r;
}

// The folder of the loaded shared library whose file name starts with `prefix`; "" if none.
std::string loaded_library_folder(const char* prefix) {
  struct Search {
    const char* prefix;
    std::string folder;
  } search{prefix, ""};
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        auto* s = static_cast<Search*>(data);
        const std::string path = info->dlpi_name ? info->dlpi_name : "";
        const std::size_t slash = path.rfind('/');
        if (slash == std::string::npos || path.compare(slash + 1, std::strlen(s->prefix), s->prefix) != 0)
          return 0;
        s->folder = path.substr(0, slash);
        return 1;
      },
      &search);
  return search.folder;
}

void check_fe(fe::error_t e, const std::string& what) {
  if (e.is_bad()) throw RuntimeError("cuDNN attention: " + what + " failed: " + e.err_msg);
}

}  // namespace

struct CudnnAttention::Impl {
  void* lib = nullptr;
  void* cudart = nullptr;
  cudnnHandle_t handle = nullptr;
  std::map<GraphKey, BuiltGraph> graphs;
  int sm_version = 0;

  const BuiltGraph& graph_for(const GraphKey& key, const Bhsd& q, const Bhsd& k, const Bhsd& v, const Bhsd& o,
                              const Bhsd& stats) {
    if (auto it = graphs.find(key); it != graphs.end()) return it->second;
    auto g = std::make_shared<fe::graph::Graph>();
    const fe::DataType_t io = key.dtype == DType::f16 ? fe::DataType_t::HALF : fe::DataType_t::BFLOAT16;
    g->set_io_data_type(io)
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    // Known already (tessel asked the driver); spares the frontend a CUDA-runtime query.
    g->set_sm_version(sm_version);
    auto input = [&](const char* name, Uid uid, const Bhsd& t) {
      return g->tensor(
          fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(t.dims).set_stride(t.strides));
    };
    auto Q = input("Q", kQ, q), K = input("K", kK, k), V = input("V", kV, v);
    auto attrs =
        fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(true).set_attn_scale(key.scale);
    if (key.causal) {
      // Right bound 0 from the bottom-right diagonal: query i sees key j iff j <= i + Sk - Sq.
      attrs.set_diagonal_alignment(fe::DiagonalAlignment_t::BOTTOM_RIGHT).set_diagonal_band_right_bound(0);
    }
    auto [O, Stats] = g->sdpa(Q, K, V, attrs);
    O->set_output(true).set_uid(kO).set_dim(o.dims).set_stride(o.strides);
    Stats->set_output(true)
        .set_uid(kStats)
        .set_data_type(fe::DataType_t::FLOAT)
        .set_dim(stats.dims)
        .set_stride(stats.strides);
    check_fe(g->validate(), "validate");
    check_fe(g->build_operation_graph(handle), "build_operation_graph");
    check_fe(g->create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}),
             "create_execution_plans");
    check_fe(g->check_support(), "check_support");
    check_fe(g->build_plans(), "build_plans");
    std::int64_t bytes = 0;
    check_fe(g->get_workspace_size(bytes), "get_workspace_size");
    BuiltGraph built{g, bytes > 0 ? Tensor::empty({bytes}, DType::u8) : Tensor()};
    return graphs.emplace(key, std::move(built)).first->second;
  }
};

bool CudnnAttention::built() {
  return true;
}

std::string CudnnAttention::frontend_version() {
  return std::to_string(CUDNN_FRONTEND_MAJOR_VERSION) + "." + std::to_string(CUDNN_FRONTEND_MINOR_VERSION) +
         "." + std::to_string(CUDNN_FRONTEND_PATCH_VERSION);
}

CudnnAttention::CudnnAttention() {
  if (!gpu_available()) {
    reason_ = "no GPU: " + gpu_unavailable_reason();
    return;
  }
  auto impl = std::make_unique<Impl>();
  impl->lib = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
  if (!impl->lib) {
    reason_ = std::string("cuDNN not found (libcudnn.so.9): ") + dlerror();
    return;
  }
  using GetVersion = std::size_t (*)();
  auto get_version = reinterpret_cast<GetVersion>(dlsym(impl->lib, "cudnnGetVersion"));
  if (!get_version || get_version() < 90000) {
    reason_ = "libcudnn.so.9 is not cuDNN 9 (cudnnGetVersion missing or too old)";
    dlclose(impl->lib);
    return;
  }
  // The frontend calls a few CUDA runtime functions, through a libcudart it loads by soname
  // (.13, then .12); tessel itself only uses the driver. Loading it here first turns a missing
  // runtime into a reason rather than an exception in the middle of a benchmark.
  impl->cudart = dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
  if (!impl->cudart) impl->cudart = dlopen("libcudart.so.12", RTLD_NOW | RTLD_LOCAL);
  if (!impl->cudart) {
    // Not on the search path: try the toolkit folder that libnvrtc (which tessel links) came
    // from. Once loaded, the frontend's dlopen by soname finds this copy.
    if (const std::string dir = loaded_library_folder("libnvrtc.so"); !dir.empty())
      impl->cudart = dlopen((dir + "/libcudart.so.13").c_str(), RTLD_NOW | RTLD_LOCAL);
  }
  if (!impl->cudart) {
    reason_ =
        "the cuDNN frontend needs the CUDA runtime (libcudart.so.13 or .12), which is not on the library "
        "path";
    dlclose(impl->lib);
    return;
  }
  if (!fe::cudnn_dlhandle) fe::cudnn_dlhandle = impl->lib;
  const DeviceInfo& dev = current_device();
  impl->sm_version = dev.cc_major * 10 + dev.cc_minor;
  ensure_context();  // cuDNN runs in the current (primary) context, the one tessel launches in
  try {
    if (fe::detail::create_handle(&impl->handle) != CUDNN_STATUS_SUCCESS) {
      reason_ = "cudnnCreate failed";
      return;
    }
  } catch (const std::exception& e) {
    reason_ = std::string("cuDNN could not be initialized: ") + e.what();
    return;
  }
  impl_ = std::move(impl);
}

CudnnAttention::~CudnnAttention() {
  if (!impl_) return;
  impl_->graphs.clear();  // the plans before the handle they were built with
  fe::detail::destroy_handle(impl_->handle);
  // libcudnn stays loaded: the frontend's resolved function pointers are process-wide statics.
}

std::string CudnnAttention::version() const {
  if (!impl_) return "unavailable";
  const std::size_t v = fe::detail::get_backend_version();
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

std::size_t CudnnAttention::cached_graphs() const {
  return impl_ ? impl_->graphs.size() : 0;
}

void CudnnAttention::run(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                         const Tensor& stats, bool causal, float scale) {
  if (!impl_) throw RuntimeError("cuDNN attention unavailable: " + reason_);
  check_tensors(q, k, v, o, stats);
  const std::int64_t B = q.size(0), Sq = q.size(1), H = q.size(2), D = q.size(3), Sk = k.size(1);
  if (scale == 0.0f) scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  // stats as [B, H, Sq, 1], whichever rank it came in.
  const Tensor st = stats.dim() == 4
                        ? stats
                        : Tensor::view_of(stats.device_ptr(), {B, H, Sq, 1}, DType::f32,
                                          {stats.strides()[0], stats.strides()[1], stats.strides()[2], 1});
  Tensor q_run = q, o_run = o, st_run = st;
  if (causal && Sq > Sk) {
    // The first Sq - Sk queries see no key. cuDNN's bottom-right mask wants Sq <= Sk, so it runs
    // on the last Sk queries (the same diagonal) and the others are written here: O = 0 and
    // stats = -inf, as Tessel defines them. Synchronous fills: this case is for checking, not timing.
    const std::int64_t masked = Sq - Sk;
    o.slice(1, 0, masked).fill(0.0);
    st.slice(2, 0, masked).fill(-INFINITY);
    if (Sk == 0) return;
    q_run = q.slice(1, masked, Sq);
    o_run = o.slice(1, masked, Sq);
    st_run = st.slice(2, masked, Sq);
  }
  const Bhsd bq = to_bhsd(q_run), bk = to_bhsd(k), bv = to_bhsd(v), bo = to_bhsd(o_run);
  const Bhsd bs{st_run.shape(), st_run.strides()};  // already [B, H, S, 1]
  const GraphKey key{dims_and_strides(bq),
                     dims_and_strides(bk),
                     dims_and_strides(bv),
                     dims_and_strides(bo),
                     dims_and_strides(bs),
                     causal,
                     q.dtype(),
                     scale};
  const BuiltGraph& built = impl_->graph_for(key, bq, bk, bv, bo, bs);
  std::unordered_map<std::int64_t, void*> pack = {{kQ, q_run.data_ptr()},
                                                  {kK, k.data_ptr()},
                                                  {kV, v.data_ptr()},
                                                  {kO, o_run.data_ptr()},
                                                  {kStats, st_run.data_ptr()}};
  void* workspace = built.workspace.defined() ? built.workspace.data_ptr() : nullptr;
  check_fe(built.graph->execute(impl_->handle, pack, workspace), "execute");
}

#else  // !TESSEL_HAVE_CUDNN_FRONTEND

struct CudnnAttention::Impl {};

bool CudnnAttention::built() {
  return false;
}

std::string CudnnAttention::frontend_version() {
  return "not built";
}

CudnnAttention::CudnnAttention()
    : reason_(
          "cuDNN attention baseline not built: frontend headers not found (scripts/setup.sh fetches them; or "
          "configure with -DTESSEL_CUDNN_FRONTEND_INCLUDE_DIR=<dir holding cudnn_frontend.h>)") {}

CudnnAttention::~CudnnAttention() = default;

std::string CudnnAttention::version() const {
  return "unavailable";
}

std::size_t CudnnAttention::cached_graphs() const {
  return 0;
}

void CudnnAttention::run(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                         const Tensor& stats, bool, float) {
  check_tensors(q, k, v, o, stats);
  throw RuntimeError("cuDNN attention unavailable: " + reason_);
}

#endif

}  // namespace tessel::cli
