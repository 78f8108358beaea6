// tessel bench gemm: Tessel's GEMM beside cuBLAS, shape by shape and dtype by dtype, in one
// process on the same inputs (see GemmBench.hpp for how it measures).
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>

#include "tessel/kernels/gemm/Matmul.hpp"
#include "tessel/runtime/Cache.hpp"
#include "tools/tessel/Commands.hpp"
#include "tools/tessel/GemmBench.hpp"
#include "tools/tessel/GemmConfigs.hpp"
#include "tools/tessel/Output.hpp"
#include "tools/tessel/Parse.hpp"
#include "tools/tessel/System.hpp"

namespace tessel::cli {

namespace {

struct BenchGemmOptions {
  std::vector<std::string> shapes = {"2048x2048x2048", "4096x4096x4096"};
  std::vector<std::string> dtypes = {"f16", "bf16"};
  std::string config;
  std::string epilogue = "none";
  std::string staging = "auto";
  std::string split_k = split_k_text(kernels::kMatmulDefaultSplitK);  // auto, or a share count (1: off)
  std::string l2_flush = "clean";
  bool compare_template = false;  // also time select_hopper_gemm's template (gemm_from_passes = false)
  int repeats = 50;
  int warmup = 10;
  std::uint64_t seed = 1;
  std::string json_file;
};

struct Case {
  GemmShape shape;
  DType dtype;
};

void print_header(bool compare_template) {
  std::cout << "  " << left("shape", 18) << left("dtype", 6) << left("config", 24) << left("from", 9)
            << right("Tessel ms", 10) << right("TFLOP/s", 9) << right("cuBLAS ms", 11) << right("TFLOP/s", 9)
            << right("ratio", 8) << right("rel.err", 9) << right("vs f64", 9);
  // --compare-template: the same program with JitOptions::gemm_from_passes = false (select_hopper_gemm's
  // template); its ratio to cuBLAS, and "vs template", the default kernel's speed over it (template ms /
  // Tessel ms).
  if (compare_template)
    std::cout << right("template ms", 12) << right("TFLOP/s", 9) << right("ratio", 8)
              << right("vs template", 12) << right("rel.err", 9) << right("vs f64", 9);
  std::cout << "\n";
}

// Whether the environment variable `var` (TESSEL_ENABLE or TESSEL_DISABLE) names gemm_from_passes (read
// as jit() reads it: names between commas or spaces). Either would build both sides of
// --compare-template the same way.
bool env_names_gemm_from_passes(const char* var) {
  const char* env = std::getenv(var);
  const std::string text = std::string(env ? env : "") + ",";
  std::string word;
  for (char ch : text) {
    if (ch != ',' && !std::isspace(static_cast<unsigned char>(ch))) {
      word += ch;
      continue;
    }
    if (word == "gemm_from_passes") return true;
    word.clear();
  }
  return false;
}

// --compare-template builds the tutorial GEMM kernel both ways; split-K runs another program
// (kernels::Matmul's partial GEMM and its reduction), which select_hopper_gemm never takes.
std::string split_k_clash(const std::string& split_k_flag) {
  return "--compare-template and --split-k " + split_k_flag +
         " do not go together: split-K runs kernels::Matmul's partial GEMM and reduction, not the tutorial "
         "GEMM kernel that --compare-template builds both ways (generic passes and template); use --split-k "
         "1";
}

// `from`: "tuned" (the tuning cache's entry), "default" (the built-in table) or "--config".
std::string row_start(const Case& c, const kernels::MatmulConfig& config, const std::string& from) {
  return "  " + left(c.shape.describe(), 18) + left(std::string(dtype_name(c.dtype)), 6) +
         left(format_matmul_config(config), 24) + left(from, 9);
}

int run_bench_gemm(const BenchGemmOptions& o) {
  std::vector<Case> cases;
  int split_k = kernels::kMatmulDefaultSplitK;
  try {
    for (const std::string& d : o.dtypes) {
      const auto dtype = parse_dtype(d);
      if (!dtype || (*dtype != DType::f16 && *dtype != DType::bf16))
        throw std::invalid_argument("--dtype takes f16 and bf16, not '" + d + "'");
    }
    for (const std::string& text : o.shapes)
      for (const std::string& d : o.dtypes) cases.push_back({parse_gemm_shape(text), *parse_dtype(d)});
    if (!o.config.empty()) (void)parse_matmul_config(o.config, DType::f16);
    if (o.epilogue != "none" && o.epilogue != "bias" && o.epilogue != "bias_relu")
      throw std::invalid_argument("--epilogue takes none, bias or bias_relu, not '" + o.epilogue + "'");
    if (o.staging != "auto" && o.staging != "always" && o.staging != "never")
      throw std::invalid_argument("--staging takes auto, always or never, not '" + o.staging + "'");
    split_k = parse_split_k(o.split_k);
    if (o.compare_template && split_k > 1 && o.config.empty() && o.epilogue == "none")
      throw std::invalid_argument(split_k_clash(o.split_k));
    for (const char* var : {"TESSEL_ENABLE", "TESSEL_DISABLE"})
      if (o.compare_template && env_names_gemm_from_passes(var))
        throw std::invalid_argument(std::string("--compare-template and ") + var +
                                    "=gemm_from_passes do not go together: the environment would build both "
                                    "sides the same way; take gemm_from_passes out of " +
                                    var);
  } catch (const std::invalid_argument& e) {
    std::cerr << "tessel bench gemm: " << e.what() << "\n";
    return kExitUsage;
  }
  const SystemInfo& s = system_info();
  if (!s.gpu) {
    std::cerr
        << "tessel bench gemm needs a GPU, and there is none: " << s.no_gpu_reason << "\n"
        << "(`tessel dump gemm --resources` and `tessel tutorial` report what the kernels compile to without "
           "one)\n";
    return kExitNoGpu;
  }

  const GemmEpilogue epilogue = o.epilogue == "bias"        ? GemmEpilogue::bias
                                : o.epilogue == "bias_relu" ? GemmEpilogue::bias_relu
                                                            : GemmEpilogue::none;
  // The library's Matmul when it stages unaligned rows or splits K (no --config, no epilogue).
  const kernels::MatmulStaging staging = o.staging == "always"  ? kernels::MatmulStaging::always
                                         : o.staging == "never" ? kernels::MatmulStaging::never
                                                                : kernels::MatmulStaging::automatic;
  const bool library = o.config.empty() && epilogue == GemmEpilogue::none;
  if (o.compare_template && library) {
    // Before anything runs: a case the library would split (--split-k auto on a skinny shape)
    // has no tutorial GEMM kernel to build both ways.
    for (const Case& c : cases) {
      try {
        const kernels::MatmulPlan plan = kernels::plan_matmul_for_current_device(
            c.shape.M, c.shape.N, c.shape.K, c.dtype, staging, split_k);
        if (plan.split()) {
          std::cerr << "tessel bench gemm: " << c.shape.describe() << " " << dtype_name(c.dtype)
                    << " would run split-K " << plan.split_k << ": " << split_k_clash(o.split_k) << "\n";
          return kExitUsage;
        }
      } catch (const std::invalid_argument& e) {
        std::cerr << "tessel bench gemm: " << c.shape.describe() << ": " << e.what() << "\n";
        return kExitUsage;
      }
    }
  }
  std::cout << (epilogue == GemmEpilogue::none
                    ? "Tessel vs cuBLAS (cublasGemmEx, f32 accumulation), "
                    : "Tessel's fused linear layer (make_matmul_bias_act) vs cuBLASLt's fused epilogue (" +
                          std::string(epilogue == GemmEpilogue::bias ? "BIAS" : "RELU_BIAS") +
                          ", f32 accumulation), C = " + (epilogue == GemmEpilogue::bias ? "" : "relu") +
                          "(A * B + bias), ")
            << s.device.name << ": medians of " << o.repeats << " interleaved runs after " << o.warmup
            << " warm-up runs, L2 flushed before each (" << o.l2_flush << ")\n";
  if (o.compare_template)
    std::cout << "--compare-template: each kernel also built with JitOptions::gemm_from_passes = false "
                 "(select_hopper_gemm's hand-written template instead of the generic sm_90a passes, the "
                 "default), checked the same way and timed in the same loop, the three sides rotating which "
                 "goes first; vs template = template ms / Tessel ms\n";
  print_header(o.compare_template);
  GemmBench bench(o.l2_flush == "write" ? L2Flush::write : L2Flush::clean);
  nlohmann::json results = nlohmann::json::array();
  int problems = 0;
  Progress progress(static_cast<int>(cases.size()), true);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    // Without --config: what make_matmul(M, N, K, dtype) would compile, the tuning cache's entry
    // for this shape when `tessel tune gemm` stored one, else the built-in table.
    kernels::MatmulChoice choice = kernels::choose_matmul_config(c.shape.M, c.shape.N, c.shape.K, c.dtype);
    // The library's Matmul when it stages unaligned rows or splits K (no --config, no epilogue):
    // the config is then the one for the aligned kernel's shape, or the partial GEMM's.
    kernels::MatmulPlan plan;
    try {
      plan =
          kernels::plan_matmul_for_current_device(c.shape.M, c.shape.N, c.shape.K, c.dtype, staging, split_k);
    } catch (const std::invalid_argument& e) {
      std::cerr << "tessel bench gemm: " << c.shape.describe() << ": " << e.what() << "\n";
      return kExitUsage;
    }
    const bool staged = library && plan.staged(), split = library && plan.split();
    if (staged)
      choice = kernels::choose_matmul_config(c.shape.M, static_cast<int>(plan.kernel_N),
                                             static_cast<int>(plan.kernel_K), c.dtype);
    if (split) choice = {plan.split_config, plan.split_tuned};
    const std::string from = !o.config.empty() ? "--config" : choice.tuned ? "tuned" : "default";
    const kernels::MatmulConfig config = !o.config.empty() ? parse_matmul_config(o.config, c.dtype)
                                         : choice.tuned || staged || split
                                             ? choice.config
                                             : default_gemm_config(c.shape, c.dtype, s.smem_cap());
    nlohmann::json r = {{"M", c.shape.M},
                        {"N", c.shape.N},
                        {"K", c.shape.K},
                        {"dtype", std::string(dtype_name(c.dtype))},
                        {"config", config_json(config)},
                        {"config_source", !o.config.empty() ? "--config"
                                          : choice.tuned    ? "tuning cache"
                                                            : "default table"},
                        {"staging",
                         {{"mode", o.staging},
                          {"staged", staged},
                          {"kernel_shape", {c.shape.M, plan.kernel_N, plan.kernel_K}},
                          {"why", plan.why}}},
                        {"split_k",
                         {{"mode", o.split_k},
                          {"splits", split ? plan.split_k : 1},
                          {"tuned", library && plan.split_tuned},
                          {"workspace_bytes", split ? plan.workspace_bytes : 0}}}};
    progress.step(c.shape.describe() + " " + std::string(dtype_name(c.dtype)) + " " +
                  format_matmul_config(config));
    if (kernels::matmul_smem_bytes(config) > s.smem_cap()) {
      progress.clear();
      std::cout << row_start(c, config, from)
                << "SKIPPED (over smem budget: " << kernels::matmul_smem_bytes(config) << " > "
                << s.smem_cap() << " bytes)\n";
      r["status"] = "skipped";
      results.push_back(r);
      continue;
    }
    try {
      // The kernel (or the library's Matmul around it) with `options`: JitOptions{} for the
      // default side; --compare-template builds it again without gemm_from_passes, all else the same.
      auto build = [&](const JitOptions& options, std::optional<kernels::Matmul>& m) -> JitKernel {
        if (staged || split) {
          m.emplace(c.shape.M, c.shape.N, c.shape.K, c.dtype, staging, options, split_k);
          return m->kernel();
        }
        return epilogue == GemmEpilogue::none
                   ? kernels::make_matmul(c.shape.M, c.shape.N, c.shape.K, config, options)
                   : kernels::make_matmul_bias_act(c.shape.M, c.shape.N, c.shape.K, config,
                                                   epilogue == GemmEpilogue::bias ? kernels::Activation::none
                                                                                  : kernels::Activation::relu,
                                                   1.0f, options);
      };
      std::optional<kernels::Matmul> matmul;
      const JitKernel k = build(JitOptions{}, matmul);
      GemmInputs in = make_gemm_inputs(c.shape, c.dtype, o.seed + 2 * i, epilogue);
      const std::function<void()> run = [&] {
        if (staged || split) {
          (*matmul)(in.A, in.B, in.C);
        } else {
          bench.launch_tessel(k, in);
        }
      };
      bench.compute_reference(in);
      const double err = bench.check(run, in);
      const double err_f64 = sampled_f64_error(in, in.C), ref_err_f64 = sampled_f64_error(in, in.C_ref);
      const bool ok =
          !std::isnan(err) && err <= kGemmTolerance && !std::isnan(err_f64) && err_f64 <= kGemmTolerance;
      // --compare-template: the template's build, checked like the default. A failure to build or
      // run it is recorded for this side alone; the other two are still timed.
      std::optional<kernels::Matmul> matmul_template;
      JitKernel k_template;
      double err_template = 0, err_template_f64 = 0;
      bool ok_template = false;
      bool template_failed = false;
      std::string template_failure_line;
      const std::function<void()> run_template = [&] {
        if (staged || split) {
          (*matmul_template)(in.A, in.B, in.C);
        } else {
          bench.launch_tessel(k_template, in);
        }
      };
      if (o.compare_template) {
        try {
          JitOptions template_options;
          template_options.gemm_from_passes = false;
          k_template = build(template_options, matmul_template);
          err_template = bench.check(run_template, in);
          err_template_f64 = sampled_f64_error(in, in.C);
          ok_template = !std::isnan(err_template) && err_template <= kGemmTolerance &&
                        !std::isnan(err_template_f64) && err_template_f64 <= kGemmTolerance;
        } catch (const std::exception& e) {
          // Recorded now, so that the JSON keeps it if the case fails later on.
          template_failed = true;
          template_failure_line = "  template failed: " + error_kind(e) + " (" + error_summary(e, 120) + ")";
          r["template_status"] = "failed";
          r["template_error"] = {{"kind", error_kind(e)}, {"message", e.what()}};
          ++problems;
        }
      }
      const std::function<void()> run_cublas = [&] { bench.launch_cublas(in); };
      const bool time_template = o.compare_template && !template_failed;
      const std::vector<Timing> times =
          time_template ? bench.time_interleaved({run, run_template, run_cublas}, o.warmup, o.repeats)
                        : bench.time_interleaved({run, run_cublas}, o.warmup, o.repeats);
      const Timing& ours = times.front();
      const Timing& theirs = times.back();
      const double tf = gemm_tflops(c.shape.M, c.shape.N, c.shape.K, ours.median_ms);
      const double tf_ref = gemm_tflops(c.shape.M, c.shape.N, c.shape.K, theirs.median_ms);
      const double ratio = theirs.median_ms / ours.median_ms;
      progress.clear();
      std::cout << row_start(c, config, from) << right(fixed(ours.median_ms, 4), 10) << right(fixed(tf, 1), 9)
                << right(fixed(theirs.median_ms, 4), 11) << right(fixed(tf_ref, 1), 9)
                << right(fixed(100 * ratio, 1) + "%", 8) << right(scientific(err), 9)
                << right(scientific(err_f64), 9);
      if (time_template) {
        const Timing& tmpl = times[1];
        std::cout << right(fixed(tmpl.median_ms, 4), 12)
                  << right(fixed(gemm_tflops(c.shape.M, c.shape.N, c.shape.K, tmpl.median_ms), 1), 9)
                  << right(fixed(100 * theirs.median_ms / tmpl.median_ms, 1) + "%", 8)
                  << right(fixed(100 * tmpl.median_ms / ours.median_ms, 1) + "%", 12)
                  << right(scientific(err_template), 9) << right(scientific(err_template_f64), 9);
      } else if (o.compare_template) {
        std::cout << template_failure_line;
      }
      std::cout << (ok ? "" : "  NUMERICALLY WRONG")
                << (time_template && !ok_template ? "  TEMPLATE NUMERICALLY WRONG" : "") << "\n";
      if (staged || split) std::cout << "    " << matmul->describe() << "\n";
      if (time_template)
        std::cout << "    paths: Tessel " << k.info().path << "; template " << k_template.info().path
                  << (k.source() == k_template.source()
                          ? " (the same generated source: gemm_from_passes changed nothing here)"
                          : "")
                  << "\n";
      const Resources& res = k.resources();
      r.update(
          {{"status", ok ? "ok" : "wrong"},
           {"tessel_ms", ours.median_ms},
           {"cublas_ms", theirs.median_ms},
           {"tessel_tflops", tf},
           {"cublas_tflops", tf_ref},
           {"ratio", ratio},
           {"rel_error", std::isnan(err) ? nlohmann::json(nullptr) : nlohmann::json(err)},
           {"rel_error_f64_sampled", std::isnan(err_f64) ? nlohmann::json(nullptr) : nlohmann::json(err_f64)},
           {"cublas_rel_error_f64_sampled",
            std::isnan(ref_err_f64) ? nlohmann::json(nullptr) : nlohmann::json(ref_err_f64)},
           {"cache_hit", res.cache_hit},
           {"source_sha256", sha256_hex(k.source())},
           {"tessel_ms_all", ours.ms},
           {"cublas_ms_all", theirs.ms},
           {"registers", res.registers},
           {"spill_bytes", res.spill_store_bytes + res.spill_load_bytes},
           {"compile_ms", res.compile_ms},
           {"instructions", k.info().instructions},
           {"path", k.info().path}});
      if (time_template) {
        // The template's side, named as the default side's fields with a template_ prefix;
        // template_ratio is cuBLAS ms / template ms (as ratio), tessel_vs_template template ms /
        // Tessel ms (above 1: the default kernel is faster).
        const Timing& tmpl = times[1];
        const Resources& tres = k_template.resources();
        r.update({{"template_status", ok_template ? "ok" : "wrong"},
                  {"template_ms", tmpl.median_ms},
                  {"template_tflops", gemm_tflops(c.shape.M, c.shape.N, c.shape.K, tmpl.median_ms)},
                  {"template_ratio", theirs.median_ms / tmpl.median_ms},
                  {"tessel_vs_template", tmpl.median_ms / ours.median_ms},
                  {"template_rel_error",
                   std::isnan(err_template) ? nlohmann::json(nullptr) : nlohmann::json(err_template)},
                  {"template_rel_error_f64_sampled",
                   std::isnan(err_template_f64) ? nlohmann::json(nullptr) : nlohmann::json(err_template_f64)},
                  {"template_cache_hit", tres.cache_hit},
                  {"template_source_sha256", sha256_hex(k_template.source())},
                  {"template_ms_all", tmpl.ms},
                  {"template_registers", tres.registers},
                  {"template_spill_bytes", tres.spill_store_bytes + tres.spill_load_bytes},
                  {"template_compile_ms", tres.compile_ms},
                  {"template_instructions", k_template.info().instructions},
                  {"template_path", k_template.info().path}});
        if (!ok_template) ++problems;
      }
      if (staged || split) r["library"] = matmul->describe();
      if (!ok) ++problems;
    } catch (const std::exception& e) {
      progress.clear();
      std::cout << row_start(c, config, from) << "failed: " << error_kind(e) << " (" << error_summary(e, 120)
                << ")\n";
      r["status"] = "failed";
      r["error"] = {{"kind", error_kind(e)}, {"message", e.what()}};
      ++problems;
    }
    results.push_back(r);
    std::cout.flush();
  }
  progress.clear();

