// The cuDNN SDPA baseline of `tessel bench attention` (tools/tessel/CudnnAttention) against the
// float64 reference on small shapes: grouped-query, causal with Sq != Sk (both ways), strided
// BHSD inputs, f16 and bf16, outputs poisoned with NaN first. Every row is checked. Skipped, with
// the reason, without a GPU or without cuDNN (or when the binary was built without the frontend).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "support/TestSupport.hpp"
#include "tessel/kernels/attention/AttentionReference.hpp"
#include "tessel/runtime/Driver.hpp"
#include "tools/tessel/CudnnAttention.hpp"

namespace {

using tessel::DType;
using tessel::Tensor;
namespace K = tessel::kernels;

// After TESSEL_REQUIRE_GPU: a GPU without cuDNN (or a binary built without the frontend) skips too.
#define REQUIRE_CUDNN(cudnn)                                                                                \
  do {                                                                                                      \
    if (!(cudnn).available()) GTEST_SKIP() << "SKIPPED: cuDNN attention unavailable: " << (cudnn).reason(); \
  } while (0)

struct Problem {
  std::int64_t B, H, Hkv, Sq, Sk, D;
  bool causal;
  bool bhsd = false;  // inputs stored [B, H, S, D], seen as [B, S, H, D]
};

// Runs cuDNN once on fresh inputs and returns the errors of every row against float64.
K::AttentionError run_and_check(tessel::cli::CudnnAttention& cudnn, const Problem& p, DType t,
                                bool stats_rank4 = false) {
  auto input = [&](std::int64_t S, std::int64_t H) {
    return p.bhsd ? Tensor::empty({p.B, H, S, p.D}, t).permute({0, 2, 1, 3})
                  : Tensor::empty({p.B, S, H, p.D}, t);
  };
  Tensor q = input(p.Sq, p.H), k = input(p.Sk, p.Hkv), v = input(p.Sk, p.Hkv);
  q.fill_random(11);
  k.fill_random(12);
  v.fill_random(13);
  Tensor o = Tensor::empty({p.B, p.Sq, p.H, p.D}, t);
  Tensor lse = stats_rank4 ? Tensor::empty({p.B, p.H, p.Sq, 1}, DType::f32)
                           : Tensor::empty({p.B, p.H, p.Sq}, DType::f32);
  o.fill(std::nan(""));
  lse.fill(std::nan(""));
  const float scale = 0.1f;
  cudnn.run(q, k, v, o, lse, p.causal, scale);
  tessel::check_cu(tessel::driver().cuCtxSynchronize(), "cuCtxSynchronize");

  K::AttentionShape s;
  s.batch = p.B, s.heads = p.H, s.kv_heads = p.Hkv, s.seqlen_q = p.Sq, s.seqlen_k = p.Sk, s.dim = p.D;
  std::vector<K::AttentionSample> all;
  for (std::int64_t b = 0; b < p.B; ++b)
    for (std::int64_t h = 0; h < p.H; ++h)
      for (std::int64_t i = 0; i < p.Sq; ++i) all.push_back({b, h, i});
  const K::AttentionRows ref =
      K::attention_reference(q.to_host_f64(), k.to_host_f64(), v.to_host_f64(), s, p.causal, scale, all);
  K::AttentionRows got;
  const std::vector<double> o_host = o.to_host_f64(), lse_host = lse.to_host_f64();
  for (const auto& x : all) {
    const std::size_t at = static_cast<std::size_t>(((x.batch * p.Sq + x.row) * p.H + x.head) * p.D);
    got.O.insert(got.O.end(), o_host.begin() + at, o_host.begin() + at + p.D);
    got.LSE.push_back(lse_host[static_cast<std::size_t>((x.batch * p.H + x.head) * p.Sq + x.row)]);
  }
  return K::attention_error(ref, got);
}

double o_tolerance(DType t) {
  return t == DType::f16 ? 5e-3 : 2e-2;
}

class CudnnAttentionDtypes : public ::testing::TestWithParam<DType> {};

TEST_P(CudnnAttentionDtypes, GroupedQueryCausalWithMoreKeysThanQueries) {
  TESSEL_REQUIRE_GPU();
  tessel::cli::CudnnAttention cudnn;
  REQUIRE_CUDNN(cudnn);
  // 8 heads over 2 K/V heads; bottom-right causal: query 0 sees keys 0..64.
  const K::AttentionError e = run_and_check(cudnn, {2, 8, 2, 96, 160, 64, true}, GetParam());
  EXPECT_LE(e.O, o_tolerance(GetParam()));
  EXPECT_LE(e.LSE, 1e-4);
}

TEST_P(CudnnAttentionDtypes, StridedBhsdInputsAndRank4Stats) {
  TESSEL_REQUIRE_GPU();
  tessel::cli::CudnnAttention cudnn;
  REQUIRE_CUDNN(cudnn);
  const K::AttentionError e = run_and_check(cudnn, {2, 4, 4, 128, 128, 128, false, true}, GetParam(), true);
  EXPECT_LE(e.O, o_tolerance(GetParam()));
  EXPECT_LE(e.LSE, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudnnAttentionDtypes, ::testing::Values(DType::f16, DType::bf16),
                         [](const auto& info) { return std::string(tessel::dtype_name(info.param)); });

TEST(CudnnAttention, RowsThatSeeNoKeyAreZeroAndMinusInfinity) {
  TESSEL_REQUIRE_GPU();
  tessel::cli::CudnnAttention cudnn;
  REQUIRE_CUDNN(cudnn);
  // Sq > Sk, causal: queries 0..63 see no key; cuDNN runs on the last 64 queries only.
  const K::AttentionError e = run_and_check(cudnn, {1, 4, 1, 128, 64, 64, true}, DType::f16);
  EXPECT_LE(e.O, o_tolerance(DType::f16));
  EXPECT_LE(e.LSE, 1e-4);  // infinite unless the masked rows hold exactly -inf
}

TEST(CudnnAttention, CachesOneGraphPerProblem) {
  TESSEL_REQUIRE_GPU();
  tessel::cli::CudnnAttention cudnn;
  REQUIRE_CUDNN(cudnn);
  const Problem p{1, 2, 2, 64, 64, 64, false};
  (void)run_and_check(cudnn, p, DType::f16);
  (void)run_and_check(cudnn, p, DType::f16);
  EXPECT_EQ(cudnn.cached_graphs(), 1u);
  (void)run_and_check(cudnn, {1, 2, 2, 64, 64, 64, true}, DType::f16);
  EXPECT_EQ(cudnn.cached_graphs(), 2u);
}

TEST(CudnnAttention, RejectsMismatchedTensorsWithWhatIsWrong) {
  TESSEL_REQUIRE_GPU();
  tessel::cli::CudnnAttention cudnn;
  REQUIRE_CUDNN(cudnn);
  Tensor q = Tensor::empty({1, 8, 4, 64}, DType::f16), k = Tensor::empty({1, 8, 3, 64}, DType::f16);
  Tensor o = Tensor::empty({1, 8, 4, 64}, DType::f16), lse = Tensor::empty({1, 4, 8}, DType::f32);
  try {
    cudnn.run(q, k, k, o, lse, false);
    FAIL() << "3 K/V heads for 4 heads were accepted";
  } catch (const tessel::RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("K/V heads must divide Q's 4 heads"), std::string::npos) << e.what();
  }
  Tensor k32 = Tensor::empty({1, 8, 4, 64}, DType::f32);
  EXPECT_THROW(cudnn.run(q, k32, k32, o, lse, false), tessel::RuntimeError);
}

}  // namespace
