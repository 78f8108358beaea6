#include "tessel/kernels/attention/AttentionReference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>

namespace tessel::kernels {

namespace {

// n indices evenly spread over [0, count): the first, the last and evenly between.
std::vector<std::int64_t> spread(std::int64_t count, std::int64_t n) {
  n = std::min(count, n);
  std::vector<std::int64_t> r;
  for (std::int64_t i = 0; i < n; ++i) r.push_back(n == 1 ? 0 : i * (count - 1) / (n - 1));
  return r;
}

// "B2 H16/4 Sq128 Sk256 D64" (AttentionShape::describe's form, without needing the kernel's file).
std::string shape_text(const AttentionShape& s) {
  return "B" + std::to_string(s.batch) + " H" + std::to_string(s.heads) + "/" + std::to_string(s.kv_heads) +
         " Sq" + std::to_string(s.seqlen_q) + " Sk" + std::to_string(s.seqlen_k) + " D" +
         std::to_string(s.dim);
}

double resolved_scale(double scale, std::int64_t D) {
  return scale == 0.0 ? 1.0 / std::sqrt(static_cast<double>(D)) : scale;
}

}  // namespace

std::vector<AttentionSample> choose_attention_samples(const AttentionShape& s, int max_pairs,
                                                      int rows_per_pair) {
  std::vector<AttentionSample> samples;
  const std::int64_t pairs = s.batch * s.heads;
  for (std::int64_t p : spread(pairs, std::max(1, max_pairs))) {
    std::set<std::int64_t> rows;
    for (std::int64_t r : spread(s.seqlen_q, std::max(1, rows_per_pair))) rows.insert(r);
    // A multiplicative hash of the pair: consecutive pairs land far apart in the sequence.
    rows.insert(static_cast<std::int64_t>((static_cast<std::uint64_t>(p) * 2654435761u + 12345u) %
                                          static_cast<std::uint64_t>(s.seqlen_q)));
    for (std::int64_t r : rows) samples.push_back({p / s.heads, p % s.heads, r});
  }
  return samples;
}

AttentionRows attention_reference(const std::vector<double>& q, const std::vector<double>& k,
                                  const std::vector<double>& v, const AttentionShape& s, bool causal,
                                  double scale, const std::vector<AttentionSample>& samples) {
  const std::int64_t B = s.batch, H = s.heads, Hkv = s.kv_heads, Sq = s.seqlen_q, Sk = s.seqlen_k, D = s.dim;
  if (Hkv < 1 || H % Hkv != 0)
    throw std::invalid_argument("attention_reference: " + std::to_string(Hkv) + " K/V heads do not divide " +
                                std::to_string(H) + " heads");
  if (static_cast<std::int64_t>(q.size()) != B * Sq * H * D ||
      static_cast<std::int64_t>(k.size()) != B * Sk * Hkv * D || k.size() != v.size())
    throw std::invalid_argument("attention_reference: host data of " + std::to_string(q.size()) + ", " +
                                std::to_string(k.size()) + " and " + std::to_string(v.size()) +
                                " elements for the shape " + shape_text(s));
  scale = resolved_scale(scale, D);
  AttentionRows out;
  out.O.assign(samples.size() * static_cast<std::size_t>(D), 0.0);
  out.LSE.assign(samples.size(), -std::numeric_limits<double>::infinity());
  std::vector<double> score(static_cast<std::size_t>(Sk));
  for (std::size_t n = 0; n < samples.size(); ++n) {
    const AttentionSample& x = samples[n];
    if (x.batch < 0 || x.batch >= B || x.head < 0 || x.head >= H || x.row < 0 || x.row >= Sq)
      throw std::invalid_argument("attention_reference: sample (" + std::to_string(x.batch) + ", " +
                                  std::to_string(x.head) + ", " + std::to_string(x.row) + ") outside " +
                                  shape_text(s));
    const std::int64_t kv_head = x.head / (H / Hkv);
    // Keys [0, visible): all of them, or under the bottom-right causal mask those j <= i + Sk - Sq.
    const std::int64_t visible = causal ? std::clamp<std::int64_t>(x.row + Sk - Sq + 1, 0, Sk) : Sk;
    if (visible == 0) continue;  // O = 0, LSE = -inf
    const double* qrow = &q[static_cast<std::size_t>(((x.batch * Sq + x.row) * H + x.head) * D)];
    auto kv_at = [&](std::int64_t j) {
      return static_cast<std::size_t>(((x.batch * Sk + j) * Hkv + kv_head) * D);
    };
    double mx = -std::numeric_limits<double>::infinity();
    for (std::int64_t j = 0; j < visible; ++j) {
      double dot = 0;
      for (std::int64_t d = 0; d < D; ++d) dot += qrow[d] * k[kv_at(j) + d];
      score[j] = scale * dot;
      mx = std::max(mx, score[j]);
    }
    double sum = 0;
    for (std::int64_t j = 0; j < visible; ++j) sum += (score[j] = std::exp(score[j] - mx));
    double* orow = &out.O[n * static_cast<std::size_t>(D)];
    for (std::int64_t j = 0; j < visible; ++j)
      for (std::int64_t d = 0; d < D; ++d) orow[d] += score[j] * v[kv_at(j) + d];
    for (std::int64_t d = 0; d < D; ++d) orow[d] /= sum;
    out.LSE[n] = mx + std::log(sum);
  }
  return out;
}

AttentionError attention_error(const AttentionRows& ref, const AttentionRows& got) {
  if (ref.O.size() != got.O.size() || ref.LSE.size() != got.LSE.size())
    throw std::invalid_argument("attention_error: " + std::to_string(got.O.size()) + " O values and " +
                                std::to_string(got.LSE.size()) + " LSE values against " +
                                std::to_string(ref.O.size()) + " and " + std::to_string(ref.LSE.size()));
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // num / den, where a zero reference must be matched exactly.
  auto ratio = [&](double num, double den) {
    return den > 0 ? std::sqrt(num / den) : (num == 0 ? 0.0 : kInf);
  };
  auto o_error = [&] {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < ref.O.size(); ++i) {
      if (!std::isfinite(got.O[i])) return kInf;
      num += (got.O[i] - ref.O[i]) * (got.O[i] - ref.O[i]);
      den += ref.O[i] * ref.O[i];
    }
    return ratio(num, den);
  };
  auto lse_error = [&] {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < ref.LSE.size(); ++i) {
      const double r = ref.LSE[i], g = got.LSE[i];
      const bool r_none = std::isinf(r) && r < 0, g_none = std::isinf(g) && g < 0;
      // A row that sees no key must be reported as such (-inf), and only such a row.
      if (r_none || g_none) {
        if (r_none != g_none) return kInf;
        continue;
      }
      if (!std::isfinite(g)) return kInf;
      num += (g - r) * (g - r);
      den += r * r;
    }
    return ratio(num, den);
  };
  return {o_error(), lse_error()};
}

}  // namespace tessel::kernels