  if (!o.json_file.empty()) {
    nlohmann::json j = provenance_json();
    j["tool"] = "tessel bench gemm";
    j["epilogue"] = gemm_epilogue_name(epilogue);
    j["method"] = {
        {"baseline",
         epilogue == GemmEpilogue::none
             ? "cublasGemmEx, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT, row-major by operand swap"
             : std::string("cublasLtMatmul, CUBLAS_COMPUTE_32F, CUBLASLT_EPILOGUE_") +
                   (epilogue == GemmEpilogue::bias ? "BIAS" : "RELU_BIAS") +
                   ", the heuristic's first algorithm, 32 MiB workspace, row-major by operand swap"},
        {"timing", o.compare_template
                       ? "CUDA events on the legacy default stream, interleaved rep by rep, order "
                         "rotating (Tessel, template, cuBLAS; rep i starts with side i % 3)"
                       : "CUDA events on the legacy default stream, interleaved rep by rep, order "
                         "alternating"},
        {"warmup", o.warmup},
        {"repeats", o.repeats},
        {"statistic", "median"},
        {"l2_flush_bytes", GemmBench::kL2FlushBytes},
        {"l2_flush", o.l2_flush == "write" ? "write: a 256 MiB memset (leaves dirty lines)"
                                           : "clean: a 256 MiB memset, then cublasSasum reads it all back"},
        {"inputs", "uniform [-1, 1), fresh per case, outputs poisoned with NaN before the checked run"},
        {"tolerance", kGemmTolerance},
        {"f64_check", "relative error over " + std::to_string(kF64Samples) +
                          " sampled entries against float64 on the host, for Tessel and for cuBLAS"},
        {"seed", o.seed}};
    if (o.compare_template)
      j["method"]["compare_template"] =
          "each case's kernel built twice, with JitOptions{} (the generic sm_90a passes) and with "
          "JitOptions::gemm_from_passes = false (select_hopper_gemm's template), all else the same; both "
          "checked against cuBLAS and float64 and timed in one interleaved loop with cuBLAS (template_* "
          "fields; tessel_vs_template = template_ms / tessel_ms)";
    j["cases"] = results;
    j["problems"] = problems;
    write_json_file(o.json_file, j);
    std::cout << "wrote " << o.json_file << "\n";
  }
  return problems ? kExitCheckFailed : kExitOk;
}

}  // namespace

