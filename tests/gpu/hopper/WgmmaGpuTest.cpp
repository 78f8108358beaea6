// wgmma on the H200, one warpgroup, checked element by element: A from registers (wgmma_rs,
// the form FlashAttention's P*V takes), B from a 128-byte-swizzled shared tile in either
// major order, and A from shared memory (wgmma_ss) for comparison. The inputs are small
// integers, so every f32 accumulation is exact and the result must equal the float64
// reference bit for bit: a wrong fragment or descriptor layout cannot hide in a tolerance.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "support/TestSupport.hpp"
#include "support/WgmmaCheckKernel.hpp"
#include "tessel/runtime/HostFloat.hpp"
#include "tessel/runtime/Module.hpp"
#include "tessel/runtime/Tensor.hpp"

namespace tessel {
namespace {

struct WgmmaCase {
  DType dtype;
  int n;
  int trans_b;
  bool from_regs;
};

class WgmmaShapes : public ::testing::TestWithParam<WgmmaCase> {};

TEST_P(WgmmaShapes, EveryElementMatchesFloat64) {
  TESSEL_REQUIRE_GPU();
  if (current_device().arch() != "sm_90a") GTEST_SKIP() << "SKIPPED: wgmma needs an sm_90a GPU";
  const WgmmaCase& c = GetParam();
  const int M = 64, K = 64, N = c.n;
  CompileOptions o;
  o.arch = "sm_90a";
  o.extra_flags = test::wgmma_check_flags(c.dtype == DType::f16, N, c.trans_b, c.from_regs);
  LoadedKernel k = load_kernel(test::kWgmmaCheckKernel, "wgmma_check", o);

  static std::mt19937_64 rng(std::random_device{}());
  std::uniform_int_distribution<int> small(-4, 4);
  std::vector<double> a(M * K), b(K * N);
  std::vector<std::uint16_t> a_bits(M * K), b_bits(K * N);
  auto bits = [&](double v) {
    return c.dtype == DType::f16 ? float_to_half_bits(static_cast<float>(v))
                                 : float_to_bf16_bits(static_cast<float>(v));
  };
  for (int i = 0; i < M * K; ++i) a_bits[i] = bits(a[i] = small(rng));
  for (int i = 0; i < K * N; ++i) b_bits[i] = bits(b[i] = small(rng));
  Tensor ta = Tensor::from_host(a_bits, {M, K}, c.dtype), tb = Tensor::from_host(b_bits, {K, N}, c.dtype);
  Tensor tc = Tensor::empty({M, N}, DType::f32);
  tc.fill(std::nan(""));
  CUdeviceptr pa = ta.device_ptr(), pb = tb.device_ptr(), pc = tc.device_ptr();
  void* args[] = {&pa, &pb, &pc};
  k.launch({1, 1, 1}, {128, 1, 1}, 0, nullptr, args);
  check_cu(driver().cuCtxSynchronize(), "cuCtxSynchronize");
  const std::vector<float> got = tc.to_host<float>();
  const std::vector<double> ref = test::reference_gemm(a, b, M, N, K);
  int wrong = 0;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j)
      if (got[i * N + j] != ref[i * N + j] && ++wrong <= 5)
        ADD_FAILURE() << "C(" << i << ", " << j << ") = " << got[i * N + j] << ", expected "
                      << ref[i * N + j];
  EXPECT_EQ(wrong, 0) << "elements differ of " << M * N;
}

INSTANTIATE_TEST_SUITE_P(
    Wgmma, WgmmaShapes,
    ::testing::Values(WgmmaCase{DType::f16, 128, 1, true}, WgmmaCase{DType::bf16, 64, 1, true},
                      WgmmaCase{DType::f16, 256, 1, true}, WgmmaCase{DType::f16, 64, 0, true},
                      WgmmaCase{DType::bf16, 128, 0, true}, WgmmaCase{DType::f16, 128, 1, false},
                      WgmmaCase{DType::bf16, 64, 0, false}),
    [](const auto& info) {
      const WgmmaCase& c = info.param;
      return std::string(c.from_regs ? "rs_" : "ss_") + std::string(dtype_name(c.dtype)) + "_n" +
             std::to_string(c.n) + (c.trans_b ? "_Bnmajor" : "_Bkmajor");
    });

}  // namespace
}  // namespace tessel
