#include "tools/tessel/CudnnSoftmax.hpp"

#include <cudnn.h>
#include <dlfcn.h>

#include "tessel/Error.hpp"
#include "tessel/runtime/Driver.hpp"

namespace tessel::cli {

// The handful of cuDNN entry points the baseline uses, resolved from the shared library.
struct CudnnSoftmax::Impl {
  void* lib = nullptr;
  decltype(&::cudnnCreate) create = nullptr;
  decltype(&::cudnnDestroy) destroy = nullptr;
  decltype(&::cudnnGetVersion) get_version = nullptr;
  decltype(&::cudnnGetErrorString) error_string = nullptr;
  decltype(&::cudnnCreateTensorDescriptor) create_desc = nullptr;
  decltype(&::cudnnDestroyTensorDescriptor) destroy_desc = nullptr;
  decltype(&::cudnnSetTensor4dDescriptor) set_desc = nullptr;
  decltype(&::cudnnSoftmaxForward) softmax = nullptr;
  cudnnHandle_t handle = nullptr;
  cudnnTensorDescriptor_t desc = nullptr;

  void check(cudnnStatus_t s, const char* what) const {
    if (s != CUDNN_STATUS_SUCCESS)
      throw RuntimeError(std::string("cuDNN ") + what + " failed: " + error_string(s));
  }
};

namespace {
template <class F>
bool resolve(void* lib, const char* name, F& out) {
  out = reinterpret_cast<F>(dlsym(lib, name));
  return out != nullptr;
}
}  // namespace

CudnnSoftmax::CudnnSoftmax() {
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
  bool ok = resolve(impl->lib, "cudnnCreate", impl->create) &&
            resolve(impl->lib, "cudnnDestroy", impl->destroy) &&
            resolve(impl->lib, "cudnnGetVersion", impl->get_version) &&
            resolve(impl->lib, "cudnnGetErrorString", impl->error_string) &&
            resolve(impl->lib, "cudnnCreateTensorDescriptor", impl->create_desc) &&
            resolve(impl->lib, "cudnnDestroyTensorDescriptor", impl->destroy_desc) &&
            resolve(impl->lib, "cudnnSetTensor4dDescriptor", impl->set_desc) &&
            resolve(impl->lib, "cudnnSoftmaxForward", impl->softmax);
  if (!ok) {
    reason_ = "libcudnn.so.9 lacks the legacy softmax API (cudnnSoftmaxForward)";
    dlclose(impl->lib);
    return;
  }
  ensure_context();
  if (impl->create(&impl->handle) != CUDNN_STATUS_SUCCESS ||
      impl->create_desc(&impl->desc) != CUDNN_STATUS_SUCCESS) {
    reason_ = "cudnnCreate failed";
    return;
  }
  impl_ = std::move(impl);
}

CudnnSoftmax::~CudnnSoftmax() {
  if (!impl_) return;
  impl_->destroy_desc(impl_->desc);
  impl_->destroy(impl_->handle);
}

std::string CudnnSoftmax::version() const {
  if (!impl_) return "unavailable";
  size_t v = impl_->get_version();
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

void CudnnSoftmax::run(const Tensor& x, const Tensor& y) {
  if (!impl_) throw RuntimeError("cuDNN softmax unavailable: " + reason_);
  cudnnDataType_t t;
  switch (x.dtype()) {
    case DType::f16:
      t = CUDNN_DATA_HALF;
      break;
    case DType::bf16:
      t = CUDNN_DATA_BFLOAT16;
      break;
    case DType::f32:
      t = CUDNN_DATA_FLOAT;
      break;
    default:
      throw RuntimeError("cuDNN softmax: dtype " + std::string(dtype_name(x.dtype())) + " is not supported");
  }
  impl_->check(impl_->set_desc(impl_->desc, CUDNN_TENSOR_NCHW, t, static_cast<int>(x.size(0)),
                               static_cast<int>(x.size(1)), 1, 1),
               "cudnnSetTensor4dDescriptor");
  float alpha = 1, beta = 0;
  impl_->check(impl_->softmax(impl_->handle, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL, &alpha,
                              impl_->desc, x.data_ptr(), &beta, impl_->desc, y.data_ptr()),
               "cudnnSoftmaxForward");
}

}  // namespace tessel::cli
