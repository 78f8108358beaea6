// A ring loop whose trip count is read from a tensor (ragged_k_gemm_program), on the GPU against
// float64: row blocks that sum no K tile (C = 0), one, a ring's worth, all of them, a count past
// K's tiles and a negative one; the mma.sync main loop by default, on sm_90a with
// gemm_from_passes the persistent TMA ring (a producer warpgroup reading the trip count itself,
// the ring's position carried from tile to tile; also on 3 blocks, 8 tiles each), mma.sync with
// disable_wgmma; outputs poisoned with NaN, a second run bit-identical.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "support/RaggedGemmProgram.hpp"
#include "support/TestSupport.hpp"
#include "tessel/runtime/Driver.hpp"
#include "tessel/runtime/Tensor.hpp"

namespace {

namespace T = tessel;
using T::Tensor;

TEST(RaggedRingGpu, MatchesFloat64) {
  TESSEL_REQUIRE_GPU();
  const int M = 1000, N = 600, K = 1000;  // 8 row blocks, 16 K tiles (the last one 40 wide)
  const std::vector<std::int32_t> steps{0, 1, 2, 3, 16, 100, -5, 7};
  std::mt19937_64 seeds(std::random_device{}());
  Tensor a = Tensor::empty({M, K}, T::DType::f16), b = Tensor::empty({K, N}, T::DType::f16);
  a.fill_random(seeds());
  b.fill_random(seeds());
  Tensor st = Tensor::from_host(steps, {8}, T::DType::i32);
  const std::vector<double> ah = a.to_host_f64(), bh = b.to_host_f64();
  T::JitOptions plain, from_passes, few_blocks, no_wgmma;
  plain.gemm_from_passes = false;  // the cp.async mma.sync main loop
  from_passes.gemm_from_passes = true;
  few_blocks.gemm_from_passes = true;
  few_blocks.max_persistent_ctas = 3;
  no_wgmma.disable_wgmma = true;
  for (const T::JitOptions& o : {plain, from_passes, few_blocks, no_wgmma}) {
    auto k = T::jit(T::test::ragged_k_gemm_program(M, N, K), o);
    SCOPED_TRACE(k.info().path);
    std::vector<double> first;
    for (int run = 0; run < 2; ++run) {
      Tensor c = Tensor::empty({M, N}, T::DType::f32);
      c.fill(std::nan(""));
      k.launch({a, b, c, st});
      T::check_cu(T::driver().cuCtxSynchronize(), "cuCtxSynchronize");
      std::vector<double> got = c.to_host_f64();
      if (run == 1) {
        EXPECT_EQ(got, first) << "two runs on the same inputs differ";
        break;
      }
      first = got;
    }
    double num = 0, den = 0;
    for (int i = 0; i < M; i += 7)
      for (int j = 0; j < N; j += 3) {
        const double ref = T::test::ragged_k_gemm_reference(ah, bh, steps, N, K, i, j);
        const double g = first[static_cast<size_t>(i) * N + j];
        ASSERT_FALSE(std::isnan(g)) << "C[" << i << ", " << j << "] not written";
        if (steps[static_cast<size_t>(i / 128)] <= 0) {
          ASSERT_EQ(g, 0.0) << "C[" << i << ", " << j << "]: its row block sums no K tile";
        }
        num += (g - ref) * (g - ref);
        den += ref * ref;
      }
    EXPECT_LE(std::sqrt(num / den), 1e-4);
  }
}

}  // namespace