Command add_bench_gemm_command(CLI::App& bench) {
  auto o = std::make_shared<BenchGemmOptions>();
  CLI::App* app = bench.add_subcommand(
      "gemm",
      "Tessel's GEMM against cuBLAS on the same inputs: ms, TFLOP/s, ratio, relative error (needs a GPU)");
  app->add_option("--shapes", o->shapes, "Problem shapes MxNxK, comma-separated")
      ->delimiter(',')
      ->capture_default_str()
      ->check(shape(3, "MxNxK", "4096x4096x4096"));
  app->add_option("--dtype", o->dtypes, "Element types, comma-separated (f16, bf16)")
      ->delimiter(',')
      ->capture_default_str();
  app->add_option(
         "--config", o->config,
         "One config for every case, BMxBNxBK:stages:threads[:swz[N]][:cXxY] (default: the tuning cache's "
         "entry for the shape, else a built-in table)")
      ->type_name("CONFIG");
  app->add_option("--epilogue", o->epilogue,
                  "none: the GEMM against cublasGemmEx; bias or bias_relu: C = [relu](A*B + bias) fused, "
                  "against cuBLASLt's fused epilogue")
      ->capture_default_str();
  app->add_option(
         "--staging", o->staging,
         "Rows that are not 16-byte aligned (K or N not a multiple of 8): auto stages them through "
         "aligned zero-padded buffers when kernels::plan_matmul's model says it pays, always whenever "
         "one is unaligned, never (the kernel for the exact shape); only without --config and --epilogue")
      ->capture_default_str();
  app->add_option(
         "--split-k", o->split_k,
         "Split K over CTAs, then sum the f32 partials (kernels::Matmul): auto when kernels::plan_matmul's "
         "model says the tile grid leaves most SMs idle (sm_90, M <= 64; the library's default), 1 off, "
         "N that many shares "
         "(at most K's tiles of 64); only without --config and --epilogue")
      ->capture_default_str();
  app->add_option(
         "--l2-flush", o->l2_flush,
         "How the L2 is emptied before each timed run: clean (a 256 MiB write, then a read of it, so no "
         "dirty lines are left to write back during the run) or write (the write alone, as before "
         "2026-12-04 session 11: its write-back slows short memory-bound runs)")
      ->capture_default_str()
      ->check(CLI::IsMember({"clean", "write"}));
  app->add_flag(
      "--compare-template,--compare-passes", o->compare_template,
      "Also build each case's kernel with JitOptions::gemm_from_passes = false (select_hopper_gemm's "
      "hand-written template instead of the generic sm_90a passes, the default; same config, shape, staging "
      "and epilogue), check it the same way and time it in the same interleaved loop as a third side: extra "
      "columns template ms, TFLOP/s, ratio (to cuBLAS), vs template (template ms / Tessel ms), rel.err, vs "
      "f64; both kernels' paths under each row; template_* fields in the JSON. Not with split-K (--split-k "
      "N, or auto where it splits) nor gemm_from_passes in TESSEL_ENABLE or TESSEL_DISABLE. "
      "(--compare-passes: its name before the passes became the default)");
  add_timing_options(*app, o->repeats, o->warmup, o->seed, o->json_file);
  return {app, [o] { return run_bench_gemm(*o); }};
}

}  // namespace tessel::cli
