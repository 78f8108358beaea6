#include "tools/tessel/SoftmaxCheck.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace tessel::cli {

double softmax_tolerance(DType dtype) {
  return dtype == DType::f32 ? 1e-3 : 1e-2;
}

double sampled_softmax_error(const Tensor& x, const Tensor& y, long long M, long long N, int rows) {
  const long long samples = std::min<long long>(M, std::max(rows, 1));
  double num = 0, den = 0;
  for (long long k = 0; k < samples; ++k) {
    const long long r = samples == 1 ? 0 : k * (M - 1) / (samples - 1);
    const std::vector<double> xr = x.slice(0, r, r + 1).to_host_f64(),
                              yr = y.slice(0, r, r + 1).to_host_f64();
    double m = -std::numeric_limits<double>::infinity(), s = 0;
    for (double v : xr) m = std::max(m, v);
    for (double v : xr) s += std::exp(v - m);
    for (long long c = 0; c < N; ++c) {
      if (std::isnan(yr[c])) return std::numeric_limits<double>::quiet_NaN();
      const double ref = std::exp(xr[c] - m) / s;
      num += (yr[c] - ref) * (yr[c] - ref);
      den += ref * ref;
    }
  }
  return std::sqrt(num / den);
}

}  // namespace tessel::cli
