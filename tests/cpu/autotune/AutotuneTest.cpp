// The autotuner without a GPU or a compiler: spaces, pruning, the tuning cache, and the search
// strategies on a synthetic timing landscape.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "support/TestSupport.hpp"
#include "tessel/autotune/Autotune.hpp"

namespace at = tessel::autotune;

TEST(AutotuneSpace, GridAndPointsEnumerate) {
  at::Space s("t");
  s.knob("a", {1, 2, 3}).knob("b", {0, 1}).point({{"a", 9}, {"b", 9}}).point({{"a", 1}, {"b", 0}});
  const auto pts = s.points();
  ASSERT_EQ(pts.size(), 7u);  // 6 grid + 1 new point (the other duplicates the grid)
  EXPECT_EQ(pts.front(), (at::Config{{"a", 1}, {"b", 0}}));
  EXPECT_EQ(pts.back(), (at::Config{{"a", 9}, {"b", 9}}));
  EXPECT_EQ(at::describe(pts.back()), "a=9 b=9");
}

TEST(AutotuneSpace, ConstraintsAndHardwareLimitsPrune) {
  at::Space s("t");
  s.knob("m", {64, 128, 256}).knob("t", {128, 256, 2048});
  s.constraint("m <= t", [](const at::Config& c) { return at::get(c, "m") <= at::get(c, "t"); });
  s.smem_bytes([](const at::Config& c) { return 1000LL * at::get(c, "m"); });
  s.threads([](const at::Config& c) { return at::get(c, "t"); });
  const auto none = s.enumerate();
  EXPECT_EQ(none.total, 9u);
  EXPECT_EQ(none.pruned.size(), 1u);  // 256 > 128
  const auto e = s.enumerate({.smem_per_block = 200000, .threads_per_block = 1024});
  // pruned: (256,128) constraint; (256,256) and (256,2048) smem; (64,2048), (128,2048) threads.
  EXPECT_EQ(e.pruned.size(), 5u);
  EXPECT_EQ(e.kept.size(), 4u);
  int smem = 0, threads = 0, constraint = 0;
  for (const auto& p : e.pruned) {
    smem += p.reason.find("shared memory") != std::string::npos;
    threads += p.reason.find("threads") == 0;
    constraint += p.reason == "constraint m <= t";
  }
  EXPECT_EQ(smem, 2);
  EXPECT_EQ(threads, 2);
  EXPECT_EQ(constraint, 1);
}

TEST(AutotuneSpace, GemmSpaceHasOverAHundredCandidatesOnHopper) {
  const at::Space s = at::gemm_space("sm_90a", tessel::DType::f16);
  const auto e = s.enumerate({.smem_per_block = 232448, .threads_per_block = 1024});
  EXPECT_GE(e.kept.size(), 100u);
  EXPECT_GT(e.pruned.size(), 0u);
  bool hopper_tile = false;
  for (const auto& c : e.kept)
    hopper_tile |=
        at::get(c, "block_K") == 64 && at::get(c, "block_N") == 256 && at::get(c, "threads") == 256;
  EXPECT_TRUE(hopper_tile);
  for (const auto& c : e.kept)
    EXPECT_LE(tessel::kernels::matmul_smem_bytes(at::gemm_config(c, tessel::DType::f16)), 232448);
  const auto m = at::gemm_config({{"block_M", 64}, {"panel", 8}}, tessel::DType::bf16);
  EXPECT_EQ(m.block_M, 64);
  EXPECT_TRUE(m.use_swizzle);
  EXPECT_EQ(m.panel_size, 8);
  EXPECT_EQ(m.dtype, tessel::DType::bf16);
  EXPECT_EQ(m.cluster_x * m.cluster_y, 1);
}

