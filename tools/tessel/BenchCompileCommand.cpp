// tessel bench compile: what the JIT costs — a cold compile of one GEMM variant (an empty disk
// cache in a fresh temporary folder, the in-process cache cleared) and cache hits from memory
// and from disk. Targets (DESIGN.md §6): cold < 1 s, hit < 10 ms. Needs no GPU.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include "tessel/kernels/gemm/Matmul.hpp"
#include "tessel/runtime/Cache.hpp"
#include "tools/tessel/Commands.hpp"
#include "tools/tessel/GemmConfigs.hpp"
#include "tools/tessel/Output.hpp"
#include "tools/tessel/Parse.hpp"
#include "tools/tessel/System.hpp"

namespace tessel::cli {

namespace {

namespace fs = std::filesystem;

constexpr double kColdTargetMs = 1000, kHitTargetMs = 10;

struct BenchCompileOptions {
  int M = 4096, N = 4096, K = 4096;
  std::string dtype = "f16";
  std::string config;
  std::string arch;
  int cold_repeats = 3;
  int repeats = 20;
  std::string json_file;
};

// Sets an environment variable for the life of the object, then puts the old value back.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

struct Sample {
  double wall_ms;     // the whole make_matmul call: frontend, passes, codegen, cache/NVRTC
  double compile_ms;  // the cache's own report (resources().compile_ms)
  bool cache_hit;
  std::string source_sha256;  // so that runs can be shown to have compiled the same thing
  std::size_t source_bytes, ptx_bytes;
  int registers;
};

nlohmann::json samples_json(const std::vector<Sample>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (const Sample& s : v)
    a.push_back({{"wall_ms", s.wall_ms},
                 {"compile_ms", s.compile_ms},
                 {"cache_hit", s.cache_hit},
                 {"source_sha256", s.source_sha256},
                 {"source_bytes", s.source_bytes},
                 {"ptx_bytes", s.ptx_bytes},
                 {"registers", s.registers}});
  return a;
}

double median_wall(const std::vector<Sample>& v) {
  std::vector<double> w;
  for (const Sample& s : v) w.push_back(s.wall_ms);
  return median(w);
}

int run_bench_compile(const BenchCompileOptions& o) {
  const auto dtype = parse_dtype(o.dtype);
  if (!dtype || (*dtype != DType::f16 && *dtype != DType::bf16)) {
    std::cerr << "tessel bench compile: --dtype must be f16 or bf16, not '" << o.dtype << "'\n";
    return kExitUsage;
  }
  const SystemInfo& s = system_info();
  const GemmShape shape{o.M, o.N, o.K};
  kernels::MatmulConfig config;
  try {
    config = o.config.empty() ? default_gemm_config(shape, *dtype, s.smem_cap())
                              : parse_matmul_config(o.config, *dtype);
  } catch (const std::invalid_argument& e) {
    std::cerr << "tessel bench compile: " << e.what() << "\n";
    return kExitUsage;
  }
  JitOptions jo;
  jo.arch = o.arch.empty() ? s.arch() : o.arch;

  auto compile = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    const JitKernel k = kernels::make_matmul(o.M, o.N, o.K, config, jo);
    const auto t1 = std::chrono::steady_clock::now();
    return Sample{std::chrono::duration<double, std::milli>(t1 - t0).count(),
                  k.resources().compile_ms,
                  k.resources().cache_hit,
                  sha256_hex(k.source()),
                  k.source().size(),
                  k.ptx().size(),
                  k.resources().registers};
  };

  char tmpl[] = "/tmp/tessel-bench-compile-XXXXXX";
  if (!mkdtemp(tmpl))
    throw RuntimeError("tessel bench compile: cannot create a temporary cache folder in /tmp");
  const fs::path root = tmpl;
  std::vector<Sample> cold, memory_hits, disk_hits;
  std::uint64_t disk_hits_seen = 0;
  try {
    KernelCache& cache = KernelCache::global();
    {
      Progress progress(o.cold_repeats + 2 * o.repeats, false);
      for (int i = 0; i < o.cold_repeats; ++i) {
        // A folder of its own for each cold run: nothing on disk, nothing in memory.
        ScopedEnv env("TESSEL_CACHE_DIR", (root / ("cold-" + std::to_string(i))).string());
        cache.clear_memory();
        progress.step("cold compile " + std::to_string(i + 1));
        cold.push_back(compile());
      }
      ScopedEnv env("TESSEL_CACHE_DIR", (root / ("cold-" + std::to_string(o.cold_repeats - 1))).string());
      for (int i = 0; i < o.repeats; ++i) {
        progress.step("memory hit " + std::to_string(i + 1));
        memory_hits.push_back(compile());
      }
      cache.reset_stats();
      for (int i = 0; i < o.repeats; ++i) {
        cache.clear_memory();
        progress.step("disk hit " + std::to_string(i + 1));
        disk_hits.push_back(compile());
      }
      disk_hits_seen = cache.stats().disk_hits;
    }
    cache.clear_memory();  // its entries point at folders about to be removed
  } catch (...) {
    std::error_code ec;
    fs::remove_all(root, ec);
    throw;
  }
  std::error_code ec;
  fs::remove_all(root, ec);

