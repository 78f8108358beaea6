// Parallel compilation of GEMM candidates for sm_90a (no GPU needed), with its throughput.
#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "support/TestSupport.hpp"
#include "tessel/autotune/Autotune.hpp"
#include "tessel/runtime/Cache.hpp"

namespace at = tessel::autotune;

TEST(AutotuneCompile, GemmCandidatesCompileInParallelForSm90a) {
  tessel::test::TempDir dir;
  tessel::test::ScopedEnv env("TESSEL_CACHE_DIR", dir.path().string());
  tessel::KernelCache::global().clear_memory();  // cold: every candidate goes through NVRTC
  const at::Space space = at::gemm_space("sm_90a", tessel::DType::f16);
  const auto e = space.enumerate({.smem_per_block = 232448, .threads_per_block = 1024});
  // Four candidates of both paths: mma.sync tiles (block_K 32) and wgmma tiles (block_K 64).
  std::vector<at::Config> pick;
  for (const auto& c : e.kept) {
    const bool a = at::get(c, "block_M") == 128 && at::get(c, "block_N") == 128 &&
                   at::get(c, "num_stages") == 3 && at::get(c, "panel") == 0;
    const bool b = at::get(c, "block_M") == 128 && at::get(c, "block_N") == 256 &&
                   at::get(c, "block_K") == 64 && at::get(c, "num_stages") == 4 &&
                   at::get(c, "threads") == 256 && at::get(c, "panel") == 16;
    if (a || b) pick.push_back(c);
  }
  ASSERT_EQ(pick.size(), 5u);     // 128x128 x {32, 64} x {128, 256} threads, and the 128x256 Hopper tile
  pick.push_back(e.kept.back());  // an explicit sm_90a point: 64x128x64, 6 stages
  tessel::JitOptions jo;
  jo.arch = "sm_90a";
  const auto r = at::compile_all(at::gemm_factory(512, 512, 512, tessel::DType::f16, jo), pick);
  ASSERT_EQ(r.rows.size(), pick.size());
  for (std::size_t i = 0; i < pick.size(); ++i) {
    EXPECT_NE(r.rows[i].status, at::Status::compile_failed)
        << at::describe(pick[i]) << ": " << r.rows[i].reason;
    EXPECT_EQ(r.rows[i].status, at::Status::not_timed) << at::describe(pick[i]) << ": " << r.rows[i].reason;
    EXPECT_TRUE(r.kernels[i].defined());
    EXPECT_GT(r.rows[i].registers, 0);
  }
  std::cout << "[ autotune ] compiled " << pick.size() << " GEMM candidates for sm_90a in " << r.seconds
            << " s on " << std::thread::hardware_concurrency() << " threads: " << pick.size() / r.seconds
            << " candidates/s\n";
}

// A skinny GEMM's split-K candidates (issue 17) compile as kernels::Matmul compiles a split --
// the partial GEMM into an f32 workspace [n, M, N] and, compiled with it, the reduction -- and
// the tuner reads each kernel's share count back from its workspace parameter.
TEST(AutotuneCompile, SplitKCandidatesCompileWithTheirReductionForSm90a) {
  tessel::test::TempDir dir;
  tessel::test::ScopedEnv env("TESSEL_CACHE_DIR", dir.path().string());
  tessel::KernelCache::global().clear_memory();
  const int M = 16, N = 4096, K = 4096;
  const auto e = at::gemm_space("sm_90a", tessel::DType::f16, M, N, K).enumerate({232448, 1024});
  // Three of the 15 (2 to 16 shares): the ends and the model's 5; and a one-kernel candidate.
  std::vector<at::Config> pick;
  for (const auto& c : e.kept)
    if (at::gemm_split_k(c) == 2 || at::gemm_split_k(c) == 5 || at::gemm_split_k(c) == 16) pick.push_back(c);
  ASSERT_EQ(pick.size(), 3u);
  pick.push_back(e.kept.front());
  tessel::JitOptions jo;
  jo.arch = "sm_90a";
  const auto r = at::compile_all(at::gemm_factory(M, N, K, tessel::DType::f16, jo), pick);
  for (std::size_t i = 0; i < pick.size(); ++i) {
    SCOPED_TRACE(at::describe(pick[i]));
    ASSERT_EQ(r.rows[i].status, at::Status::not_timed) << r.rows[i].reason;
    const tessel::JitKernel& k = r.kernels[i];
    EXPECT_EQ(at::gemm_split_k(k), at::gemm_split_k(pick[i]));
    EXPECT_EQ(r.rows[i].spill_bytes, 0);
    if (at::gemm_split_k(pick[i]) == 1) {
      EXPECT_EQ(k.program().name, "matmul");
      continue;
    }
    EXPECT_EQ(k.program().name, "matmul_split_k");
    // The reduction was compiled beside the partial GEMM: asking again is an in-process hit.
    const auto before = tessel::KernelCache::global().stats();
    const tessel::JitKernel reduce =
        at::gemm_split_k_reduce(M, N, at::gemm_split_k(pick[i]), tessel::DType::f16, jo);
    EXPECT_EQ(reduce.program().name, "matmul_split_k_reduce");
    EXPECT_TRUE(reduce.resources().cache_hit);
    EXPECT_EQ(tessel::KernelCache::global().stats().misses, before.misses);
    EXPECT_EQ(tessel::KernelCache::global().stats().memory_hits, before.memory_hits + 1);
  }
}

