// fast_exp2 on the GPU (one ex2.approx.ftz.f32) against the interpreter's meaning of it (2^x, a
// result below 2^-126 flushed to 0): relative error within the instruction's 2^-21 away from
// the flush boundary, exact zeros below it, exact 1 at 0, infinities and NaN as exp2. The
// interpreter is the reference, so the two must agree wherever the hardware's rounding cannot
// move a value across 2^-126.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "support/TestSupport.hpp"
#include "tessel/tessel.hpp"

namespace {

namespace T = tessel;

TEST(FastExp2Gpu, MatchesTheInterpreter) {
  TESSEL_REQUIRE_GPU();
  const std::int64_t n = 4096;
  T::PrimFunc f("fast_exp2");
  auto X = f.tensor("X", {n}, T::f32);
  auto Y = f.tensor("Y", {n}, T::f32);
  f.body([&] {
    T::Kernel(n / 256, 256, [&](T::Var bx) {
      T::Parallel(256, [&](T::Var i) { Y.at({bx * 256 + i}) = T::fast_exp2(X(bx * 256 + i)); });
    });
  });
  T::JitKernel k = T::jit(f, {.out_idx = {-1}});
  ASSERT_NE(k.ptx().find("ex2.approx.ftz.f32"), std::string::npos);
  std::mt19937_64 rng(std::random_device{}());
  std::vector<float> x(static_cast<size_t>(n));
  const float inf = std::numeric_limits<float>::infinity();
  const float special[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 20.0f, 127.0f, 128.5f, -125.0f,
                           -127.0f, -149.0f, -1000.0f, -inf, inf, std::nanf(""), 1e-40f, -1e-40f};
  size_t i = 0;
  for (float s : special) x[i++] = s;
  for (; i < x.size(); ++i) x[i] = std::uniform_real_distribution<float>(-140.0f, 30.0f)(rng);
  T::interp::HostTensor in(T::DType::f32, {n});
  for (std::int64_t j = 0; j < n; ++j) in.set(j, x[static_cast<size_t>(j)]);
  const std::vector<double> want = k.run_on_cpu({in})[0].to_values();
  T::Tensor xd = T::Tensor::empty({n}, T::DType::f32);
  xd.copy_from_host(x.data());
  T::Tensor yd = T::Tensor::empty({n}, T::DType::f32);
  yd.fill(std::nan(""));
  k.launch({xd, yd});
  T::check_cu(T::driver().cuCtxSynchronize(), "cuCtxSynchronize");
  const std::vector<double> got = yd.to_host_f64();
  for (std::int64_t j = 0; j < n; ++j) {
    const double xj = x[static_cast<size_t>(j)], g = got[static_cast<size_t>(j)], w = want[static_cast<size_t>(j)];
    SCOPED_TRACE("x = " + std::to_string(xj));
    if (std::isnan(xj)) {
      EXPECT_TRUE(std::isnan(g) && std::isnan(w));
    } else if (xj > -125.5 && xj < 128.0) {
      EXPECT_NEAR(g, w, std::ldexp(std::abs(w), -21));
      if (xj == 0.0 || std::abs(xj) < 1e-38) {
        EXPECT_EQ(g, 1.0);
      }
    } else if (xj < -126.5) {
      EXPECT_EQ(g, 0.0);
      EXPECT_EQ(w, 0.0);
    } else if (xj >= 128.0) {
      EXPECT_EQ(g, INFINITY);
      EXPECT_EQ(w, INFINITY);
    }
  }
}

}  // namespace
