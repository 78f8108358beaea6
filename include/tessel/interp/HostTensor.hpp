// A tensor in host memory, the interpreter's argument type: a dtype, a row-major shape and the
// elements' bytes exactly as the GPU stores them (f16/bf16 as their 16-bit patterns).
//
//   auto a = HostTensor::random(T::f16, {64, 32}, /*seed=*/1);   // uniform in [-1, 1), rounded
//   std::vector<double> v = a.to_values();
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessel/DType.hpp"

namespace tessel::interp {

struct HostTensor {
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape{};
  std::vector<unsigned char> bytes{};

  HostTensor() = default;
  // Zero-filled.
  HostTensor(DType dtype, std::vector<std::int64_t> shape);

  // Each value rounded to dtype as a store would round it (nearest even; integers truncate).
  static HostTensor from_values(DType dtype, std::vector<std::int64_t> shape,
                                const std::vector<double>& values);
  static HostTensor full(DType dtype, std::vector<std::int64_t> shape, double value);
  // Uniform in [lo, hi) (integers: [lo, hi]), then rounded to dtype; the same seed gives the same data.
  static HostTensor random(DType dtype, std::vector<std::int64_t> shape, std::uint64_t seed, double lo = -1.0,
                           double hi = 1.0);

  std::int64_t numel() const;
  double get(std::int64_t flat_index) const;
  void set(std::int64_t flat_index, double value);  // rounds like from_values
  std::vector<double> to_values() const;
  void fill(double value);  // fill(NaN) poisons a float tensor
  void fill_random(std::uint64_t seed, double lo = -1.0, double hi = 1.0);
  // "f16[64, 32]"
  std::string describe() const;
};

// "[64, 32]"
std::string shape_string(const std::vector<std::int64_t>& shape);

// ||got - want||_F / ||want||_F (infinity if got holds a NaN or an infinity, or the sizes
// differ; the absolute error if want is all zeros).
double relative_frobenius_error(const std::vector<double>& got, const std::vector<double>& want);

}  // namespace tessel::interp
