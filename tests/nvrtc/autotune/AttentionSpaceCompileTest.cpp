// FlashAttention's tuning space compiles for sm_90a (no GPU needed): for D = 64 and D = 128, a
// sample of the kept points of each schedule (the first, the last and two between, of 64- and
// 128-row tiles; and 192-row tiles on the ring and on cp.async; the whole
// space takes a minute or two on two cores, `tessel tune attention --compile-only` compiles it)
// and the default, without spills, each on the path its schedule names.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <thread>

#include "support/TestSupport.hpp"
#include "tessel/autotune/Autotune.hpp"

namespace at = tessel::autotune;
using Schedule = tessel::kernels::AttentionConfig::Schedule;

namespace {

bool has(const std::vector<std::string>& instructions, const std::string& name) {
  return std::find(instructions.begin(), instructions.end(), name) != instructions.end();
}

}  // namespace

TEST(AttentionSpaceCompile, SampledPointsOfEverySchedule) {
  tessel::test::TempDir dir;
  tessel::test::ScopedEnv env("TESSEL_CACHE_DIR", dir.path().string());
  tessel::JitOptions jo;
  jo.arch = "sm_90a";
  for (const auto& [D, causal] : {std::pair{64, true}, std::pair{128, false}}) {
    tessel::kernels::AttentionShape s;
    s.batch = 2, s.heads = 8, s.kv_heads = 2, s.seqlen_q = 1000, s.seqlen_k = 4097, s.dim = D;
    const auto e = at::attention_space("sm_90a", s, tessel::DType::bf16, causal)
                       .enumerate({.smem_per_block = 232448, .threads_per_block = 1024});
    std::vector<at::Config> pick;
    for (int schedule : {0, 1, 2}) {
      std::vector<at::Config> of;
      // 192-row tiles (three warpgroups) sit at the register limit: a few of them spill a few
      // bytes, which the tuner drops after compiling (AttentionSpace.cpp); two are checked below.
      for (const auto& c : e.kept)
        if (at::get(c, "schedule") == schedule && at::get(c, "block_M") <= 128) of.push_back(c);
      ASSERT_GE(of.size(), 4u) << "schedule " << schedule;
      for (std::size_t i : {std::size_t{0}, of.size() / 3, 2 * of.size() / 3, of.size() - 1})
        pick.push_back(of[i]);
    }
    for (Schedule sc : {Schedule::ring, Schedule::cp_async}) {
      const at::Config three = at::attention_point({192, 128, 384, 2, sc});
      ASSERT_EQ(std::count(e.kept.begin(), e.kept.end(), three), 1) << "192x128 s2 t384 kept";
      pick.push_back(three);
    }
    const at::Config def = at::attention_point(
        tessel::kernels::default_attention_config(s, tessel::DType::bf16, causal, "sm_90a"));
    if (std::find(pick.begin(), pick.end(), def) == pick.end()) pick.push_back(def);
    const auto r = at::compile_all(at::attention_factory(s, tessel::DType::bf16, causal, jo), pick);
    for (std::size_t i = 0; i < pick.size(); ++i) {
      const tessel::kernels::AttentionConfig a = at::attention_config(pick[i]);
      SCOPED_TRACE("D" + std::to_string(D) + (causal ? " causal " : " ") + a.describe());
      ASSERT_EQ(r.rows[i].status, at::Status::not_timed) << a.describe() << " D" << D << ": " << r.rows[i].reason;
      EXPECT_EQ(r.rows[i].spill_bytes, 0);
      EXPECT_GT(r.rows[i].registers, 0);
      EXPECT_GT(r.rows[i].smem_bytes, 0);
      EXPECT_LE(r.rows[i].smem_bytes, 232448);
      const tessel::KernelInfo& info = r.kernels[i].info();
      EXPECT_TRUE(has(info.instructions, "wgmma")) << info.path;
      const bool ring = a.schedule != Schedule::cp_async;
      EXPECT_EQ(has(info.instructions, "cp.async.bulk.tensor"), ring) << info.path;
      EXPECT_EQ(info.path.find("TMA + mbarrier ring") != std::string::npos, ring) << info.path;
      if (!ring) {
        EXPECT_TRUE(has(info.instructions, "cp.async")) << info.path;
      }
      EXPECT_EQ(info.path.find("ping-pong") != std::string::npos, a.schedule == Schedule::ring_pingpong)
          << info.path;
    }
    std::cout << "[ autotune ] attention D" << D << ": " << e.kept.size() << " of " << e.total
              << " points kept; compiled " << pick.size() << " in " << r.seconds << " s on "
              << std::thread::hardware_concurrency() << " threads\n";
  }
}