// sm_90a's space also holds the 128x256 tiles in 2-CTA multicast clusters (A or B shared, panels
// 4 and 8): kept, converted with their cluster, and valid as tuning-cache entries; sm_80's has
// none.
TEST(AutotuneSpace, GemmSpaceHoldsMulticastClustersOnHopper) {
  const at::HardwareLimits h200{.smem_per_block = 232448, .threads_per_block = 1024};
  const at::Space s = at::gemm_space("sm_90a", tessel::DType::bf16);
  std::vector<std::string> clustered;
  for (const auto& c : s.enumerate(h200).kept) {
    const auto m = at::gemm_config(c, tessel::DType::bf16);
    if (m.cluster_x * m.cluster_y == 1) continue;
    clustered.push_back(m.describe());
    EXPECT_EQ(s.why_not(c, h200), std::nullopt) << at::describe(c);
  }
  EXPECT_EQ(clustered,
            (std::vector<std::string>{"128x256x64 s3 t256 swz c2x1", "128x256x64 s3 t256 swz c1x2",
                                      "128x256x64 s3 t256 swz c2x1", "128x256x64 s3 t256 swz c1x2"}));
  const at::Config c1x2{{"block_M", 128}, {"block_N", 256}, {"block_K", 64},  {"num_stages", 3},
                        {"threads", 256}, {"panel", 4},     {"cluster_x", 1}, {"cluster_y", 2}};
  const auto m = at::gemm_config(c1x2, tessel::DType::bf16);
  EXPECT_EQ(m.cluster_x, 1);
  EXPECT_EQ(m.cluster_y, 2);
  EXPECT_EQ(m.panel_size, 4);
  // A cluster off those tiles is not a point; sm_80 has no cluster knob at all.
  at::Config other = c1x2;
  other["block_N"] = 128;
  EXPECT_NE(s.why_not(other, h200), std::nullopt);
  EXPECT_EQ(at::gemm_space("sm_80", tessel::DType::bf16).why_not(c1x2, h200),
            "has a knob cluster_x the space 'gemm sm_80 bf16' does not have");
}

namespace {
at::KeyParts parts() {
  at::KeyParts p;
  p.kernel = "matmul";
  p.shapes = {4096, 4096, 4096};
  p.dtypes = {"f16"};
  p.device_name = "NVIDIA H200";
  p.cc_major = 9;
  p.sm_count = 132;
  p.driver_version = 13000;
  p.nvrtc_version = 13000;
  p.space = at::gemm_space("sm_90a").description();
  return p;
}
}  // namespace

TEST(AutotuneCache, KeyDependsOnShapeAndDevice) {
  const std::string k = at::tuning_key(parts());
  EXPECT_EQ(k.size(), 64u);
  EXPECT_EQ(at::tuning_key(parts()), k);
  auto p = parts();
  p.shapes[2] = 8192;
  EXPECT_NE(at::tuning_key(p), k);
  p = parts();
  p.device_name = "NVIDIA H100";
  EXPECT_NE(at::tuning_key(p), k);
  p = parts();
  p.sm_count = 114;
  EXPECT_NE(at::tuning_key(p), k);
  p = parts();
  p.dtypes = {"bf16"};
  EXPECT_NE(at::tuning_key(p), k);
  p = parts();
  p.space = at::gemm_space("sm_80").description();
  EXPECT_NE(at::tuning_key(p), k);
}

TEST(AutotuneCache, RoundTripMissAndCorruptFilesRewritten) {
  tessel::test::TempDir dir;
  const std::string k = at::tuning_key(parts());
  EXPECT_FALSE(at::read_tuning_entry(dir.path(), k));
  at::StoredResult r{{{"block_M", 128}, {"threads", 256}}, 1.25, "halving", "gemm"};
  ASSERT_TRUE(at::write_tuning_entry(dir.path(), k, r));
  auto got = at::read_tuning_entry(dir.path(), k);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->config, r.config);
  EXPECT_DOUBLE_EQ(got->ms, 1.25);
  // Another shape's key misses.
  auto p = parts();
  p.shapes[0] = 1024;
  EXPECT_FALSE(at::read_tuning_entry(dir.path(), at::tuning_key(p)));

  for (const char* junk : {"{\"format\": 1, \"key\": \"", "not json at all", "{}", "[1,2]"}) {
    const auto file = dir.path() / (k + ".json");
    std::ofstream(file, std::ios::trunc) << junk;
    EXPECT_FALSE(at::read_tuning_entry(dir.path(), k)) << junk;
    EXPECT_FALSE(std::filesystem::exists(file)) << "a damaged entry is removed: " << junk;
    ASSERT_TRUE(at::write_tuning_entry(dir.path(), k, r));
    EXPECT_TRUE(at::read_tuning_entry(dir.path(), k));
  }
}

