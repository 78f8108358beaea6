// FlashAttention's tuning space without a GPU: what it keeps and prunes (and why) for sm_90a and
// sm_80 at several head dimensions and key lengths; the conversions; the tuning-cache entries the
// library uses and the ones it rejects (Space::why_not); kernels::attention_flops; and every kept
// tile run on the reference interpreter against float64.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "tessel/kernels/attention/AttentionReference.hpp"
#include "support/TestSupport.hpp"
#include "tessel/autotune/Autotune.hpp"
#include "tessel/interp/Interpreter.hpp"
#include "tessel/runtime/Driver.hpp"

namespace at = tessel::autotune;
using tessel::DType;
using tessel::kernels::AttentionConfig;
using tessel::kernels::AttentionShape;
using Schedule = AttentionConfig::Schedule;

namespace {

constexpr long long kH200Smem = 232448;  // the H200's shared memory per block (opt-in)
constexpr long long kA100Smem = 166912;

AttentionShape shape(std::int64_t B, std::int64_t H, std::int64_t Hkv, std::int64_t Sq, std::int64_t Sk,
                     std::int64_t D) {
  AttentionShape s;
  s.batch = B, s.heads = H, s.kv_heads = Hkv, s.seqlen_q = Sq, s.seqlen_k = Sk, s.dim = D;
  return s;
}

const std::string kWarpgroups = "constraint a consumer warpgroup per 64 query rows (threads = 2 * block_M)";
const std::string kPingpong =
    "constraint ring+pingpong needs two consumer warpgroups (256 threads; with one it is the ring)";
const std::string kBuilds =
    "constraint the compiler builds the schedule asked for (a TMA ring with a producer of its own, with "
    "ping-pong for ring+pingpong, persistent or not as asked)";
const std::string kPersistentRings = "constraint persistent only on the ring schedules";
const std::string kLazyRings = "constraint lazy rescaling only on the ring schedules";

int schedule(const at::Config& c) {
  return at::get(c, "schedule");
}

}  // namespace

