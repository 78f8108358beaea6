// A user's GEMM kernel with a row reduction and an epilogue (gemm_row_max_program: C = A B -
// rowmax(A B), R = rowmax(A B)) on 128-row tiles and 128 threads, on the GPU against float64: on
// sm_90a with gemm_from_passes its one consumer warpgroup computes two m64 wgmma blocks (the
// accumulator, the reduction and the epilogue in interleaved 16-row strips), persistent, also on
// 3 blocks; by default and with disable_wgmma on mma.sync. Row tails (M = 300, 1000, 1) and a K
// tail (200); f16 and bf16; outputs poisoned with NaN, a second run bit-identical.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "support/GemmRowMaxProgram.hpp"
#include "support/TestSupport.hpp"
#include "tessel/runtime/Driver.hpp"
#include "tessel/runtime/Tensor.hpp"

namespace {

namespace T = tessel;
using T::Tensor;

TEST(GemmRowMaxGpu, InterleavedBlocksMatchFloat64) {
  TESSEL_REQUIRE_GPU();
  const bool hopper = T::current_device().arch() == "sm_90a";
  std::mt19937_64 seeds(std::random_device{}());
  T::JitOptions plain, from_passes, few_blocks, no_wgmma;
  plain.gemm_from_passes = false;  // the cp.async mma.sync main loop
  from_passes.gemm_from_passes = true;
  few_blocks.gemm_from_passes = true;
  few_blocks.max_persistent_ctas = 3;
  no_wgmma.disable_wgmma = true;
  // 500 x 8192 and 200 x 4160: few row tiles over a long K, split over clusters of 4 and 2 CTAs
  // under gemm_from_passes (split_k_clusters), the row reduction in rank 0.
  for (auto [M, K] : {std::pair{300, 200}, std::pair{1000, 1024}, std::pair{1, 64}, std::pair{500, 8192},
                      std::pair{200, 4160}})
    for (T::DType dt : {T::DType::f16, T::DType::bf16})
      for (const T::JitOptions* o : {&plain, &from_passes, &few_blocks, &no_wgmma}) {
        const int N = 64;
        auto k = T::jit(T::test::gemm_row_max_program(M, N, K, dt), *o);
        SCOPED_TRACE("M " + std::to_string(M) + " K " + std::to_string(K) + " " +
                     std::string(T::dtype_name(dt)) + " " + k.info().path);
        if (hopper && o->gemm_from_passes && !o->disable_wgmma) {
          EXPECT_NE(k.source().find("tessel::AccumulatorLayout<128, 64, 4, 1, true>"), std::string::npos);
        }
        Tensor a = Tensor::empty({M, K}, dt), b = Tensor::empty({K, N}, dt);
        a.fill_random(seeds());
        b.fill_random(seeds());
        const std::vector<double> ah = a.to_host_f64(), bh = b.to_host_f64();
        std::vector<double> c1, r1;
        for (int run = 0; run < 2; ++run) {
          Tensor c = Tensor::empty({M, N}, dt), r = Tensor::empty({M}, T::DType::f32);
          c.fill(std::nan(""));
          r.fill(std::nan(""));
          k.launch({a, b, c, r});
          T::check_cu(T::driver().cuCtxSynchronize(), "cuCtxSynchronize");
          if (run == 1) {
            EXPECT_EQ(c.to_host_f64(), c1) << "two runs on the same inputs differ (C)";
            EXPECT_EQ(r.to_host_f64(), r1) << "two runs on the same inputs differ (R)";
            break;
          }
          c1 = c.to_host_f64();
          r1 = r.to_host_f64();
        }
        // Every row (the reduction and the interleaved strips touch all of them), all columns.
        double num = 0, den = 0, rnum = 0, rden = 0;
        for (int i = 0; i < M; ++i) {
          const std::vector<double> row = T::test::gemm_row_reference(ah, bh, N, K, i);
          const double mx = *std::max_element(row.begin(), row.end());
          ASSERT_FALSE(std::isnan(r1[static_cast<size_t>(i)])) << "R[" << i << "] not written";
          rnum += (r1[static_cast<size_t>(i)] - mx) * (r1[static_cast<size_t>(i)] - mx);
          rden += mx * mx;
          for (int j = 0; j < N; ++j) {
            const double g = c1[static_cast<size_t>(i) * N + j], ref = row[static_cast<size_t>(j)] - mx;
            ASSERT_FALSE(std::isnan(g)) << "C[" << i << ", " << j << "] not written";
            num += (g - ref) * (g - ref);
            den += ref * ref + row[static_cast<size_t>(j)] * row[static_cast<size_t>(j)];
          }
        }
        // 16-bit outputs: half an ulp of the values' scale; f32 row maxima from f32 accumulators.
        EXPECT_LE(std::sqrt(num / den), dt == T::DType::bf16 ? 8e-3 : 1e-3);
        EXPECT_LE(std::sqrt(rnum / rden), 1e-4);
      }
}

}  // namespace
