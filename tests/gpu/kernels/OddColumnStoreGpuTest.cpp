// A user's row-blocked tile stored at an odd column of a wider tensor on the GPU -- rows that
// start at every alignment, gaps between them, a ragged last block -- writes exactly its elements
// (the output poisoned with NaN first: a byte written outside the region, or a valid one missed,
// fails) with the values a float64 evaluation gives, in f16, bf16 and f32; the compiler's store
// path (a staged span where rows are not provably aligned) and the element-wise one
// (JitOptions::disable_row_staging) agree bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "support/TestSupport.hpp"
#include "tessel/tessel.hpp"

namespace {

namespace T = tessel;
using T::DType;
using T::Tensor;

struct Shape {
  long long M, N, NY, col;  // X [M, N]; Y [M, NY], the tile stored from column `col`
};

// Y[r, col + c] = X[r, c] - max_c X[r, c] for the tile's 1024 columns c, as far as Y's edge (-inf
// past X's); 4 rows a block.
T::JitKernel shifted_rows(const Shape& s, DType t, bool staged) {
  T::PrimFunc f("shifted_rows");
  auto X = f.tensor("X", {s.M, s.N}, t);
  auto Y = f.tensor("Y", {s.M, s.NY}, t);
  f.body([&] {
    T::Kernel(T::ceildiv(T::Expr(s.M), 4), 128, [&](T::Var bx) {
      auto raw = T::alloc_fragment({4, 1024}, t);
      auto x = T::alloc_fragment({4, 1024}, T::f32);
      auto m = T::alloc_fragment({4}, T::f32);
      T::copy_padded(X(bx * 4, 0), raw, -T::infinity(t));
      T::Parallel(4, 1024, [&](T::Var i, T::Var j) { x(i, j) = T::cast(T::f32, raw(i, j)); });
      T::reduce_max(x, m, 1);
      T::Parallel(4, 1024, [&](T::Var i, T::Var j) { raw(i, j) = T::cast(t, x(i, j) - m(i)); });
      T::copy(raw, Y(bx * 4, s.col));
    });
  });
  T::JitOptions o;
  o.disable_row_staging = !staged;
  return T::jit(f, o);
}

class OddColumnStores : public ::testing::TestWithParam<std::tuple<int, DType>> {};

TEST_P(OddColumnStores, WriteExactlyTheRegion) {
  TESSEL_REQUIRE_GPU();
  const Shape shapes[] = {{63, 1000, 1003, 3}, {64, 1000, 1000, 0}, {17, 1024, 1031, 7},
                          {5, 999, 1001, 1},   {9, 200, 1003, 5}};
  auto [which, t] = GetParam();
  const Shape s = shapes[which];
  T::JitKernel k = shifted_rows(s, t, true);
  T::JitKernel plain = shifted_rows(s, t, false);
  std::mt19937_64 seeds(std::random_device{}());
  Tensor x = Tensor::empty({s.M, s.N}, t);
  x.fill_random(seeds(), -6, 6);
  const std::vector<double> in = x.to_host_f64();
  Tensor y = Tensor::empty({s.M, s.NY}, t), y_plain = Tensor::empty({s.M, s.NY}, t);
  y.fill(std::nan(""));
  y_plain.fill(std::nan(""));
  k.launch({x, y});
  plain.launch({x, y_plain});
  T::check_cu(T::driver().cuCtxSynchronize(), "cuCtxSynchronize");
  const std::vector<double> out = y.to_host_f64(), out_plain = y_plain.to_host_f64();
  // The tile's 1024 columns are stored as far as Y's edge; those past X's edge hold -inf (the
  // padded load minus the row's maximum).
  const long long written = std::min(1024LL, s.NY - s.col);
  const double tol = t == DType::f32 ? 1e-6 : 2e-2;
  for (long long r = 0; r < s.M; ++r) {
    double mx = -INFINITY;
    for (long long c = 0; c < s.N; ++c) mx = std::max(mx, in[r * s.N + c]);
    for (long long c = 0; c < s.NY; ++c) {
      const double got = out[r * s.NY + c];
      const long long src = c - s.col;
      if (src < 0 || src >= written) {
        ASSERT_TRUE(std::isnan(got)) << "Y[" << r << ", " << c << "] written outside the region: " << got;
        continue;
      }
      if (src >= s.N) {
        ASSERT_TRUE(std::isinf(got) && got < 0) << "Y[" << r << ", " << c << "] = " << got << ", expected -inf";
      } else {
        const double want = in[r * s.N + src] - mx;
        ASSERT_NEAR(got, want, tol * std::max(1.0, std::abs(want))) << "Y[" << r << ", " << c << "]";
      }
      // The same values as the element-wise store, bit for bit.
      ASSERT_EQ(got, out_plain[r * s.NY + c]) << "Y[" << r << ", " << c << "] differs from the element-wise store";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, OddColumnStores,
                         ::testing::Combine(::testing::Values(0, 1, 2, 3, 4),
                                            ::testing::Values(DType::f16, DType::bf16, DType::f32)),
                         [](const auto& info) {
                           return "shape" + std::to_string(std::get<0>(info.param)) + "_" +
                                  std::string(T::dtype_name(std::get<1>(info.param)));
                         });

}  // namespace
