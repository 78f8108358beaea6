// Running fuzz cases: one case through the interpreter (against float64), NVRTC for each arch
// asked, and the GPU when asked; batches of generated cases on a pool of threads; the
// minimizer, which shrinks a failing case while it keeps failing the same way.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "fuzz/FuzzCase.hpp"

namespace tessel::fuzz {

struct RunOptions {
  bool interpret = true;                              // the interpreter against float64
  std::vector<std::string> archs{"sm_80", "sm_90a"};  // compiled through the whole pipeline and NVRTC
  bool gpu = false;  // also run the kernel for the device's own arch (compiled if not listed) on it
};

enum class Outcome { Pass, Rejected, Fail };
const char* outcome_name(Outcome o);

struct CaseResult {
  Outcome outcome = Outcome::Pass;
  // Fail: "mismatch" (interpreter vs float64), "interpreter-error" (an access the interpreter
  // refused in a program the compiler accepts), "internal-error", "compile-failure" (NVRTC,
  // ptxas or any other exception while compiling), "gpu-mismatch", "gpu-error", "gpu-fault" (a
  // sticky CUDA error -- illegal or misaligned address, launch failure, illegal instruction --
  // after which the process's CUDA context is dead: later cases run without the GPU);
  // Rejected: "rejected" (a CompileError).
  std::string kind;
  std::string stage;   // where: "frontend", "interpreter", an arch, "gpu"
  std::string detail;  // the error's text, or the errors and the tolerance
  double interp_error = -1, gpu_error = -1, tolerance = 0;
  std::vector<std::string> compiled;  // the archs compiled without error
  std::vector<std::string> paths;     // "arch: KernelInfo::path" of each, to show what was covered
  int spill_bytes = 0;                // the most spill loads + stores ptxas reported for an arch
  double seconds = 0;
  // Fail and Rejected compare by this: the outcome, kind and stage.
  std::string signature() const { return std::string(outcome_name(outcome)) + "/" + kind + "/" + stage; }
};

CaseResult run_case(const FuzzCase& c, const RunOptions& o);

// Empty while the GPU is usable; after a sticky fault, the summary of the case whose kernel
// faulted (GPU runs are skipped from then on, so that the minimizer and later cases do not mistake
// the dead context for failures of their own).
std::string gpu_fault_case();

// Case i of a batch: generate_case(case_seed(seed, i)).
std::uint64_t case_seed(std::uint64_t batch_seed, int index);

struct BatchOptions {
  std::uint64_t seed = 1;
  int count = 100;
  int family = -1;  // all
  RunOptions run;
  // Compile only every n-th case (index % n == 0) for the archs; the others are interpreted only.
  int compile_every = 1;
  int jobs = 1;
  // Called (under a lock, in completion order) after each case.
  std::function<void(int index, const FuzzCase&, const CaseResult&)> on_result;
  // Called before a case starts (from its worker thread): e.g. to save it for a crash.
  std::function<void(int worker, const FuzzCase&)> on_start;
};

struct BatchReport {
  int programs = 0, passed = 0, rejected = 0, failed = 0;
  std::map<std::string, int> compiled;    // arch -> programs compiled
  std::map<std::string, int> rejections;  // first line of each CompileError -> count
  std::map<std::string, int> paths;       // "arch: path" -> programs compiled to it
  int spilled = 0;                        // programs whose kernel spilled registers (not a failure)
  std::vector<std::pair<FuzzCase, CaseResult>> failures;
  double seconds = 0;
  int gpu_runs = 0;
  // The largest error / tolerance among passing programs: how close the batch came to failing.
  double worst_interp_ratio = 0, worst_gpu_ratio = 0;
};

BatchReport run_batch(const BatchOptions& o);

// Shrinks `c`, which fails with `result`, by greedy steps (simpler expressions, knobs off,
// smaller sizes and tiles) each kept only when the case still fails with the same signature.
// Gives up after `max_attempts` runs. `log` gets one line per kept step.
FuzzCase minimize(const FuzzCase& c, const CaseResult& result, const RunOptions& o, int max_attempts = 300,
                  const std::function<void(const std::string&)>& log = {});

// The greedy loop minimize runs, for any notion of failing (tests plant one).
FuzzCase shrink(const FuzzCase& c, const std::function<bool(const FuzzCase&)>& still_fails, int max_attempts,
                const std::function<void(const std::string&)>& log = {});

// The batch as JSON (options, counts, rejections, failures with their case texts).
std::string report_json(const BatchOptions& o, const BatchReport& r);

}  // namespace tessel::fuzz