TEST(AutotuneAttentionSpace, Hopper128KeepsEveryScheduleWithinSharedMemory) {
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "not causal");
    const AttentionShape s = shape(2, 16, 16, 4096, 4096, 128);
    const auto space = at::attention_space("sm_90a", s, DType::bf16, causal);
    EXPECT_EQ(space.name(), std::string("attention sm_90a D128 ") + (causal ? "causal " : "") + "bf16");
    const auto e = space.enumerate({.smem_per_block = kH200Smem, .threads_per_block = 1024});
    // 3 block_M x 3 threads x 7 block_N x 3 stages x 3 schedules x persistent or not x lazy or
    // not; the default is a grid point.
    EXPECT_EQ(e.total, 2268u);
    EXPECT_EQ(e.kept.size() + e.pruned.size(), e.total);
    std::set<int> schedules, block_N;
    for (const auto& c : e.kept) {
      const AttentionConfig a = at::attention_config(c);
      SCOPED_TRACE(a.describe());
      EXPECT_EQ(a.threads, 2 * a.block_M);
      EXPECT_EQ(a.block_N % 32, 0);
      EXPECT_GE(a.block_N, 64);
      EXPECT_LE(a.block_N, 256);
      if (a.schedule == Schedule::ring_pingpong) {
        EXPECT_EQ(a.threads, 256);
      }
      // Q, then num_stages blocks of K and V: within the H200's shared memory.
      EXPECT_LE(2LL * (a.block_M + 2LL * a.num_stages * a.block_N) * 128, kH200Smem);
      schedules.insert(schedule(c));
      block_N.insert(a.block_N);
    }
    EXPECT_EQ(schedules, (std::set<int>{0, 1, 2}));
    // Every ring kernel twice, lazy and not; the cp.async kernels exact only.
    int lazy_rings = 0, exact_rings = 0;
    for (const auto& c : e.kept) {
      if (schedule(c) == 2) {
        EXPECT_EQ(at::get(c, "lazy"), 0) << at::describe(c);
      } else {
        (at::get(c, "lazy") ? lazy_rings : exact_rings) += 1;
      }
    }
    EXPECT_GT(exact_rings, 0);
    EXPECT_EQ(lazy_rings, exact_rings);
    EXPECT_EQ(block_N, (std::set<int>{64, 96, 128, 160, 192, 224, 256}));
    const at::Config def =
        at::attention_point(tessel::kernels::default_attention_config(s, DType::bf16, causal, "sm_90a"));
    EXPECT_EQ(std::count(e.kept.begin(), e.kept.end(), def), 1) << "the dispatcher's default is a candidate";
    // The deepest ring that fits: 128 x 128 in three stages (231424 bytes); 160 keys do not.
    const at::Config deep = at::attention_point({128, 128, 256, 3, Schedule::ring});
    EXPECT_EQ(std::count(e.kept.begin(), e.kept.end(), deep), 1);
    // Three consumer warpgroups over 192 query rows (FlashAttention 3's tile at D = 64), on the
    // ring (no ping-pong: the turns are for two) and on cp.async.
    EXPECT_EQ(std::count(e.kept.begin(), e.kept.end(), at::attention_point({192, 128, 384, 2, Schedule::ring})), 1);
    EXPECT_EQ(std::count(e.kept.begin(), e.kept.end(), at::attention_point({192, 128, 384, 2, Schedule::cp_async})), 1);
    // Persistent rings (O's staging tile on top of the ring): 128 x 128 in two stages.
    EXPECT_EQ(std::count(e.kept.begin(), e.kept.end(),
                         at::attention_point({128, 128, 256, 2, Schedule::ring_pingpong, true})),
              1);
    int smem = 0;
    for (const auto& p : e.pruned) {
      const bool over = p.reason.rfind("shared memory ", 0) == 0;
      smem += over;
      // 192 x 224 and 192 x 256: past three warpgroups' registers.
      const bool too_wide =
          p.reason == "constraint block_N at most 192 with 192 query rows (three warpgroups' registers)" &&
          at::get(p.config, "block_M") == 192 && at::get(p.config, "block_N") > 192;
      EXPECT_TRUE(over || too_wide || p.reason == kWarpgroups || p.reason == kPingpong ||
                  p.reason == kPersistentRings || p.reason == kLazyRings)
          << p.reason;
      if (p.reason == kLazyRings) {
        EXPECT_EQ(schedule(p.config), 2);
        EXPECT_EQ(at::get(p.config, "lazy"), 1);
      }
      if (p.config == at::attention_point({128, 160, 256, 3, Schedule::ring})) {
        EXPECT_EQ(p.reason, "shared memory 280576 > 232448 bytes");
      }
    }
    EXPECT_GT(smem, 0);
  }
}

TEST(AutotuneAttentionSpace, RingsOnlyWhereTheCompilerBuildsThem) {
  // D = 96: V's 192-byte rows take no 128-byte swizzle, so P V cannot read V by wgmma
  // descriptor and no ring is built: every ring candidate would be the cp.async kernel again.
  const auto e = at::attention_space("sm_90a", shape(1, 8, 8, 1024, 1024, 96), DType::f16, false)
                     .enumerate({.smem_per_block = kH200Smem, .threads_per_block = 1024});
  int builds = 0;
  for (const auto& p : e.pruned) builds += p.reason == kBuilds;
  EXPECT_GT(builds, 0);
  ASSERT_FALSE(e.kept.empty());
  for (const auto& c : e.kept) EXPECT_EQ(schedule(c), 2) << at::describe(c);
}

