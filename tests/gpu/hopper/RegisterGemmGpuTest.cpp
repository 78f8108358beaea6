// gemm with A in registers on the GPU, against float64: the plain form (A copied into a
// fragment) and the FlashAttention-shaped chain O = f16(scale * Q K^T) V, f16 and bf16, ragged
// and tiny shapes, on sm_90a with wgmma (both gemms WarpgroupGemm, the second wgmma with A from
// registers) and with disable_wgmma (mma.sync), outputs poisoned with NaN, two runs
// bit-identical.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "support/RegisterGemmPrograms.hpp"
#include "support/TestSupport.hpp"
#include "tessel/runtime/Driver.hpp"
#include "tessel/runtime/HostFloat.hpp"
#include "tessel/runtime/Tensor.hpp"

namespace {

namespace T = tessel;
using tessel::Tensor;

void sync() {
  tessel::check_cu(tessel::driver().cuCtxSynchronize(), "cuCtxSynchronize");
}

// Runs the kernel twice on the same inputs into NaN-poisoned outputs; returns the first result
// and checks that the second is bit-identical.
std::vector<double> run_twice(const T::JitKernel& k, std::vector<Tensor> inputs, std::vector<std::int64_t> out_shape) {
  std::vector<double> first;
  for (int run = 0; run < 2; ++run) {
    Tensor out = Tensor::empty(out_shape, T::DType::f32);
    out.fill(std::nan(""));
    std::vector<Tensor> args = inputs;
    args.push_back(out);
    k.launch(args);
    sync();
    std::vector<double> got = out.to_host_f64();
    if (run == 0)
      first = got;
    else
      EXPECT_EQ(got, first) << "two runs on the same inputs differ";
  }
  return first;
}

class RegisterAGemm : public ::testing::TestWithParam<std::tuple<tessel::test::RegisterGemmShape, T::DType, bool>> {
};

TEST_P(RegisterAGemm, MatchesFloat64) {
  TESSEL_REQUIRE_GPU();
  auto [s, dtype, disable_wgmma] = GetParam();
  T::JitOptions o;
  o.disable_wgmma = disable_wgmma;
  auto k = T::jit(tessel::test::register_a_gemm_program(s, dtype), o);
  const bool sm90 = T::current_device().arch() == "sm_90a";
  EXPECT_NE(k.ptx().find(sm90 && !disable_wgmma ? "wgmma.mma_async" : "mma.sync"), std::string::npos);
  static std::mt19937_64 seeds(std::random_device{}());
  Tensor a = Tensor::empty({s.M, s.K}, dtype), b = Tensor::empty({s.K, s.N}, dtype);
  a.fill_random(seeds());
  b.fill_random(seeds());
  std::vector<double> got = run_twice(k, {a, b}, {s.M, s.N});
  std::vector<double> ref = tessel::test::reference_gemm(a.to_host_f64(), b.to_host_f64(), s.M, s.N, s.K);
  double err = tessel::test::rel_error(got, ref);
  EXPECT_LE(err, 1e-4) << "relative Frobenius error " << err << " (" << k.info().path << ")";
}

std::string register_name(
    const ::testing::TestParamInfo<std::tuple<tessel::test::RegisterGemmShape, T::DType, bool>>& info) {
  auto [s, t, off] = info.param;
  return std::to_string(s.M) + "x" + std::to_string(s.N) + "x" + std::to_string(s.K) + "_" + std::to_string(s.BM) +
         "x" + std::to_string(s.BN) + "x" + std::to_string(s.BK) + "t" + std::to_string(s.threads) + "_" +
         std::string(T::dtype_name(t)) + (off ? "_nowgmma" : "");
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, RegisterAGemm,
    ::testing::Combine(::testing::Values(tessel::test::RegisterGemmShape{1000, 1000, 1000, 64, 128, 32, 128, 3},
                                         tessel::test::RegisterGemmShape{100, 72, 40, 64, 64, 16, 128, 2},
                                         tessel::test::RegisterGemmShape{7, 64, 16, 64, 64, 16, 128, 2},
                                         tessel::test::RegisterGemmShape{513, 520, 200, 128, 256, 64, 256, 2}),
                       ::testing::Values(T::DType::f16, T::DType::bf16), ::testing::Bool()),
    register_name);

class GemmChain : public ::testing::TestWithParam<std::tuple<tessel::test::ChainShape, T::DType, bool, bool>> {};

TEST_P(GemmChain, MatchesFloat64WithP16Bit) {
  TESSEL_REQUIRE_GPU();
  auto [s, dtype, disable_wgmma, via_copy] = GetParam();
  const float scale = 0.125f;
  T::JitOptions o;
  o.disable_wgmma = disable_wgmma;
  // With the copy of S to P the loop is also rotated (opt-in: O += P V of block j - 1 behind
  // S = Q K^T of block j); without it, asynchronous gemms only.
  o.rotate_gemm_loops = via_copy;
  auto k = T::jit(tessel::test::gemm_chain_program(s, dtype, scale, via_copy), o);
  const bool sm90 = T::current_device().arch() == "sm_90a";
  if (sm90 && !disable_wgmma) {
    EXPECT_EQ(k.info().path, std::string("sm90 wgmma block gemm (generic kernel), TMA + mbarrier ring, warp-specialized") +
                                 (s.threads == 256 ? ", ping-pong" : ""));
  }
  static std::mt19937_64 seeds(std::random_device{}());
  Tensor q = Tensor::empty({s.M, s.D}, dtype), kk = Tensor::empty({s.N, s.D}, dtype),
         v = Tensor::empty({s.N, s.D}, dtype);
  q.fill_random(seeds());
  kk.fill_random(seeds());
  v.fill_random(seeds());
  std::vector<double> got = run_twice(k, {q, kk, v}, {s.M, s.D});
  auto round16 = [dtype](double x) {
    return static_cast<double>(dtype == T::DType::f16 ? tessel::round_to_half(static_cast<float>(x))
                                                      : tessel::round_to_bf16(static_cast<float>(x)));
  };
  std::vector<double> ref = tessel::test::reference_gemm_chain(q.to_host_f64(), kk.to_host_f64(), v.to_host_f64(),
                                                               s.M, s.N, s.D, scale, round16);
  double err = tessel::test::rel_error(got, ref);
  // P is rounded to 16 bits from an f32 S; an element whose S lands on a rounding boundary may
  // round the other way than from the float64 S: a few ulps of P in a sum of N terms.
  EXPECT_LE(err, dtype == T::DType::f16 ? 2e-3 : 1e-2) << "relative Frobenius error " << err << " ("
                                                         << k.info().path << ")";
}

std::string chain_name(
    const ::testing::TestParamInfo<std::tuple<tessel::test::ChainShape, T::DType, bool, bool>>& info) {
  auto [s, t, off, copy] = info.param;
  return std::to_string(s.M) + "x" + std::to_string(s.N) + "xd" + std::to_string(s.D) + "_" + std::to_string(s.BM) +
         "x" + std::to_string(s.BN) + "t" + std::to_string(s.threads) + "_" + std::string(T::dtype_name(t)) +
         (off ? "_nowgmma" : "") + (copy ? "_copy" : "");
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemmChain,
                         ::testing::Combine(::testing::Values(tessel::test::ChainShape{200, 300, 64, 64, 64, 128},
                                                              tessel::test::ChainShape{256, 256, 128, 128, 64, 256},
                                                              tessel::test::ChainShape{300, 1000, 64, 64, 128, 128},
                                                              tessel::test::ChainShape{17, 5, 64, 64, 64, 128}),
                                            ::testing::Values(T::DType::f16, T::DType::bf16), ::testing::Bool(),
                                            ::testing::Bool()),
                         chain_name);

class Attention : public ::testing::TestWithParam<std::tuple<tessel::test::ChainShape, T::DType, bool>> {};

TEST_P(Attention, MatchesFloat64Softmax) {
  TESSEL_REQUIRE_GPU();
  auto [s, dtype, disable_wgmma] = GetParam();
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.D));
  T::JitOptions o;
  o.disable_wgmma = disable_wgmma;
  auto k = T::kernels::make_attention(s.M, s.N, s.D, dtype, scale, {s.BM, s.BN, s.threads, 2}, o);
  const bool sm90 = T::current_device().arch() == "sm_90a";
  EXPECT_NE(k.ptx().find(sm90 && !disable_wgmma ? "wgmma.mma_async" : "mma.sync"), std::string::npos);
  static std::mt19937_64 seeds(std::random_device{}());
  Tensor q = Tensor::empty({s.M, s.D}, dtype), kk = Tensor::empty({s.N, s.D}, dtype),
         v = Tensor::empty({s.N, s.D}, dtype);
  // Wide logits (|S| up to ~16) so that the running max moves and the rescaling matters.
  q.fill_random(seeds(), -2, 2);
  kk.fill_random(seeds(), -2, 2);
  v.fill_random(seeds());
  std::vector<double> got = run_twice(k, {q, kk, v}, {s.M, s.D});
  std::vector<double> ref = tessel::test::reference_attention(q.to_host_f64(), kk.to_host_f64(), v.to_host_f64(),
                                                              s.M, s.N, s.D, scale);
  double err = tessel::test::rel_error(got, ref);
  // P = exp(S - m) goes to the second gemm in 16 bits: ~2^-11 (f16) or 2^-8 (bf16) per term.
  EXPECT_LE(err, dtype == T::DType::f16 ? 5e-3 : 2e-2) << "relative Frobenius error " << err << " ("
                                                          << k.info().path << ")";
}

std::string attention_name(const ::testing::TestParamInfo<std::tuple<tessel::test::ChainShape, T::DType, bool>>& info) {
  const auto& [s, t, off] = info.param;
  return std::to_string(s.M) + "x" + std::to_string(s.N) + "xd" + std::to_string(s.D) + "_" + std::to_string(s.BM) +
         "x" + std::to_string(s.BN) + "_" + std::string(T::dtype_name(t)) + (off ? "_nowgmma" : "");
}

INSTANTIATE_TEST_SUITE_P(Shapes, Attention,
                         ::testing::Combine(::testing::Values(tessel::test::ChainShape{200, 300, 64, 64, 64, 128},
                                                              tessel::test::ChainShape{256, 1000, 128, 128, 64, 256},
                                                              tessel::test::ChainShape{1024, 4096, 64, 64, 128, 128},
                                                              tessel::test::ChainShape{17, 5, 64, 64, 64, 128}),
                                            ::testing::Values(T::DType::f16, T::DType::bf16), ::testing::Bool()),
                         attention_name);

}  // namespace
