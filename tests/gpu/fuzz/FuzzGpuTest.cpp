// The fuzzer on the GPU (docs/fuzzing.md): generated programs compiled for the device's arch and
// run on it, outputs NaN-poisoned first, against float64 and the interpreter; and every
// regression case. The 10^4-program batch is scripts/gpu-check.sh's `tessel_fuzz --gpu` step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include "fuzz/Regressions.hpp"
#include "fuzz/Runner.hpp"
#include "support/TestSupport.hpp"

namespace tessel::fuzz {
namespace {

TEST(FuzzGpu, GeneratedProgramsMatchOnTheDevice) {
  TESSEL_REQUIRE_GPU();
  BatchOptions o;
  o.seed = 4242;
  o.count = 500;
  o.run.archs.clear();  // the device's own arch only (run_case adds it for --gpu)
  o.run.gpu = true;
  o.jobs = static_cast<int>(std::max(2u, std::thread::hardware_concurrency()));
  const BatchReport r = run_batch(o);
  std::printf(
      "[ fuzz gpu ] seed %llu: %d programs, %d run on the GPU: %d passed, %d rejected, %d failed in %.1f s\n",
      static_cast<unsigned long long>(o.seed), r.programs, r.gpu_runs, r.passed, r.rejected, r.failed,
      r.seconds);
  EXPECT_EQ(r.failed, 0);
  for (const auto& [c, res] : r.failures)
    ADD_FAILURE() << res.signature() << ": " << c.summary() << "\n  " << res.detail.substr(0, 600) << "\n"
                  << c.to_text();
  EXPECT_GE(r.gpu_runs, o.count * 9 / 10);
}

// Every regression case on the device (and the interpreter), under the environment the caller set.
void replay_regressions_on_the_device() {
  for (const Regression& reg : load_regressions()) {
    SCOPED_TRACE(reg.file.filename().string() + ": " + reg.c.summary());
    RunOptions o;
    o.gpu = true;
    const CaseResult r = run_case(reg.c, o);
    if (!reg.known_failing) {
      EXPECT_EQ(r.outcome, Outcome::Pass) << r.signature() << ": " << r.detail;
      // Ran on the device, not only on the interpreter (a dead context skips the GPU).
      if (r.outcome == Outcome::Pass) {
        EXPECT_GE(r.gpu_error, 0) << "not run on the GPU";
      }
    }
  }
}

TEST(FuzzGpu, RegressionCasesMatchOnTheDevice) {
  TESSEL_REQUIRE_GPU();
  replay_regressions_on_the_device();
}

// The same cases with the generic passes' persistence on for every ring (TESSEL_ENABLE=persistent_rings, at
// most 3 blocks, so every block loops over several tiles): GEMMs and attention programs on TMA rings become
// persistent, a causal one with its key loop cut at the mask (attention-causal-skip-masked.case) carrying the
// ring's position from tile to tile.
TEST(FuzzGpu, RegressionCasesMatchOnTheDeviceWithPersistentRings) {
  TESSEL_REQUIRE_GPU();
  if (tessel::current_device().arch() != "sm_90a") GTEST_SKIP() << "SKIPPED: not an sm_90a GPU";
  test::ScopedEnv enable("TESSEL_ENABLE", "persistent_rings");
  test::ScopedEnv blocks("TESSEL_MAX_PERSISTENT_CTAS", "3");
  test::ScopedEnv no_cache("TESSEL_CACHE", "0");
  replay_regressions_on_the_device();
}

}  // namespace
}  // namespace tessel::fuzz
