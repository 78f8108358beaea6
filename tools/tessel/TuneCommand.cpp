// tessel tune gemm | softmax | attention: the autotuner over a kernel's space for one shape.
// Every candidate is checked (GEMM against cuBLAS, softmax and attention against float64 on
// sampled rows) and timed with CUDA events (L2 flushed, medians); the winner is kept in the
// tuning cache, where the library's default entry points find it. A skinny GEMM's space holds
// kernels::Matmul's split-K too (partial GEMM and reduction, timed together). Without a GPU: the
// space's size and pruning, and with --compile-only the compile throughput (for attention, each
// candidate's registers, spills and shared memory too; for GEMM, the split-K candidates').
#include <chrono>
#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

#include "tessel/Error.hpp"
#include "tessel/autotune/Autotune.hpp"
#include "tessel/autotune/CostModel.hpp"
#include "tessel/kernels/gemm/Matmul.hpp"
#include "tools/tessel/Commands.hpp"
#include "tools/tessel/GemmBench.hpp"
#include "tools/tessel/GemmConfigs.hpp"
#include "tools/tessel/Output.hpp"
#include "tools/tessel/Parse.hpp"
#include "tools/tessel/SoftmaxCheck.hpp"
#include "tools/tessel/System.hpp"
#include "tools/tessel/TuneOutput.hpp"

