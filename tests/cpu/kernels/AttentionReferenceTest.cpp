// The float64 attention reference (kernels/attention/AttentionReference) against a brute force
// written differently: the full score matrix per (batch, head) with an explicit mask, a
// two-pass softmax in long double, K/V heads found by an explicit group table. Small shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <set>

#include "tessel/kernels/attention/AttentionReference.hpp"

namespace {

namespace K = tessel::kernels;

struct Inputs {
  K::AttentionShape s;
  std::vector<double> q, k, v;
};

Inputs random_inputs(std::int64_t B, std::int64_t H, std::int64_t Hkv, std::int64_t Sq, std::int64_t Sk,
                     std::int64_t D, unsigned seed) {
  Inputs in;
  in.s.batch = B, in.s.heads = H, in.s.kv_heads = Hkv, in.s.seqlen_q = Sq, in.s.seqlen_k = Sk, in.s.dim = D;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  in.q.resize(B * Sq * H * D);
  in.k.resize(B * Sk * Hkv * D);
  in.v.resize(in.k.size());
  for (auto* x : {&in.q, &in.k, &in.v})
    for (double& e : *x) e = u(rng);
  return in;
}

// The whole [Sq, Sk] matrix of one (b, h), masked with "the key sits right of the bottom-right
// diagonal", softmax in long double, then P V. Group table: K/V head g serves heads
// [g * H / Hkv, (g + 1) * H / Hkv).
K::AttentionRows brute_force(const Inputs& in, bool causal, double scale,
                             const std::vector<K::AttentionSample>& samples) {
  const auto& s = in.s;
  std::vector<std::int64_t> group(s.heads);
  for (std::int64_t g = 0; g < s.kv_heads; ++g)
    for (std::int64_t h = g * (s.heads / s.kv_heads); h < (g + 1) * (s.heads / s.kv_heads); ++h) group[h] = g;
  K::AttentionRows r;
  for (const K::AttentionSample& x : samples) {
    std::vector<long double> p(s.seqlen_k);
    std::vector<bool> allowed(s.seqlen_k);
    long double mx = -std::numeric_limits<long double>::infinity();
    for (std::int64_t j = 0; j < s.seqlen_k; ++j) {
      // The diagonal through (Sq - 1, Sk - 1): key j is right of it when j - (Sk - Sq) > i.
      allowed[j] = !causal || j - (s.seqlen_k - s.seqlen_q) <= x.row;
      long double dot = 0;
      for (std::int64_t d = 0; d < s.dim; ++d)
        dot +=
            static_cast<long double>(in.q[((x.batch * s.seqlen_q + x.row) * s.heads + x.head) * s.dim + d]) *
            in.k[((x.batch * s.seqlen_k + j) * s.kv_heads + group[x.head]) * s.dim + d];
      p[j] = scale * dot;
      if (allowed[j] && p[j] > mx) mx = p[j];
    }
    long double sum = 0;
    for (std::int64_t j = 0; j < s.seqlen_k; ++j) sum += allowed[j] ? std::exp(p[j] - mx) : 0.0L;
    for (std::int64_t d = 0; d < s.dim; ++d) {
      long double o = 0;
      for (std::int64_t j = 0; j < s.seqlen_k; ++j)
        if (allowed[j])
          o += std::exp(p[j] - mx) / sum *
               in.v[((x.batch * s.seqlen_k + j) * s.kv_heads + group[x.head]) * s.dim + d];
      r.O.push_back(sum > 0 ? static_cast<double>(o) : 0.0);
    }
    r.LSE.push_back(sum > 0 ? static_cast<double>(mx + std::log(sum))
                            : -std::numeric_limits<double>::infinity());
  }
  return r;
}

std::vector<K::AttentionSample> every_row(const K::AttentionShape& s) {
  std::vector<K::AttentionSample> all;
  for (std::int64_t b = 0; b < s.batch; ++b)
    for (std::int64_t h = 0; h < s.heads; ++h)
      for (std::int64_t i = 0; i < s.seqlen_q; ++i) all.push_back({b, h, i});
  return all;
}

void expect_close(const K::AttentionRows& a, const K::AttentionRows& b) {
  ASSERT_EQ(a.O.size(), b.O.size());
  ASSERT_EQ(a.LSE.size(), b.LSE.size());
  for (std::size_t i = 0; i < a.O.size(); ++i) EXPECT_NEAR(a.O[i], b.O[i], 1e-12) << "O element " << i;
  for (std::size_t i = 0; i < a.LSE.size(); ++i) {
    if (std::isinf(b.LSE[i]))
      EXPECT_EQ(a.LSE[i], b.LSE[i]) << "LSE " << i;
    else
      EXPECT_NEAR(a.LSE[i], b.LSE[i], 1e-12) << "LSE " << i;
  }
}

TEST(AttentionReference, MatchesBruteForceNonCausalGroupedQuery) {
  // 6 heads over 2 K/V heads: heads 0-2 read K/V head 0, heads 3-5 head 1 (not h % Hkv).
  const Inputs in = random_inputs(2, 6, 2, 5, 7, 8, 1);
  const auto samples = every_row(in.s);
  expect_close(K::attention_reference(in.q, in.k, in.v, in.s, false, 0.3, samples),
               brute_force(in, false, 0.3, samples));
}

TEST(AttentionReference, MatchesBruteForceCausalMoreKeysThanQueries) {
  // Sq < Sk: bottom-right alignment lets query 0 see keys 0..Sk-Sq.
  const Inputs in = random_inputs(1, 4, 2, 4, 9, 8, 2);
  const auto samples = every_row(in.s);
  const K::AttentionRows ref = K::attention_reference(in.q, in.k, in.v, in.s, true, 0.5, samples);
  expect_close(ref, brute_force(in, true, 0.5, samples));
  // Row 0 of (0, 0) differs from the non-causal result (the mask did something) ...
  const K::AttentionRows full = K::attention_reference(in.q, in.k, in.v, in.s, false, 0.5, samples);
  EXPECT_NE(ref.LSE[0], full.LSE[0]);
  // ... and the last row sees every key, as without the mask.
  EXPECT_DOUBLE_EQ(ref.LSE[3], full.LSE[3]);
}

TEST(AttentionReference, FullyMaskedRowsWhenMoreQueriesThanKeys) {
  // Sq = 6 > Sk = 3: rows 0..2 see no key (O = 0, LSE = -inf); row 3 sees key 0 alone.
  const Inputs in = random_inputs(1, 2, 1, 6, 3, 8, 3);
  const auto samples = every_row(in.s);
  const K::AttentionRows ref = K::attention_reference(in.q, in.k, in.v, in.s, true, 0.0, samples);
  expect_close(ref, brute_force(in, true, 1.0 / std::sqrt(8.0), samples));
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(std::isinf(ref.LSE[i]) && ref.LSE[i] < 0) << "row " << i;
    for (int d = 0; d < 8; ++d) EXPECT_EQ(ref.O[i * 8 + d], 0.0);
  }
  // One key: softmax is 1, O is V's row 0 of K/V head 0.
  for (int d = 0; d < 8; ++d) EXPECT_DOUBLE_EQ(ref.O[3 * 8 + d], in.v[d]);
}

