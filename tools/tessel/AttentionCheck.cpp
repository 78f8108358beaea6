#include "tools/tessel/AttentionCheck.hpp"

#include <algorithm>
#include <cmath>

#include "tessel/runtime/HostFloat.hpp"

namespace tessel::cli {

std::vector<long long> spread_rows(long long M, long long samples) {
  samples = std::min(M, samples);
  std::vector<long long> rows;
  for (long long n = 0; n < samples; ++n) rows.push_back(samples == 1 ? 0 : n * (M - 1) / (samples - 1));
  return rows;
}

double attention_error(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                       const std::vector<double>& o, const std::vector<long long>& rows, long long N, long long D,
                       float scale, DType t, bool softmax) {
  double num = 0, den = 0;
  std::vector<double> p(N);
  for (long long i : rows) {
    double mx = -INFINITY, sum = 0;
    for (long long j = 0; j < N; ++j) {
      double acc = 0;
      for (long long d = 0; d < D; ++d) acc += q[i * D + d] * k[j * D + d];
      const float x = static_cast<float>(acc) * scale;
      p[j] = softmax ? double(x) : (t == DType::f16 ? round_to_half(x) : round_to_bf16(x));
      mx = std::max(mx, p[j]);
    }
    if (softmax) {
      for (long long j = 0; j < N; ++j) sum += (p[j] = std::exp(p[j] - mx));
      for (long long j = 0; j < N; ++j) p[j] /= sum;
    }
    for (long long d = 0; d < D; ++d) {
      double ref = 0;
      for (long long j = 0; j < N; ++j) ref += p[j] * v[j * D + d];
      const double got = o[i * D + d];
      if (!std::isfinite(got)) return NAN;
      num += (got - ref) * (got - ref);
      den += ref * ref;
    }
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

}  // namespace tessel::cli
