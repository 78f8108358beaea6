// autotune(): enumerate and prune, look in the tuning cache, compile in parallel, check, search.
#include "tessel/autotune/Autotune.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <random>

#include "tessel/ir/IR.hpp"
#include "tessel/runtime/Driver.hpp"

namespace tessel::autotune {

namespace {

std::string first_line(const std::string& s, std::size_t max_chars = 200) {
  std::string out = s.substr(0, s.find('\n'));
  if (out.size() > max_chars) out = out.substr(0, max_chars) + "...";
  return out;
}

}  // namespace

std::function<Measurement(const JitKernel&, int)> event_timer(std::function<void(const JitKernel&)> run,
                                                              int warmup) {
  struct Scratch {
    CUdeviceptr ptr = 0;
    std::size_t bytes = 256u << 20;
    unsigned char value = 0;
    ~Scratch() {
      if (ptr) (void)driver().cuMemFree(ptr);
    }
  };
  auto scratch = std::make_shared<Scratch>();
  return [run = std::move(run), warmup, scratch](const JitKernel& k, int repeats) {
    ensure_context();
    if (!scratch->ptr) check_cu(driver().cuMemAlloc(&scratch->ptr, scratch->bytes), "cuMemAlloc(L2 flush)");
    for (int i = 0; i < warmup; ++i) run(k);
    std::vector<double> samples;
    EventTimer timer;
    for (int i = 0; i < repeats; ++i) {
      // Writing 256 MiB (more than the 50-60 MB L2) evicts the inputs and the last output.
      check_cu(driver().cuMemsetD8Async(scratch->ptr, ++scratch->value, scratch->bytes, nullptr),
               "cuMemsetD8Async(L2 flush)");
      timer.start();
      run(k);
      timer.stop();
      samples.push_back(timer.elapsed_ms());
    }
    return summarize(std::move(samples));
  };
}

Result autotune(const Factory& factory, const Space& space, const Callbacks& cb, const Options& o) {
  return autotune(
      factory, space, [&] { return cb; }, o);
}

Result autotune(const Factory& factory, const Space& space, const std::function<Callbacks()>& prepare,
                const Options& o) {
  auto say = [&](const std::string& s) {
    if (o.progress) o.progress(s);
  };
  auto event = [&](ProgressEvent::Phase phase, int done, int total, const Config& c) {
    if (o.on_progress) o.on_progress(ProgressEvent{phase, done, total, describe(c)});
  };
  Result result;
  HardwareLimits limits = o.limits;
  if (limits.smem_per_block == 0 && limits.threads_per_block == 0 && gpu_available()) {
    limits.smem_per_block = current_device().smem_optin_per_block;
    limits.threads_per_block = current_device().max_threads_per_block;
  }
  Space::Enumeration e = space.enumerate(limits);
  say(std::to_string(e.total) + " candidates, " + std::to_string(e.pruned.size()) +
      " pruned before compiling, " + std::to_string(e.kept.size()) + " left");

  // A stored answer: compile it alone and return.
  std::optional<std::filesystem::path> dir = o.cache_dir ? o.cache_dir : tuning_cache_directory();
  if (!o.cache_key.empty() && dir) {
    // Only a config this space would try now (a point, its constraints, this GPU's limits).
    if (auto stored = read_valid_tuning_entry(*dir, o.cache_key, space, limits)) {
      try {
        result.kernel = factory(stored->config);
        result.found = result.from_cache = true;
        result.config = stored->config;
        result.ms = stored->ms;
        result.compiled = 1;
        Row row{stored->config,
                Status::ok,
                "from the tuning cache",
                stored->ms,
                0,
                result.kernel.resources().registers,
                result.kernel.resources().compile_ms};
        result.table.push_back(row);
        say("tuning cache hit: " + describe(stored->config) + " (" + std::to_string(stored->ms) + " ms)");
        return result;
      } catch (const std::exception& ex) {
        say("the cached config no longer compiles (" + first_line(ex.what()) + "); tuning again");
      }
    }
  }

  const Callbacks cb = prepare();
  for (auto& p : e.pruned) result.table.push_back(Row{p.config, Status::pruned, p.reason, -1, 0, -1, 0});

  // Random search compiles only its sample.
  std::vector<Config> candidates = e.kept;
  SearchOptions so = o.search;
  if (so.strategy == Strategy::random) {
    std::mt19937_64 rng(so.seed);
    std::shuffle(candidates.begin(), candidates.end(), rng);
    const std::size_t budget =
        so.budget > 0 ? static_cast<std::size_t>(so.budget) : std::max<std::size_t>(1, candidates.size() / 4);
    if (candidates.size() > budget) candidates.resize(budget);
    so.strategy = Strategy::exhaustive;
  }

  // Successive halving with a cost model compiles only the candidates the model ranks best
  // (kept in enumeration order, so that the search sees them as it would have).
  if (so.strategy == Strategy::halving && o.cost_model && o.model_keep > 0 && o.model_keep < 1 &&
      candidates.size() > o.model_min_keep) {
    const std::size_t n = candidates.size();
    std::vector<double> estimate(n);
    for (std::size_t i = 0; i < n; ++i) estimate[i] = o.cost_model(candidates[i]);
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return estimate[a] < estimate[b]; });
    const std::size_t keep = std::max(
        o.model_min_keep, static_cast<std::size_t>(std::ceil(o.model_keep * static_cast<double>(n))));
    std::vector<bool> kept(n, false);
    for (std::size_t r = 0; r < keep && r < n; ++r) kept[order[r]] = true;
    std::vector<Config> chosen;
    for (std::size_t r = 0; r < n; ++r) {
      const std::size_t i = order[r];
      if (!kept[i])
        result.table.push_back(Row{candidates[i], Status::ranked_out,
                                   "cost model rank " + std::to_string(r + 1) + " of " + std::to_string(n) +
                                       " (the best " + std::to_string(keep) + " compiled)",
                                   -1, 0, -1, 0});
    }
    for (std::size_t i = 0; i < n; ++i)
      if (kept[i]) chosen.push_back(candidates[i]);
    say("cost model: compiling the best " + std::to_string(chosen.size()) + " of " + std::to_string(n));
    candidates = std::move(chosen);
  }

  say("compiling " + std::to_string(candidates.size()) + " candidates");
  CompileOptions co;
  co.threads = o.compile_threads;
  co.allow_spills = o.allow_spills;
  co.time_limit_s = o.compile_time_limit_s;
  int compiled_so_far = 0;
  const int to_compile = static_cast<int>(candidates.size());
  co.on_compiled = [&](std::size_t, const Row& row) {
    ++compiled_so_far;
    say("  compiled " + std::to_string(compiled_so_far) + "/" + std::to_string(to_compile) + " " +
        describe(row.config) + ": " +
        (row.status == Status::not_timed ? std::to_string(row.registers) + " registers"
                                         : std::string(status_name(row.status)) + " (" + row.reason + ")") +
        ", " + std::to_string(static_cast<int>(row.compile_ms)) + " ms");
    event(ProgressEvent::Phase::compiling, compiled_so_far, to_compile, row.config);
  };
  CompileReport compiled = compile_all(factory, candidates, co);
  result.compile_seconds = compiled.seconds;
  result.compiled = static_cast<int>(candidates.size());
  say("compiled in " + std::to_string(compiled.seconds) + " s (" +
      std::to_string(candidates.size() / std::max(compiled.seconds, 1e-9)) + " candidates/s)");

  // Check every compiled candidate.
  std::vector<int> valid;
  int to_check = 0, checked = 0;
  for (const JitKernel& k : compiled.kernels) to_check += k.defined();
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    Row& row = compiled.rows[i];
    if (!compiled.kernels[i].defined()) continue;
    std::string verdict = "right";
    try {
      std::string why;
      if (cb.check && !cb.check(compiled.kernels[i], why)) {
        row.status = Status::wrong;
        row.reason = why;
        verdict = "WRONG: " + why;
      } else {
        valid.push_back(static_cast<int>(i));
      }
    } catch (const std::exception& ex) {
      row.status = Status::launch_failed;
      row.reason = first_line(ex.what());
      verdict = "launch failed: " + row.reason;
    }
    ++checked;
    say("  checked " + std::to_string(checked) + "/" + std::to_string(to_check) + " " + describe(row.config) +
        ": " + verdict);
    event(ProgressEvent::Phase::checking, checked, to_check, row.config);
  }

  if (!valid.empty()) {
    auto timer = cb.time ? cb.time : event_timer(cb.run, o.warmup);
    say("timing " + std::to_string(valid.size()) + " candidates (" + strategy_name(so.strategy) + ")");
    int timed = 0, to_time = planned_timings(static_cast<int>(valid.size()), so);
    // Spin the GPU up first: after compiling and checking it may sit at idle clocks, and the
    // first candidates of a short first round would be timed slow and dropped (seen on the
    // H200: halving lost the 4096^3 winner). Untimed, discarded.
    if (!valid.empty()) {
      try {
        for (int i = 0; i < 3; ++i) (void)timer(compiled.kernels[valid[0]], std::max(10, so.repeats));
      } catch (const std::exception&) {
        // the candidate's own timing below records the failure
      }
    }
    auto measure = [&](int v, int reps) -> Measurement {
      Row& row = compiled.rows[valid[v]];
      Measurement m{std::numeric_limits<double>::infinity(), 0};
      std::string line;
      if (row.status != Status::launch_failed) {
        try {
          m = timer(compiled.kernels[valid[v]], reps);
          line = std::to_string(m.median_ms) + " ms (" + std::to_string(reps) + " repeats)";
        } catch (const std::exception& ex) {
          row.status = Status::launch_failed;
          row.reason = first_line(ex.what());
          line = "launch failed: " + row.reason;
        }
      } else {
        line = "launch failed earlier";
      }
      ++timed;
      to_time = std::max(to_time, timed);  // near-ties re-timed past the plan
      say("  timed " + std::to_string(timed) + "/" + std::to_string(to_time) + " " + describe(row.config) +
          ": " + line);
      event(ProgressEvent::Phase::timing, timed, to_time, row.config);
      return m;
    };
    SearchResult s = search(static_cast<int>(valid.size()), measure, so);
    for (std::size_t v = 0; v < valid.size(); ++v) {
      Row& row = compiled.rows[valid[v]];
      if (row.status == Status::launch_failed) continue;
      if (s.repeats[v] > 0) {
        row.status = Status::ok;
        row.ms = s.measured[v].median_ms;
        row.repeats = s.repeats[v];
      }
    }
    result.timed_full = s.timed_full;
    if (s.best >= 0 && compiled.rows[valid[s.best]].status == Status::ok) {
      result.found = true;
      result.config = compiled.rows[valid[s.best]].config;
      result.kernel = compiled.kernels[valid[s.best]];
      result.ms = compiled.rows[valid[s.best]].ms;
    }
  }
  for (Row& r : compiled.rows) result.table.push_back(std::move(r));

  if (result.found) {
    say("best: " + describe(result.config) + ", " + std::to_string(result.ms) + " ms");
    if (!o.cache_key.empty() && dir)
      write_tuning_entry(
          *dir, o.cache_key,
          StoredResult{result.config, result.ms, strategy_name(o.search.strategy), space.name()});
  } else {
    say("no candidate compiled, passed its check and ran");
  }
  return result;
}

