// run_case and run_batch: the checks a fuzz case goes through, and a pool of threads for many.
#include "fuzz/Runner.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "fuzz/Program.hpp"
#include "fuzz/Reference.hpp"
#include "tessel/Error.hpp"
#include "tessel/Jit.hpp"
#include "tessel/interp/Interpreter.hpp"
#include "tessel/runtime/Cache.hpp"
#include "tessel/runtime/Driver.hpp"
#include "tessel/runtime/Tensor.hpp"

namespace tessel::fuzz {

namespace {

using Clock = std::chrono::steady_clock;

std::string first_line(const std::string& s, size_t max_chars = 300) {
  std::string out = s.substr(0, s.find('\n'));
  if (out.size() > max_chars) out = out.substr(0, max_chars) + "...";
  return out;
}

// An error's text, shortened: NVRTC's log can run to pages.
std::string excerpt(const std::string& s, size_t max_chars = 3000) {
  return s.size() > max_chars ? s.substr(0, max_chars) + "..." : s;
}

std::string number(double v) {
  std::ostringstream os;
  os.precision(3);
  os << v;
  return os.str();
}

// ||got - want||_F / max(||magnitude||_F, sqrt(n) * floor), the largest over the outputs;
// infinite on a NaN or an infinity (a poisoned element never written) or a size mismatch.
double relative_error(const std::vector<double>& got, const std::vector<double>& want,
                      const std::vector<double>& magnitude, double floor) {
  if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return std::numeric_limits<double>::infinity();
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += magnitude[i] * magnitude[i];
  }
  const double scale = std::max(std::sqrt(norm), std::sqrt(static_cast<double>(got.size())) * floor);
  return scale > 0 ? std::sqrt(diff) / scale : std::sqrt(diff);
}

double worst_error(const std::vector<std::vector<double>>& got, const std::vector<std::vector<double>>& want,
                   const std::vector<std::vector<double>>& magnitudes, double floor) {
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i)
    worst = std::max(worst, i < got.size() ? relative_error(got[i], want[i], magnitudes[i], floor)
                                           : std::numeric_limits<double>::infinity());
  return worst;
}

// Values below f16's smallest normal (2^-14) are stored with an absolute spacing of 2^-24, not
// a relative one: outputs that small are compared as if they were 2^-14 (their rounding is then
// within one unit of roundoff, like any other's).
// The row length of the first output: N for gemm, tile and softmax; attention's O is [M, K].
std::int64_t output_cols(const FuzzCase& c) { return c.family == Family::Attention ? c.K : c.N; }

// Where a mismatch is: the element with the largest difference (a NaN or an infinity first)
// of the worst output, its flat index, row and column (outputs are row-major with `cols`
// columns), and how many elements differ by more than 1 % of that output's largest magnitude.
std::string worst_element(const std::vector<std::vector<double>>& got, const std::vector<std::vector<double>>& want,
                          const std::vector<std::vector<double>>& magnitudes, std::int64_t cols) {
  std::ostringstream os;
  for (size_t o = 0; o < want.size() && o < got.size(); ++o) {
    if (got[o].size() != want[o].size()) continue;
    double scale = 0;
    for (double m : magnitudes[o]) scale = std::max(scale, std::abs(m));
    size_t worst = 0;
    double worst_diff = -1;
    std::int64_t off = 0;
    for (size_t i = 0; i < got[o].size(); ++i) {
      const double d = std::isfinite(got[o][i]) ? std::abs(got[o][i] - want[o][i])
                                                : std::numeric_limits<double>::infinity();
      if (d > 0.01 * scale) ++off;
      if (d > worst_diff) worst_diff = d, worst = i;
    }
    if (off == 0) continue;
    os << "; output " << o << ": " << off << " of " << got[o].size() << " elements off, worst at ["
       << worst << "]";
    if (cols > 0) os << " (row " << static_cast<std::int64_t>(worst) / cols << ", col " << static_cast<std::int64_t>(worst) % cols << ")";
    os << " got " << got[o][worst] << " want " << want[o][worst];
  }
  return os.str();
}

double error_floor(const FuzzCase& c) {
  return c.dtype == DType::f16 || c.out_dtype == DType::f16 ? 0x1p-14 : 0.0;
}

void fail(CaseResult& r, const std::string& kind, const std::string& stage, const std::string& detail) {
  if (r.outcome == Outcome::Fail) return;  // the first failure is the one reported
  r.outcome = Outcome::Fail;
  r.kind = kind;
  r.stage = stage;
  r.detail = detail;
}

void reject(CaseResult& r, const std::string& stage, const std::string& detail) {
  if (r.outcome != Outcome::Pass) return;
  r.outcome = Outcome::Rejected;
  r.kind = "rejected";
  r.stage = stage;
  r.detail = detail;
}

// GPU launches come one at a time, whatever the pool's width: the context is shared and
// the comparison wants the device to itself.
std::mutex& gpu_mutex() {
  static std::mutex m;
  return m;
}

