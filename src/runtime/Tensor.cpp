#include "tessel/runtime/Tensor.hpp"

#include <dlpack/dlpack.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "tessel/runtime/Driver.hpp"
#include "tessel/runtime/HostFloat.hpp"

namespace tessel {

namespace {

// Host-to-device copies from pageable memory and memsets may still be in flight when the call
// returns; a kernel launched next on a non-blocking stream would not wait for them. Waiting on
// the legacy default stream makes upload, fill and zeros synchronous as documented.
void finish_legacy_stream(const char* what) {
  check_cu(driver().cuStreamSynchronize(nullptr), std::string("cuStreamSynchronize(after ") + what + ")");
}

std::int64_t product(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (std::int64_t s : shape) n *= s;
  return n;
}

void check_shape(const std::vector<std::int64_t>& shape, const char* who) {
  for (std::int64_t s : shape)
    if (s < 0)
      throw RuntimeError(std::string(who) + ": negative extent " + std::to_string(s) + " in a shape");
}

std::string join(const std::vector<std::int64_t>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out;
}

// splitmix64: tiny, and the same sequence on every platform (std::uniform_real_distribution is
// not), so a seed names the same inputs on the CPU machine and the GPU machine.
struct SplitMix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1p-53; }  // [0, 1)
};

std::pair<double, double> integer_range(DType t) {
  switch (t) {
    case DType::i8:
      return {-128, 127};
    case DType::u8:
      return {0, 255};
    case DType::i32:
      return {std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::int32_t>::max()};
    case DType::i64:
      return {-0x1p63, 0x1p63 - 1024};  // the largest doubles that fit
    default:
      return {0, 1};  // bool
  }
}

template <class I>
void store_integer(double value, void* dst) {
  const I v = static_cast<I>(value);
  std::memcpy(dst, &v, sizeof(I));
}

template <class T>
T load(const void* src) {
  T v;
  std::memcpy(&v, src, sizeof(T));
  return v;
}

}  // namespace

void store_host_element(double value, DType dtype, void* dst) {
  switch (dtype) {
    case DType::f16: {
      // Through float: a double that rounds to a float tie may round twice; harmless for fills.
      const std::uint16_t bits = float_to_half_bits(static_cast<float>(value));
      std::memcpy(dst, &bits, 2);
      return;
    }
    case DType::bf16: {
      const std::uint16_t bits = float_to_bf16_bits(static_cast<float>(value));
      std::memcpy(dst, &bits, 2);
      return;
    }
    case DType::f32: {
      const float f = static_cast<float>(value);
      std::memcpy(dst, &f, 4);
      return;
    }
    case DType::f64:
      std::memcpy(dst, &value, 8);
      return;
    default:
      break;
  }
  const auto [lo, hi] = integer_range(dtype);
  if (std::isnan(value) || value < lo || value > hi)
    throw RuntimeError("value " + std::to_string(value) + " does not fit dtype " +
                       std::string(dtype_name(dtype)));
  switch (dtype) {
    case DType::i8:
      store_integer<std::int8_t>(value, dst);
      return;
    case DType::u8:
      store_integer<std::uint8_t>(value, dst);
      return;
    case DType::i32:
      store_integer<std::int32_t>(value, dst);
      return;
    case DType::i64:
      store_integer<std::int64_t>(value, dst);
      return;
    default:
      store_integer<std::uint8_t>(value != 0 ? 1 : 0, dst);
      return;  // bool
  }
}

double load_host_element(const void* src, DType dtype) {
  switch (dtype) {
    case DType::f16:
      return half_bits_to_float(load<std::uint16_t>(src));
    case DType::bf16:
      return bf16_bits_to_float(load<std::uint16_t>(src));
    case DType::f32:
      return load<float>(src);
    case DType::f64:
      return load<double>(src);
    case DType::i8:
      return load<std::int8_t>(src);
    case DType::u8:
      return load<std::uint8_t>(src);
    case DType::i32:
      return load<std::int32_t>(src);
    case DType::i64:
      return static_cast<double>(load<std::int64_t>(src));
    case DType::boolean:
      return load<std::uint8_t>(src) != 0 ? 1.0 : 0.0;
  }
  return 0;
}

