// tessel tune gemm: the autotuner over gemm_space on one shape, every candidate checked against
// cuBLAS, timed with GemmBench (CUDA events, L2 flushed, medians); the winner kept in the tuning
// cache. Without a GPU: the space's size and pruning, and (--compile-only) the compile throughput.
#include <chrono>
#include <cmath>
#include <thread>
#include <iostream>
#include <memory>

#include "tessel/autotune/Autotune.hpp"
#include "tools/tessel/Commands.hpp"
#include "tools/tessel/GemmBench.hpp"
#include "tools/tessel/GemmConfigs.hpp"
#include "tools/tessel/Output.hpp"
#include "tools/tessel/System.hpp"

namespace tessel::cli {

namespace {

namespace at = tessel::autotune;

struct TuneGemmOptions {
  int M = 4096, N = 4096, K = 4096;
  std::string dtype = "f16";
  std::string strategy = "halving";
  int budget = 0;
  int repeats = 20;
  int warmup = 3;
  bool compile_only = false;
  bool no_cache = false;
  std::string json_file;
};

nlohmann::json table_json(const std::vector<at::Row>& rows) {
  nlohmann::json a = nlohmann::json::array();
  for (const at::Row& r : rows)
    a.push_back({{"config", r.config},
                 {"status", at::status_name(r.status)},
                 {"reason", r.reason},
                 {"ms", r.ms < 0 ? nlohmann::json(nullptr) : nlohmann::json(r.ms)},
                 {"repeats", r.repeats},
                 {"registers", r.registers},
                 {"compile_ms", r.compile_ms}});
  return a;
}

int run_tune_gemm(const TuneGemmOptions& o) {
  const auto dtype = parse_dtype(o.dtype);
  const auto strategy = at::parse_strategy(o.strategy);
  if (!dtype || (*dtype != DType::f16 && *dtype != DType::bf16) || !strategy) {
    std::cerr << "tessel tune gemm: --dtype takes f16 or bf16, --strategy exhaustive, random or halving\n";
    return kExitUsage;
  }
  const SystemInfo& s = system_info();
  const std::string arch = s.arch();
  const at::Space space = at::gemm_space(arch, *dtype);
  const at::HardwareLimits limits{s.smem_cap(), s.gpu ? s.device.max_threads_per_block : 1024};
  const auto e = space.enumerate(limits);
  std::cout << "tessel tune gemm " << o.M << "x" << o.N << "x" << o.K << " " << o.dtype << " on " << arch << ": "
            << e.total << " candidates, " << e.pruned.size() << " pruned (constraints, " << limits.smem_per_block
            << " bytes of shared memory, " << limits.threads_per_block << " threads), " << e.kept.size()
            << " left\n";
  JitOptions jo;
  jo.arch = arch;
  const at::Factory factory = at::gemm_factory(o.M, o.N, o.K, *dtype, jo);

  if (o.compile_only || !s.gpu) {
    if (!s.gpu) std::cout << "no GPU: " << s.no_gpu_reason << "\n";
    if (o.compile_only) {
      const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
      std::cout << "compiling all " << e.kept.size() << " candidates on " << threads << " threads ...\n";
      std::cout.flush();
      const auto r = at::compile_all(factory, e.kept);
      int failed = 0, spills = 0;
      for (const at::Row& row : r.rows) {
        failed += row.status == at::Status::compile_failed;
        spills += row.status == at::Status::spills;
      }
      std::cout << "compiled " << e.kept.size() << " in " << fixed(r.seconds, 2) << " s: "
                << fixed(e.kept.size() / std::max(r.seconds, 1e-9), 2) << " candidates/s; " << failed
                << " failed, " << spills << " spill\n";
      if (!o.json_file.empty()) {
        nlohmann::json j = provenance_json();
        j["tool"] = "tessel tune gemm --compile-only";
        j.update({{"M", o.M}, {"N", o.N}, {"K", o.K}, {"dtype", o.dtype}, {"arch", arch}, {"threads", threads},
                  {"candidates", e.kept.size()}, {"pruned", e.pruned.size()}, {"seconds", r.seconds},
                  {"candidates_per_second", e.kept.size() / std::max(r.seconds, 1e-9)},
                  {"table", table_json(r.rows)}});
        write_json_file(o.json_file, j);
        std::cout << "wrote " << o.json_file << "\n";
      }
      if (!s.gpu) return kExitNoGpu;
      return failed ? kExitCheckFailed : kExitOk;
    }
    std::cerr << "tessel tune gemm needs a GPU to time candidates (--compile-only compiles the space without one)\n";
    return kExitNoGpu;
  }

  GemmBench bench;
  GemmInputs in = make_gemm_inputs(GemmShape{o.M, o.N, o.K}, *dtype, 1);
  bench.compute_reference(in);
  at::Callbacks cb;
  cb.run = [&](const JitKernel& k) { bench.launch_tessel(k, in); };
  cb.check = [&](const JitKernel& k, std::string& why) {
    const double err = bench.check(k, in);
    if (!std::isnan(err) && err <= kGemmTolerance) return true;
    why = "relative error " + scientific(err) + " against cuBLAS (tolerance " + scientific(kGemmTolerance) + ")";
    return false;
  };
  const int warmup = o.warmup;
  cb.time = [&, warmup](const JitKernel& k, int repeats) {
    const Timing t = bench.time([&] { bench.launch_tessel(k, in); }, warmup, repeats);
    return at::summarize(t.ms);
  };
  at::Options opts;
  opts.search.strategy = *strategy;
  opts.search.budget = o.budget;
  opts.search.repeats = o.repeats;
  opts.limits = limits;
  opts.warmup = o.warmup;
  if (!o.no_cache)
    opts.cache_key = at::tuning_key(
        at::key_parts_for_current_device("matmul", {o.M, o.N, o.K}, {o.dtype}, space));
  opts.progress = [](const std::string& line) { std::cerr << line << "\n"; };
  const auto t0 = std::chrono::steady_clock::now();
  const at::Result r = at::autotune(factory, space, cb, opts);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int wrong = 0;
  for (const at::Row& row : r.table) wrong += row.status == at::Status::wrong;
  if (!r.found) {
    std::cout << "no candidate passed\n";
    return kExitCheckFailed;
  }
  const kernels::MatmulConfig best = at::gemm_config(r.config, *dtype);
  std::cout << "best: " << format_matmul_config(best) << "  " << fixed(r.ms, 4) << " ms  "
            << fixed(gemm_tflops(o.M, o.N, o.K, r.ms), 1) << " TFLOP/s" << (r.from_cache ? "  (tuning cache)" : "")
            << "\ncompiled " << r.compiled << " in " << fixed(r.compile_seconds, 2) << " s, timed "
            << r.timed_full << " at full repeats, " << wrong << " wrong; " << fixed(wall, 2) << " s in all\n";
  if (!o.json_file.empty()) {
    nlohmann::json j = provenance_json();
    j["tool"] = "tessel tune gemm";
    j.update({{"M", o.M}, {"N", o.N}, {"K", o.K}, {"dtype", o.dtype}, {"strategy", o.strategy},
              {"budget", o.budget}, {"repeats", o.repeats}, {"from_cache", r.from_cache},
              {"best", {{"config", r.config}, {"ms", r.ms}, {"text", format_matmul_config(best)}}},
              {"compiled", r.compiled}, {"compile_seconds", r.compile_seconds}, {"timed_full", r.timed_full},
              {"wall_seconds", wall}, {"table", table_json(r.table)}});
    write_json_file(o.json_file, j);
    std::cout << "wrote " << o.json_file << "\n";
  }
  return kExitOk;
}

}  // namespace

Command add_tune_command(CLI::App& root) {
  CLI::App* tune = root.add_subcommand("tune", "The autotuner: search a kernel's tuning space for one shape");
  tune->require_subcommand(1);
  auto o = std::make_shared<TuneGemmOptions>();
  CLI::App* app = tune->add_subcommand(
      "gemm", "Tune the GEMM for one shape: every candidate checked against cuBLAS, the winner cached");
  app->add_option("--m", o->M, "Rows of A and C")->capture_default_str()->check(CLI::PositiveNumber);
  app->add_option("--n", o->N, "Columns of B and C")->capture_default_str()->check(CLI::PositiveNumber);
  app->add_option("--k", o->K, "Columns of A, rows of B")->capture_default_str()->check(CLI::PositiveNumber);
  app->add_option("--dtype", o->dtype, "f16 or bf16")->capture_default_str();
  app->add_option("--strategy", o->strategy, "exhaustive, random or halving")->capture_default_str();
  app->add_option("--budget", o->budget, "random: candidates to time (0: a quarter)")->capture_default_str();
  app->add_option("--repeats", o->repeats, "Full repeats per timing")->capture_default_str()->check(CLI::PositiveNumber);
  app->add_option("--warmup", o->warmup, "Untimed runs before each timing")->capture_default_str();
  app->add_flag("--compile-only", o->compile_only, "Compile the whole space in parallel and report candidates/s");
  app->add_flag("--no-cache", o->no_cache, "Neither read nor write the tuning cache");
  app->add_option("--json", o->json_file, "Also write the table and the winner to FILE")->type_name("FILE");
  return {app, [o] { return run_tune_gemm(*o); }};
}

}  // namespace tessel::cli
