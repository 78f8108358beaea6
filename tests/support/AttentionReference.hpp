// A float64 attention reference for tests: O and LSE of softmax(scale Q K^T) V per (batch, head,
// query row), Q [B, Sq, H, D], K/V [B, Sk, Hkv, D] given as logical row-major values, head h
// reading K/V head h / (H / Hkv), causal bottom-right aligned (query i sees keys j <= i + Sk -
// Sq). A row that sees no key: O = 0, LSE = -inf.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace tessel::test {

struct AttentionDims {
  std::int64_t B, H, Hkv, Sq, Sk, D;
};

// Row i of head h of batch b: writes its D outputs to o_row and returns its LSE.
inline double reference_attention_row(const std::vector<double>& q, const std::vector<double>& k,
                                      const std::vector<double>& v, const AttentionDims& s, bool causal,
                                      double scale, std::int64_t b, std::int64_t h, std::int64_t i,
                                      double* o_row) {
  const std::int64_t hk = h / (s.H / s.Hkv);
  const std::int64_t last = std::min(causal ? i + s.Sk - s.Sq : s.Sk - 1, s.Sk - 1);
  for (std::int64_t d = 0; d < s.D; ++d) o_row[d] = 0;
  if (last < 0) return -std::numeric_limits<double>::infinity();
  std::vector<double> p(static_cast<size_t>(last + 1));
  double mx = -std::numeric_limits<double>::infinity();
  for (std::int64_t j = 0; j <= last; ++j) {
    double acc = 0;
    for (std::int64_t d = 0; d < s.D; ++d)
      acc += q[static_cast<size_t>(((b * s.Sq + i) * s.H + h) * s.D + d)] *
             k[static_cast<size_t>(((b * s.Sk + j) * s.Hkv + hk) * s.D + d)];
    p[static_cast<size_t>(j)] = acc * scale;
    mx = std::max(mx, acc * scale);
  }
  double sum = 0;
  for (std::int64_t j = 0; j <= last; ++j) {
    const double e = std::exp(p[static_cast<size_t>(j)] - mx);
    sum += e;
    for (std::int64_t d = 0; d < s.D; ++d)
      o_row[d] += e * v[static_cast<size_t>(((b * s.Sk + j) * s.Hkv + hk) * s.D + d)];
  }
  for (std::int64_t d = 0; d < s.D; ++d) o_row[d] /= sum;
  return mx + std::log(sum);
}

struct AttentionRef {
  std::vector<double> o;    // [B, Sq, H, D]
  std::vector<double> lse;  // [B, H, Sq]
};

// Every row.
inline AttentionRef reference_attention(const std::vector<double>& q, const std::vector<double>& k,
                                        const std::vector<double>& v, std::int64_t B, std::int64_t H,
                                        std::int64_t Hkv, std::int64_t Sq, std::int64_t Sk, std::int64_t D,
                                        bool causal, double scale) {
  const AttentionDims s{B, H, Hkv, Sq, Sk, D};
  AttentionRef r;
  r.o.assign(static_cast<size_t>(B * Sq * H * D), 0.0);
  r.lse.assign(static_cast<size_t>(B * H * Sq), 0.0);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t i = 0; i < Sq; ++i)
        r.lse[static_cast<size_t>((b * H + h) * Sq + i)] = reference_attention_row(
            q, k, v, s, causal, scale, b, h, i, &r.o[static_cast<size_t>(((b * Sq + i) * H + h) * D)]);
  return r;
}

}  // namespace tessel::test