std::vector<std::int64_t> Tensor::row_major_strides(const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> strides(shape.size());
  std::int64_t s = 1;
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    strides[i] = s;
    s *= std::max<std::int64_t>(shape[i], 1);
  }
  return strides;
}

Tensor Tensor::empty(std::vector<std::int64_t> shape, DType dtype) {
  check_shape(shape, "Tensor::empty");
  Tensor t;
  t.dtype_ = dtype;
  t.strides_ = row_major_strides(shape);
  t.shape_ = std::move(shape);
  t.defined_ = true;
  ensure_context();
  t.device_ = current_device().ordinal;
  const std::int64_t bytes = t.nbytes();
  if (bytes == 0) return t;  // cuMemAlloc rejects 0 bytes; an empty tensor needs no memory
  CUdeviceptr p = 0;
  check_cu(driver().cuMemAlloc(&p, static_cast<size_t>(bytes)),
           "cuMemAlloc(" + std::to_string(bytes) + " bytes for " + t.describe() + ")");
  t.base_ = p;
  // Errors are ignored on free: a deleter must not throw, and at exit the driver may be gone.
  // The context is made current first: the last reference may die on another thread.
  t.owner_ = std::shared_ptr<void>(reinterpret_cast<void*>(p), [](void* q) {
    try {
      ensure_context();
      (void)driver().cuMemFree(reinterpret_cast<CUdeviceptr>(q));
    } catch (...) {
    }
  });
  return t;
}

Tensor Tensor::zeros(std::vector<std::int64_t> shape, DType dtype) {
  Tensor t = empty(std::move(shape), dtype);
  if (t.nbytes() > 0) {
    check_cu(driver().cuMemsetD8(t.device_ptr(), 0, static_cast<size_t>(t.nbytes())), "cuMemsetD8(zeros)");
    finish_legacy_stream("zeros");
  }
  return t;
}

Tensor Tensor::from_host(const void* data, std::vector<std::int64_t> shape, DType dtype) {
  Tensor t = empty(std::move(shape), dtype);
  t.copy_from_host(data);
  return t;
}

Tensor Tensor::view_of(CUdeviceptr data, std::vector<std::int64_t> shape, DType dtype,
                       std::vector<std::int64_t> strides) {
  check_shape(shape, "Tensor::view_of");
  if (!strides.empty() && strides.size() != shape.size())
    throw RuntimeError("Tensor::view_of: " + std::to_string(strides.size()) + " strides for " +
                       std::to_string(shape.size()) + " dimensions");
  Tensor t;
  t.dtype_ = dtype;
  t.base_ = data;
  t.strides_ = strides.empty() ? row_major_strides(shape) : std::move(strides);
  t.shape_ = std::move(shape);
  t.device_ = gpu_available() ? current_device().ordinal : 0;
  t.defined_ = true;
  return t;
}

std::int64_t Tensor::size(int d) const {
  if (d < 0) d += dim();
  if (d < 0 || d >= dim())
    throw RuntimeError("dimension " + std::to_string(d) + " out of range for " + describe());
  return shape_[d];
}

std::int64_t Tensor::numel() const {
  return defined_ ? product(shape_) : 0;
}

bool Tensor::is_contiguous() const {
  std::int64_t expected = 1;
  for (int i = dim() - 1; i >= 0; --i) {
    if (shape_[i] != 1 && strides_[i] != expected) return false;  // size-1 dims may have any stride
    expected *= shape_[i];
  }
  return true;
}

std::pair<std::int64_t, std::int64_t> Tensor::offset_span() const {
  std::int64_t lo = 0, hi = 0;
  for (int i = 0; i < dim(); ++i) {
    if (shape_[i] == 0) return {0, -1};
    const std::int64_t reach = (shape_[i] - 1) * strides_[i];
    (reach < 0 ? lo : hi) += reach;
  }
  return {lo, hi};
}

