// A small device tensor: a pointer into GPU memory, a shape and strides in elements, a dtype.
// Owning tensors share their allocation (freed with the last copy); views borrow memory that
// someone else owns. DLPack import/export lets any framework's CUDA tensors be passed to Tessel
// kernels and Tessel's results be handed back without copies.
//
// Host transfers, fill and fill_random are synchronous on the legacy default stream (they
// return when the data is in place): they exist for setting up inputs and checking outputs, not
// for hot paths. They do not wait for non-blocking streams: synchronize those before reading.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "tessel/DType.hpp"
#include "tessel/Error.hpp"

struct DLManagedTensor;

namespace tessel {

class Tensor {
 public:
  Tensor() = default;  // undefined: no data, no shape

  static Tensor empty(std::vector<std::int64_t> shape, DType dtype);
  static Tensor zeros(std::vector<std::int64_t> shape, DType dtype);
  // Uploads numel * dtype_bytes bytes of packed row-major host data.
  static Tensor from_host(const void* data, std::vector<std::int64_t> shape, DType dtype);
  // No conversion: T must have the dtype's size, and data.size() must equal the shape's numel.
  template <class T>
  static Tensor from_host(const std::vector<T>& data, std::vector<std::int64_t> shape, DType dtype);
  // A non-owning view of device memory owned elsewhere. Empty strides mean row-major.
  static Tensor view_of(CUdeviceptr data, std::vector<std::int64_t> shape, DType dtype,
                        std::vector<std::int64_t> strides = {});

  // Takes ownership of `managed`: its deleter runs when the last Tensor sharing it dies. Only
  // kDLCUDA tensors with a Tessel dtype and one lane are accepted; on RuntimeError nothing is
  // taken (the caller still owns `managed`).
  static Tensor from_dlpack(DLManagedTensor* managed);
  // A new DLManagedTensor that keeps this tensor's memory alive until its deleter is called.
  // (For a non-owning view, the memory's real owner must outlive it.)
  DLManagedTensor* to_dlpack() const;

  // Packed row-major host copies of the logical elements (works for strided views too).
  void copy_to_host(void* dst) const;
  template <class T>
  std::vector<T> to_host() const;
  // Every element converted exactly to double (f16/bf16/f32/f64/ints/bool).
  std::vector<double> to_host_f64() const;
  void copy_from_host(const void* src);

  // Uniform values in [lo, hi) from a host RNG that is the same on every machine, rounded to
  // the dtype (integers: uniform over the integers in [lo, hi]; bool: 0 or 1).
  void fill_random(std::uint64_t seed, double lo = -1, double hi = 1);
  // Every element set to `value` rounded to the dtype; NaN writes the dtype's quiet NaN (useful
  // to poison outputs). NaN or out-of-range values for integer dtypes are a RuntimeError.
  void fill(double value);

  // Same memory, new row-major shape (contiguous tensors only; numel must match).
  Tensor view(std::vector<std::int64_t> shape) const;
  // Elements [start, stop) of dimension `dim`, as a view sharing ownership.
  Tensor slice(int dim, std::int64_t start, std::int64_t stop) const;
  // The same memory with its dimensions reordered: dimension i of the result is dimension
  // order[i] of this one (a [B, H, S, D] tensor permuted by {0, 2, 1, 3} is its [B, S, H, D] view).
  Tensor permute(const std::vector<int>& order) const;

  bool defined() const { return defined_; }
  bool owning() const { return owner_ != nullptr; }
  DType dtype() const { return dtype_; }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  const std::vector<std::int64_t>& strides() const { return strides_; }
  int dim() const { return static_cast<int>(shape_.size()); }
  std::int64_t size(int d) const;
  std::int64_t numel() const;
  std::int64_t nbytes() const { return numel() * dtype_bytes(dtype_); }  // logical elements only
  bool is_contiguous() const;
  int device() const { return device_; }
  std::int64_t byte_offset() const { return byte_offset_; }
  void* data_ptr() const { return reinterpret_cast<void*>(device_ptr()); }
  CUdeviceptr device_ptr() const { return static_cast<CUdeviceptr>(base_ + byte_offset_); }

  // "f16[2048, 2048] on cuda:0" (strides appended when not row-major).
  std::string describe() const;

  static std::vector<std::int64_t> row_major_strides(const std::vector<std::int64_t>& shape);

 private:
  // Element offsets of every logical element, in row-major order (for strided copies).
  std::vector<std::int64_t> element_offsets() const;
  // The [min, max] element offsets the tensor touches.
  std::pair<std::int64_t, std::int64_t> offset_span() const;

  std::shared_ptr<void> owner_;  // the allocation or the DLPack tensor; null for views
  std::uint64_t base_ = 0;       // CUdeviceptr of the owner's memory
  std::int64_t byte_offset_ = 0;
  std::vector<std::int64_t> shape_, strides_;
  DType dtype_ = DType::f32;
  int device_ = 0;
  bool defined_ = false;
};

// One element on the host, in the dtype's bit pattern (the runtime's and the interpreter's
// single definition of rounding to a dtype).
void store_host_element(double value, DType dtype, void* dst);
double load_host_element(const void* src, DType dtype);

template <class T>
Tensor Tensor::from_host(const std::vector<T>& data, std::vector<std::int64_t> shape, DType dtype) {
  static_assert(std::is_trivially_copyable_v<T>, "Tensor::from_host needs trivially copyable elements");
  if (static_cast<int>(sizeof(T)) != dtype_bytes(dtype))
    throw RuntimeError("Tensor::from_host: host elements of " + std::to_string(sizeof(T)) +
                       " bytes for dtype " + std::string(dtype_name(dtype)) + " of " +
                       std::to_string(dtype_bytes(dtype)) + " bytes (no conversions are made)");
  std::int64_t n = 1;
  for (std::int64_t s : shape) n *= s;
  if (n != static_cast<std::int64_t>(data.size()))
    throw RuntimeError("Tensor::from_host: " + std::to_string(data.size()) +
                       " host elements for a shape of " + std::to_string(n) + " elements");
  return from_host(static_cast<const void*>(data.data()), std::move(shape), dtype);
}

template <class T>
std::vector<T> Tensor::to_host() const {
  static_assert(std::is_trivially_copyable_v<T>, "Tensor::to_host needs trivially copyable elements");
  if (static_cast<int>(sizeof(T)) != dtype_bytes(dtype_))
    throw RuntimeError("Tensor::to_host: host elements of " + std::to_string(sizeof(T)) + " bytes for " +
                       describe());
  std::vector<T> out(static_cast<std::size_t>(numel()));
  copy_to_host(out.data());
  return out;
}

}  // namespace tessel