TEST(AutotuneCache, ConcurrentWritersLeaveAValidFile) {
  tessel::test::TempDir dir;
  const std::string k = at::tuning_key(parts());
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i)
        at::write_tuning_entry(dir.path(), k,
                               at::StoredResult{{{"block_M", 64 + t}}, 1.0 + i, "halving", "s"});
    });
  for (auto& t : threads) t.join();
  auto got = at::read_tuning_entry(dir.path(), k);
  ASSERT_TRUE(got);
  EXPECT_GE(at::get(got->config, "block_M"), 64);
  EXPECT_LT(at::get(got->config, "block_M"), 72);
  int files = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir.path())) {
    (void)f;
    ++files;
  }
  EXPECT_EQ(files, 1) << "no temporary files left behind";
}

namespace {
// A smooth landscape with noise shrinking with the repeats; the minimum is at `best`.
struct Landscape {
  int n, best;
  at::Measurement operator()(int i, int reps) {
    const double base = 1.0 + 0.002 * std::abs(i - best);
    const double noise = 0.01 / reps * (((i * 31 + reps * 17) % 5) - 2) / 2.0;  // < ~1 % at 1 repeat
    return {base + noise, 0.001};
  }
};
}  // namespace

TEST(AutotuneSearch, SuccessiveHalvingFindsTheMinimumTimingFewAtFullRepeats) {
  for (int n : {64, 200, 432}) {
    for (int best : {0, n / 3, n - 1}) {
      Landscape land{n, best};
      std::vector<int> full_calls(n, 0);
      at::SearchOptions o;  // halving by default, 20 full repeats
      auto r = at::search(
          n,
          [&](int i, int reps) {
            if (reps >= o.repeats) ++full_calls[i];
            return land(i, reps);
          },
          o);
      EXPECT_EQ(r.best, best) << "n=" << n;
      int distinct_full = 0;
      for (int c : full_calls) distinct_full += c > 0;
      EXPECT_LE(distinct_full, n / 4) << "n=" << n;
      EXPECT_EQ(r.timed_full, distinct_full);
    }
  }
}

TEST(AutotuneSearch, ExhaustiveAndRandom) {
  Landscape land{50, 17};
  at::SearchOptions o;
  o.strategy = at::Strategy::exhaustive;
  auto e = at::search(50, land, o);
  EXPECT_EQ(e.best, 17);
  EXPECT_EQ(e.timed_full, 50);
  o.strategy = at::Strategy::random;
  o.budget = 10;
  auto r = at::search(50, land, o);
  int timed = 0;
  for (int reps : r.repeats) timed += reps > 0;
  EXPECT_EQ(timed, 10);
  ASSERT_GE(r.best, 0);
  EXPECT_GT(r.repeats[r.best], 0);
  EXPECT_EQ(at::parse_strategy("halving"), at::Strategy::halving);
  EXPECT_FALSE(at::parse_strategy("greedy"));
}

TEST(AutotuneSearch, SummarizeGivesMedianAndSpread) {
  auto m = at::summarize({5, 1, 3, 2, 4});
  EXPECT_DOUBLE_EQ(m.median_ms, 3);
  EXPECT_DOUBLE_EQ(m.spread_ms, 2);
}

TEST(AutotuneSearch, PlannedTimingsMatchTheSearchWithoutNearTies) {
  for (int n : {1, 2, 5, 64, 200}) {
    for (at::Strategy s : {at::Strategy::exhaustive, at::Strategy::random, at::Strategy::halving}) {
      at::SearchOptions o;
      o.strategy = s;
      // 5 % apart: never within the 1 % near-tie margin, so nothing is re-timed.
      const auto r = at::search(
          n,
          [](int i, int) {
            return at::Measurement{1.0 + 0.05 * i, 0};
          },
          o);
      EXPECT_EQ(at::planned_timings(n, o), r.timings) << "n=" << n << " " << at::strategy_name(s);
      if (s != at::Strategy::random) {
        EXPECT_EQ(r.best, 0);
      }
    }
  }
  EXPECT_EQ(at::planned_timings(0, {}), 0);
}