TEST(AutotuneAttentionSpace, OffHopperOnlyCpAsyncAndSmallerTiles) {
  const AttentionShape s = shape(1, 8, 8, 2048, 2048, 256);
  const auto space = at::attention_space("sm_80", s, DType::f16, true);
  const auto e = space.enumerate({.smem_per_block = kA100Smem, .threads_per_block = 1024});
  ASSERT_FALSE(e.kept.empty());
  bool has_32 = false;
  for (const auto& c : e.kept) {
    EXPECT_EQ(schedule(c), 2) << at::describe(c);
    has_32 = has_32 || at::get(c, "block_N") == 32;
  }
  EXPECT_TRUE(has_32) << "mma.sync takes 32-key blocks";
  // The default (block_N 32 at D = 256 on sm_80, cp.async) is a candidate.
  const AttentionConfig def = tessel::kernels::default_attention_config(s, DType::f16, true, "sm_80");
  EXPECT_EQ(def.schedule, Schedule::cp_async);
  EXPECT_EQ(def.block_N, 32);
  EXPECT_EQ(std::count(e.kept.begin(), e.kept.end(), at::attention_point(def)), 1);
  // A ring is not a point of the space there.
  EXPECT_EQ(space.why_not(at::attention_point({128, 64, 256, 2, Schedule::ring})),
            "is not a point of the space 'attention sm_80 D256 causal f16'");
}

TEST(AutotuneAttentionSpace, ShortKeysTryOnlyTheSmallestBlock) {
  const auto e = at::attention_space("sm_90a", shape(1, 4, 4, 300, 17, 64), DType::f16, false)
                     .enumerate({.smem_per_block = kH200Smem, .threads_per_block = 1024});
  ASSERT_FALSE(e.kept.empty());
  for (const auto& c : e.kept) EXPECT_EQ(at::get(c, "block_N"), 64) << at::describe(c);
  int short_keys = 0;
  for (const auto& p : e.pruned)
    short_keys += p.reason == "constraint block_N at most Sk rounded up to 64 (64)";
  EXPECT_GT(short_keys, 0);
}

TEST(AutotuneAttentionSpace, ConversionsRoundTrip) {
  for (Schedule sch : {Schedule::ring_pingpong, Schedule::ring, Schedule::cp_async})
    for (const AttentionConfig& a :
         {AttentionConfig{128, 192, 256, 3, sch}, AttentionConfig{64, 96, 128, 1, sch},
          AttentionConfig{128, 128, 256, 2, sch, true}}) {
      SCOPED_TRACE(a.describe());
      EXPECT_EQ(at::attention_config(at::attention_point(a)), a);
    }
  EXPECT_EQ(
      at::describe(at::attention_point({128, 128, 256, 2, Schedule::ring})),
      "block_M=128 block_N=128 kv_interleave=0 lazy=0 num_stages=2 persistent=0 schedule=1 threads=256");
  EXPECT_EQ(at::attention_config(at::attention_point({128, 128, 256, 2, Schedule::ring, true})).describe(),
            "128x128 s2 t256 ring persistent");
  const auto e = at::attention_space("sm_90a", shape(1, 2, 1, 256, 512, 64), DType::f16, true).enumerate();
  for (const auto& c : e.kept) EXPECT_EQ(at::attention_point(at::attention_config(c)), c) << at::describe(c);
  AttentionConfig interleaved{128, 128, 256, 2, Schedule::ring};
  interleaved.kv_interleave = true;
  EXPECT_EQ(at::attention_config(at::attention_point(interleaved)), interleaved);
  AttentionConfig lazy{64, 128, 128, 1, Schedule::ring};
  lazy.lazy_rescale = true;
  EXPECT_EQ(at::attention_config(at::attention_point(lazy)), lazy);
  EXPECT_EQ(at::describe(at::attention_point(lazy)),
            "block_M=64 block_N=128 kv_interleave=0 lazy=1 num_stages=1 persistent=0 schedule=1 threads=128");
}

TEST(AutotuneAttentionSpace, GqaAlsoTriesTheInterleavedHeadOrder) {
  // kv_interleave is searched only where K/V heads are shared (H_kv < H); both orders of a
  // config are kept, and each candidate's lowering is the interleaved program's own.
  auto interleaved_kept = [](const AttentionShape& s) {
    const auto e = at::attention_space("sm_90a", s, DType::bf16, true).enumerate();
    int on = 0, off = 0;
    for (const auto& c : e.kept) (at::get(c, "kv_interleave") ? on : off) += 1;
    return std::pair{on, off};
  };
  const auto [gqa_on, gqa_off] = interleaved_kept(shape(1, 8, 2, 256, 256, 128));
  EXPECT_GT(gqa_on, 0);
  EXPECT_EQ(gqa_on, gqa_off);
  const auto [mha_on, mha_off] = interleaved_kept(shape(1, 8, 8, 256, 256, 128));
  EXPECT_EQ(mha_on, 0);
  EXPECT_GT(mha_off, 0);
}