// ---- GEMM -------------------------------------------------------------------------------------

int gemm_split_k(const Config& c) {
  return get(c, "split_k", 1);
}

int gemm_split_k(const JitKernel& kernel) {
  const std::vector<ir::Buffer>& params = kernel.program().params;
  if (params.size() != 3 || params[2].ndim() != 3) return 1;
  return static_cast<int>(ir::as_const_int(params[2]->shape[0]).value_or(1));
}

JitKernel gemm_split_k_reduce(int M, int N, int splits, DType dtype, JitOptions options) {
  options.out_idx.clear();
  return jit(
      kernels::matmul_split_k_reduce_program(M, N, splits, dtype, kernels::default_split_k_reduce(M, N)),
      options);
}

kernels::MatmulConfig gemm_config(const Config& c, DType dtype) {
  kernels::MatmulConfig m;
  m.dtype = dtype;
  m.block_M = get(c, "block_M", m.block_M);
  m.block_N = get(c, "block_N", m.block_N);
  m.block_K = get(c, "block_K", m.block_K);
  m.num_stages = get(c, "num_stages", m.num_stages);
  m.threads = get(c, "threads", m.threads);
  const int panel = get(c, "panel", 0);
  m.use_swizzle = panel > 0;
  if (panel > 0) m.panel_size = panel;
  m.cluster_x = get(c, "cluster_x", 1);
  m.cluster_y = get(c, "cluster_y", 1);
  return m;
}