TEST(AutotuneCompileAll, ReportsEveryCandidateOnceAndOneAtATime) {
  std::vector<at::Config> configs;
  for (int i = 0; i < 40; ++i) configs.push_back({{"i", i}});
  std::atomic<int> inside{0};
  std::vector<int> seen(configs.size(), 0);
  at::CompileOptions o;
  o.threads = 4;
  o.on_compiled = [&](std::size_t i, const at::Row& row) {
    EXPECT_EQ(inside.fetch_add(1), 0) << "on_compiled entered twice at once";
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    ++seen[i];
    EXPECT_EQ(row.status, at::Status::compile_failed);
    EXPECT_EQ(row.config, configs[i]);
    inside.fetch_sub(1);
  };
  const auto r = at::compile_all(
      [](const at::Config& c) -> tessel::JitKernel {
        if (at::get(c, "i") % 2) throw std::runtime_error("odd candidate\nsecond line of the log");
        return {};  // a factory that returns nothing is a failure too, not a crash
      },
      configs, o);
  for (std::size_t i = 0; i < configs.size(); ++i) {
    EXPECT_EQ(seen[i], 1) << i;
    EXPECT_EQ(r.rows[i].reason, i % 2 ? "odd candidate" : "the factory returned no kernel");
    EXPECT_FALSE(r.kernels[i].defined());
  }
}

TEST(AutotuneCompileAll, ACandidatePastTheTimeLimitFailsAndTheOthersGoOn) {
  // One worker; candidate 0 takes 1.5 s, the limit is 0.2 s. Candidate 0 must be recorded as
  // failed on the limit (once), and the rest compiled by the worker that replaces the stalled one
  // while candidate 0 is still running; compile_all returns only after it ends (no thread left).
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  std::vector<at::Config> configs;
  for (int i = 0; i < 6; ++i) configs.push_back({{"i", i}});
  std::mutex mutex;
  std::vector<double> reported_at(configs.size(), -1);
  std::vector<int> reports(configs.size(), 0);
  std::atomic<bool> slow_done{false};
  at::CompileOptions o;
  o.threads = 1;
  o.time_limit_s = 0.2;
  o.on_compiled = [&](std::size_t i, const at::Row&) {
    std::lock_guard<std::mutex> lock(mutex);
    ++reports[i];
    reported_at[i] = std::chrono::duration<double>(Clock::now() - t0).count();
  };
  const auto r = at::compile_all(
      [&](const at::Config& c) -> tessel::JitKernel {
        if (at::get(c, "i") == 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1500));
          slow_done = true;
          return {};
        }
        throw std::runtime_error(slow_done ? "compiled after the slow one" : "compiled meanwhile");
      },
      configs, o);
  EXPECT_TRUE(slow_done);
  EXPECT_GE(r.seconds, 1.5) << "compile_all waits for the stalled compile";
  EXPECT_EQ(r.rows[0].status, at::Status::compile_failed);
  EXPECT_EQ(r.rows[0].reason.rfind("compile time limit", 0), 0u) << r.rows[0].reason;
  EXPECT_GE(r.rows[0].compile_ms, 200);
  EXPECT_LT(reported_at[0], 1.0) << "the limit settles the row before the compile ends";
  for (std::size_t i = 0; i < configs.size(); ++i) {
    EXPECT_EQ(reports[i], 1) << i;
    if (i > 0) {
      EXPECT_EQ(r.rows[i].reason, "compiled meanwhile") << i;
    }
    EXPECT_EQ(r.rows[i].config, configs[i]);
  }
}

TEST(AutotuneCompileAll, NoTimeLimitWaitsForSlowCandidates) {
  at::CompileOptions o;
  o.threads = 2;
  const auto r = at::compile_all(
      [](const at::Config&) -> tessel::JitKernel {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        throw std::runtime_error("slow and failing");
      },
      {{{"i", 0}}, {{"i", 1}}, {{"i", 2}}}, o);
  for (const at::Row& row : r.rows) EXPECT_EQ(row.reason, "slow and failing");
}