  bool same_source = true;
  for (const auto* v : {&cold, &memory_hits, &disk_hits})
    for (const Sample& x : *v) same_source = same_source && x.source_sha256 == cold.front().source_sha256;
  const std::string kernel_line = std::string("  kernel: ") + std::to_string(cold.front().source_bytes) +
                                  " B of CUDA C++ (sha256 " + cold.front().source_sha256.substr(0, 12) +
                                  "), " + std::to_string(cold.front().ptx_bytes) + " B of PTX, " +
                                  std::to_string(cold.front().registers) + " registers\n";
  const double cold_first = cold.front().wall_ms, cold_median = median_wall(cold);
  const double mem_median = median_wall(memory_hits), disk_median = median_wall(disk_hits);
  auto verdict = [](double ms, double target) { return ms < target ? "meets" : "MISSES"; };
  std::cout << "JIT compile of the tutorial GEMM " << shape.describe() << " " << dtype_name(*dtype)
            << ", config " << format_matmul_config(config) << ", for " << jo.arch << " (NVRTC "
            << cuda_version_string(s.nvrtc_version) << ")\n"
            << kernel_line << "  cold, first in this process: " << right(fixed(cold_first, 1), 9) << " ms\n"
            << "  cold, median of " << right(std::to_string(cold.size()), 3) << ":          "
            << right(fixed(cold_median, 1), 9) << " ms   " << verdict(cold_median, kColdTargetMs) << " the < "
            << kColdTargetMs << " ms target\n"
            << "  memory hit, median of " << right(std::to_string(memory_hits.size()), 3) << ":    "
            << right(fixed(mem_median, 3), 9) << " ms   " << verdict(mem_median, kHitTargetMs) << " the < "
            << kHitTargetMs << " ms target\n"
            << "  disk hit, median of " << right(std::to_string(disk_hits.size()), 3) << ":      "
            << right(fixed(disk_median, 3), 9) << " ms   " << verdict(disk_median, kHitTargetMs) << " the < "
            << kHitTargetMs << " ms target\n"
            << "  (wall time of the whole jit call: frontend, passes, codegen, cache look-up or NVRTC)\n";
  if (!same_source) std::cout << "  warning: the runs did not all generate the same source\n";
  bool honest = true;
  for (const Sample& c : cold) honest = honest && !c.cache_hit;
  for (const Sample& h : memory_hits) honest = honest && h.cache_hit;
  for (const Sample& h : disk_hits) honest = honest && h.cache_hit;
  if (!honest)
    std::cout
        << "  warning: a cold run hit the cache or a hit run missed it; the figures are not what they say\n";
  if (disk_hits_seen < disk_hits.size())
    std::cout << "  warning: only " << disk_hits_seen << " of " << disk_hits.size()
              << " disk-hit runs were served from disk\n";

  if (!o.json_file.empty()) {
    nlohmann::json j = provenance_json();
    j["tool"] = "tessel bench compile";
    j["kernel"] = {
        {"M", o.M},       {"N", o.N}, {"K", o.K}, {"dtype", o.dtype}, {"config", config_json(config)},
        {"arch", jo.arch}};
    j["targets_ms"] = {{"cold", kColdTargetMs}, {"hit", kHitTargetMs}};
    j["cold_first_ms"] = cold_first;
    j["cold_median_ms"] = cold_median;
    j["memory_hit_median_ms"] = mem_median;
    j["disk_hit_median_ms"] = disk_median;
    j["samples"] = {{"cold", samples_json(cold)},
                    {"memory_hit", samples_json(memory_hits)},
                    {"disk_hit", samples_json(disk_hits)}};
    j["consistent"] = honest && same_source;
    write_json_file(o.json_file, j);
    std::cout << "wrote " << o.json_file << "\n";
  }
  return kExitOk;
}

}  // namespace

Command add_bench_compile_command(CLI::App& bench) {
  auto o = std::make_shared<BenchCompileOptions>();
  CLI::App* app = bench.add_subcommand("compile",
                                       "JIT cost of one GEMM variant: cold compile (empty cache) and cache "
                                       "hits from memory and disk (no GPU needed)");
  app->add_option("--m", o->M, "Rows of A and C")->capture_default_str()->check(dimension());
  app->add_option("--n", o->N, "Columns of B and C")->capture_default_str()->check(dimension());
  app->add_option("--k", o->K, "Columns of A, rows of B")->capture_default_str()->check(dimension());
  app->add_option("--dtype", o->dtype, "f16 or bf16")->capture_default_str();
  app->add_option("--config", o->config,
                  "BMxBNxBK:stages:threads[:swz[N]][:cXxY] (default: the built-in table)")
      ->type_name("CONFIG");
  app->add_option("--arch", o->arch, "NVRTC target (default: the GPU's, else sm_90a)")->check(arch());
  app->add_option("--cold-repeats", o->cold_repeats, "Cold compiles, each with an empty cache")
      ->capture_default_str()
      ->check(integer_in(1, 1000));
  app->add_option("--repeats", o->repeats, "Cache hits timed, from memory and from disk each")
      ->capture_default_str()
      ->check(integer_in(1, kMaxRepeats));
  app->add_option("--json", o->json_file, "Also write the results as JSON to FILE")->type_name("FILE");
  return {app, [o] { return run_bench_compile(*o); }};
}

}  // namespace tessel::cli
