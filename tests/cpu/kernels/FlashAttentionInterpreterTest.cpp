// kernels::attention_program on the CPU interpreter against float64: causal and not, GQA and
// MQA, Sq != Sk (both ways), tails in every dimension, D not a multiple of 16, rows that see no
// key, and the argument errors by message.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "support/TestSupport.hpp"
#include "tessel/interp/Interpreter.hpp"
#include "tessel/kernels/attention/AttentionReference.hpp"
#include "tessel/kernels/attention/FlashAttention.hpp"

namespace {

namespace T = tessel;
using T::DType;
using T::kernels::AttentionConfig;
using T::kernels::AttentionShape;

struct Case {
  std::int64_t B, H, Hkv, Sq, Sk, D;
  bool causal;
};

std::string describe(const Case& c) {
  return "B" + std::to_string(c.B) + " H" + std::to_string(c.H) + "/" + std::to_string(c.Hkv) + " Sq" +
         std::to_string(c.Sq) + " Sk" + std::to_string(c.Sk) + " D" + std::to_string(c.D) +
         (c.causal ? " causal" : "");
}

// The program on the interpreter against float64 for the given Q, K and V ([B, S, H, D]).
void check_inputs(const Case& c, DType t, const AttentionConfig& cfg, float scale,
                  const T::interp::HostTensor& q, const T::interp::HostTensor& k,
                  const T::interp::HostTensor& v) {
  SCOPED_TRACE(describe(c) + " " + std::string(T::dtype_name(t)) + " " + cfg.describe() + " scale " +
               std::to_string(scale));
  AttentionShape s;
  s.batch = c.B, s.heads = c.H, s.kv_heads = c.Hkv, s.seqlen_q = c.Sq, s.seqlen_k = c.Sk, s.dim = c.D;
  auto out =
      T::interp::run_on_cpu(T::kernels::attention_program(s, t, c.causal, scale, cfg), {q, k, v}, {3, 4});
  // Every row of every (batch, head).
  std::vector<T::kernels::AttentionSample> rows;
  for (std::int64_t b = 0; b < c.B; ++b)
    for (std::int64_t h = 0; h < c.H; ++h)
      for (std::int64_t i = 0; i < c.Sq; ++i) rows.push_back({b, h, i});
  auto ref = T::kernels::attention_reference(q.to_values(), k.to_values(), v.to_values(), s, c.causal, scale, rows);
  T::kernels::AttentionRows got;
  const std::vector<double> o = out[0].to_values(), lse = out[1].to_values();
  for (const auto& r : rows) {
    for (std::int64_t d = 0; d < c.D; ++d) got.O.push_back(o[static_cast<size_t>(((r.batch * c.Sq + r.row) * c.H + r.head) * c.D + d)]);
    got.LSE.push_back(lse[static_cast<size_t>((r.batch * c.H + r.head) * c.Sq + r.row)]);
  }
  const T::kernels::AttentionError err = T::kernels::attention_error(ref, got);
  EXPECT_LE(err.O, t == DType::f16 ? 5e-3 : 2e-2) << "O: relative error " << err.O;
  EXPECT_LE(err.LSE, 1e-3) << "LSE: relative error " << err.LSE;
}

void check(const Case& c, DType t, const AttentionConfig& cfg, float scale = 0.3f) {
  std::mt19937_64 seeds(std::random_device{}());
  auto q = T::interp::HostTensor::random(t, {c.B, c.Sq, c.H, c.D}, seeds(), -2, 2);
  auto k = T::interp::HostTensor::random(t, {c.B, c.Sk, c.Hkv, c.D}, seeds(), -2, 2);
  auto v = T::interp::HostTensor::random(t, {c.B, c.Sk, c.Hkv, c.D}, seeds());
  check_inputs(c, t, cfg, scale, q, k, v);
}

// Small tiles keep the interpreter quick; the program is the same for every tile size.
const AttentionConfig kSmall{64, 64, 128, 2};

TEST(FlashAttentionInterpreter, MultiHeadTailsBothWays) {
  check({2, 2, 2, 70, 90, 64, false}, DType::f16, kSmall);
  check({1, 2, 2, 130, 17, 32, false}, DType::bf16, kSmall);
}

TEST(FlashAttentionInterpreter, CausalBottomRightAligned) {
  check({1, 2, 2, 100, 100, 32, true}, DType::f16, kSmall);
  check({1, 1, 1, 40, 150, 32, true}, DType::bf16, kSmall);  // Sq < Sk: every row sees keys
  // Sq > Sk: the first Sq - Sk rows see no key (O = 0, LSE = -inf), whole blocks of them too.
  check({1, 1, 1, 150, 20, 32, true}, DType::f16, kSmall);
}

TEST(FlashAttentionInterpreter, GroupedAndMultiQuery) {
  check({1, 4, 2, 33, 65, 16, true}, DType::f16, kSmall);
  check({2, 3, 1, 9, 66, 32, false}, DType::bf16, kSmall);
}

// AttentionConfig::kv_interleave: blockIdx.y walks the query heads K/V head by K/V head; every
// head's O and LSE are still its own (GQA 6 over 2 and 3, MQA, and MHA where it changes nothing).
TEST(FlashAttentionInterpreter, KvInterleavedHeads) {
  AttentionConfig c = kSmall;
  c.kv_interleave = true;
  check({1, 6, 2, 40, 70, 16, true}, DType::f16, c);
  check({2, 6, 3, 33, 65, 32, false}, DType::bf16, c);
  check({1, 4, 1, 20, 30, 16, false}, DType::f16, c);
  check({1, 2, 2, 20, 30, 16, true}, DType::bf16, c);
}

TEST(FlashAttentionInterpreter, HeadDimNotAMultipleOf16) {
  check({1, 2, 1, 20, 70, 24, true}, DType::f16, kSmall);
  check({1, 1, 1, 65, 65, 40, false}, DType::bf16, kSmall);
}

TEST(FlashAttentionInterpreter, SingleQueryDecode) {
  check({2, 4, 2, 1, 130, 64, false}, DType::f16, kSmall);
  check({1, 2, 2, 1, 70, 32, true}, DType::bf16, kSmall);
}

TEST(FlashAttentionInterpreter, DefaultConfigTiles) {
  AttentionShape s;
  s.dim = 128;
  check({1, 1, 1, 129, 130, 128, true}, DType::f16,
        T::kernels::default_attention_config(s, DType::f16, true, "sm_90a"));
}

// The defaults for D = 64 (sessions 17-24): over long non-causal loops 192 query rows on three
// consumer warpgroups, persistent, 128 keys a step in two stages where 128 divides Sk (160 in one
// otherwise); causal at any length (and shorter loops) 64
// rows on one warpgroup, 128 keys a step, lazy rescaling (session 32); both the ring's program (scale folded
// into the exponents). Tails in both lengths, a partial last query block, causal and not, GQA.
TEST(FlashAttentionInterpreter, DefaultTilesAtD64) {
  AttentionShape s;
  s.batch = 1, s.heads = 2, s.kv_heads = 1, s.dim = 64;
  for (bool causal : {false, true}) {
    s.seqlen_q = s.seqlen_k = causal ? 16384 : 4096;  // 4096 keys a row on average or more
    const AttentionConfig c = T::kernels::default_attention_config(s, DType::bf16, causal, "sm_90a");
    ASSERT_EQ(c.describe(), causal ? "64x128 s1 t128 ring lazy-rescale" : "192x128 s2 t384 ring persistent");
    check({1, 2, 1, 200, 300, 64, false}, DType::bf16, c);
    check({1, 2, 2, 200, 260, 64, true}, DType::f16, c);
    check({1, 2, 1, 71, 130, 64, true}, DType::bf16, c);
  }
}

// Session 20's D = 128 causal defaults: the warpgroups taking turns, persistent; 256 keys in one
// stage past 768 keys a row on average (lazy rescaling there, session 32), 128 in two up to it.
// Tails, GQA, Sq != Sk both ways.
TEST(FlashAttentionInterpreter, DefaultCausalTilesAtD128) {
  AttentionShape s;
  s.batch = 1, s.heads = 2, s.kv_heads = 2, s.dim = 128;
  for (std::int64_t S : {1024, 4096}) {
    s.seqlen_q = s.seqlen_k = S;
    const AttentionConfig c = T::kernels::default_attention_config(s, DType::bf16, true, "sm_90a");
    ASSERT_EQ(c.describe(), S == 1024 ? "128x128 s2 t256 ring+pingpong persistent"
                                      : "128x256 s1 t256 ring+pingpong persistent lazy-rescale");
    check({1, 2, 1, 200, 300, 128, true}, DType::bf16, c);
    check({1, 2, 2, 300, 270, 128, true}, DType::f16, c);
  }
}

// The scale folded into the exponents (positive scales: the max over raw scores) and not (a
// negative scale reverses the scores' order: scaled first), a large scale whose smaller
// probabilities fall below 2^-126 and flush to 0 (fast_exp2), and the default 1/sqrt(D).
TEST(FlashAttentionInterpreter, ScalesFoldedNegativeAndLarge) {
  check({1, 2, 1, 70, 90, 32, false}, DType::f16, kSmall, -0.4f);
  check({1, 1, 1, 65, 100, 32, true}, DType::bf16, kSmall, -0.2f);
  check({1, 2, 2, 40, 70, 32, false}, DType::f16, kSmall, 40.0f);
  check({1, 1, 1, 33, 65, 64, true}, DType::bf16, kSmall, 0.0f);
}

template <class F>
void expect_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing: " << needle;
  } catch (const T::Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(FlashAttentionErrors, ShapesAndStridesByMessage) {
  AttentionShape s;
  s.heads = 6, s.kv_heads = 4;
  expect_error([&] { T::kernels::check_attention(s, DType::f16); }, "H must be a multiple of H_kv");
  s = {};
  s.dim = 100;
  expect_error([&] { T::kernels::check_attention(s, DType::f16); }, "legal: a multiple of 8 from 8 to 256");
  s.dim = 264;
  expect_error([&] { T::kernels::check_attention(s, DType::f16); }, "the head dimension D is 264");
  s = {};
  expect_error([&] { T::kernels::check_attention(s, DType::f32); }, "legal: f16 or bf16");
  s.q_strides = {4096, 64, 1, 2};
  expect_error([&] { T::kernels::check_attention(s, DType::f16); }, "the head dimension must be contiguous");
  s.q_strides = {4096, 68, 4, 1};
  expect_error([&] { T::kernels::check_attention(s, DType::f16); }, "positive multiples of 8");
  s = {};
  s.seqlen_k = 0;
  expect_error([&] { T::kernels::check_attention(s, DType::f16); }, "the key length Sk is 0");
}

TEST(FlashAttentionErrors, ScaleThatIsNotFinite) {
  AttentionShape s;
  for (float bad : {std::nanf(""), INFINITY, -INFINITY})
    expect_error([&] { T::kernels::attention_program(s, DType::f16, false, bad, kSmall); },
                 "legal: a finite value, or 0 for 1/sqrt(D)");
}

// AttentionConfig::poly_exp_one_in: one group of 8 key columns in N takes poly_exp2 (relative
// error below 8.6e-5) -- still within the tolerances, masked columns still 0 (tails, the causal
// diagonal), rows that see no key still O = 0 and LSE = -inf; legal values 0 and 2 .. 16.
TEST(FlashAttentionInterpreter, PolyExpColumns) {
  for (int n : {2, 4, 8}) {  // 64 keys a block: 8 groups of 8
    AttentionConfig c = kSmall;
    c.poly_exp_one_in = n;
    check({1, 2, 2, 70, 90, 64, false}, DType::f16, c);
    check({1, 1, 1, 150, 20, 32, true}, DType::bf16, c);  // the first 130 rows see no key
  }
  AttentionShape s;
  for (int bad : {1, 17, -2}) {
    AttentionConfig c = kSmall;
    c.poly_exp_one_in = bad;
    expect_error([&] { T::kernels::attention_program(s, DType::f16, false, 0.0f, c); },
                 "poly_exp_one_in = " + std::to_string(bad) +
                     "; legal: 0 (every exponential on the MUFU unit) or 2 .. 16");
  }
}

// AttentionConfig::lazy_rescale: a row keeps its running max until a key block passes it by more
// than 8 in base-2 exponent units. Random scores (the max rarely moves after the first block),
// tails, causal rows that see no key (O = 0, LSE = -inf), GQA; then scores that climb along the
// keys -- by about 5 exponent units a key block (the stale max is kept for a block or two, the
// exponentials grow towards 2^8), by about 20 (a new max every block) and in steps larger than
// f16's exponent range allows without rescaling (2^100 over the row) -- and scores that fall
// (the first block's max is never replaced). O and LSE match float64 in every case.
TEST(FlashAttentionInterpreter, LazyRescale) {
  AttentionConfig lazy = kSmall;
  lazy.lazy_rescale = true;
  EXPECT_NE(lazy.describe().find("lazy-rescale"), std::string::npos) << lazy.describe();
  check({1, 2, 2, 70, 90, 64, false}, DType::f16, lazy);
  check({1, 4, 2, 65, 200, 40, true}, DType::bf16, lazy);
  check({1, 1, 1, 150, 20, 32, true}, DType::f16, lazy);           // the first 130 rows see no key
  check({2, 2, 1, 1, 300, 64, true}, DType::bf16, lazy);           // decode: one query row, every key
  check({1, 2, 1, 33, 129, 64, false}, DType::bf16, lazy, -0.2f);  // scaled before the max
  const Case c{1, 1, 1, 40, 700, 32, false};
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> noise(-0.05, 0.05);
  // score(i, j) = scale * sum_d q_d k_jd ~ 0.3 * 32 * ramp * j: per 64-key block 614 * ramp in
  // natural units, 886 * ramp in base-2 units.
  for (double ramp : {0.0056, 0.0226, -0.0226, 0.25}) {
    for (DType t : {DType::f16, DType::bf16}) {
      SCOPED_TRACE("ramp " + std::to_string(ramp));
      std::vector<double> q(static_cast<size_t>(c.Sq * c.D)), k(static_cast<size_t>(c.Sk * c.D)),
          v(static_cast<size_t>(c.Sk * c.D));
      for (double& x : q) x = 1.0 + noise(rng);
      for (std::int64_t j = 0; j < c.Sk; ++j)
        for (std::int64_t d = 0; d < c.D; ++d) {
          // At ramp 0.25 the scores span 0.3 * 32 * 0.25 * 700 = 1680 natural units: K's entries
          // up to 175, which f16 holds (to 0.125: the noise then is f16's rounding).
          k[static_cast<size_t>(j * c.D + d)] = ramp * static_cast<double>(j) + noise(rng);
          v[static_cast<size_t>(j * c.D + d)] = noise(rng) * 20.0;
        }
      for (const AttentionConfig& cfg : {lazy, kSmall})
        check_inputs(c, t, cfg, 0.3f, T::interp::HostTensor::from_values(t, {1, c.Sq, 1, c.D}, q),
                     T::interp::HostTensor::from_values(t, {1, c.Sk, 1, c.D}, k),
                     T::interp::HostTensor::from_values(t, {1, c.Sk, 1, c.D}, v));
    }
  }
}

}  // namespace