TEST(AutotuneAttentionSpace, WhyNotNamesWhatIsWrongWithAConfig) {
  const auto space = at::attention_space("sm_90a", shape(2, 16, 16, 4096, 4096, 128), DType::f16, false);
  const std::string in = "the space 'attention sm_90a D128 f16'";
  EXPECT_EQ(space.why_not(at::attention_point({128, 128, 256, 2, Schedule::ring_pingpong})), std::nullopt);
  EXPECT_EQ(space.why_not(at::attention_point({64, 128, 256, 2, Schedule::ring})),
            "is pruned from " + in + " by " + kWarpgroups);
  EXPECT_EQ(space.why_not(at::attention_point({64, 128, 128, 2, Schedule::ring_pingpong})),
            "is pruned from " + in + " by " + kPingpong);
  EXPECT_EQ(space.why_not(at::attention_point({128, 176, 256, 2, Schedule::ring})),
            "is not a point of " + in);
  EXPECT_EQ(space.why_not(at::attention_point({128, 128, 256, 4, Schedule::ring})),
            "is not a point of " + in);
  at::Config bad_schedule = at::attention_point({128, 128, 256, 2, Schedule::ring});
  bad_schedule["schedule"] = 7;
  EXPECT_EQ(space.why_not(bad_schedule), "is not a point of " + in);
  at::Config missing = at::attention_point({128, 128, 256, 2, Schedule::ring});
  missing.erase("schedule");
  EXPECT_EQ(space.why_not(missing), "lacks the knob schedule of " + in);
  const auto smem = space.why_not(at::attention_point({128, 192, 256, 2, Schedule::ring}), {48 * 1024, 1024});
  ASSERT_TRUE(smem);
  EXPECT_CONTAINS(*smem, "is pruned from " + in + " by shared memory 231424 > 49152 bytes");
}

TEST(AutotuneAttentionSpace, StridesClassesForTheKey) {
  EXPECT_EQ(at::attention_strides_class({}, 2, 100, 8, 64), 0);
  EXPECT_EQ(at::attention_strides_class({100 * 8 * 64, 8 * 64, 64, 1}, 2, 100, 8, 64), 0);
  EXPECT_EQ(at::attention_strides_class(tessel::kernels::bhsd_strides(2, 100, 8, 64), 2, 100, 8, 64), 1);
  EXPECT_EQ(at::attention_strides_class({100 * 8 * 128, 8 * 128, 128, 1}, 2, 100, 8, 64), 2);
}

TEST(AutotuneAttentionSpace, FlopsCountVisiblePairs) {
  const AttentionShape s = shape(2, 3, 1, 4, 4, 64);
  EXPECT_DOUBLE_EQ(tessel::kernels::attention_flops(s, false), 4.0 * 2 * 3 * 4 * 4 * 64);
  EXPECT_DOUBLE_EQ(tessel::kernels::attention_flops(s, true), 4.0 * 2 * 3 * 4 * 4 * 64 / 2);
  // Sq 3, Sk 5: query i sees i + 3 keys (3 + 4 + 5 pairs); Sq 5, Sk 2: rows 0-2 see none, then 1, 2.
  EXPECT_DOUBLE_EQ(tessel::kernels::attention_flops(shape(2, 3, 1, 3, 5, 64), true), 4.0 * 2 * 3 * 64 * 12);
  EXPECT_DOUBLE_EQ(tessel::kernels::attention_flops(shape(1, 1, 1, 5, 2, 8), true), 4.0 * 8 * 3);
}

// ---- the tuning cache --------------------------------------------------------------------------