Space gemm_space(const std::string& arch, DType dtype) {
  Space s("gemm " + arch + " " + std::string(dtype_name(dtype)));
  s.knob("block_M", {64, 128, 256})
      .knob("block_N", {64, 128, 256})
      .knob("block_K", {32, 64})
      .knob("num_stages", {2, 3, 4, 5})
      .knob("threads", {128, 256})
      // Rasterization panels: 4 ran 6-12 % ahead of 8 on an aligned LM head (8192x50256x4096, 197
      // column tiles of 256) on an H100 and 1 % behind at 128 column tiles (session 32).
      .knob("panel", {0, 4, 8, 16});
  if (arch.rfind("sm_90", 0) == 0) {
    // The warp-specialized wgmma path's tiles default_matmul_config picks (6 and 8 stages are
    // off-grid): {block_M, block_N, num_stages, threads}, block_K 64, panels of 16.
    for (const auto& [bm, bn, stages, threads] :
         {std::array{128, 64, 8, 256}, std::array{128, 128, 6, 128}, std::array{64, 128, 6, 128}})
      s.point({{"block_M", bm},
               {"block_N", bn},
               {"block_K", 64},
               {"num_stages", stages},
               {"threads", threads},
               {"panel", 16}});
    // The large shapes' 128x256 tiles in 2-CTA clusters that load the A (cluster_x) or B
    // (cluster_y) tile they share once, by TMA multicast (use_cluster), in panels of 4 and 8: on
    // an aligned LM head whose rows start off 128-byte lines (8192x50256x4096, bf16) the B-sharing
    // clusters ran 0.95x cuBLAS against the default's 0.76-0.89x on an H100, and lost 1-3 % on
    // the whole-line 8192x32000x4096 (session 33).
    for (int panel : {4, 8})
      for (const auto& [cx, cy] : {std::array{2, 1}, std::array{1, 2}})
        s.point({{"block_M", 128},
                 {"block_N", 256},
                 {"block_K", 64},
                 {"num_stages", 3},
                 {"threads", 256},
                 {"panel", panel},
                 {"cluster_x", cx},
                 {"cluster_y", cy}});
  }
  s.constraint("at most 256 f32 accumulators per thread", [](const Config& c) {
    return 1LL * get(c, "block_M") * get(c, "block_N") <= 256LL * get(c, "threads");
  });
  s.smem_bytes([dtype](const Config& c) { return kernels::matmul_smem_bytes(gemm_config(c, dtype)); });
  s.threads([](const Config& c) { return get(c, "threads"); });
  return s;
}