TEST(AttentionReference, ZeroScaleMeansOneOverRootD) {
  const Inputs in = random_inputs(1, 2, 2, 3, 4, 16, 4);
  const auto samples = every_row(in.s);
  expect_close(K::attention_reference(in.q, in.k, in.v, in.s, false, 0.0, samples),
               K::attention_reference(in.q, in.k, in.v, in.s, false, 0.25, samples));
}

TEST(AttentionReference, RejectsMismatchedSizesAndHeads) {
  Inputs in = random_inputs(1, 4, 2, 3, 4, 8, 5);
  in.k.pop_back();
  EXPECT_THROW(K::attention_reference(in.q, in.k, in.v, in.s, false, 0, {{0, 0, 0}}), std::invalid_argument);
  Inputs bad = random_inputs(1, 4, 3, 3, 4, 8, 5);
  EXPECT_THROW(K::attention_reference(bad.q, bad.k, bad.v, bad.s, false, 0, {{0, 0, 0}}),
               std::invalid_argument);
  Inputs ok = random_inputs(1, 4, 2, 3, 4, 8, 5);
  EXPECT_THROW(K::attention_reference(ok.q, ok.k, ok.v, ok.s, false, 0, {{0, 4, 0}}), std::invalid_argument);
}

TEST(AttentionError, RelativeFrobeniusAndNonFiniteValues) {
  K::AttentionRows ref{{3, 4, 0, 0}, {1.0, -std::numeric_limits<double>::infinity()}};
  K::AttentionRows got = ref;
  EXPECT_EQ(K::attention_error(ref, got).O, 0.0);
  EXPECT_EQ(K::attention_error(ref, got).LSE, 0.0);  // -inf against -inf is equal
  got.O[0] = 3.5;                                    // |diff| 0.5 over ||ref|| 5
  EXPECT_DOUBLE_EQ(K::attention_error(ref, got).O, 0.1);
  got.LSE[0] = 1.5;
  EXPECT_DOUBLE_EQ(K::attention_error(ref, got).LSE, 0.5);
  got = ref;
  got.O[3] = std::nan("");
  EXPECT_TRUE(std::isinf(K::attention_error(ref, got).O));
  EXPECT_EQ(K::attention_error(ref, got).LSE, 0.0);  // each output judged on its own
  got = ref;
  got.LSE[1] = 0.0;  // a masked row reported as seeing keys
  EXPECT_TRUE(std::isinf(K::attention_error(ref, got).LSE));
  got = ref;
  got.LSE[0] = -std::numeric_limits<double>::infinity();  // a row that sees keys reported as masked
  EXPECT_TRUE(std::isinf(K::attention_error(ref, got).LSE));
  got = ref;
  got.LSE[0] = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(std::isinf(K::attention_error(ref, got).LSE));
  // A zero reference must be met exactly.
  K::AttentionRows zero{{0, 0}, {}};
  EXPECT_EQ(K::attention_error(zero, zero).O, 0.0);
  EXPECT_TRUE(std::isinf(K::attention_error(zero, K::AttentionRows{{0, 1e-9}, {}}).O));
  EXPECT_THROW(K::attention_error(ref, zero), std::invalid_argument);
}