namespace {

const at::DeviceKey kH200{"NVIDIA H200", 9, 0, 132, 13000, 13000};

std::filesystem::path entry(const std::filesystem::path& dir, const AttentionShape& s, DType t, bool causal) {
  return dir / (at::tuning_key(at::attention_key_parts(s, t, causal, kH200)) + ".json");
}

void plant(const std::filesystem::path& dir, const AttentionShape& s, DType t, bool causal,
           const at::Config& config) {
  ASSERT_TRUE(at::write_tuning_entry(dir, at::tuning_key(at::attention_key_parts(s, t, causal, kH200)),
                                     at::StoredResult{config, 0.5, "halving", "test"}));
}

}  // namespace

TEST(AutotuneAttentionSpace, PlantedEntryIsFoundForItsProblemOnly) {
  tessel::test::TempDir dir;
  const AttentionShape s = shape(2, 16, 4, 4096, 4096, 128);
  EXPECT_FALSE(at::find_tuned_attention_config(s, DType::bf16, true, kH200, dir.path()));
  const AttentionConfig tuned{128, 96, 256, 3, Schedule::ring};
  plant(dir.path(), s, DType::bf16, true, at::attention_point(tuned));
  const auto found = at::find_tuned_attention_config(s, DType::bf16, true, kH200, dir.path());
  ASSERT_TRUE(found);
  EXPECT_EQ(*found, tuned);

  EXPECT_FALSE(at::find_tuned_attention_config(s, DType::bf16, false, kH200, dir.path())) << "not causal";
  EXPECT_FALSE(at::find_tuned_attention_config(s, DType::f16, true, kH200, dir.path())) << "another dtype";
  AttentionShape other = s;
  other.seqlen_k = 8192;
  EXPECT_FALSE(at::find_tuned_attention_config(other, DType::bf16, true, kH200, dir.path())) << "another Sk";
  other = s;
  other.kv_heads = 16;
  EXPECT_FALSE(at::find_tuned_attention_config(other, DType::bf16, true, kH200, dir.path()))
      << "another H_kv";
  other = s;
  other.q_strides = tessel::kernels::bhsd_strides(s.batch, s.seqlen_q, s.heads, s.dim);
  EXPECT_FALSE(at::find_tuned_attention_config(other, DType::bf16, true, kH200, dir.path())) << "BHSD Q";
  other = s;  // the same class of strides is the same problem
  other.k_strides = {4096LL * 4 * 128, 4 * 128, 128, 1};
  EXPECT_TRUE(at::find_tuned_attention_config(other, DType::bf16, true, kH200, dir.path())) << "BSHD K given";
  at::DeviceKey a100 = kH200;
  a100.cc_major = 8;
  EXPECT_FALSE(at::find_tuned_attention_config(s, DType::bf16, true, a100, dir.path())) << "another arch";
}