Space gemm_space(const std::string& arch, DType dtype, long long M, long long N, long long K) {
  Space s = gemm_space(arch, dtype);
  const std::vector<int> shares = kernels::split_k_candidates(M, N, K, dtype, arch);
  if (!shares.empty()) {
    // Skinny 16-bit shapes on sm_90 (where split-K is a candidate): one-wave unsplit tiles too
    // (off the grid: 16 and 32 rows and columns, 8 stages) -- 16x32x128 where M <= 16 (not the
    // dispatcher's: on the H200 it lost to split-K at 1x4096x4096, session 17), and
    // default_matmul_config's 64x64x64 where M <= 64 -- timed beside the splits. Elsewhere the
    // space (and its cache key) is the generic one.
    if (M <= 16)
      s.point({{"block_M", 16}, {"block_N", 32}, {"block_K", 128}, {"num_stages", 8}, {"threads", 128}, {"panel", 0}});
    s.point({{"block_M", 64}, {"block_N", 64}, {"block_K", 64}, {"num_stages", 8}, {"threads", 128}, {"panel", 0}});
  }
  const bool sixteen_bit = dtype == DType::f16 || dtype == DType::bf16;
  if (sixteen_bit && arch.rfind("sm_90", 0) == 0 && M >= 1 && M <= 64 && (N % 8 != 0 || K % 8 != 0)) {
    // Skinny with a row off 16 bytes, tuned on the exact shape (kernels::Matmul runs it direct):
    // the small tiles whose loops keep the generic schedule and load through realigned rings --
    // default_matmul_config's two and 16x64x64 s4, which an H100 ran between them in session 36
    // (1.35x cuBLAS at 1x50257x4096, 1.85x at 16x50257x4096).
    // (16x32x128 s8 is already a point where M <= 16 and split-K applies.)
    for (const auto& [bm, bn, bk, stages] :
         {std::array{32, 64, 64, 4}, std::array{16, 32, 128, 8}, std::array{16, 64, 64, 4}}) {
      const Config c{{"block_M", bm},        {"block_N", bn},  {"block_K", bk},
                     {"num_stages", stages}, {"threads", 128}, {"panel", 0}};
      const std::vector<Config> points = s.points();
      if (std::find(points.begin(), points.end(), c) == points.end()) s.point(c);
    }
  }
  const kernels::MatmulConfig t = kernels::split_k_config(M, dtype);
  for (int share_count : shares)
    s.point({{"block_M", t.block_M},
             {"block_N", t.block_N},
             {"block_K", t.block_K},
             {"num_stages", t.num_stages},
             {"threads", t.threads},
             {"panel", t.use_swizzle ? t.panel_size : 0},
             {"split_k", share_count}});
  return s;
}

Factory gemm_factory(int M, int N, int K, DType dtype, JitOptions options) {
  return [=](const Config& c) {
    const int splits = gemm_split_k(c);
    if (splits == 1) return kernels::make_matmul(M, N, K, gemm_config(c, dtype), options);
    (void)gemm_split_k_reduce(M, N, splits, dtype, options);
    JitOptions o = options;
    o.out_idx.clear();
    return jit(kernels::matmul_split_k_program(M, N, K, splits, gemm_config(c, dtype)), o);
  };
}

}  // namespace tessel::autotune
