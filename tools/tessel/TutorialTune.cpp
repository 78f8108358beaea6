// Tutorial section 7: autotuning. Section 3 swept six schedules by hand; here the autotuner
// searches a small GEMM space at 2048^3 f16: pruning by the GPU's shared memory, compiling in
// parallel, checking every candidate against cuBLAS, timing by successive halving. Then the
// winner and the built-in default are timed side by side for the speed-up. Without a GPU the
// space, its pruning and the compiled candidates; with --cpu the space and why timing needs a GPU.
#include <cmath>
#include <iostream>

#include "tessel/autotune/Autotune.hpp"
#include "tools/tessel/GemmBench.hpp"
#include "tools/tessel/GemmConfigs.hpp"
#include "tools/tessel/Output.hpp"
#include "tools/tessel/System.hpp"
#include "tools/tessel/TuneOutput.hpp"
#include "tools/tessel/Tutorial.hpp"

namespace tessel::cli {

namespace {

namespace at = tessel::autotune;

constexpr int kSize = 2048;
constexpr std::uint64_t kSection7Seed = 70;

// 16 grid points around the Hopper tiles (two of them over the H200's shared memory), plus the
// built-in default for this GPU (on the H200 already one of them).
at::Space tutorial_space(const kernels::MatmulConfig& default_config) {
  at::Space s("tutorial section 7");
  s.knob("block_M", {128})
      .knob("block_N", {128, 256})
      .knob("block_K", {32, 64})
      .knob("num_stages", {4, 5})
      .knob("threads", {128, 256})
      .knob("panel", {8});
  s.point({{"block_M", default_config.block_M},
           {"block_N", default_config.block_N},
           {"block_K", default_config.block_K},
           {"num_stages", default_config.num_stages},
           {"threads", default_config.threads},
           {"panel", default_config.use_swizzle ? default_config.panel_size : 0}});
  s.constraint("at most 256 f32 accumulators per thread", [](const at::Config& c) {
    return 1LL * at::get(c, "block_M") * at::get(c, "block_N") <= 256LL * at::get(c, "threads");
  });
  s.smem_bytes(
      [](const at::Config& c) { return kernels::matmul_smem_bytes(at::gemm_config(c, DType::f16)); });
  s.threads([](const at::Config& c) { return at::get(c, "threads"); });
  return s;
}

void show_program(const at::Space::Enumeration& e, const at::HardwareLimits& limits) {
  std::cout
      << "  the space (tools/tessel/TutorialTune.cpp), knobs of section 3's make_matmul:\n"
         "    T::autotune::Space space(\"tutorial section 7\");\n"
         "    space.knob(\"block_M\", {128}).knob(\"block_N\", {128, 256}).knob(\"block_K\", {32, 64})\n"
         "         .knob(\"num_stages\", {4, 5}).knob(\"threads\", {128, 256}).knob(\"panel\", {8})\n"
         "         .point(default_config)   // the built-in table's choice for this GPU\n"
         "         .constraint(\"at most 256 f32 accumulators per thread\", ...)\n"
         "         .smem_bytes(matmul_smem_bytes);  // pruned before compiling\n"
         "    auto best = T::autotune::autotune(gemm_factory(2048, 2048, 2048, f16), space,\n"
         "                                      {.run = ..., .check = against cuBLAS}, {});\n";
  std::cout << "  " << e.total << " candidates; " << e.pruned.size() << " pruned before compiling ("
            << limits.smem_per_block << " bytes of shared memory per block):\n";
  for (const auto& p : e.pruned)
    std::cout << "    " << left(format_matmul_config(at::gemm_config(p.config, DType::f16)), 24) << p.reason
              << "\n";
  std::cout << "  " << e.kept.size() << " left\n";
}

nlohmann::json space_json(const at::Space::Enumeration& e) {
  return {{"candidates", e.total}, {"pruned", e.pruned.size()}, {"kept", e.kept.size()}};
}

std::string text(const at::Config& c) {
  return format_matmul_config(at::gemm_config(c, DType::f16));
}

std::string tflops(double ms) {
  return fixed(gemm_tflops(kSize, kSize, kSize, ms), 1) + " TFLOP/s";
}

// No GPU: compile what the GPU run would time, and show what the compiler made of each.
void compile_candidates(TutorialContext& ctx, const at::Space::Enumeration& e, const SystemInfo& s,
                        nlohmann::json& j) {
  JitOptions jo;
  jo.arch = s.arch();
  std::cout << "  no GPU (" << s.no_gpu_reason << "):\n"
            << "  compiling the " << e.kept.size() << " candidates for " << s.arch()
            << " in parallel, as `tessel tune gemm --compile-only` does:\n";
  std::cout.flush();
  TuneProgress progress(false);
  at::CompileOptions co;
  co.time_limit_s = at::Options{}.compile_time_limit_s;
  progress.attach(co, static_cast<int>(e.kept.size()));
  const at::CompileReport r =
      at::compile_all(at::gemm_factory(kSize, kSize, kSize, DType::f16, jo), e.kept, co);
  progress.clear();
  std::cout << "  " << left("config", 24) << right("regs", 6) << right("compile", 10) << "   path\n";
  int failed = 0, spills = 0, cached = 0;
  for (std::size_t i = 0; i < e.kept.size(); ++i) {
    const at::Row& row = r.rows[i];
    std::cout << "  " << left(text(row.config), 24);
    if (row.status == at::Status::spills) {
      // Not an error: the tuner drops candidates that spill, after the compiler says so.
      std::cout << right(std::to_string(row.registers), 6) << right(fixed(row.compile_ms, 0) + "ms", 10)
                << "   dropped: " << row.reason << "\n";
      ++spills;
      continue;
    }
    if (!r.kernels[i].defined()) {
      std::cout << "   " << at::status_name(row.status) << ": " << row.reason << "\n";
      ++failed;
      continue;
    }
    const JitKernel& k = r.kernels[i];
    cached += k.resources().cache_hit;
    std::cout << right(std::to_string(row.registers), 6)
              << right(k.resources().cache_hit ? std::string("cached") : fixed(row.compile_ms, 0) + "ms", 10)
              << "   " << k.info().path << "\n";
  }
  std::cout << "  compiled " << e.kept.size() << " in " << fixed(r.seconds, 2) << " s ("
            << fixed(e.kept.size() / std::max(r.seconds, 1e-9), 1) << " candidates/s"
            << (cached ? ", " + std::to_string(cached) + " from the kernel cache" : "") << "): " << spills
            << " dropped for spilling, " << failed << " failed\n"
            << "  on a GPU this section checks each against cuBLAS, times them by successive halving and\n"
            << "  compares the winner with the default\n";
  ctx.problems += failed;
  j.update({{"backend", "compile-only"},
            {"compiled", e.kept.size()},
            {"failed", failed},
            {"spills", spills},
            {"compile_seconds", r.seconds},
            {"table", tune_table_json(r.rows)}});
}

void tune_on_gpu(TutorialContext& ctx, const at::Space& space, const at::HardwareLimits& limits,
                 const kernels::MatmulConfig& default_config, nlohmann::json& j) {
  GemmBench& bench = ctx.gpu_bench();
  GemmInputs in = make_gemm_inputs({kSize, kSize, kSize}, DType::f16, kSection7Seed);
  bench.compute_reference(in);
  at::Callbacks cb;
  cb.run = [&](const JitKernel& k) { bench.launch_tessel(k, in); };
  cb.check = [&](const JitKernel& k, std::string& why) {
    const double err = bench.check(k, in);
    if (!std::isnan(err) && err <= kGemmTolerance) return true;
    why = "NUMERICALLY WRONG: relative error " + scientific(err) + " against cuBLAS";
    return false;
  };
  cb.time = [&](const JitKernel& k, int repeats) {
    return at::summarize(bench.time([&] { bench.launch_tessel(k, in); }, ctx.warmup, repeats).ms);
  };
  at::Options o;
  o.search.repeats = ctx.repeats;  // successive halving, the default strategy
  o.limits = limits;
  TuneProgress progress(false);
  progress.attach(o);
  const at::Result r = at::autotune(at::gemm_factory(kSize, kSize, kSize, DType::f16), space, cb, o);
  progress.clear();

  int wrong = 0, failed = 0, timed_full = 0, timed = 0;
  for (const at::Row& row : r.table) {
    wrong += row.status == at::Status::wrong;
    failed += row.status == at::Status::compile_failed || row.status == at::Status::launch_failed;
    timed += row.repeats > 0;
    timed_full += row.repeats >= ctx.repeats;
  }
  std::cout << "  compiled " << r.compiled << " in " << fixed(r.compile_seconds, 2)
            << " s, each checked against cuBLAS; successive halving timed " << timed << " of them, the "
            << timed_full << " fastest at " << ctx.repeats << " repeats:\n";
  print_tune_table(r.table, text, tflops);
  ctx.problems += wrong + failed;  // a wrong or failing candidate is a compiler bug
  j.update({{"backend", "gpu"},
            {"compiled", r.compiled},
            {"compile_seconds", r.compile_seconds},
            {"wrong", wrong},
            {"failed", failed},
            {"timed_full", r.timed_full},
            {"table", tune_table_json(r.table)}});
  if (!r.found) {
    std::cout << "\n  no candidate compiled, passed its check and ran: there is no winner\n";
    ++ctx.problems;
    return;
  }

  // The winner against the built-in default, side by side on the same inputs.
  const kernels::MatmulConfig winner = at::gemm_config(r.config, DType::f16);
  const bool same = text(r.config) == format_matmul_config(default_config);
  const JitKernel default_kernel =
      same ? r.kernel : kernels::make_matmul(kSize, kSize, kSize, default_config);
  const auto [w, d] =
      bench.time_interleaved([&] { bench.launch_tessel(r.kernel, in); },
                             [&] { bench.launch_tessel(default_kernel, in); }, ctx.warmup, ctx.repeats);
  std::cout << "\n  winner:  " << left(format_matmul_config(winner), 24) << fixed(w.median_ms, 3) << " ms  "
            << tflops(w.median_ms) << "\n"
            << "  default: " << left(format_matmul_config(default_config), 24) << fixed(d.median_ms, 3)
            << " ms  " << tflops(d.median_ms) << "   (the built-in table, kernels::default_matmul_config)\n"
            << "  speed-up over the default: " << fixed(d.median_ms / w.median_ms, 3) << "x (medians of "
            << ctx.repeats << " interleaved runs of each, after the tune)\n";
  if (same) std::cout << "  the built-in default is already the best schedule in this space on this GPU\n";
  std::cout << "  `tessel tune gemm` searches the full space ("
            << at::gemm_space(system_info().arch()).points().size()
            << " points) and stores the winner, which make_matmul(M, N, K, dtype) then uses\n";
  j.update({{"winner", config_json(winner)},
            {"winner_ms", w.median_ms},
            {"default", config_json(default_config)},
            {"default_ms", d.median_ms},
            {"speedup_over_default", d.median_ms / w.median_ms},
            {"winner_is_default", same}});
}

}  // namespace

void section_autotune(TutorialContext& ctx, bool cpu) {
  print_banner("7. Autotuning: the search of section 3, done by the machine (2048^3, f16)");
  const SystemInfo& s = system_info();
  const at::HardwareLimits limits{s.smem_cap(), s.gpu ? s.device.max_threads_per_block : 1024};
  const kernels::MatmulConfig default_config =
      default_gemm_config({kSize, kSize, kSize}, DType::f16, s.smem_cap());
  const at::Space space = tutorial_space(default_config);
  const at::Space::Enumeration e = space.enumerate(limits);
  show_program(e, limits);
  nlohmann::json j = {{"implemented", true}, {"shape", {kSize, kSize, kSize}}, {"space", space_json(e)}};
  try {
    if (cpu) {
      std::cout
          << "  --cpu: the autotuner times candidates on the GPU, and the interpreter's times say nothing\n"
             "  about a GPU, so this section stops here. Without --cpu it tunes on a GPU, or on a machine\n"
             "  without one compiles the candidates and shows what each became.\n";
      j["backend"] = "interpreter (not run)";
    } else if (!s.gpu) {
      compile_candidates(ctx, e, s, j);
    } else {
      tune_on_gpu(ctx, space, limits, default_config, j);
    }
  } catch (const std::exception& ex) {
    std::cout << "  failed: " << error_kind(ex) << " (" << error_summary(ex, 160) << ")\n";
    j["error"] = {{"kind", error_kind(ex)}, {"message", ex.what()}};
    ++ctx.problems;
  }
  ctx.sections["7"] = j;
}

}  // namespace tessel::cli