TEST(AutotuneAttentionSpace, InvalidEntriesAreRemovedWithANote) {
  tessel::test::TempDir dir;
  const AttentionShape s = shape(1, 8, 8, 1024, 1024, 64);
  const std::string in = "the space 'attention sm_90a D64 f16'";
  auto rejected = [&](const at::Config& config, const at::HardwareLimits& limits = {}) {
    plant(dir.path(), s, DType::f16, false, config);
    testing::internal::CaptureStderr();
    const auto found = at::find_tuned_attention_config(s, DType::f16, false, kH200, dir.path(), limits);
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_FALSE(found) << err;
    EXPECT_FALSE(std::filesystem::exists(entry(dir.path(), s, DType::f16, false)))
        << "a rejected entry is removed";
    return err;
  };
  const std::string note =
      "tessel: note: tuning cache entry " + entry(dir.path(), s, DType::f16, false).string() + " holds ";
  EXPECT_CONTAINS(rejected(at::attention_point({64, 128, 256, 2, Schedule::cp_async})),
                  note +
                      "block_M=64 block_N=128 kv_interleave=0 lazy=0 num_stages=2 persistent=0 schedule=2 "
                      "threads=256, which is pruned from " +
                      in + " by " + kWarpgroups + "; removed\n");
  EXPECT_CONTAINS(rejected(at::attention_point({64, 64, 128, 2, Schedule::ring_pingpong})),
                  "which is pruned from " + in + " by " + kPingpong);
  EXPECT_CONTAINS(rejected({{"block_M", 128},
                            {"block_N", 7},
                            {"kv_interleave", 0},
                            {"lazy", 0},
                            {"num_stages", -3},
                            {"persistent", 0},
                            {"schedule", 0},
                            {"threads", 256}}),
                  "which is not a point of " + in);
  // An entry tuned before persistence, kv_interleave or lazy was a knob: stale, removed (the space
  // it was the best of was smaller).
  for (const char* knob : {"persistent", "kv_interleave", "lazy"}) {
    at::Config older = at::attention_point({128, 128, 256, 2, Schedule::ring_pingpong});
    older.erase(knob);
    EXPECT_CONTAINS(rejected(older), std::string("which lacks the knob ") + knob + " of " + in);
  }
  // Interleaving is a GQA knob: with one query head a K/V head it is not a point of the space.
  at::Config interleaved = at::attention_point({128, 128, 256, 2, Schedule::ring});
  interleaved["kv_interleave"] = 1;
  EXPECT_CONTAINS(rejected(interleaved), "which is not a point of " + in);
  EXPECT_CONTAINS(rejected(at::attention_point({128, 128, 256, 2, Schedule::cp_async, true})),
                  "which is pruned from " + in + " by " + kPersistentRings);
  EXPECT_CONTAINS(
      rejected({{"block_M", 128}, {"block_N", 128}, {"kv_interleave", 0}, {"lazy", 0}, {"threads", 256}}),
      "which lacks the knob num_stages of " + in);
  EXPECT_CONTAINS(rejected(at::attention_point({128, 256, 256, 3, Schedule::ring}), {48 * 1024, 1024}),
                  "which is pruned from " + in + " by shared memory ");
  // A good one is used.
  plant(dir.path(), s, DType::f16, false, at::attention_point({128, 64, 256, 3, Schedule::ring_pingpong}));
  EXPECT_TRUE(at::find_tuned_attention_config(s, DType::f16, false, kH200, dir.path()));
}

TEST(AutotuneAttentionSpace, WithoutAnEntryTheBuiltInChoice) {
  tessel::test::TempDir dir;
  tessel::test::ScopedEnv env("TESSEL_CACHE_DIR", dir.path().string());
  const AttentionShape s = shape(2, 16, 16, 4096, 4096, 128);
  const bool gpu = tessel::gpu_available();
  const std::string arch = gpu ? tessel::current_device().arch() : "sm_90a";
  const auto choice = tessel::kernels::choose_attention_config(s, DType::f16, true, arch);
  EXPECT_FALSE(choice.tuned);
  EXPECT_EQ(choice.config, tessel::kernels::default_attention_config(s, DType::f16, true, arch));
  if (!gpu) {
    EXPECT_FALSE(at::tuned_attention_config(s, DType::f16, true));
  }
  // For another arch than the GPU's a tuned entry never applies: the built-in choice.
  const auto sm80 = tessel::kernels::choose_attention_config(s, DType::f16, true, "sm_80");
  EXPECT_FALSE(sm80.tuned);
  EXPECT_EQ(sm80.config.schedule, Schedule::cp_async);
}

// ---- every kept tile on the interpreter ----------------------------------------------------------

