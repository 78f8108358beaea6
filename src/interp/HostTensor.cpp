#include "tessel/interp/HostTensor.hpp"

#include <cmath>
#include <limits>
#include <random>
#include <sstream>

#include "Elements.hpp"
#include "tessel/Error.hpp"

namespace tessel::interp {

namespace {
std::int64_t count(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    if (d < 0) throw RuntimeError("HostTensor: negative dimension in shape " + shape_string(shape));
    n *= d;
  }
  return n;
}
}  // namespace

std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

HostTensor::HostTensor(DType t, std::vector<std::int64_t> s)
    : dtype(t), shape(std::move(s)), bytes(static_cast<size_t>(count(shape) * dtype_bytes(t)), 0) {}

HostTensor HostTensor::from_values(DType t, std::vector<std::int64_t> s, const std::vector<double>& values) {
  HostTensor h(t, std::move(s));
  if (static_cast<std::int64_t>(values.size()) != h.numel())
    throw RuntimeError("HostTensor::from_values: " + std::to_string(values.size()) + " values for shape " +
                       shape_string(h.shape) + " (" + std::to_string(h.numel()) + " elements)");
  for (std::int64_t i = 0; i < h.numel(); ++i) h.set(i, values[static_cast<size_t>(i)]);
  return h;
}

HostTensor HostTensor::full(DType t, std::vector<std::int64_t> s, double value) {
  HostTensor h(t, std::move(s));
  h.fill(value);
  return h;
}

HostTensor HostTensor::random(DType t, std::vector<std::int64_t> s, std::uint64_t seed, double lo,
                              double hi) {
  HostTensor h(t, std::move(s));
  h.fill_random(seed, lo, hi);
  return h;
}

std::int64_t HostTensor::numel() const {
  return count(shape);
}

double HostTensor::get(std::int64_t i) const {
  return detail::load_float(bytes.data(), dtype, i);
}

void HostTensor::set(std::int64_t i, double v) {
  if (detail::is_float_path(dtype)) {
    detail::store_float(bytes.data(), dtype, i, v);
  } else {
    detail::store_int(bytes.data(), dtype, i, detail::float_to_int(v, DType::i64));
  }
}

std::vector<double> HostTensor::to_values() const {
  std::vector<double> out(static_cast<size_t>(numel()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = get(static_cast<std::int64_t>(i));
  return out;
}

void HostTensor::fill(double v) {
  for (std::int64_t i = 0, n = numel(); i < n; ++i) set(i, v);
}

void HostTensor::fill_random(std::uint64_t seed, double lo, double hi) {
  std::mt19937_64 rng(seed);
  const std::int64_t n = numel();
  if (detail::is_float_path(dtype)) {
    std::uniform_real_distribution<double> dist(lo, hi);
    for (std::int64_t i = 0; i < n; ++i) set(i, dist(rng));
  } else {
    std::uniform_int_distribution<std::int64_t> dist(static_cast<std::int64_t>(std::ceil(lo)),
                                                     static_cast<std::int64_t>(std::floor(hi)));
    for (std::int64_t i = 0; i < n; ++i) detail::store_int(bytes.data(), dtype, i, dist(rng));
  }
}

std::string HostTensor::describe() const {
  return std::string(dtype_name(dtype)) + shape_string(shape);
}

double relative_frobenius_error(const std::vector<double>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return std::numeric_limits<double>::infinity();
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

}  // namespace tessel::interp
