// Row copies whose column start may be negative, on the GPU (tests/support/RowWindowProgram.hpp):
// the window at the aligned word before each row (whole-word loads and stores, the row's head
// and tail masked) and a fixed window at column -3 (element by element). Every element of the
// blocks' rows must be 2x - 1 exactly, and rows 0 and M - 1 (no block's) must keep their NaN
// poison: a store outside a row's columns, or a head or tail element missed, fails.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "support/RowWindowProgram.hpp"
#include "support/TestSupport.hpp"
#include "tessel/tessel.hpp"

namespace {

namespace T = tessel;
using T::DType;
using T::Tensor;

// An M x N input of small integers (2x - 1 exact in every dtype) on the device, its values on the
// host, and Y [M, N] poisoned with NaN; runs k on (X, Y) and returns Y's values.
std::vector<double> run_on_integers(const T::JitKernel& k, long long M, long long N, DType t, std::uint64_t seed,
                                    std::vector<double>* in) {
  Tensor x = Tensor::empty({M, N}, t);
  x.fill_random(seed, -8, 8);
  *in = x.to_host_f64();
  for (double& v : *in) v = std::round(v);
  std::vector<unsigned char> bytes(x.nbytes());
  for (long long i = 0; i < M * N; ++i) T::store_host_element((*in)[i], t, bytes.data() + i * T::dtype_bytes(t));
  x.copy_from_host(bytes.data());
  Tensor y = Tensor::empty({M, N}, t);
  y.fill(std::nan(""));
  k.launch({x, y});
  T::check_cu(T::driver().cuCtxSynchronize(), "cuCtxSynchronize");
  return y.to_host_f64();
}

class RowWindows : public ::testing::TestWithParam<std::tuple<long long, DType>> {};

TEST_P(RowWindows, StoreExactlyTheRows) {
  TESSEL_REQUIRE_GPU();
  auto [N, t] = GetParam();
  std::mt19937_64 seeds(std::random_device{}());
  for (bool aligned : {true, false}) {
    SCOPED_TRACE(aligned ? "aligned window" : "col0 = -3");
    const long long M = std::max<long long>(5, std::min<long long>(257, (1LL << 21) / N));
    std::vector<double> in;
    const std::vector<double> out =
        run_on_integers(T::jit(T::test::row_window_program(M, N, t, aligned)), M, N, t, seeds(), &in);
    for (long long r = 0; r < M; ++r)
      for (long long c = 0; c < N; ++c) {
        const double got = out[r * N + c];
        if (r == 0 || r == M - 1) {
          ASSERT_TRUE(std::isnan(got)) << "row " << r << " (no block's) written at column " << c << ": " << got;
        } else {
          ASSERT_EQ(got, 2 * in[r * N + c] - 1) << "Y[" << r << ", " << c << "] of " << M << "x" << N;
        }
      }
  }
}

// Tiles that start before row 0 and column 0 through shared memory and a fragment: every element
// of Y is 2x - 1 exactly (a read before the tensor, or a store before it, fails or faults); and
// fills of such regions.
TEST(NegativeStartsGpu, TilesBeforeRowAndColumnZero) {
  TESSEL_REQUIRE_GPU();
  std::mt19937_64 seeds(std::random_device{}());
  for (DType t : {DType::f16, DType::bf16, DType::f32})
    for (long long M : {1LL, 6LL, 13LL, 1001LL}) {
      const long long N = 50;
      SCOPED_TRACE(std::string(T::dtype_name(t)) + " M=" + std::to_string(M));
      std::vector<double> in;
      const std::vector<double> out =
          run_on_integers(T::jit(T::test::shifted_tile_program(M, N, t)), M, N, t, seeds(), &in);
      for (long long i = 0; i < M * N; ++i) ASSERT_EQ(out[i], 2 * in[i] - 1) << "element " << i;
      // A fill of regions that start before row and column 0: 7 everywhere, nothing outside.
      Tensor y = Tensor::empty({M, N}, t);
      y.fill(std::nan(""));
      T::jit(T::test::shifted_fill_program(M, N, t)).launch({y});
      T::check_cu(T::driver().cuCtxSynchronize(), "cuCtxSynchronize");
      for (double v : y.to_host_f64()) ASSERT_EQ(v, 7.0);
    }
}

INSTANTIATE_TEST_SUITE_P(Widths, RowWindows,
                         ::testing::Combine(::testing::Values(1, 7, 9, 127, 1000, 1023, 4099, 8191),
                                            ::testing::Values(DType::f16, DType::bf16, DType::f32)),
                         [](const auto& info) {
                           return "N" + std::to_string(std::get<0>(info.param)) + "_" +
                                  std::string(T::dtype_name(std::get<1>(info.param)));
                         });

}  // namespace