// A split-K winner goes into the tuning cache with its knob, under the key kernels::Matmul looks
// up, and a second tune is a hit that compiles the partial GEMM again (a fake timer that makes 5
// shares the fastest; a few of the space's points, no GPU).
TEST(AutotuneCompile, ASplitKWinnerIsStoredWhereMatmulFindsIt) {
  tessel::test::TempDir dir;
  tessel::test::ScopedEnv env("TESSEL_CACHE_DIR", dir.path().string());
  const int M = 16, N = 4096, K = 4096;
  const at::DeviceKey h200{"NVIDIA H200", 9, 0, 132, 13000, 13000};
  const at::Space full = at::gemm_space("sm_90a", tessel::DType::f16, M, N, K);
  at::Space few("gemm sm_90a f16");
  for (const at::Config& c : full.points())
    if (at::gemm_split_k(c) == 3 || at::gemm_split_k(c) == 5 || c == full.points().front()) few.point(c);
  ASSERT_EQ(few.points().size(), 3u);
  tessel::JitOptions jo;
  jo.arch = "sm_90a";
  at::Callbacks cb;
  cb.time = [](const tessel::JitKernel& k, int) {
    const int shares = at::gemm_split_k(k);
    return at::Measurement{shares == 5 ? 0.5 : 1.0 + 0.1 * shares, 0};
  };
  at::Options o;
  o.search.strategy = at::Strategy::exhaustive;
  o.cache_key = at::tuning_key(at::gemm_split_k_key_parts(M, N, K, tessel::DType::f16, h200));
  o.limits = {.smem_per_block = 232448, .threads_per_block = 1024};
  const at::Factory factory = at::gemm_factory(M, N, K, tessel::DType::f16, jo);
  const at::Result r = at::autotune(factory, few, cb, o);
  ASSERT_TRUE(r.found);
  EXPECT_EQ(at::gemm_split_k(r.config), 5);
  const auto tuned =
      at::find_tuned_matmul_config(M, N, K, tessel::DType::f16, h200, *at::tuning_cache_directory());
  ASSERT_TRUE(tuned);
  EXPECT_EQ(tuned->split_k, 5);
  EXPECT_TRUE(tuned->split_searched);
  EXPECT_EQ(tuned->config.describe(), "16x256x64 s4 t128");

  const at::Result hit = at::autotune(
      factory, full, [&]() -> at::Callbacks { throw std::logic_error("prepared on a hit"); }, o);
  EXPECT_TRUE(hit.from_cache);
  EXPECT_EQ(hit.config, r.config);
  EXPECT_EQ(at::gemm_split_k(hit.kernel), 5);
}

