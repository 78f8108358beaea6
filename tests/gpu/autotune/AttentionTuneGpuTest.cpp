// Tuning FlashAttention on the GPU: attention_callbacks' check catches a planted wrong candidate
// (a softmax scale off by a factor) and never lets it win; a small tune of the real space with a
// budget stores its winner, which choose_attention_config, make_flash_attention and
// flash_attention then use, and which is right.
#include <gtest/gtest.h>

#include <cmath>

#include "tessel/kernels/attention/AttentionReference.hpp"
#include "support/TestSupport.hpp"
#include "tessel/autotune/Autotune.hpp"
#include "tessel/runtime/Driver.hpp"

namespace {

namespace at = tessel::autotune;
namespace K = tessel::kernels;
using tessel::DType;
using Schedule = K::AttentionConfig::Schedule;

K::AttentionShape small_shape() {
  K::AttentionShape s;
  s.batch = 2, s.heads = 4, s.kv_heads = 2, s.seqlen_q = 300, s.seqlen_k = 700, s.dim = 64;
  return s;
}

}  // namespace

TEST(AttentionTuneGpu, APlantedWrongCandidateIsCaughtAndNeverWins) {
  TESSEL_REQUIRE_GPU();
  tessel::test::TempDir dir;
  tessel::test::ScopedEnv env("TESSEL_CACHE_DIR", dir.path().string());
  const K::AttentionShape s = small_shape();
  const std::string arch = tessel::current_device().arch();
  const bool hopper = arch == "sm_90a";
  const K::AttentionConfig right{128, 64, 256, 2, hopper ? Schedule::ring : Schedule::cp_async};
  const K::AttentionConfig planted{128, 128, 256, 2, Schedule::cp_async};
  at::Space space("two attention configs");
  space.point(at::attention_point(right)).point(at::attention_point(planted));
  // The planted one scales the scores by 0.3 instead of 1/sqrt(D) = 0.125.
  const at::Factory factory = [&](const at::Config& c) {
    K::AttentionOptions o;
    o.causal = true;
    o.config = at::attention_config(c);
    if (*o.config == planted) o.scale = 0.3f;
    return K::make_flash_attention(s, DType::f16, o);
  };
  at::Options o;
  o.search.strategy = at::Strategy::exhaustive;
  o.search.repeats = 5;
  const at::Result r = at::autotune(factory, space, at::attention_callbacks(s, DType::f16, true), o);
  ASSERT_TRUE(r.found);
  EXPECT_EQ(at::attention_config(r.config), right);
  ASSERT_EQ(r.table.size(), 2u);
  for (const at::Row& row : r.table) {
    SCOPED_TRACE(at::attention_config(row.config).describe());
    if (at::attention_config(row.config) == planted) {
      EXPECT_EQ(row.status, at::Status::wrong) << row.reason;
      EXPECT_CONTAINS(row.reason, "relative error against float64 on ");
      EXPECT_CONTAINS(row.reason, " sampled rows: O ");
      EXPECT_LT(row.ms, 0);
    } else {
      EXPECT_EQ(row.status, at::Status::ok) << row.reason;
      EXPECT_GT(row.ms, 0);
    }
  }
}

TEST(AttentionTuneGpu, ASmallTuneIsStoredAndUsedByTheLibrary) {
  TESSEL_REQUIRE_GPU();
  tessel::test::TempDir dir;
  tessel::test::ScopedEnv env("TESSEL_CACHE_DIR", dir.path().string());
  const K::AttentionShape s = small_shape();
  const DType t = DType::bf16;
  const std::string arch = tessel::current_device().arch();
  const auto device = at::current_device_key();
  ASSERT_TRUE(device);
  EXPECT_FALSE(K::choose_attention_config(s, t, false, arch).tuned);

  at::Options o;
  o.search.strategy = at::Strategy::random;
  o.search.budget = 4;
  o.search.repeats = 5;
  o.cache_key = at::tuning_key(at::attention_key_parts(s, t, false, *device));
  const at::Space space = at::attention_space(arch, s, t, false);
  const at::Result r = at::autotune(
      at::attention_factory(s, t, false), space, [&] { return at::attention_callbacks(s, t, false, 5); }, o);
  ASSERT_TRUE(r.found) << "no candidate compiled, passed and ran";
  EXPECT_FALSE(r.from_cache);
  EXPECT_EQ(r.compiled, 4);
  for (const at::Row& row : r.table)
    EXPECT_NE(row.status, at::Status::wrong) << at::describe(row.config) << ": " << row.reason;

  // The library's default entry points now use the winner.
  const K::AttentionChoice choice = K::choose_attention_config(s, t, false, arch);
  EXPECT_TRUE(choice.tuned);
  EXPECT_EQ(choice.config, at::attention_config(r.config));
  EXPECT_FALSE(K::choose_attention_config(s, t, true, arch).tuned) << "causal is another problem";
  K::AttentionOptions tuned;
  tuned.config = choice.config;
  EXPECT_EQ(K::make_flash_attention(s, t).source(), K::make_flash_attention(s, t, tuned).source());

  // And the library entry point's results with it are right.
  tessel::Tensor q = tessel::Tensor::empty({s.batch, s.seqlen_q, s.heads, s.dim}, t);
  tessel::Tensor k = tessel::Tensor::empty({s.batch, s.seqlen_k, s.kv_heads, s.dim}, t);
  tessel::Tensor v = tessel::Tensor::empty({s.batch, s.seqlen_k, s.kv_heads, s.dim}, t);
  q.fill_random(1, -2, 2);
  k.fill_random(2, -2, 2);
  v.fill_random(3, -2, 2);
  const K::AttentionOutput out = K::flash_attention(q, k, v);
  tessel::check_cu(tessel::driver().cuCtxSynchronize(), "cuCtxSynchronize");
  const auto samples = K::choose_attention_samples(s);
  const auto ref =
      K::attention_reference(q.to_host_f64(), k.to_host_f64(), v.to_host_f64(), s, false, 0.0, samples);
  const std::vector<double> o_host = out.O.to_host_f64(), lse_host = out.LSE.to_host_f64();
  K::AttentionRows got;
  for (const auto& x : samples) {
    for (std::int64_t d = 0; d < s.dim; ++d)
      got.O.push_back(
          o_host[static_cast<std::size_t>(((x.batch * s.seqlen_q + x.row) * s.heads + x.head) * s.dim + d)]);
    got.LSE.push_back(lse_host[static_cast<std::size_t>((x.batch * s.heads + x.head) * s.seqlen_q + x.row)]);
  }
  const K::AttentionError err = K::attention_error(ref, got);
  EXPECT_LE(err.O, at::attention_tolerance(t).O) << "O: relative error " << err.O;
  EXPECT_LE(err.LSE, at::attention_tolerance(t).LSE) << "LSE: relative error " << err.LSE;

  // A second tune is a cache hit.
  const at::Result again = at::autotune(
      at::attention_factory(s, t, false), space,
      [&]() -> at::Callbacks { throw std::logic_error("prepared on a hit"); }, o);
  EXPECT_TRUE(again.from_cache);
  EXPECT_EQ(again.config, r.config);
}
