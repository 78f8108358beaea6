// Borrowing DLPack tensors and handing out capsules (DLPack.hpp).
#include "DLPack.hpp"

#include <Python.h>

#include <cstring>
#include <memory>
#include <vector>

#include "tessel/runtime/Driver.hpp"

namespace nb = nanobind;

namespace tessel::python {

namespace {

constexpr const char* kVersionedName = "dltensor_versioned";
constexpr const char* kLegacyName = "dltensor";

const char* device_name(std::int32_t type) {
  switch (type) {
    case dl::kCPU: return "cpu";
    case dl::kCUDA: return "cuda";
    case dl::kCUDAHost: return "cuda_host";
    case dl::kCUDAManaged: return "cuda_managed";
    default: return "device type ";
  }
}

bool borrow_capsule(PyObject* cap, Borrowed& out) {
  if (PyCapsule_IsValid(cap, kVersionedName)) {
    auto* m = static_cast<dl::ManagedTensorVersioned*>(PyCapsule_GetPointer(cap, kVersionedName));
    if (m->version.major > 1)
      throw nb::type_error(("a DLPack " + std::to_string(m->version.major) + "." +
                            std::to_string(m->version.minor) + " tensor; Tessel reads DLPack 1.x")
                               .c_str());
    out.tensor = &m->dl_tensor;
    out.read_only = (m->flags & dl::kFlagReadOnly) != 0;
    return true;
  }
  if (PyCapsule_IsValid(cap, kLegacyName)) {
    out.tensor = &static_cast<dl::ManagedTensor*>(PyCapsule_GetPointer(cap, kLegacyName))->dl_tensor;
    return true;
  }
  return false;
}

}  // namespace

Borrowed borrow(nb::handle obj, const char* what) {
  Borrowed b;
  if (PyCapsule_CheckExact(obj.ptr())) {
    b.owner = nb::borrow(obj);
    if (borrow_capsule(obj.ptr(), b)) return b;
    const char* name = PyCapsule_GetName(obj.ptr());
    throw nb::type_error((std::string(what) + ": a capsule named '" + (name ? name : "") +
                          "'; expected an unconsumed DLPack capsule ('dltensor_versioned' or 'dltensor'; "
                          "a capsule can be consumed once)")
                             .c_str());
  }
  if (!nb::hasattr(obj, "__dlpack__"))
    throw nb::type_error((std::string(what) + ": expected a tensor supporting DLPack (__dlpack__), e.g. a "
                          "torch.Tensor or numpy array; got " +
                          std::string(nb::str(obj.type().attr("__name__")).c_str()))
                             .c_str());
  nb::object cap;
  try {
    cap = obj.attr("__dlpack__")(nb::arg("max_version") = nb::make_tuple(1, 0));
  } catch (nb::python_error& e) {
    if (!e.matches(PyExc_TypeError)) throw;
    cap = obj.attr("__dlpack__")();  // a producer older than DLPack 1.0's keyword
  }
  b.owner = cap;
  if (!PyCapsule_CheckExact(cap.ptr()) || !borrow_capsule(cap.ptr(), b))
    throw nb::type_error((std::string(what) + ".__dlpack__() did not return a DLPack capsule").c_str());
  return b;
}

DType dtype_of(const dl::Tensor& t, const char* what) {
  auto d = dtype_from_dlpack(t.dtype.code, t.dtype.bits);
  if (!d || t.dtype.lanes != 1)
    throw nb::type_error((std::string(what) + ": DLPack dtype (code " + std::to_string(t.dtype.code) + ", " +
                          std::to_string(t.dtype.bits) + " bits, " + std::to_string(t.dtype.lanes) +
                          " lanes) is not a Tessel dtype; legal: f16, bf16, f32, f64, i8, u8, i32, i64, bool")
                             .c_str());
  return *d;
}

std::string describe(const dl::Tensor& t) {
  auto d = dtype_from_dlpack(t.dtype.code, t.dtype.bits);
  std::string s = d ? std::string(dtype_name(*d)) : "dtype?";
  s += "[";
  for (int i = 0; i < t.ndim; ++i) s += (i ? ", " : "") + std::to_string(t.shape[i]);
  s += "] on ";
  s += device_name(t.device.device_type);
  if (std::strcmp(device_name(t.device.device_type), "device type ") == 0) s += std::to_string(t.device.device_type);
  s += ":" + std::to_string(t.device.device_id);
  return s;
}

Tensor device_view(const Borrowed& b, const char* what) {
  const dl::Tensor& t = *b.tensor;
  if (t.device.device_type != dl::kCUDA && t.device.device_type != dl::kCUDAManaged)
    throw nb::value_error((std::string(what) + " is " + describe(t) +
                           "; Tessel's GPU kernels take CUDA tensors (device memory)")
                              .c_str());
  if (gpu_available() && t.device.device_id != current_device().ordinal)
    throw nb::value_error((std::string(what) + " is " + describe(t) + "; Tessel runs on cuda:" +
                           std::to_string(current_device().ordinal) + " (set TESSEL_DEVICE to choose its GPU)")
                              .c_str());
  DType dtype = dtype_of(t, what);
  std::vector<std::int64_t> shape(t.shape, t.shape + t.ndim);
  std::vector<std::int64_t> strides;
  if (t.strides) strides.assign(t.strides, t.strides + t.ndim);
  auto data = reinterpret_cast<CUdeviceptr>(t.data) + t.byte_offset;
  return Tensor::view_of(data, std::move(shape), dtype, std::move(strides));
}

interp::HostTensor host_copy(const Borrowed& b, const char* what) {
  const dl::Tensor& t = *b.tensor;
  if (t.device.device_type != dl::kCPU && t.device.device_type != dl::kCUDAHost)
    throw nb::value_error((std::string(what) + " is " + describe(t) +
                           "; the CPU interpreter takes host tensors (device 'cpu')")
                              .c_str());
  DType dtype = dtype_of(t, what);
  std::vector<std::int64_t> shape(t.shape, t.shape + t.ndim);
  interp::HostTensor h(dtype, shape);
  const int elem = dtype_bytes(dtype);
  const auto* src = static_cast<const unsigned char*>(t.data) + t.byte_offset;
  const std::int64_t n = h.numel();
  if (!t.strides) {
    std::memcpy(h.bytes.data(), src, static_cast<std::size_t>(n * elem));
    return h;
  }
  // Strided gather in row-major order of the logical elements.
  std::vector<std::int64_t> index(shape.size(), 0);
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t offset = 0;
    for (std::size_t d = 0; d < shape.size(); ++d) offset += index[d] * t.strides[d];
    std::memcpy(h.bytes.data() + i * elem, src + offset * elem, static_cast<std::size_t>(elem));
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
  return h;
}

namespace {

struct HostContext {
  interp::HostTensor tensor;
  std::vector<std::int64_t> shape;
  dl::ManagedTensor managed;
};

void delete_host(dl::ManagedTensor* m) {
  delete static_cast<HostContext*>(m->manager_ctx);
}

// A capsule that was never consumed frees its tensor (the DLPack protocol's rule: a consumer
// renames it to "used_dltensor" and calls the deleter itself).
void capsule_destructor(PyObject* cap) {
  if (!PyCapsule_IsValid(cap, kLegacyName)) return;
  auto* m = static_cast<dl::ManagedTensor*>(PyCapsule_GetPointer(cap, kLegacyName));
  if (m && m->deleter) m->deleter(m);
}

nb::object make_capsule(dl::ManagedTensor* m) {
  PyObject* cap = PyCapsule_New(m, kLegacyName, capsule_destructor);
  if (!cap) {
    m->deleter(m);
    throw nb::python_error();
  }
  return nb::steal(cap);
}

}  // namespace

nb::object host_capsule(interp::HostTensor&& t) {
  auto ctx = std::make_unique<HostContext>();
  ctx->tensor = std::move(t);
  ctx->shape = ctx->tensor.shape;
  dl::Tensor& d = ctx->managed.dl_tensor;
  d.data = ctx->tensor.bytes.data();
  d.device = {dl::kCPU, 0};
  d.ndim = static_cast<std::int32_t>(ctx->shape.size());
  d.dtype = {static_cast<std::uint8_t>(dlpack_code(ctx->tensor.dtype)),
             static_cast<std::uint8_t>(dlpack_bits(ctx->tensor.dtype)), 1};
  d.shape = ctx->shape.data();
  d.strides = nullptr;
  ctx->managed.manager_ctx = ctx.get();
  ctx->managed.deleter = delete_host;
  dl::ManagedTensor* m = &ctx->managed;
  ctx.release();
  return make_capsule(m);
}

nb::object device_capsule(const Tensor& t) {
  return make_capsule(reinterpret_cast<dl::ManagedTensor*>(t.to_dlpack()));
}

}  // namespace tessel::python