TEST(AttentionSamples, FirstLastAndSpreadOverEveryBatchAndHead) {
  K::AttentionShape s;
  s.batch = 3, s.heads = 8, s.kv_heads = 2, s.seqlen_q = 1000, s.seqlen_k = 1000, s.dim = 64;
  const auto samples = K::choose_attention_samples(s, 5, 4);
  ASSERT_FALSE(samples.empty());
  // Pairs: the first (0, 0) and the last (2, 7) are in.
  EXPECT_EQ(samples.front().batch, 0);
  EXPECT_EQ(samples.front().head, 0);
  EXPECT_EQ(samples.back().batch, 2);
  EXPECT_EQ(samples.back().head, 7);
  std::set<std::pair<std::int64_t, std::int64_t>> pairs;
  bool first_row = false, last_row = false, odd_row = false;
  for (const auto& x : samples) {
    pairs.insert({x.batch, x.head});
    first_row |= x.row == 0;
    last_row |= x.row == 999;
    odd_row |= x.row != 0 && x.row != 333 && x.row != 666 && x.row != 999;
    EXPECT_TRUE(x.row >= 0 && x.row < 1000);
  }
  EXPECT_EQ(pairs.size(), 5u);
  EXPECT_TRUE(first_row && last_row && odd_row);
  // Few pairs: all of them; one query row (decode): that row only, once per pair.
  s.batch = 1, s.heads = 2, s.seqlen_q = 1;
  const auto decode = K::choose_attention_samples(s, 16, 4);
  ASSERT_EQ(decode.size(), 2u);
  EXPECT_EQ(decode[1], (K::AttentionSample{0, 1, 0}));
}

}  // namespace