std::vector<std::int64_t> Tensor::element_offsets() const {
  std::vector<std::int64_t> out;
  out.reserve(static_cast<std::size_t>(numel()));
  if (numel() == 0) return out;
  std::vector<std::int64_t> index(shape_.size(), 0);
  std::int64_t offset = 0;
  for (std::int64_t n = 0; n < numel(); ++n) {
    out.push_back(offset);
    for (int d = dim() - 1; d >= 0; --d) {  // odometer increment, last dimension fastest
      offset += strides_[d];
      if (++index[d] < shape_[d]) break;
      offset -= strides_[d] * shape_[d];
      index[d] = 0;
    }
  }
  return out;
}

void Tensor::copy_to_host(void* dst) const {
  if (numel() == 0) return;
  ensure_context();
  Driver& d = driver();
  const int eb = dtype_bytes(dtype_);
  if (is_contiguous()) {
    check_cu(d.cuMemcpyDtoH(dst, device_ptr(), static_cast<size_t>(nbytes())),
             "cuMemcpyDtoH(" + describe() + ")");
    return;
  }
  // Strided: fetch the whole span the view covers, then gather on the host.
  const auto [lo, hi] = offset_span();
  std::vector<unsigned char> span(static_cast<std::size_t>((hi - lo + 1) * eb));
  check_cu(d.cuMemcpyDtoH(span.data(), device_ptr() + lo * eb, span.size()),
           "cuMemcpyDtoH(" + describe() + ")");
  auto* out = static_cast<unsigned char*>(dst);
  for (std::int64_t off : element_offsets()) {
    std::memcpy(out, span.data() + (off - lo) * eb, static_cast<std::size_t>(eb));
    out += eb;
  }
}

void Tensor::copy_from_host(const void* src) {
  if (numel() == 0) return;
  ensure_context();
  Driver& d = driver();
  const int eb = dtype_bytes(dtype_);
  if (is_contiguous()) {
    check_cu(d.cuMemcpyHtoD(device_ptr(), src, static_cast<size_t>(nbytes())),
             "cuMemcpyHtoD(" + describe() + ")");
    finish_legacy_stream("cuMemcpyHtoD");
    return;
  }
  // Strided: read-modify-write of the span, so the gaps between elements keep their contents
  // (synchronous, so only work on non-blocking streams could interleave).
  const auto [lo, hi] = offset_span();
  std::vector<unsigned char> span(static_cast<std::size_t>((hi - lo + 1) * eb));
  check_cu(d.cuMemcpyDtoH(span.data(), device_ptr() + lo * eb, span.size()),
           "cuMemcpyDtoH(" + describe() + ")");
  const auto* in = static_cast<const unsigned char*>(src);
  for (std::int64_t off : element_offsets()) {
    std::memcpy(span.data() + (off - lo) * eb, in, static_cast<std::size_t>(eb));
    in += eb;
  }
  check_cu(d.cuMemcpyHtoD(device_ptr() + lo * eb, span.data(), span.size()),
           "cuMemcpyHtoD(" + describe() + ")");
  finish_legacy_stream("cuMemcpyHtoD");
}

std::vector<double> Tensor::to_host_f64() const {
  const int eb = dtype_bytes(dtype_);
  std::vector<unsigned char> bytes(static_cast<std::size_t>(nbytes()));
  copy_to_host(bytes.data());
  std::vector<double> out(static_cast<std::size_t>(numel()));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = load_host_element(bytes.data() + i * eb, dtype_);
  return out;
}

void Tensor::fill_random(std::uint64_t seed, double lo, double hi) {
  const int eb = dtype_bytes(dtype_);
  std::vector<unsigned char> bytes(static_cast<std::size_t>(nbytes()));
  SplitMix64 rng{seed};
  if (is_float(dtype_)) {
    for (std::size_t i = 0; i < bytes.size() / eb; ++i)
      store_host_element(lo + (hi - lo) * rng.uniform(), dtype_, bytes.data() + i * eb);
  } else {
    const auto [tmin, tmax] = integer_range(dtype_);
    const double first = std::max(std::ceil(lo), tmin), last = std::min(std::floor(hi), tmax);
    if (first > last)
      throw RuntimeError("fill_random: no " + std::string(dtype_name(dtype_)) + " value lies in [" +
                         std::to_string(lo) + ", " + std::to_string(hi) + "]");
    for (std::size_t i = 0; i < bytes.size() / eb; ++i) {
      const double v = std::min(last, first + std::floor((last - first + 1) * rng.uniform()));
      store_host_element(v, dtype_, bytes.data() + i * eb);
    }
  }
  copy_from_host(bytes.data());
}