std::string& fault_case() {
  static std::string s;  // guarded by gpu_mutex()
  return s;
}

// A CUDA error after which the context cannot be used again.
bool sticky_fault(const std::string& what) {
  for (const char* code : {"CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_MISALIGNED_ADDRESS", "CUDA_ERROR_LAUNCH_FAILED",
                           "CUDA_ERROR_ILLEGAL_INSTRUCTION", "CUDA_ERROR_HARDWARE_STACK_ERROR",
                           "CUDA_ERROR_INVALID_ADDRESS_SPACE", "CUDA_ERROR_INVALID_PC", "CUDA_ERROR_ASSERT"})
    if (what.find(code) != std::string::npos) return true;
  return false;
}

struct ContextDead {};

std::vector<std::vector<double>> run_on_gpu(const JitKernel& k, const FuzzCase& c,
                                            const std::vector<interp::HostTensor>& args) {
  std::lock_guard<std::mutex> lock(gpu_mutex());
  if (!fault_case().empty()) throw ContextDead{};
  ensure_context();
  const std::vector<Param> params = parameters(c);
  std::vector<Tensor> dev;
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor t = Tensor::empty(params[i].shape, params[i].dtype);
    if (params[i].output)
      t.fill(std::nan(""));
    else
      t.copy_from_host(args[i].bytes.data());
    dev.push_back(t);
  }
  try {
    k.launch(dev);
    check_cu(driver().cuCtxSynchronize(), "cuCtxSynchronize after a fuzzed kernel");
  } catch (const std::exception& e) {
    if (sticky_fault(e.what())) fault_case() = c.summary();
    throw;
  }
  std::vector<std::vector<double>> out;
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i].output) out.push_back(dev[i].to_host_f64());
  return out;
}

}  // namespace

const char* outcome_name(Outcome o) {
  switch (o) {
    case Outcome::Pass:
      return "pass";
    case Outcome::Rejected:
      return "rejected";
    case Outcome::Fail:
      return "fail";
  }
  return "?";
}