TEST(AutotuneCompile, SoftmaxSpacesCompileForSm90a) {
  tessel::test::TempDir dir;
  tessel::test::ScopedEnv env("TESSEL_CACHE_DIR", dir.path().string());
  tessel::JitOptions jo;
  jo.arch = "sm_90a";
  // Every kept candidate of a short, a medium and a long row (softmax kernels compile in a tenth
  // of a second) compiles. The space's register limits keep spills rare (none of 533 candidates
  // over 33 shapes when last measured; the tuner drops any), and the default never spills.
  for (auto [N, t] : {std::pair{1000LL, tessel::DType::f16}, std::pair{5000LL, tessel::DType::bf16},
                      std::pair{100003LL, tessel::DType::f32}}) {
    const long long M = 4096;
    const auto e =
        at::softmax_space("sm_90a", M, N, t).enumerate({.smem_per_block = 232448, .threads_per_block = 1024});
    ASSERT_GE(e.kept.size(), 5u);
    const auto r = at::compile_all(at::softmax_factory(M, N, t, jo), e.kept);
    const at::Config def = at::softmax_point(tessel::kernels::default_softmax_config(M, N, t));
    std::size_t spills = 0;
    for (std::size_t i = 0; i < e.kept.size(); ++i) {
      const std::string what = "N=" + std::to_string(N) + " " + at::softmax_config(e.kept[i]).describe();
      EXPECT_NE(r.rows[i].status, at::Status::compile_failed) << what << ": " << r.rows[i].reason;
      EXPECT_GT(r.rows[i].registers, 0) << what;
      if (r.rows[i].status == at::Status::spills) {
        ++spills;
        std::cout << "[ autotune ] " << what << " spills: " << r.rows[i].reason << "\n";
      }
      if (e.kept[i] == def) {
        EXPECT_EQ(r.rows[i].status, at::Status::not_timed) << what << ": " << r.rows[i].reason;
      }
    }
    EXPECT_LE(spills * 4, e.kept.size()) << "more than a quarter of the candidates spill";
    std::cout << "[ autotune ] softmax N=" << N << " " << tessel::dtype_name(t) << ": compiled "
              << e.kept.size() << " candidates in " << r.seconds << " s, " << spills << " spill\n";
  }
}

TEST(AutotuneCompile, WholeTuneWithAFakeTimerReportsProgressAndSkipsAWrongCandidate) {
  // autotune() end to end without a GPU: real candidates compiled, a check that calls one of
  // them wrong, a timer that makes that one the fastest. The winner must be the next fastest,
  // and the progress events must count every step.
  tessel::test::TempDir dir;
  tessel::test::ScopedEnv env("TESSEL_CACHE_DIR", dir.path().string());
  tessel::JitOptions jo;
  jo.arch = "sm_90a";
  const long long M = 4096, N = 1000;
  const at::Space space = at::softmax_space("sm_90a", M, N, tessel::DType::f16);
  const auto kept = space.enumerate({.smem_per_block = 232448, .threads_per_block = 1024}).kept;
  ASSERT_GE(kept.size(), 4u);
  // Which config a kernel was built from, by its generated source.
  std::mutex mutex;
  std::map<std::string, tessel::kernels::SoftmaxConfig> config_of;
  const at::Factory softmax = at::softmax_factory(M, N, tessel::DType::f16, jo);
  const at::Factory factory = [&](const at::Config& c) {
    tessel::JitKernel k = softmax(c);
    std::lock_guard<std::mutex> lock(mutex);
    config_of[k.source()] = at::softmax_config(c);
    return k;
  };
  const std::string planted = "rows:t128:r2:bn1024";
  auto fake_ms = [&](const tessel::JitKernel& k) {
    // Fewer threads and rows: faster, every two configs more than 1 % apart (no near-ties).
    const auto c = config_of.at(k.source());
    return c.describe() == planted ? 0.5 : 1.0 + 0.001 * c.threads + 0.02 * c.rows_per_block;
  };
  at::Callbacks cb;
  cb.check = [&](const tessel::JitKernel& k, std::string& why) {
    if (config_of.at(k.source()).describe() != planted) return true;
    why = "planted";
    return false;
  };
  cb.time = [&](const tessel::JitKernel& k, int) { return at::Measurement{fake_ms(k), 0}; };
  std::vector<at::ProgressEvent> events;
  int lines = 0;
  at::Options o;
  o.limits = {.smem_per_block = 232448, .threads_per_block = 1024};
  o.search.strategy = at::Strategy::exhaustive;
  o.on_progress = [&](const at::ProgressEvent& e) { events.push_back(e); };
  o.progress = [&](const std::string&) { ++lines; };
  const at::Result r = at::autotune(factory, space, cb, o);
  ASSERT_TRUE(r.found);
  int wrong = 0, compiled = 0, checked = 0, timed = 0;
  for (const at::Row& row : r.table) wrong += row.status == at::Status::wrong;
  EXPECT_EQ(wrong, 1);
  EXPECT_EQ(at::softmax_config(r.config).describe(), "row:t128:bn1024") << "the next fastest wins";
  for (const auto& e : events) {
    using Phase = at::ProgressEvent::Phase;
    int& n = e.phase == Phase::compiling ? compiled : e.phase == Phase::checking ? checked : timed;
    EXPECT_EQ(e.done, n + 1) << "events count up by one";
    EXPECT_LE(e.done, e.total);
    EXPECT_FALSE(e.label.empty());
    n = e.done;
  }
  EXPECT_EQ(compiled, static_cast<int>(kept.size()));
  EXPECT_EQ(checked, static_cast<int>(kept.size()));    // none spills at this shape
  EXPECT_EQ(timed, static_cast<int>(kept.size()) - 1);  // exhaustive: every right one, no near-ties
  EXPECT_GT(lines, compiled + checked + timed) << "a plain line per step, and the summaries";
}

