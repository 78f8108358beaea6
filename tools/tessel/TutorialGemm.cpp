// Tutorial sections 2 and 3: the tensor-core GEMM checked against cuBLAS and timed beside it,
// then the knob sweep over the tutorial's six candidate schedules. Without a GPU both sections
// compile every kernel they would run and report what the compiler produced instead.
#include <cmath>
#include <iostream>
#include <optional>

#include "tessel/kernels/gemm/Matmul.hpp"
#include "tools/tessel/GemmConfigs.hpp"
#include "tools/tessel/Output.hpp"
#include "tools/tessel/System.hpp"
#include "tools/tessel/Tutorial.hpp"

namespace tessel::cli {

namespace {

constexpr int kSize = 2048;  // the tutorial's M = N = K
constexpr std::uint64_t kSection2Seed = 20, kSection3Seed = 30;

bool passes(double rel_error) {
  return !std::isnan(rel_error) && rel_error <= kGemmTolerance;
}

std::string kb(long long bytes) {
  return std::to_string(bytes / 1024) + "KB";
}

void print_no_gpu_note(const SystemInfo& s) {
  std::cout
      << "  timing and the check against cuBLAS need a GPU; there is none here (" << s.no_gpu_reason << ")\n"
      << "  `tessel tutorial --cpu` runs these programs on the CPU reference interpreter and checks them\n";
}

nlohmann::json error_json(const std::exception& e) {
  return {{"kind", error_kind(e)}, {"message", e.what()}};
}

nlohmann::json build_json(const JitKernel& k) {
  const Resources& r = k.resources();
  return {{"registers", r.registers},
          {"spill_store_bytes", r.spill_store_bytes},
          {"spill_load_bytes", r.spill_load_bytes},
          {"static_smem_bytes", r.static_smem_bytes},
          {"dynamic_smem_bytes", k.info().dynamic_smem_bytes},
          {"compile_ms", r.compile_ms},
          {"cache_hit", r.cache_hit},
          {"arch", k.info().arch},
          {"instructions", k.info().instructions},
          {"path", k.info().path}};
}

std::string tile_text(const kernels::MatmulConfig& c) {
  return std::to_string(c.block_M) + "x" + std::to_string(c.block_N) + "x" + std::to_string(c.block_K);
}

// The first columns of a section-3 row: tile, stages, threads, swizzle, smem.
std::string row_prefix(const kernels::MatmulConfig& c) {
  return "  " + right(tile_text(c), 12) + right(std::to_string(c.num_stages), 5) +
         right(std::to_string(c.threads), 5) + right(c.use_swizzle ? "yes" : "no", 5) +
         right(kb(kernels::matmul_smem_bytes(c)), 8);
}

}  // namespace

std::vector<kernels::MatmulConfig> tutorial_candidates() {
  struct Candidate {
    int block_M, block_N, block_K, num_stages, threads;
    bool use_swizzle;
  };
  constexpr Candidate kCandidates[] = {
      {64, 64, 32, 2, 128, false},   {128, 128, 32, 2, 128, false}, {128, 128, 32, 2, 128, true},
      {128, 128, 32, 3, 128, false}, {128, 128, 64, 2, 256, false}, {128, 256, 32, 2, 256, false},
  };
  std::vector<kernels::MatmulConfig> out;
  for (const Candidate& c : kCandidates) {
    kernels::MatmulConfig m;
    m.block_M = c.block_M, m.block_N = c.block_N, m.block_K = c.block_K;
    m.num_stages = c.num_stages, m.threads = c.threads, m.use_swizzle = c.use_swizzle;
    m.dtype = DType::f16;
    out.push_back(m);
  }
  return out;
}

void section_gemm(TutorialContext& ctx) {
  print_banner("2. Tensor-core GEMM (2048^3, f16)");
  const SystemInfo& s = system_info();
  kernels::MatmulConfig c;  // 128x128x32, 128 threads, no swizzle
  c.num_stages = default_num_stages(s.smem_cap());
  c = fit_stages(c, s.smem_cap());
  std::cout << "  config:  " << tile_text(c) << ", num_stages=" << c.num_stages << ", threads=" << c.threads
            << ", smem=" << kernels::matmul_smem_bytes(c) / 1024 << " KB (budget " << s.smem_cap() / 1024
            << " KB)\n";
  nlohmann::json j = {{"shape", {kSize, kSize, kSize}}, {"config", config_json(c)}};
  try {
    JitOptions jo;
    if (!s.gpu) jo.arch = s.arch();
    const JitKernel k = kernels::make_matmul(kSize, kSize, kSize, c, jo);
    std::cout << "  kernel:  " << describe_build(k) << "\n";
    j["build"] = build_json(k);
    if (!s.gpu) {
      std::cout << "  emitted: " << describe_instructions(k) << "\n";
      print_no_gpu_note(s);
      j["timed"] = false;
      ctx.sections["2"] = j;
      return;
    }
    GemmBench& bench = ctx.gpu_bench();
    GemmInputs in = make_gemm_inputs({kSize, kSize, kSize}, DType::f16, kSection2Seed);
    bench.compute_reference(in);
    const double err = bench.check(k, in);
    const bool ok = passes(err);
    std::cout << "  check:   relative Frobenius error vs cuBLAS " << scientific(err) << " (bar "
              << scientific(kGemmTolerance) << "): " << (ok ? "OK" : "NUMERICALLY WRONG") << "\n";
    const double err_f64 = sampled_f64_error(in, in.C), ref_err_f64 = sampled_f64_error(in, in.C_ref);
    std::cout << "  float64 spot check (" << kF64Samples << " entries): Tessel " << scientific(err_f64)
              << ", cuBLAS " << scientific(ref_err_f64) << (passes(err_f64) ? "" : "   <- NUMERICALLY WRONG")
              << "\n";
    if (!ok || !passes(err_f64)) ++ctx.problems;
    j.update({{"rel_error_f64_sampled", err_f64}, {"cublas_rel_error_f64_sampled", ref_err_f64}});
    const auto [ours, theirs] = bench.time_interleaved(
        [&] { bench.launch_tessel(k, in); }, [&] { bench.launch_cublas(in); }, ctx.warmup, ctx.repeats);
    const double tf = gemm_tflops(kSize, kSize, kSize, ours.median_ms);
    const double tf_ref = gemm_tflops(kSize, kSize, kSize, theirs.median_ms);
    std::cout << "  Tessel:  " << right(fixed(ours.median_ms, 3), 8) << " ms -> " << right(fixed(tf, 1), 7)
              << " TFLOP/s\n"
              << "  cuBLAS:  " << right(fixed(theirs.median_ms, 3), 8) << " ms -> "
              << right(fixed(tf_ref, 1), 7) << " TFLOP/s\n"
              << "  ratio:   " << fixed(100.0 * theirs.median_ms / ours.median_ms, 1)
              << " % of cuBLAS, from a tile program of about twenty lines (medians of " << ctx.repeats
              << " runs, L2 flushed)\n"
              << "  emitted: " << describe_instructions(k) << "\n";
    j.update({{"timed", true},
              {"rel_error", err},
              {"ok", ok},
              {"tessel_ms", ours.median_ms},
              {"cublas_ms", theirs.median_ms},
              {"tessel_tflops", tf},
              {"cublas_tflops", tf_ref},
              {"ratio", theirs.median_ms / ours.median_ms}});
  } catch (const std::exception& e) {
    std::cout << "  failed:  " << error_kind(e) << ": " << e.what() << "\n";
    j["error"] = error_json(e);
    ++ctx.problems;
  }
  ctx.sections["2"] = j;
}

void section_knobs(TutorialContext& ctx) {
  print_banner("3. Knobs: the same program under six schedules (2048^3, f16)");
  const SystemInfo& s = system_info();
  nlohmann::json rows = nlohmann::json::array();
  const std::string header =
      "  " + right("tile", 12) + right("stg", 5) + right("thr", 5) + right("swz", 5) + right("smem", 8);
  if (s.gpu)
    std::cout << header << right("ms", 10) << right("TFLOP/s", 10) << "\n";
  else
    std::cout << header << right("regs", 6) << right("spill", 7) << right("compile", 10) << "   emitted\n";

  std::optional<GemmInputs> inputs;
  GemmBench* bench = nullptr;
  if (s.gpu) {
    try {
      bench = &ctx.gpu_bench();
      inputs = make_gemm_inputs({kSize, kSize, kSize}, DType::f16, kSection3Seed);
      bench->compute_reference(*inputs);
    } catch (const std::exception& e) {
      std::cout << "  cannot set up the sweep: " << error_kind(e) << ": " << e.what() << "\n";
      ctx.sections["3"] = {{"error", error_json(e)}};
      ++ctx.problems;
      return;
    }
  }

  struct Best {
    double ms;
    kernels::MatmulConfig config;
  };
  std::optional<Best> best;
  const std::vector<kernels::MatmulConfig> candidates = tutorial_candidates();
  Progress progress(static_cast<int>(candidates.size()), false);
  for (const kernels::MatmulConfig& c : candidates) {
    const long long need = kernels::matmul_smem_bytes(c);
    nlohmann::json row = {{"config", config_json(c)}, {"smem_bytes", need}};
    progress.step(format_matmul_config(c));
    if (need > s.smem_cap()) {
      progress.clear();
      std::cout << row_prefix(c) << "   SKIPPED (over smem budget)\n";
      row["status"] = "skipped";
      rows.push_back(row);
      continue;
    }
    try {
      JitOptions jo;
      if (!s.gpu) jo.arch = s.arch();
      const JitKernel k = kernels::make_matmul(kSize, kSize, kSize, c, jo);
      row["build"] = build_json(k);
      if (!s.gpu) {
        const Resources& r = k.resources();
        progress.clear();
        std::cout << row_prefix(c) << right(std::to_string(r.registers), 6)
                  << right(std::to_string(r.spill_store_bytes + r.spill_load_bytes) + "B", 7)
                  << right(r.cache_hit ? std::string("cached") : fixed(r.compile_ms, 0) + "ms", 10) << "   "
                  << describe_instructions(k) << "\n";
        row["status"] = "compiled";
        rows.push_back(row);
        continue;
      }
      const double err = bench->check(k, *inputs);
      const bool ok = passes(err);
      const Timing t = bench->time([&] { bench->launch_tessel(k, *inputs); }, ctx.warmup, ctx.repeats);
      progress.clear();
      std::cout << row_prefix(c) << right(fixed(t.median_ms, 3), 10)
                << right(fixed(gemm_tflops(kSize, kSize, kSize, t.median_ms), 1), 10)
                << (ok ? "" : "   <- NUMERICALLY WRONG (rel. error " + scientific(err) + ")") << "\n";
      row.update({{"status", ok ? "ok" : "wrong"},
                  {"rel_error", err},
                  {"ms", t.median_ms},
                  {"tflops", gemm_tflops(kSize, kSize, kSize, t.median_ms)}});
      if (ok && (!best || t.median_ms < best->ms)) best = Best{t.median_ms, c};
      if (!ok) ++ctx.problems;
    } catch (const std::exception& e) {
      progress.clear();
      std::cout << row_prefix(c) << "   failed: " << error_kind(e) << " (" << error_summary(e, 100) << ")\n";
      row["status"] = "failed";
      row["error"] = error_json(e);
      ++ctx.problems;
    }
    rows.push_back(row);
  }
  progress.clear();

  nlohmann::json j = {{"shape", {kSize, kSize, kSize}}, {"rows", rows}, {"timed", s.gpu}};
  if (!s.gpu) {
    print_no_gpu_note(s);
  } else if (best) {
    const kernels::MatmulConfig& w = best->config;
    std::cout << "\n  winner: " << tile_text(w) << ", stages=" << w.num_stages << ", threads=" << w.threads
              << ", swizzle=" << (w.use_swizzle ? "yes" : "no") << " (" << fixed(best->ms, 3) << " ms, "
              << fixed(gemm_tflops(kSize, kSize, kSize, best->ms), 1) << " TFLOP/s)\n"
              << "  Which schedule wins depends on the GPU and on the shape: searching for it is the job of\n"
              << "  section 7 (autotuning).\n";
    j["winner"] = config_json(w);
    j["winner_ms"] = best->ms;
  } else {
    std::cout << "\n  no candidate ran correctly, so there is no winner\n";
  }
  ctx.sections["3"] = j;
}

}  // namespace tessel::cli