CaseResult run_case(const FuzzCase& c, const RunOptions& o) {
  CaseResult r;
  const auto t0 = Clock::now();
  r.tolerance = tolerance(c);
  PrimFunc f;
  try {
    f = build_program(c);
  } catch (const CompileError& e) {
    reject(r, "frontend", first_line(e.what()));
    return r;
  } catch (const std::exception& e) {
    fail(r, "internal-error", "frontend", first_line(e.what()));
    return r;
  }
  std::vector<interp::HostTensor> args = make_arguments(c);
  const Expected expected = evaluate_float64(c, args);
  const std::vector<std::vector<double>>& want = expected.values;
  std::vector<std::vector<double>> interp_out;
  std::string interp_error;
  if (o.interpret) {
    try {
      std::vector<interp::HostTensor*> ptrs;
      for (interp::HostTensor& a : args) ptrs.push_back(&a);
      interp::interpret(f.ir(), ptrs);
      for (int i : output_indices(c)) interp_out.push_back(args[static_cast<size_t>(i)].to_values());
      r.interp_error = worst_error(interp_out, want, expected.magnitudes, error_floor(c));
      if (!(r.interp_error <= r.tolerance))
        fail(r, "mismatch", "interpreter",
             "interpreter vs float64: relative error " + number(r.interp_error) + " > tolerance " +
                 number(r.tolerance) + worst_element(interp_out, want, expected.magnitudes, output_cols(c)));
    } catch (const std::exception& e) {
      interp_error = first_line(e.what());
    }
  }

  std::vector<std::string> archs = o.archs;
  std::string device_arch;
  if (o.gpu) {
    device_arch = current_device().arch();
    if (std::find(archs.begin(), archs.end(), device_arch) == archs.end()) archs.push_back(device_arch);
  }
  bool rejected_somewhere = false;
  for (const std::string& arch : archs) {
    JitOptions jo;
    jo.out_idx = output_indices(c);
    jo.arch = arch;
    JitKernel k;
    try {
      k = jit(f, jo);
      r.compiled.push_back(arch);
      const std::string& path = k.info().path;
      r.paths.push_back(arch + ": " + path.substr(0, path.find(';')));
      r.spill_bytes =
          std::max(r.spill_bytes, k.resources().spill_store_bytes + k.resources().spill_load_bytes);
    } catch (const CompileError& e) {
      rejected_somewhere = true;
      reject(r, arch, first_line(e.what()));
      continue;
    } catch (const InternalError& e) {
      fail(r, "internal-error", arch, excerpt(e.what()));
      continue;
    } catch (const std::exception& e) {
      fail(r, "compile-failure", arch, excerpt(e.what()));
      continue;
    }
    if (!o.gpu || arch != device_arch) continue;
    try {
      const std::vector<std::vector<double>> got = run_on_gpu(k, c, make_arguments(c));
      r.gpu_error = worst_error(got, want, expected.magnitudes, error_floor(c));
      const double vs_interp =
          interp_out.empty() ? 0 : worst_error(got, interp_out, expected.magnitudes, error_floor(c));
      if (!(r.gpu_error <= r.tolerance) || !(vs_interp <= 2 * r.tolerance))
        fail(r, "gpu-mismatch", "gpu",
             "GPU vs float64: relative error " + number(r.gpu_error) + ", GPU vs interpreter " +
                 number(vs_interp) + "; tolerance " + number(r.tolerance) +
                 worst_element(got, want, expected.magnitudes, output_cols(c)));
    } catch (const ContextDead&) {
      // An earlier case's kernel faulted: this one is not run on the GPU (see gpu_fault_case).
    } catch (const std::exception& e) {
      if (sticky_fault(e.what()))
        fail(r, "gpu-fault", "gpu",
             excerpt(e.what()) + " (the CUDA context is dead: later cases run without the GPU)");
      else
        fail(r, "gpu-error", "gpu", excerpt(e.what()));
    }
  }
  // The interpreter refusing a program is a failure unless the compiler refuses it too.
  if (!interp_error.empty() && !rejected_somewhere) fail(r, "interpreter-error", "interpreter", interp_error);
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

std::uint64_t case_seed(std::uint64_t batch_seed, int index) {
  std::uint64_t z = batch_seed * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(index) + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return (z ^ (z >> 31)) & 0xFFFFFFFFFFFFull;  // 48 bits: short enough to type
}

BatchReport run_batch(const BatchOptions& o) {
  BatchReport report;
  const auto t0 = Clock::now();
  std::atomic<int> next{0};
  std::mutex mutex;
  auto worker = [&](int id) {
    for (int i; (i = next++) < o.count;) {
      const FuzzCase c = generate_case(case_seed(o.seed, i), o.family);
      if (o.on_start) o.on_start(id, c);
      RunOptions ro = o.run;
      if (o.compile_every <= 0 || i % o.compile_every != 0) ro.archs.clear();
      CaseResult r = run_case(c, ro);
      std::lock_guard<std::mutex> lock(mutex);
      ++report.programs;
      for (const std::string& a : r.compiled) ++report.compiled[a];
      for (const std::string& p : r.paths) ++report.paths[p];
      if (r.spill_bytes > 0) ++report.spilled;
      if (r.gpu_error >= 0) ++report.gpu_runs;
      switch (r.outcome) {
        case Outcome::Pass:
          ++report.passed;
          if (r.tolerance > 0) {
            report.worst_interp_ratio = std::max(report.worst_interp_ratio, r.interp_error / r.tolerance);
            report.worst_gpu_ratio = std::max(report.worst_gpu_ratio, r.gpu_error / r.tolerance);
          }
          break;
        case Outcome::Rejected:
          ++report.rejected;
          ++report.rejections[r.stage + ": " + r.detail.substr(0, 160)];
          break;
        case Outcome::Fail:
          ++report.failed;
          report.failures.emplace_back(c, r);
          break;
      }
      if (o.on_result) o.on_result(i, c, r);
      // Every program compiles to a different kernel: keep the in-process cache from growing
      // with the batch.
      if (report.programs % 256 == 0) KernelCache::global().clear_memory();
    }
  };
  const int jobs = std::max(1, o.jobs);
  std::vector<std::thread> threads;
  for (int j = 1; j < jobs; ++j) threads.emplace_back(worker, j);
  worker(0);
  for (std::thread& t : threads) t.join();
  report.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return report;
}

std::string gpu_fault_case() {
  std::lock_guard<std::mutex> lock(gpu_mutex());
  return fault_case();
}

std::string report_json(const BatchOptions& o, const BatchReport& r) {
  nlohmann::json j;
  j["seed"] = o.seed;
  j["count"] = o.count;
  j["family"] = o.family < 0 ? std::string("all") : std::string(family_name(static_cast<Family>(o.family)));
  j["archs"] = o.run.archs;
  j["compile_every"] = o.compile_every;
  j["gpu"] = o.run.gpu;
  j["jobs"] = o.jobs;
  j["programs"] = r.programs;
  j["passed"] = r.passed;
  j["rejected"] = r.rejected;
  j["failed"] = r.failed;
  j["gpu_runs"] = r.gpu_runs;
  j["gpu_fault_case"] = gpu_fault_case();
  j["compiled"] = r.compiled;
  j["seconds"] = r.seconds;
  j["worst_interp_error_over_tolerance"] = r.worst_interp_ratio;
  j["worst_gpu_error_over_tolerance"] = r.worst_gpu_ratio;
  j["rejections"] = r.rejections;
  j["paths"] = r.paths;
  j["programs_with_spills"] = r.spilled;
  nlohmann::json failures = nlohmann::json::array();
  for (const auto& [c, res] : r.failures)
    failures.push_back({{"summary", c.summary()},
                        {"signature", res.signature()},
                        {"detail", res.detail},
                        {"case", c.to_text()}});
  j["failures"] = failures;
  return j.dump(2);
}

}  // namespace tessel::fuzz