TEST(AutotuneCompile, HalvingWithACostModelCompilesOnlyItsBestFraction) {
  // A cost model that knows the fake timer's answer: halving compiles the model's best quarter
  // (at least 2 here), records the rest as ranked_out, and still finds the true best.
  tessel::test::TempDir dir;
  tessel::test::ScopedEnv env("TESSEL_CACHE_DIR", dir.path().string());
  tessel::JitOptions jo;
  jo.arch = "sm_90a";
  const long long M = 4096, N = 3000;
  const at::Space space = at::softmax_space("sm_90a", M, N, tessel::DType::f16);
  const at::HardwareLimits limits{.smem_per_block = 232448, .threads_per_block = 1024};
  const auto kept = space.enumerate(limits).kept;
  ASSERT_GT(kept.size(), 8u);
  auto fake_ms = [](const at::Config& c) {
    const auto s = at::softmax_config(c);
    return 1.0 + 0.001 * s.threads + 0.02 * s.rows_per_block + 0.00001 * s.block_N;
  };
  std::mutex mutex;
  std::map<std::string, at::Config> config_of;
  const at::Factory softmax = at::softmax_factory(M, N, tessel::DType::f16, jo);
  int factory_calls = 0;
  const at::Factory factory = [&](const at::Config& c) {
    tessel::JitKernel k = softmax(c);
    std::lock_guard<std::mutex> lock(mutex);
    config_of[k.source()] = c;
    ++factory_calls;
    return k;
  };
  at::Callbacks cb;
  cb.time = [&](const tessel::JitKernel& k, int) {
    return at::Measurement{fake_ms(config_of.at(k.source())), 0};
  };
  at::Options o;
  o.limits = limits;
  o.search.strategy = at::Strategy::halving;
  o.cost_model = fake_ms;
  o.model_keep = 0.25;
  o.model_min_keep = 2;
  const at::Result r = at::autotune(factory, space, cb, o);
  ASSERT_TRUE(r.found);
  const std::size_t keep = std::max<std::size_t>(2, (kept.size() + 3) / 4);
  EXPECT_EQ(factory_calls, static_cast<int>(keep));
  int ranked_out = 0;
  for (const at::Row& row : r.table) ranked_out += row.status == at::Status::ranked_out;
  EXPECT_EQ(ranked_out, static_cast<int>(kept.size() - keep));
  const auto best =
      *std::min_element(kept.begin(), kept.end(),
                        [&](const at::Config& a, const at::Config& b) { return fake_ms(a) < fake_ms(b); });
  EXPECT_EQ(at::describe(r.config), at::describe(best));
}

// A tuning-cache hit compiles the stored config alone and never prepares inputs, references or
// timers: that is what makes a repeated `tessel tune` return at once (no GPU needed here).
TEST(AutotuneCompile, ACacheHitSkipsPreparingTheCallbacks) {
  tessel::test::TempDir dir;
  tessel::test::ScopedEnv env("TESSEL_CACHE_DIR", dir.path().string());
  const at::Space space = at::gemm_space("sm_90a", tessel::DType::f16);
  const auto e = space.enumerate({.smem_per_block = 232448, .threads_per_block = 1024});
  ASSERT_FALSE(e.kept.empty());
  const at::Config stored = e.kept.back();
  const std::string key = "test-cache-hit-key";
  ASSERT_TRUE(
      at::write_tuning_entry(dir.path() / "tune", key, {stored, 0.5, "halving", space.description()}));
  tessel::JitOptions jo;
  jo.arch = "sm_90a";
  int prepared = 0;
  at::Options o;
  o.cache_key = key;
  o.cache_dir = dir.path() / "tune";
  o.limits = {.smem_per_block = 232448, .threads_per_block = 1024};
  const auto r = at::autotune(
      at::gemm_factory(256, 256, 256, tessel::DType::f16, jo), space,
      [&] {
        ++prepared;
        return at::Callbacks{};
      },
      o);
  EXPECT_EQ(prepared, 0);
  EXPECT_TRUE(r.from_cache);
  EXPECT_TRUE(r.found);
  EXPECT_EQ(r.config, stored);
  EXPECT_DOUBLE_EQ(r.ms, 0.5);
  EXPECT_EQ(r.compiled, 1);
  EXPECT_TRUE(r.kernel.defined());
}
