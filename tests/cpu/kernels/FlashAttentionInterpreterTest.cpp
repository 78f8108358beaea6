// kernels::attention_program on the CPU interpreter against float64: causal and not, GQA and
// MQA, Sq != Sk (both ways), tails in every dimension, D not a multiple of 16, rows that see no
// key, and the argument errors by message.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/attention/FlashAttention.hpp"
#include "support/AttentionReference.hpp"
#include "support/TestSupport.hpp"
#include "tessel/interp/Interpreter.hpp"

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

void check(const Case& c, DType t, const AttentionConfig& cfg) {
  SCOPED_TRACE(describe(c) + " " + std::string(T::dtype_name(t)) + " " + cfg.describe());
  AttentionShape s;
  s.batch = c.B, s.heads = c.H, s.kv_heads = c.Hkv, s.seqlen_q = c.Sq, s.seqlen_k = c.Sk, s.dim = c.D;
  std::mt19937_64 seeds(std::random_device{}());
  auto q = T::interp::HostTensor::random(t, {c.B, c.Sq, c.H, c.D}, seeds(), -2, 2);
  auto k = T::interp::HostTensor::random(t, {c.B, c.Sk, c.Hkv, c.D}, seeds(), -2, 2);
  auto v = T::interp::HostTensor::random(t, {c.B, c.Sk, c.Hkv, c.D}, seeds());
  const float scale = 0.3f;
  auto out =
      T::interp::run_on_cpu(T::kernels::attention_program(s, t, c.causal, scale, cfg), {q, k, v}, {3, 4});
  auto ref = T::test::reference_attention(q.to_values(), k.to_values(), v.to_values(), c.B, c.H, c.Hkv, c.Sq,
                                          c.Sk, c.D, c.causal, scale);
  const double err = T::test::rel_error(out[0].to_values(), ref.o);
  EXPECT_LE(err, t == DType::f16 ? 5e-3 : 2e-2) << "O: relative error " << err;
  // LSE: -inf exactly where the reference has it, else close.
  std::vector<double> lse = out[1].to_values(), lse_ref = ref.lse;
  for (size_t i = 0; i < lse.size(); ++i) {
    if (std::isinf(lse_ref[i])) {
      EXPECT_TRUE(std::isinf(lse[i]) && lse[i] < 0) << "LSE[" << i << "] = " << lse[i] << ", want -inf";
      lse[i] = lse_ref[i] = 0;
    }
  }
  const double lse_err = T::test::rel_error(lse, lse_ref);
  EXPECT_LE(lse_err, 1e-3) << "LSE: relative error " << lse_err;
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

}  // namespace