namespace tessel::cli {

namespace {

namespace at = tessel::autotune;

struct TuneOptions {
  long long M = 0, N = 0, K = 0;
  std::string dtype = "f16";
  std::string strategy = "halving";
  int budget = 0;
  int repeats = 20;
  int warmup = 3;
  double compile_time_limit = 60;  // seconds per candidate; 0: none
  bool compile_only = false;
  bool no_cache = false;
  double model_keep = 0.25;
  std::string staging = "auto";  // gemm: tune the shape kernels::Matmul runs (auto) or the exact one
  std::string json_file;
};

// What differs between the kernels; run_tune does the rest.
struct TuneJob {
  std::string command;  // "tessel tune gemm"
  std::string problem;  // "4096x4096x4096 f16"
  nlohmann::json problem_json;
  at::Space space;
  at::Factory factory;
  std::function<std::string(const at::Config&)> describe;  // as the kernel's --config spells it
  std::function<std::string(double ms)> rate;              // "612.3 TFLOP/s"
  // GPU only: inputs, reference and callbacks (holding what they need).
  std::function<at::Callbacks()> prepare;
  std::function<at::KeyParts(const at::DeviceKey&)> key;
  // Ranks candidates before compiling (halving only); absent: every candidate compiles.
  std::function<double(const at::Config&)> cost_model;
  // --compile-only lists these candidates' registers, spills and shared memory; absent: none.
  std::function<bool(const at::Config&)> list_compiled;
};

int report_compile_only(const TuneJob& job, const at::Space::Enumeration& e, const TuneOptions& o, bool gpu) {
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::cout << "compiling all " << e.kept.size() << " candidates on " << threads << " threads ...\n";
  std::cout.flush();
  TuneProgress progress;
  at::CompileOptions co;
  co.time_limit_s = o.compile_time_limit;
  progress.attach(co, static_cast<int>(e.kept.size()));
  const auto r = at::compile_all(job.factory, e.kept, co);
  progress.clear();
  int failed = 0, spills = 0;
  for (const at::Row& row : r.rows) {
    failed += row.status == at::Status::compile_failed;
    spills += row.status == at::Status::spills;
    if (row.status == at::Status::compile_failed || row.status == at::Status::spills)
      std::cout << "  " << job.describe(row.config) << ": " << at::status_name(row.status) << " ("
                << row.reason << ")\n";
    else if (job.list_compiled && job.list_compiled(row.config))
      std::cout << "  " << job.describe(row.config) << ": " << row.registers << " registers, "
                << row.spill_bytes << " bytes spilled, " << row.smem_bytes << " bytes of shared memory, "
                << fixed(row.compile_ms / 1000, 2) << " s\n";
  }
  std::cout << "compiled " << e.kept.size() << " in " << fixed(r.seconds, 2)
            << " s: " << fixed(e.kept.size() / std::max(r.seconds, 1e-9), 2) << " candidates/s; " << failed
            << " failed, " << spills << " spill\n";
  if (!o.json_file.empty()) {
    nlohmann::json j = provenance_json();
    j["tool"] = job.command + " --compile-only";
    j.update(job.problem_json);
    j.update({{"arch", system_info().arch()},
              {"threads", threads},
              {"candidates", e.kept.size()},
              {"pruned", e.pruned.size()},
              {"seconds", r.seconds},
              {"candidates_per_second", e.kept.size() / std::max(r.seconds, 1e-9)},
              {"table", tune_table_json(r.rows)}});
    write_json_file(o.json_file, j);
    std::cout << "wrote " << o.json_file << "\n";
  }
  if (!gpu) return kExitNoGpu;
  return failed ? kExitCheckFailed : kExitOk;
}

int run_tune(const TuneJob& job, const TuneOptions& o, at::Strategy strategy) {
  const SystemInfo& s = system_info();
  const at::HardwareLimits limits{s.smem_cap(), s.gpu ? s.device.max_threads_per_block : 1024};
  const auto e = job.space.enumerate(limits);
  std::cout << job.command << " " << job.problem << " on " << s.arch() << ": " << e.total << " candidates, "
            << e.pruned.size() << " pruned (constraints, " << limits.smem_per_block
            << " bytes of shared memory, " << limits.threads_per_block << " threads), " << e.kept.size()
            << " left\n";
  if (!s.gpu) std::cout << "no GPU: " << s.no_gpu_reason << "\n";
  if (o.compile_only) return report_compile_only(job, e, o, s.gpu);
  if (!s.gpu) {
    std::cerr << job.command
              << " needs a GPU to time candidates (--compile-only compiles the space without one)\n";
    return kExitNoGpu;
  }

  at::Options opts;
  opts.search.strategy = strategy;
  opts.search.budget = o.budget;
  opts.search.repeats = o.repeats;
  opts.limits = limits;
  opts.warmup = o.warmup;
  if (strategy == at::Strategy::halving && job.cost_model) {
    opts.cost_model = job.cost_model;
    opts.model_keep = o.model_keep;
  }
  opts.compile_time_limit_s = o.compile_time_limit;
  if (!o.no_cache) {
    const auto device = at::current_device_key();
    if (!device) throw RuntimeError("cannot key the tuning cache: the GPU or NVRTC could not be queried");
    opts.cache_key = at::tuning_key(job.key(*device));
  }
  TuneProgress progress;
  progress.attach(opts);
  const auto t0 = std::chrono::steady_clock::now();
  const at::Result r = at::autotune(job.factory, job.space, job.prepare, opts);
  progress.clear();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int wrong = 0;
  for (const at::Row& row : r.table) wrong += row.status == at::Status::wrong;
  if (!r.from_cache) print_tune_table(r.table, job.describe, job.rate);
  if (!r.found) {
    std::cout << "no candidate passed\n";
    return kExitCheckFailed;
  }
  std::cout << "best: " << job.describe(r.config) << "  " << fixed(r.ms, 4) << " ms  " << job.rate(r.ms)
            << (r.from_cache ? "  (tuning cache)" : "") << "\ncompiled " << r.compiled << " in "
            << fixed(r.compile_seconds, 2) << " s, timed " << r.timed_full << " at full repeats, " << wrong
            << " wrong; " << fixed(wall, 2) << " s in all\n";
  if (!o.json_file.empty()) {
    nlohmann::json j = provenance_json();
    j["tool"] = job.command;
    j.update(job.problem_json);
    j.update({{"strategy", o.strategy},
              {"budget", o.budget},
              {"repeats", o.repeats},
              {"from_cache", r.from_cache},
              {"best", {{"config", r.config}, {"ms", r.ms}, {"text", job.describe(r.config)}}},
              {"compiled", r.compiled},
              {"compile_seconds", r.compile_seconds},
              {"timed_full", r.timed_full},
              {"wall_seconds", wall},
              {"table", tune_table_json(r.table)}});
    write_json_file(o.json_file, j);
    std::cout << "wrote " << o.json_file << "\n";
  }
  return kExitOk;
}

// Runs a split-K candidate of gemm_factory as kernels::Matmul runs a split (and as `tessel bench
// gemm --split-k N` times it): the partial GEMM on A and B into an f32 workspace [n, M, N], then
// the reduction into C, both on the default stream, so that a timing covers both. The
// reduction was compiled with the candidate (gemm_factory): here it is the JIT's in-process
// cache hit.
class SplitKLauncher {
 public:
  SplitKLauncher(int M, int N, DType dtype, JitOptions options)
      : M_(M), N_(N), dtype_(dtype), options_(std::move(options)) {}