TEST(AutotuneAttentionSpace, EveryKeptTileIsRightOnTheInterpreter) {
  // The schedule and the ring's depth do not change the program's meaning (the interpreter runs
  // them alike), so each (block_M, block_N, threads) once: causal with Sq != Sk and tails.
  const AttentionShape s = shape(1, 2, 1, 200, 150, 32);
  const auto e = at::attention_space("sm_90a", s, DType::f16, true).enumerate();
  std::set<std::tuple<int, int, int>> tiles;
  for (const auto& c : e.kept)
    tiles.insert({at::get(c, "block_M"), at::get(c, "block_N"), at::get(c, "threads")});
  EXPECT_EQ(tiles.size(), 3u * 5u) << "block_M 64, 128 and 192 (Sq = 200), block_N 64 to 192 (Sk = 150 rounds up to 192)";
  std::mt19937_64 seeds(11);
  const auto q = tessel::interp::HostTensor::random(DType::f16, {1, 200, 2, 32}, seeds(), -2, 2);
  const auto k = tessel::interp::HostTensor::random(DType::f16, {1, 150, 1, 32}, seeds(), -2, 2);
  const auto v = tessel::interp::HostTensor::random(DType::f16, {1, 150, 1, 32}, seeds(), -2, 2);
  std::vector<tessel::kernels::AttentionSample> rows;
  for (std::int64_t h = 0; h < 2; ++h)
    for (std::int64_t i = 0; i < 200; ++i) rows.push_back({0, h, i});
  const auto ref =
      tessel::kernels::attention_reference(q.to_values(), k.to_values(), v.to_values(), s, true, 0.0, rows);
  for (const auto& [bm, bn, threads] : tiles) {
    const AttentionConfig a{bm, bn, threads, 2, Schedule::cp_async};
    SCOPED_TRACE(a.describe());
    const auto out = tessel::interp::run_on_cpu(
        tessel::kernels::attention_program(s, DType::f16, true, 0.0f, a), {q, k, v}, {3, 4});
    tessel::kernels::AttentionRows got;
    const std::vector<double> o = out[0].to_values(), lse = out[1].to_values();
    for (const auto& r : rows) {
      for (std::int64_t d = 0; d < 32; ++d)
        got.O.push_back(o[static_cast<std::size_t>((r.row * 2 + r.head) * 32 + d)]);
      got.LSE.push_back(lse[static_cast<std::size_t>(r.head * 200 + r.row)]);
    }
    const auto err = tessel::kernels::attention_error(ref, got);
    EXPECT_LE(err.O, at::attention_tolerance(DType::f16).O) << "O: relative error " << err.O;
    EXPECT_LE(err.LSE, at::attention_tolerance(DType::f16).LSE) << "LSE: relative error " << err.LSE;
  }
}

// The space lowers each candidate under the switches jit() compiles it with: a persistent
// config, or any ring under persistent_rings (JitOptions or TESSEL_ENABLE), is persistent and
// keeps O's staging tile for its TMA stores and a second slot for its Q tile (plan_tile_loads),
// 64 KB more shared memory that the limits must see;
// under those switches the plain ring is the persistent one again (pruned as a duplicate).
TEST(AutotuneAttentionSpace, SharedMemoryCountsWhatTheJitOptionsBuild) {
  const AttentionShape s = shape(2, 16, 16, 4096, 4096, 128);
  const at::Config ring = at::attention_point({128, 128, 256, 2, Schedule::ring});
  const at::Config persistent = at::attention_point({128, 128, 256, 2, Schedule::ring, true});
  const at::HardwareLimits limits{.smem_per_block = 180000, .threads_per_block = 1024};
  EXPECT_EQ(at::attention_space("sm_90a", s, DType::bf16, false).why_not(ring, limits), std::nullopt);
  const auto why = at::attention_space("sm_90a", s, DType::bf16, false).why_not(persistent, limits);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("shared memory 232448 > 180000 bytes"), std::string::npos) << *why;
  EXPECT_EQ(at::attention_space("sm_90a", s, DType::bf16, false).why_not(persistent), std::nullopt);
  tessel::JitOptions passes;
  passes.persistent_rings = true;
  EXPECT_EQ(at::attention_space("sm_90a", s, DType::bf16, false, passes).why_not(persistent, limits), why);
  const auto plain = at::attention_space("sm_90a", s, DType::bf16, false, passes).why_not(ring);
  ASSERT_TRUE(plain.has_value());
  EXPECT_NE(plain->find(kBuilds), std::string::npos) << *plain;
  tessel::test::ScopedEnv env("TESSEL_ENABLE", "persistent_rings");
  EXPECT_EQ(at::attention_space("sm_90a", s, DType::bf16, false).why_not(persistent, limits), why);
}

