// DLPack for the extension: the ABI of DLPack 1.x (DLManagedTensorVersioned, "dltensor_versioned"
// capsules) and of 0.x (DLManagedTensor, "dltensor"), declared here because the system's
// dlpack.h may predate 1.0. Borrowing reads a producer's tensor without consuming its capsule (the
// capsule stays with its owner, whose destructor frees it), so the call path allocates nothing.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <string>

#include "tessel/DType.hpp"
#include "tessel/interp/HostTensor.hpp"
#include "tessel/runtime/Tensor.hpp"

namespace tessel::python {

namespace dl {
enum DeviceType : std::int32_t { kCPU = 1, kCUDA = 2, kCUDAHost = 3, kCUDAManaged = 13 };
struct Device {
  std::int32_t device_type = 0, device_id = 0;
};
struct DataType {
  std::uint8_t code = 0, bits = 0;
  std::uint16_t lanes = 0;
};
struct Tensor {
  void* data = nullptr;
  Device device{};
  std::int32_t ndim = 0;
  DataType dtype{};
  std::int64_t* shape = nullptr;
  std::int64_t* strides = nullptr;  // null: row-major
  std::uint64_t byte_offset = 0;
};
struct ManagedTensor {
  Tensor dl_tensor{};
  void* manager_ctx = nullptr;
  void (*deleter)(ManagedTensor*) = nullptr;
};
struct PackVersion {
  std::uint32_t major = 1, minor = 0;
};
struct ManagedTensorVersioned {
  PackVersion version{};
  void* manager_ctx = nullptr;
  void (*deleter)(ManagedTensorVersioned*) = nullptr;
  std::uint64_t flags = 0;  // bit 0: read-only; bit 1: a copy
  Tensor dl_tensor{};
};
inline constexpr std::uint64_t kFlagReadOnly = 1;
}  // namespace dl

// A producer's tensor, borrowed for the length of a call: `owner` (the capsule) keeps it alive.
struct Borrowed {
  nanobind::object owner{};
  const dl::Tensor* tensor = nullptr;
  bool read_only = false;
};

// `obj` is a DLPack capsule ("dltensor_versioned" or "dltensor", not yet consumed) or an object
// with __dlpack__ (asked for a versioned capsule first). `what` names the argument in errors
// (TypeError when it is neither).
Borrowed borrow(nanobind::handle obj, const char* what);

// The tensor's Tessel dtype; TypeError naming `what` for dtypes Tessel lacks or vector lanes.
DType dtype_of(const dl::Tensor& t, const char* what);
// "f16[64, 32] on cuda:0" for errors.
std::string describe(const dl::Tensor& t);

// A non-owning Tessel view of a CUDA tensor (device memory: kDLCUDA or kDLCUDAManaged);
// ValueError naming `what` for any other device. No synchronization, no copy.
Tensor device_view(const Borrowed& b, const char* what);
// A row-major host copy of a CPU tensor (kDLCPU or pinned kDLCUDAHost, any strides) for the
// interpreter; ValueError naming `what` for device memory.
interp::HostTensor host_copy(const Borrowed& b, const char* what);

// An owning "dltensor" capsule (DLPack 0.x ABI, which every consumer takes) over a host tensor:
// the interpreter's results handed to torch.from_dlpack / numpy without a copy.
nanobind::object host_capsule(interp::HostTensor&& t);
// The same over a Tessel device tensor (Tensor::to_dlpack).
nanobind::object device_capsule(const Tensor& t);

}  // namespace tessel::python