  void operator()(const JitKernel& partial, const GemmInputs& in) {
    const int splits = at::gemm_split_k(partial);
    auto it = by_splits_.find(splits);
    if (it == by_splits_.end())
      it = by_splits_
               .emplace(splits, Split{Tensor::empty({splits, M_, N_}, DType::f32),
                                      at::gemm_split_k_reduce(M_, N_, splits, dtype_, options_)})
               .first;
    partial.launch({in.A, in.B, it->second.workspace}, nullptr);
    it->second.reduce.launch({it->second.workspace, in.C}, nullptr);
  }

 private:
  struct Split {
    Tensor workspace;
    JitKernel reduce;
  };
  int M_, N_;
  DType dtype_;
  JitOptions options_;
  std::map<int, Split> by_splits_;
};

std::optional<at::Strategy> parse_strategy_option(const std::string& command, const std::string& text) {
  const auto strategy = at::parse_strategy(text);
  if (!strategy)
    std::cerr << command << ": --strategy takes exhaustive, random or halving, not '" << text << "'\n";
  return strategy;
}

int run_tune_gemm(const TuneOptions& o) {
  const std::string command = "tessel tune gemm";
  const auto dtype = parse_dtype(o.dtype);
  if (!dtype || (*dtype != DType::f16 && *dtype != DType::bf16)) {
    std::cerr << command << ": --dtype takes f16 or bf16, not '" << o.dtype << "'\n";
    return kExitUsage;
  }
  const auto strategy = parse_strategy_option(command, o.strategy);
  if (!strategy) return kExitUsage;
  if (o.staging != "auto" && o.staging != "never") {
    std::cerr << command << ": --staging takes auto or never, not '" << o.staging << "'\n";
    return kExitUsage;
  }
  const std::string arch = system_info().arch();
  // Rows that are not 16-byte aligned: the library's Matmul stages them and runs the kernel of
  // the padded shape, whose tuning entry it looks up -- so that is the shape tuned -- or, where
  // its model says so (skinny shapes on sm_90), runs the exact shape's kernel.
  const int sm_count = system_info().gpu ? system_info().device.sm_count : 132;
  const kernels::MatmulPlan plan = kernels::plan_matmul(
      o.M, o.N, o.K, *dtype, arch,
      o.staging == "never" ? kernels::MatmulStaging::never : kernels::MatmulStaging::automatic, 0, sm_count);
  const bool unaligned = o.N % 8 != 0 || o.K % 8 != 0;
  if (plan.staged())
    std::cout << command << ": " << o.M << "x" << o.N << "x" << o.K << " " << o.dtype << " -- " << plan.why
              << "\ntuning the kernel kernels::Matmul runs: " << o.M << "x" << plan.kernel_N << "x" << plan.kernel_K
              << " (--staging never tunes the exact shape)\n";
  else if (unaligned && o.staging == "auto")
    std::cout << command << ": " << o.M << "x" << o.N << "x" << o.K << " " << o.dtype << " -- " << plan.why
              << "\ntuning the exact shape's kernel, which kernels::Matmul runs\n";
  const int M = static_cast<int>(o.M), N = static_cast<int>(plan.kernel_N), K = static_cast<int>(plan.kernel_K);
  JitOptions jo;
  jo.arch = arch;
  jo.compile_time_limit_s = o.compile_time_limit;  // NVRTC stops too, rather than running on unseen
  TuneJob job{command,
              GemmShape{M, N, K}.describe() + " " + o.dtype,
              {{"M", M}, {"N", N}, {"K", K}, {"dtype", o.dtype}},
              at::gemm_space(arch, *dtype, M, N, K),
              at::gemm_factory(M, N, K, *dtype, jo),
              [d = *dtype](const at::Config& c) {
                const int splits = at::gemm_split_k(c);
                return format_matmul_config(at::gemm_config(c, d)) +
                       (splits > 1 ? " split-K " + std::to_string(splits) : "");
              },
              [=](double ms) { return fixed(gemm_tflops(M, N, K, ms), 1) + " TFLOP/s"; },
              {},
              [=, d = *dtype](const at::DeviceKey& device) {
                return at::gemm_split_k_key_parts(M, N, K, d, device);
              }};
  job.cost_model =
      at::gemm_cost_model(M, N, K, arch, system_info().gpu ? system_info().device.sm_count : 132);
  job.list_compiled = [](const at::Config& c) { return at::gemm_split_k(c) > 1; };
  const std::vector<int> shares = kernels::split_k_candidates(M, N, K, *dtype, arch);
  if (!shares.empty())
    std::cout << command << ": split-K candidates too: kernels::Matmul's partial GEMM "
              << format_matmul_config(kernels::split_k_config(M, *dtype)) << " over " << shares.front()
              << " to " << shares.back() << " shares of K, then its reduction (" << shares.size()
              << " candidates)\n";
  const int warmup = o.warmup;
  job.prepare = [=, d = *dtype] {
    auto bench = std::make_shared<GemmBench>();
    auto in = std::make_shared<GemmInputs>(make_gemm_inputs(GemmShape{M, N, K}, d, 1));
    bench->compute_reference(*in);
    auto split = std::make_shared<SplitKLauncher>(M, N, d, jo);
    // One candidate on the bench's inputs, into in->C: a split as kernels::Matmul runs it.
    auto launch = [=](const JitKernel& k) {
      if (at::gemm_split_k(k) > 1)
        (*split)(k, *in);
      else
        bench->launch_tessel(k, *in);
    };
    at::Callbacks cb;
    cb.run = launch;
    cb.check = [=](const JitKernel& k, std::string& why) {
      const double err = bench->check([&] { launch(k); }, *in);
      if (!std::isnan(err) && err <= kGemmTolerance) return true;
      why = "relative error " + scientific(err) + " against cuBLAS (tolerance " + scientific(kGemmTolerance) +
            ")";
      return false;
    };
    cb.time = [=](const JitKernel& k, int repeats) {
      return at::summarize(bench->time([&] { launch(k); }, warmup, repeats).ms);
    };
    return cb;
  };
  return run_tune(job, o, *strategy);
}

int run_tune_softmax(const TuneOptions& o) {
  const std::string command = "tessel tune softmax";
  const auto dtype = parse_dtype(o.dtype);
  if (!dtype || (*dtype != DType::f16 && *dtype != DType::bf16 && *dtype != DType::f32)) {
    std::cerr << command << ": --dtype takes f16, bf16 or f32, not '" << o.dtype << "'\n";
    return kExitUsage;
  }
  const auto strategy = parse_strategy_option(command, o.strategy);
  if (!strategy) return kExitUsage;
  const long long M = o.M, N = o.N;
  const std::string arch = system_info().arch();
  JitOptions jo;
  jo.arch = arch;
  jo.compile_time_limit_s = o.compile_time_limit;  // NVRTC stops too, rather than running on unseen
  const double bytes = 2.0 * static_cast<double>(M) * static_cast<double>(N) * dtype_bytes(*dtype);
  TuneJob job{
      command,
      std::to_string(M) + "x" + std::to_string(N) + " " + o.dtype,
      {{"M", M}, {"N", N}, {"dtype", o.dtype}},
      at::softmax_space(arch, M, N, *dtype),
      at::softmax_factory(M, N, *dtype, jo),
      [](const at::Config& c) { return at::softmax_config(c).describe(); },
      [=](double ms) { return fixed(bytes / (ms * 1e-3) / 1e9, 0) + " GB/s"; },
      {},
      [=, d = *dtype](const at::DeviceKey& device) { return at::softmax_key_parts(M, N, d, device); }};
  job.prepare = [=, d = *dtype] {
    auto x = std::make_shared<Tensor>(Tensor::empty({M, N}, d));
    auto y = std::make_shared<Tensor>(Tensor::empty({M, N}, d));
    x->fill_random(1, -6, 6);
    at::Callbacks cb;
    cb.run = [=](const JitKernel& k) { k.launch({*x, *y}); };
    cb.check = [=](const JitKernel& k, std::string& why) {
      y->fill(std::nan(""));  // an unwritten row cannot pass
      k.launch({*x, *y});
      check_cu(driver().cuCtxSynchronize(), "cuCtxSynchronize");
      const double err = sampled_softmax_error(*x, *y, M, N);
      if (!std::isnan(err) && err <= softmax_tolerance(d)) return true;
      why = "relative error " + scientific(err) + " against float64 on 64 rows (tolerance " +
            scientific(softmax_tolerance(d)) + ")";
      return false;
    };
    return cb;  // timed by event_timer: CUDA events, L2 flushed before each repeat
  };
  return run_tune(job, o, *strategy);
}

struct TuneAttentionOptions : TuneOptions {
  std::int64_t batch = 2, heads = 16, kv_heads = 0, seqlen_q = 4096, seqlen_k = 0, dim = 128;
  bool causal = false;
  std::string layout = "bshd";
};

int run_tune_attention(const TuneAttentionOptions& o) {
  const std::string command = "tessel tune attention";
  const auto dtype = parse_dtype(o.dtype);
  if (!dtype || (*dtype != DType::f16 && *dtype != DType::bf16)) {
    std::cerr << command << ": --dtype takes f16 or bf16, not '" << o.dtype << "'\n";
    return kExitUsage;
  }
  const auto strategy = parse_strategy_option(command, o.strategy);
  if (!strategy) return kExitUsage;
  kernels::AttentionShape shape;
  shape.batch = o.batch, shape.heads = o.heads, shape.kv_heads = o.kv_heads ? o.kv_heads : o.heads;
  shape.seqlen_q = o.seqlen_q, shape.seqlen_k = o.seqlen_k ? o.seqlen_k : o.seqlen_q, shape.dim = o.dim;
  if (shape.heads % shape.kv_heads != 0) {
    std::cerr << command << ": --kv-heads: " << shape.kv_heads << " K/V heads do not divide the "
              << shape.heads << " query heads (--heads); legal: a divisor of " << shape.heads << "\n";
    return kExitUsage;
  }
  if (shape.dim % 8 != 0) {
    std::cerr << command << ": --dim: the head dimension is " << shape.dim
              << "; legal: a multiple of 8 from 8 to 256\n";
    return kExitUsage;
  }
  if (o.layout != "bshd" && o.layout != "bhsd") {
    std::cerr << command << ": --layout takes bshd or bhsd, not '" << o.layout << "'\n";
    return kExitUsage;
  }
  if (o.layout == "bhsd") {
    shape.q_strides = kernels::bhsd_strides(shape.batch, shape.seqlen_q, shape.heads, shape.dim);
    shape.k_strides = kernels::bhsd_strides(shape.batch, shape.seqlen_k, shape.kv_heads, shape.dim);
    shape.v_strides = shape.k_strides;
  }
  try {
    kernels::check_attention(shape, *dtype);  // anything the flags above let through
  } catch (const CompileError& e) {
    std::cerr << command << ": " << e.what() << "\n";
    return kExitUsage;
  }
  const bool causal = o.causal;
  const std::string arch = system_info().arch();
  JitOptions jo;
  jo.arch = arch;
  jo.compile_time_limit_s = o.compile_time_limit;  // NVRTC stops too, rather than running on unseen
  const double flops = kernels::attention_flops(shape, causal);
  std::ostringstream problem;
  problem << shape.batch << "x" << shape.heads << "x" << shape.kv_heads << "x" << shape.seqlen_q << "x"
          << shape.seqlen_k << "x" << shape.dim << (causal ? " causal " : " ") << o.layout << " " << o.dtype;
  TuneJob job{command,
              problem.str(),
              {{"batch", shape.batch},
               {"heads", shape.heads},
               {"kv_heads", shape.kv_heads},
               {"seqlen_q", shape.seqlen_q},
               {"seqlen_k", shape.seqlen_k},
               {"dim", shape.dim},
               {"causal", causal},
               {"layout", o.layout},
               {"dtype", o.dtype},
               {"flops", flops}},
              at::attention_space(arch, shape, *dtype, causal, jo),
              at::attention_factory(shape, *dtype, causal, jo),
              [](const at::Config& c) { return at::attention_config(c).describe(); },
              [=](double ms) { return fixed(flops / (ms * 1e-3) / 1e12, 1) + " TFLOP/s"; },
              {},
              [=, d = *dtype](const at::DeviceKey& device) {
                return at::attention_key_parts(shape, d, causal, device);
              }};
  job.list_compiled = [](const at::Config&) { return true; };
  job.prepare = [=, d = *dtype] { return at::attention_callbacks(shape, d, causal, 1); };
  return run_tune(job, o, *strategy);
}

void add_common_options(CLI::App* app, TuneOptions& o) {
  app->add_option("--strategy", o.strategy, "exhaustive, random or halving")->capture_default_str();
  app->add_option("--budget", o.budget, "random: candidates to time (0: a quarter)")
      ->capture_default_str()
      ->check(integer_in(0, INT_MAX));
  app->add_option("--repeats", o.repeats, "Full repeats per timing")
      ->capture_default_str()
      ->check(integer_in(1, kMaxRepeats));
  app->add_option("--warmup", o.warmup, "Untimed runs before each timing")
      ->capture_default_str()
      ->check(integer_in(0, kMaxRepeats));
  app->add_option("--compile-time-limit", o.compile_time_limit,
                  "Seconds a candidate may take to compile before it counts as failed (0: no limit)")
      ->capture_default_str()
      ->check(number_in(0, 86400))
      ->type_name("SECONDS");
  app->add_flag("--compile-only", o.compile_only,
                "Compile the whole space in parallel and report candidates/s");
  app->add_flag("--no-cache", o.no_cache, "Neither read nor write the tuning cache");
  app->add_option("--model-keep", o.model_keep,
                  "halving, gemm: compile only this fraction of the candidates, the best by the cost model "
                  "(at least 16; 1 compiles all)")
      ->capture_default_str()
      ->check(number_in(0, 1));
  app->add_option("--json", o.json_file, "Also write the table and the winner to FILE")->type_name("FILE");
}

}  // namespace

Command add_tune_gemm_command(CLI::App& tune) {
  auto o = std::make_shared<TuneOptions>();
  o->M = o->N = o->K = 4096;
  CLI::App* app = tune.add_subcommand(
      "gemm",
      "Tune the GEMM for one shape: every candidate checked against cuBLAS, the winner cached; tiles, "
      "stages, threads and rasterization panels, on sm_90a also 128x256 tiles in 2-CTA multicast clusters; "
      "for M <= 64 on sm_90 (f16, bf16) the candidates include kernels::Matmul's split-K over 2 to 16 "
      "shares of K, and Matmul's automatic split-K then takes the tuned split");
  app->add_option("--m", o->M, "Rows of A and C")->capture_default_str()->check(dimension());
  app->add_option("--n", o->N, "Columns of B and C")->capture_default_str()->check(dimension());
  app->add_option("--k", o->K, "Columns of A, rows of B")->capture_default_str()->check(dimension());
  app->add_option("--dtype", o->dtype, "f16 or bf16")->capture_default_str();
  app->add_option(
         "--staging", o->staging,
         "auto: when K or N is not a multiple of 8 and kernels::Matmul stages the shape, tune the padded "
         "shape it runs (else the exact shape, which it runs direct); never: the exact shape's kernel")
      ->capture_default_str();
  add_common_options(app, *o);
  return {app, [o] { return run_tune_gemm(*o); }};
}

Command add_tune_softmax_command(CLI::App& tune) {
  auto o = std::make_shared<TuneOptions>();
  o->M = 65536;  // 512 MiB of f16 at N = 4096
  o->N = 4096;
  CLI::App* app = tune.add_subcommand("softmax",
                                      "Tune the softmax for one shape: every candidate checked against "
                                      "float64 on sampled rows, the winner cached");
  app->add_option("--m", o->M, "Rows")->capture_default_str()->check(dimension());
  app->add_option("--n", o->N, "Row length (the softmax's dimension)")
      ->capture_default_str()
      ->check(dimension());
  app->add_option("--dtype", o->dtype, "f16, bf16 or f32")->capture_default_str();
  add_common_options(app, *o);
  return {app, [o] { return run_tune_softmax(*o); }};
}

Command add_tune_attention_command(CLI::App& tune) {
  auto o = std::make_shared<TuneAttentionOptions>();
  CLI::App* app = tune.add_subcommand(
      "attention",
      "Tune FlashAttention's forward pass for one shape: every candidate's O and LSE checked against "
      "float64 on sampled rows, the winner cached for kernels::flash_attention");
  // B and H are grid dimensions: at most 65535 each.
  app->add_option("--batch", o->batch, "The batch size B")->capture_default_str()->check(dimension(65535));
  app->add_option("--heads", o->heads, "Query heads H")->capture_default_str()->check(dimension(65535));
  app->add_option("--kv-heads", o->kv_heads, "K/V heads HKV, dividing H (default: H)")
      ->check(dimension(65535));
  app->add_option("--seqlen-q", o->seqlen_q, "Query length SQ")->capture_default_str()->check(dimension());
  app->add_option("--seqlen-k", o->seqlen_k, "Key length SK (default: SQ)")->check(dimension());
  app->add_option("--dim", o->dim, "Head dimension D (a multiple of 8 up to 256)")
      ->capture_default_str()
      ->check(dimension(256));
  app->add_flag("--causal", o->causal, "The bottom-right causal mask (query i sees keys j <= i + SK - SQ)");
  app->add_option("--layout", o->layout, "Storage of Q, K and V: bshd ([B, S, H, D]) or bhsd ([B, H, S, D])")
      ->capture_default_str();
  app->add_option("--dtype", o->dtype, "f16 or bf16")->capture_default_str();
  add_common_options(app, *o);
  return {app, [o] { return run_tune_attention(*o); }};
}

}  // namespace tessel::cli