// The built-in choice (sessions 17-20): D = 64 takes 192 query rows on the ring where a query row
// sees 4096 keys or more on average and the mask is off, else 64 rows on the ring (more than 64
// query rows) or the cp.async 128-row kernel (decode); D = 128's rings are persistent, ping-pong causal or not (one stage of 256 keys over
// long causal loops); nothing of either off sm_90a; each choice is a point the space keeps.
TEST(AutotuneAttentionSpace, DefaultConfigByLoopLengthAndCausality) {
  struct Want {
    std::int64_t Sq, Sk, D;
    bool causal;
    const char* config;
  };
  for (const Want& w :
       {// D = 64 over short loops (<= 1024 keys a row): 64 rows, one warpgroup, the ring, lazy
        // rescaling with its skips (session 32).
        Want{1024, 1024, 64, false, "64x128 s1 t128 ring lazy-rescale"},
        Want{1024, 1024, 64, true, "64x128 s1 t128 ring lazy-rescale"},
        Want{2048, 2048, 64, true, "64x128 s1 t128 ring lazy-rescale"},
        Want{64, 1024, 64, false, "128x128 s2 t256 cp.async"},  // one block of 64 rows
        Want{2048, 2048, 64, false, "64x128 s1 t128 ring lazy-rescale"},
        Want{4096, 4096, 64, true, "64x128 s1 t128 ring lazy-rescale"},
        Want{4096, 4096, 64, false, "192x128 s2 t384 ring persistent"},
        Want{4096, 4097, 64, false, "192x160 s1 t384 ring persistent"},  // a key tail: no rotation
        Want{16384, 16384, 64, true, "64x128 s1 t128 ring lazy-rescale"},
        Want{128, 8192, 64, false, "64x128 s1 t128 ring lazy-rescale"},  // 128 rows: no 192-row tile
        Want{1, 8192, 64, true, "128x128 s2 t256 cp.async"},
        Want{4096, 4096, 128, false, "128x128 s2 t256 ring+pingpong persistent"},
        // D = 128 causal: ping-pong, persistent; 256 keys a step in one stage
        // past 768 keys a row on average, lazy there (session 32); one query block (decode) as before.
        Want{4096, 4096, 128, true, "128x256 s1 t256 ring+pingpong persistent lazy-rescale"},
        Want{1024, 1024, 128, true, "128x128 s2 t256 ring+pingpong persistent"},
        Want{2048, 2048, 128, true, "128x256 s1 t256 ring+pingpong persistent lazy-rescale"},
        Want{128, 8192, 128, true, "128x128 s2 t256 ring"},  // one query block
        Want{4096, 4096, 256, false, "128x64 s2 t256 ring+pingpong"},
        Want{4096, 4096, 56, false, "192x128 s2 t384 ring persistent"},   // padded to 64
        Want{4096, 4096, 40, false, "128x128 s2 t256 cp.async"},          // no ring below 64
        Want{4096, 4096, 96, false, "128x128 s2 t256 ring+pingpong"}}) {  // no ring: not persistent
    const AttentionShape s = shape(2, 8, 8, w.Sq, w.Sk, w.D);
    const AttentionConfig c = tessel::kernels::default_attention_config(s, DType::bf16, w.causal, "sm_90a");
    SCOPED_TRACE(s.describe() + (w.causal ? " causal" : ""));
    EXPECT_EQ(c.describe(), w.config);
    // (At D = 96 the space has no ring -- the compiler cannot build one -- so the default's ring
    // request, which compiles as the cp.async kernel, is not one of its points.)
    if (w.D != 96) {
      EXPECT_EQ(at::attention_space("sm_90a", s, DType::bf16, w.causal).why_not(at::attention_point(c)),
                std::nullopt);
    }
    const AttentionConfig ampere = tessel::kernels::default_attention_config(s, DType::bf16, w.causal, "sm_80");
    EXPECT_EQ(ampere.schedule, Schedule::cp_async);
    EXPECT_FALSE(ampere.persistent);
    EXPECT_FALSE(ampere.lazy_rescale);
    EXPECT_EQ(ampere.block_M, 128);
  }
}
