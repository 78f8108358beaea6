// A jitted kernel also runs on the CPU interpreter with the same meaning: what CI, which has no
// GPU, uses to check the numerics of the kernels it compiles.
#include <gtest/gtest.h>

#include <random>

#include "support/TestSupport.hpp"
#include "tessel/kernels/gemm/Matmul.hpp"

namespace {

TEST(JitRunOnCpu, TutorialMatmulMatchesFloat64) {
  for (tessel::DType t : {tessel::DType::f16, tessel::DType::bf16}) {
    tessel::kernels::MatmulConfig c;
    c.block_M = 64;
    c.block_N = 64;
    c.dtype = t;
    tessel::JitOptions o;
    o.arch = "sm_80";
    auto k = tessel::kernels::make_matmul(100, 72, 40, c, o);
    std::mt19937_64 seeds(std::random_device{}());
    auto a = tessel::interp::HostTensor::random(t, {100, 40}, seeds());
    auto b = tessel::interp::HostTensor::random(t, {40, 72}, seeds());
    auto out = k.run_on_cpu({a, b});
    ASSERT_EQ(out.size(), 1u);
    auto ref = tessel::test::reference_gemm(a.to_values(), b.to_values(), 100, 72, 40);
    double err = tessel::test::rel_error(out[0].to_values(), ref);
    EXPECT_LE(err, 1e-2) << tessel::dtype_name(t);
  }
}

TEST(JitRunOnCpu, ChecksArgumentsLikeTheGpuPath) {
  tessel::JitOptions o;
  o.arch = "sm_80";
  auto k = tessel::kernels::make_matmul(64, 64, 64, {}, o);
  auto a = tessel::interp::HostTensor::random(tessel::DType::f16, {64, 64}, 1);
  auto bad = tessel::interp::HostTensor::random(tessel::DType::f16, {64, 32}, 2);
  try {
    k.run_on_cpu({a, bad});
    FAIL() << "no error for a wrong shape";
  } catch (const tessel::RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("parameter B expects shape [64, 64], given [64, 32]"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