void Tensor::fill(double value) {
  if (numel() == 0) return;
  const int eb = dtype_bytes(dtype_);
  unsigned char pattern[8] = {};
  if (std::isnan(value) && is_float(dtype_)) {
    // The canonical quiet NaN of each type (what the GPU produces), not a payload that a
    // conversion happened to keep.
    const std::uint64_t bits = dtype_ == DType::f16    ? 0x7e00u
                               : dtype_ == DType::bf16 ? 0x7fc0u
                               : dtype_ == DType::f32  ? 0x7fc00000u
                                                       : 0x7ff8000000000000ull;
    std::memcpy(pattern, &bits, static_cast<std::size_t>(eb));  // little-endian host
  } else {
    store_host_element(value, dtype_, pattern);
  }
  ensure_context();
  Driver& d = driver();
  const CUdeviceptr p = device_ptr();
  const size_t n = static_cast<size_t>(numel());
  if (is_contiguous() && eb <= 4 && p % eb == 0) {
    if (eb == 1) check_cu(d.cuMemsetD8(p, pattern[0], n), "cuMemsetD8(fill)");
    if (eb == 2) check_cu(d.cuMemsetD16(p, load<std::uint16_t>(pattern), n), "cuMemsetD16(fill)");
    if (eb == 4) check_cu(d.cuMemsetD32(p, load<std::uint32_t>(pattern), n), "cuMemsetD32(fill)");
    finish_legacy_stream("fill");
    return;
  }
  std::vector<unsigned char> bytes(n * eb);
  for (size_t i = 0; i < n; ++i) std::memcpy(bytes.data() + i * eb, pattern, static_cast<std::size_t>(eb));
  copy_from_host(bytes.data());
}

