// Split-K's two programs on the CPU interpreter against float64: the partial GEMM's shares of K
// (ragged: K tiles not divisible by the splits, K not a multiple of block_K, tiles past every
// edge) and the reduction into C.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <stdexcept>

#include "support/TestSupport.hpp"
#include "tessel/interp/Interpreter.hpp"
#include "tessel/kernels/gemm/Matmul.hpp"

namespace {

using tessel::DType;
using tessel::interp::HostTensor;
using tessel::kernels::MatmulConfig;

MatmulConfig small_tiles(DType t) {
  MatmulConfig c;
  c.block_M = 16, c.block_N = 32, c.block_K = 16, c.num_stages = 2, c.threads = 128;
  c.dtype = t;
  return c;
}

// Every element within `tol` of the magnitude of its dot product (the float64 product of |A| and
// |B|): a bound that a skinny output's cancellation cannot defeat, unlike a relative error.
// `floor`: the output dtype's spacing near zero (f16's subnormals are 2^-24 apart).
void expect_close(const std::vector<double>& got, const std::vector<double>& ref,
                  const std::vector<double>& magnitude, double tol, double floor, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(got[i] - ref[i]) <= tol * magnitude[i] + floor)) {
      ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", float64 " << ref[i] << " (|A||B| "
                    << magnitude[i] << ")";
      return;
    }
}

std::vector<double> absolute(std::vector<double> v) {
  for (double& x : v) x = std::abs(x);
  return v;
}

// C = A * B through the partial GEMM and the reduction; W's share z checked against the float64
// product over that share's K columns, C against the whole product.
void check(int M, int N, int K, int splits, const MatmulConfig& c) {
  SCOPED_TRACE(std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K) + " splits " +
               std::to_string(splits) + " " + c.describe() + " " + std::string(tessel::dtype_name(c.dtype)));
  std::mt19937_64 seeds(std::random_device{}());
  auto a = HostTensor::random(c.dtype, {M, K}, seeds());
  auto b = HostTensor::random(c.dtype, {K, N}, seeds());
  auto w =
      tessel::interp::run_on_cpu(tessel::kernels::matmul_split_k_program(M, N, K, splits, c), {a, b}, {-1});
  ASSERT_EQ(w.size(), 1u);
  const std::vector<double> av = a.to_values(), bv = b.to_values(), wv = w[0].to_values();
  const int k_tiles = (K + c.block_K - 1) / c.block_K;
  for (int z = 0; z < splits; ++z) {
    // Share z: K tiles [z * k_tiles / splits, (z + 1) * k_tiles / splits), clipped to K.
    const int k0 = std::min(K, z * k_tiles / splits * c.block_K);
    const int k1 = std::min(K, (z + 1) * k_tiles / splits * c.block_K);
    std::vector<double> as(static_cast<size_t>(M) * (k1 - k0)), bs(static_cast<size_t>(k1 - k0) * N);
    for (int i = 0; i < M; ++i)
      for (int k = k0; k < k1; ++k)
        as[static_cast<size_t>(i) * (k1 - k0) + (k - k0)] = av[static_cast<size_t>(i) * K + k];
    for (int k = k0; k < k1; ++k)
      for (int j = 0; j < N; ++j)
        bs[static_cast<size_t>(k - k0) * N + j] = bv[static_cast<size_t>(k) * N + j];
    const std::vector<double> got(wv.begin() + static_cast<long>(z) * M * N,
                                  wv.begin() + static_cast<long>(z + 1) * M * N);
    expect_close(
        got, tessel::test::reference_gemm(as, bs, M, N, k1 - k0),
        tessel::test::reference_gemm(absolute(as), absolute(bs), M, N, k1 - k0), 1e-5, 0,
        "share " + std::to_string(z) + " of K [" + std::to_string(k0) + ", " + std::to_string(k1) + ")");
  }
  auto out =
      tessel::interp::run_on_cpu(tessel::kernels::matmul_split_k_reduce_program(
                                     M, N, splits, c.dtype, tessel::kernels::default_split_k_reduce(M, N)),
                                 {w[0]}, {-1});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].dtype, c.dtype);
  // Rounding to f16 / bf16 once: at most 2^-9 of |C| (2^-12 for f16), |C| <= |A||B|; f16's
  // subnormals are 2^-24 apart.
  expect_close(out[0].to_values(), tessel::test::reference_gemm(av, bv, M, N, K),
               tessel::test::reference_gemm(absolute(av), absolute(bv), M, N, K), 1e-2, 0x1p-24, "C");
}

TEST(MatmulSplitKInterpreter, RaggedSharesAndEdgesAgreeWithFloat64) {
  for (DType t : {DType::f16, DType::bf16})
    for (int M : {1, 7, 9, 63, 65})
      for (int N : {1, 7, 9, 63, 65})
        for (int K : {1, 9, 63, 65}) {
          const int k_tiles = (K + 15) / 16;
          for (int splits = 1; splits <= std::min(4, k_tiles); ++splits)
            check(M, N, K, splits, small_tiles(t));
        }
}

// The tiles kernels::Matmul compiles (split_k_config's 16/32/64 x 256 x 64), with K tiles that
// the splits do not divide and a K tail.
TEST(MatmulSplitKInterpreter, LibraryTilesOnRaggedShapes) {
  MatmulConfig c;
  c.block_M = 16, c.block_N = 256, c.block_K = 64, c.num_stages = 4, c.threads = 128;
  check(7, 300, 449, 3, c);  // 8 K tiles in shares of 2, 3, 3; the last tile 1 column wide
  c.block_M = 64, c.dtype = DType::bf16;
  check(65, 257, 200, 4, c);  // 4 K tiles, one each; two row tiles, two column tiles
}

TEST(MatmulSplitKInterpreter, IllegalSplitsSayWhatIsLegal) {
  MatmulConfig c;
  c.block_K = 64;
  try {
    (void)tessel::kernels::matmul_split_k_program(16, 64, 128, 3, c);
    FAIL() << "3 shares of 2 K tiles accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(
        std::string(e.what()).find("splits = 3 but K = 128 has only 2 tiles of block_K = 64 (legal: 1 to 2)"),
        std::string::npos)
        << e.what();
  }
  try {
    (void)tessel::kernels::matmul_split_k_reduce_program(16, 64, 0, DType::f16, {});
    FAIL() << "0 splits accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("splits = 0 (legal: 1 or more)"), std::string::npos) << e.what();
  }
}

}  // namespace
