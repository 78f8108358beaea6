// Float64 softmax over rows, with PyTorch's semantics: -inf entries give 0, a row of only -inf
// gives NaN, a NaN anywhere in a row makes the row NaN.
#pragma once

#include <cmath>
#include <limits>
#include <vector>

namespace tessel::test {

inline std::vector<double> reference_softmax(const std::vector<double>& x, long long M, long long N) {
  std::vector<double> y(x.size());
  for (long long r = 0; r < M; ++r) {
    const double* row = &x[r * N];
    double m = -std::numeric_limits<double>::infinity();
    bool nan = false;
    for (long long c = 0; c < N; ++c) {
      nan = nan || std::isnan(row[c]);
      m = std::max(m, row[c]);
    }
    double s = 0;
    for (long long c = 0; c < N; ++c) s += std::exp(row[c] - m);
    for (long long c = 0; c < N; ++c)
      y[r * N + c] = (nan || (std::isinf(m) && m < 0)) ? std::nan("") : std::exp(row[c] - m) / s;
  }
  return y;
}

}  // namespace tessel::test