Tensor Tensor::view(std::vector<std::int64_t> shape) const {
  check_shape(shape, "Tensor::view");
  if (!is_contiguous())
    throw RuntimeError("Tensor::view of non-contiguous " + describe() +
                       ": copy it to a contiguous tensor first");
  if (product(shape) != numel())
    throw RuntimeError("Tensor::view: shape [" + join(shape) + "] has " + std::to_string(product(shape)) +
                       " elements, " + describe() + " has " + std::to_string(numel()));
  Tensor t = *this;
  t.strides_ = row_major_strides(shape);
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::slice(int d, std::int64_t start, std::int64_t stop) const {
  const std::int64_t extent = size(d);
  if (d < 0) d += dim();
  if (start < 0 || stop < start || stop > extent)
    throw RuntimeError("Tensor::slice: [" + std::to_string(start) + ", " + std::to_string(stop) +
                       ") is not within [0, " + std::to_string(extent) + "] in dimension " +
                       std::to_string(d) + " of " + describe());
  Tensor t = *this;
  t.shape_[d] = stop - start;
  t.byte_offset_ += start * strides_[d] * dtype_bytes(dtype_);
  return t;
}

Tensor Tensor::permute(const std::vector<int>& order) const {
  std::vector<bool> seen(static_cast<size_t>(dim()), false);
  bool ok = static_cast<int>(order.size()) == dim();
  for (int o : order) {
    ok = ok && o >= 0 && o < dim() && !seen[static_cast<size_t>(o)];
    if (ok) seen[static_cast<size_t>(o)] = true;
  }
  if (!ok)
    throw RuntimeError("Tensor::permute: [" + join(std::vector<std::int64_t>(order.begin(), order.end())) +
                       "] is not a permutation of the " + std::to_string(dim()) + " dimensions of " +
                       describe());
  Tensor t = *this;
  for (size_t i = 0; i < order.size(); ++i) {
    t.shape_[i] = shape_[static_cast<size_t>(order[i])];
    t.strides_[i] = strides_[static_cast<size_t>(order[i])];
  }
  return t;
}

std::string Tensor::describe() const {
  if (!defined_) return "undefined tensor";
  std::string out = std::string(dtype_name(dtype_)) + "[" + join(shape_) + "]";
  if (!is_contiguous()) out += " strides [" + join(strides_) + "]";
  return out + " on cuda:" + std::to_string(device_);
}

// --- DLPack ----------------------------------------------------------------------------------

namespace {

// Owns what a DLManagedTensor points at: its shape and strides arrays and a share of the
// tensor's memory. manager_ctx points here; the deleter deletes it.
struct DLPackExport {
  DLManagedTensor managed{};
  std::vector<std::int64_t> shape, strides;
  std::shared_ptr<void> owner;
};

const char* device_type_name(int type) {
  switch (type) {
    case kDLCPU:
      return "kDLCPU";
    case kDLCUDA:
      return "kDLCUDA";
    case kDLCUDAHost:
      return "kDLCUDAHost";
    case kDLCUDAManaged:
      return "kDLCUDAManaged";
    case kDLROCM:
      return "kDLROCM";
    default:
      return "another device";
  }
}

}  // namespace

DLManagedTensor* Tensor::to_dlpack() const {
  if (!defined_) throw RuntimeError("to_dlpack of an undefined tensor");
  auto* e = new DLPackExport();
  e->shape = shape_;
  e->strides = strides_;
  e->owner = owner_;
  DLTensor& t = e->managed.dl_tensor;
  // data is the element pointer itself with byte_offset 0: some consumers ignore byte_offset.
  t.data = data_ptr();
  t.device = DLDevice{kDLCUDA, device_};
  t.ndim = dim();
  t.dtype = DLDataType{static_cast<std::uint8_t>(dlpack_code(dtype_)),
                       static_cast<std::uint8_t>(dlpack_bits(dtype_)), 1};
  t.shape = e->shape.data();
  t.strides = e->strides.data();
  t.byte_offset = 0;
  e->managed.manager_ctx = e;
  e->managed.deleter = [](DLManagedTensor* self) { delete static_cast<DLPackExport*>(self->manager_ctx); };
  return &e->managed;
}

Tensor Tensor::from_dlpack(DLManagedTensor* managed) {
  if (!managed) throw RuntimeError("from_dlpack: null DLManagedTensor");
  const DLTensor& t = managed->dl_tensor;
  if (t.device.device_type != kDLCUDA)
    throw RuntimeError("from_dlpack: device type " + std::to_string(static_cast<int>(t.device.device_type)) +
                       " (" + device_type_name(t.device.device_type) +
                       ") is not supported; Tessel takes kDLCUDA (" +
                       std::to_string(static_cast<int>(kDLCUDA)) + ") tensors only");
  const auto dtype = dtype_from_dlpack(t.dtype.code, t.dtype.bits);
  if (!dtype || t.dtype.lanes != 1)
    throw RuntimeError(
        "from_dlpack: DLPack dtype code " + std::to_string(t.dtype.code) + ", " +
        std::to_string(t.dtype.bits) + " bits, " + std::to_string(t.dtype.lanes) +
        " lanes is not a Tessel dtype (f16, bf16, f32, f64, i8, u8, i32, i64, bool; one lane)");
  if (t.ndim < 0 || (t.ndim > 0 && !t.shape)) throw RuntimeError("from_dlpack: malformed shape");
  Tensor out;
  out.dtype_ = *dtype;
  out.shape_.assign(t.shape, t.shape + t.ndim);
  check_shape(out.shape_, "from_dlpack");
  // DLPack >= 0.6 allows strides == NULL for a compact row-major tensor.
  out.strides_ =
      t.strides ? std::vector<std::int64_t>(t.strides, t.strides + t.ndim) : row_major_strides(out.shape_);
  out.base_ = reinterpret_cast<std::uint64_t>(t.data);
  out.byte_offset_ = static_cast<std::int64_t>(t.byte_offset);
  out.device_ = t.device.device_id;
  out.defined_ = true;
  // The owner may be null-data (an empty tensor), so the shared_ptr owns the DLManagedTensor.
  out.owner_ = std::shared_ptr<void>(managed, [](void* m) {
    auto* mt = static_cast<DLManagedTensor*>(m);
    if (mt->deleter) mt->deleter(mt);
  });
  return out;
}

}  // namespace tessel
