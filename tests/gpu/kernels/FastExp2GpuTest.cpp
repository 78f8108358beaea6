// fast_exp2 on the GPU (one ex2.approx.ftz.f32) against the interpreter's meaning of it (2^x, a
// result below 2^-126 flushed to 0): relative error within the instruction's 2^-21 away from
// the flush boundary, exact zeros below it, exact 1 at 0, infinities and NaN as exp2. The
// interpreter is the reference, so the two must agree wherever the hardware's rounding cannot
// move a value across 2^-126. poly_exp2 (FMA-pipe arithmetic only) must agree bit for bit.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "support/TestSupport.hpp"
#include "tessel/tessel.hpp"

namespace {

namespace T = tessel;

// Y = op(X) over x.size() elements (a multiple of 256), compiled, run on the GPU (Y poisoned with
// NaN first) and in the interpreter on the same inputs: {the kernel, the GPU's Y, the interpreter's}.
struct UnaryRun {
  T::JitKernel kernel;
  std::vector<double> got, want;
};
UnaryRun run_unary(const char* name, T::Expr (*op)(T::Expr, T::Loc), const std::vector<float>& x) {
  const auto n = static_cast<std::int64_t>(x.size());
  T::PrimFunc f(name);
  auto X = f.tensor("X", {n}, T::f32);
  auto Y = f.tensor("Y", {n}, T::f32);
  f.body([&] {
    T::Kernel(n / 256, 256, [&](T::Var bx) {
      T::Parallel(256, [&](T::Var i) { Y.at({bx * 256 + i}) = op(X(bx * 256 + i), T::Loc::current()); });
    });
  });
  UnaryRun r{T::jit(f, {.out_idx = {-1}}), {}, {}};
  T::interp::HostTensor in(T::DType::f32, {n});
  for (std::int64_t j = 0; j < n; ++j) in.set(j, x[static_cast<size_t>(j)]);
  r.want = r.kernel.run_on_cpu({in})[0].to_values();
  T::Tensor xd = T::Tensor::empty({n}, T::DType::f32);
  xd.copy_from_host(x.data());
  T::Tensor yd = T::Tensor::empty({n}, T::DType::f32);
  yd.fill(std::nan(""));
  r.kernel.launch({xd, yd});
  T::check_cu(T::driver().cuCtxSynchronize(), "cuCtxSynchronize");
  r.got = yd.to_host_f64();
  return r;
}

TEST(FastExp2Gpu, MatchesTheInterpreter) {
  TESSEL_REQUIRE_GPU();
  const std::int64_t n = 4096;
  std::mt19937_64 rng(std::random_device{}());
  std::vector<float> x(static_cast<size_t>(n));
  const float inf = std::numeric_limits<float>::infinity();
  const float special[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 20.0f, 127.0f, 128.5f, -125.0f,
                           -127.0f, -149.0f, -1000.0f, -inf, inf, std::nanf(""), 1e-40f, -1e-40f};
  size_t i = 0;
  for (float s : special) x[i++] = s;
  for (; i < x.size(); ++i) x[i] = std::uniform_real_distribution<float>(-140.0f, 30.0f)(rng);
  const UnaryRun r = run_unary("fast_exp2", T::fast_exp2, x);
  ASSERT_NE(r.kernel.ptx().find("ex2.approx.ftz.f32"), std::string::npos);
  const std::vector<double>&got = r.got, &want = r.want;
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

// poly_exp2 is IEEE arithmetic end to end (adds, fused multiply-adds, an integer multiply-add, a
// multiply), so the GPU and the interpreter must give the same bits for every input: the ranges
// of every binade's fraction, the edges (-127, -126, 128), infinities, NaN, denormals. The PTX has
// no ex2 instruction: the exponentials really come from the FMA pipe.
TEST(PolyExp2Gpu, SameBitsAsTheInterpreter) {
  TESSEL_REQUIRE_GPU();
  const std::int64_t n = 1 << 16;
  std::mt19937_64 rng(std::random_device{}());
  std::vector<float> x(static_cast<size_t>(n));
  const float inf = std::numeric_limits<float>::infinity();
  const float special[] = {0.0f,           -0.0f,  1.0f,          -1.0f,   0.5f,    127.0f,  127.999f,
                           128.0f,         128.5f, -126.0f,       -126.5f, -127.0f, -127.5f, -1000.0f,
                           -inf,           inf,    std::nanf(""), 1e-40f,  -1e-40f, -1e-30f, 0x1.fffffep-1f,
                           -0x1.fffffep-1f};
  size_t i = 0;
  for (float s : special) x[i++] = s;
  for (; i < x.size() / 2; ++i) x[i] = std::uniform_real_distribution<float>(-130.0f, 130.0f)(rng);
  for (; i < x.size(); ++i) x[i] = std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng);
  const UnaryRun r = run_unary("poly_exp2", T::poly_exp2, x);
  EXPECT_EQ(r.kernel.ptx().find("ex2.approx"), std::string::npos) << "poly_exp2 issued a MUFU.EX2";
  const std::vector<double>&got = r.got, &want = r.want;
  int mismatches = 0;
  for (std::int64_t j = 0; j < n && mismatches < 10; ++j) {
    const double g = got[static_cast<size_t>(j)], w = want[static_cast<size_t>(j)];
    const bool same = (std::isnan(g) && std::isnan(w)) ||
                      std::bit_cast<std::uint64_t>(g) == std::bit_cast<std::uint64_t>(w);
    if (!same) {
      ++mismatches;
      ADD_FAILURE() << "poly_exp2(" << std::hexfloat << x[static_cast<size_t>(j)] << "): GPU " << g
                    << ", interpreter " << w;
    }
  }
}

}  // namespace
