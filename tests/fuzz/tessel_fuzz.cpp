// tessel_fuzz: generates random Tessel programs and checks each one (docs/fuzzing.md).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include "fuzz/FuzzCase.hpp"
#include "fuzz/Program.hpp"
#include "fuzz/Runner.hpp"
#include "tessel/Jit.hpp"
#include "tessel/runtime/Driver.hpp"

namespace fs = std::filesystem;
using namespace tessel::fuzz;

namespace {

constexpr const char* kHelp =
    R"(tessel_fuzz: random Tessel programs, each checked against a float64 evaluation.

Each program (a GEMM, a Parallel + reduction tile, a softmax, or an attention-like gemm chain,
with random tiles, stages, threads, transposes, sizes with tails, offsets and expressions) is
  - run on the CPU reference interpreter and compared with a float64 evaluation of the same
    program (Frobenius error relative to the magnitudes the program computes from, within a
    tolerance for its dtypes and reduction lengths; outputs are NaN-poisoned first, so an
    element never written fails);
  - compiled through the whole pipeline and NVRTC for each --arch (no GPU needed);
  - with --gpu, also run on the GPU (compiled for the device's arch) and compared with float64
    and with the interpreter.
A CompileError is counted as "rejected" (the program broke a rule of the language); an internal
error, an NVRTC/ptxas failure, an interpreter error on a program the compiler accepts, or a
mismatch is a failure. Failures are minimized and, with --out, written as regression cases
(.case, reloadable with --replay) and C++ reproducers (.cpp).

usage: tessel_fuzz [options]
  --seed S            batch seed (default 1); case i has seed case_seed(S, i)
  --count N           programs to generate (default 100)
  --family F          gemm, tile, softmax, attention or all (default all)
  --arch A[,B]        archs to compile for (default sm_80,sm_90a); "none": interpreter only
  --compile-every N   compile only cases whose index is a multiple of N (default 1: all)
  --gpu               also run each program on the GPU, compiled for the device's arch
                      (--arch none --gpu compiles for that arch only); exit 2 without a GPU
  --jobs N            worker threads (default: the number of cores)
  --out DIR           write failing cases (minimized) there as <family>-<seed>.case and .cpp
  --json FILE         write the batch report as JSON
  --replay FILE       run one .case file (--arch, --gpu, --out and --no-minimize apply)
  --print-cpp FILE    print the C++ reproducer of a .case file and exit
  --print-cuda FILE   print the CUDA the compiler generates for a .case file (for the first
                      --arch, default sm_90a) and exit; TESSEL_DUMP=after:<pass> adds the IR
  --no-minimize       report failures as generated
  --verbose           one line per program
  --help              this text
exit status: 0 no failures, 1 failures, 2 usage or setup error
)";

[[noreturn]] void usage_error(const std::string& what) {
  std::cerr << "tessel_fuzz: " << what << " (see --help)\n";
  std::exit(2);
}

long long parse_int(const std::string& flag, const std::string& v, long long lo, long long hi) {
  long long x = 0;
  size_t used = 0;
  try {
    x = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != v.size() || x < lo || x > hi)
    usage_error(flag + " wants an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                "], got '" + v + "'");
  return x;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) usage_error("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string first_line_of(const std::string& s) {
  return s.substr(0, s.find('\n'));
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p);
  out << text;
}

}  // namespace

int main(int argc, char** argv) {
  BatchOptions o;
  o.jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::string out_dir, json_path, replay, print_cpp, print_cuda;
  bool do_minimize = true, verbose = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      std::cout << kHelp;
      return 0;
    } else if (a == "--seed") {
      o.seed = static_cast<std::uint64_t>(parse_int(a, value(), 0, (1LL << 62)));
    } else if (a == "--count") {
      o.count = static_cast<int>(parse_int(a, value(), 0, 10'000'000));
    } else if (a == "--family") {
      const std::string f = value();
      if (f == "all") {
        o.family = -1;
      } else {
        o.family = -2;
        for (int k = 0; k < 4; ++k)
          if (f == family_name(static_cast<Family>(k))) o.family = k;
        if (o.family == -2)
          usage_error("--family: unknown family '" + f + "' (gemm, tile, softmax, attention, all)");
      }
    } else if (a == "--arch") {
      const std::string v = value();
      o.run.archs.clear();
      if (v != "none") {
        std::stringstream ss(v);
        for (std::string arch; std::getline(ss, arch, ',');)
          if (!arch.empty()) o.run.archs.push_back(arch);
      }
    } else if (a == "--compile-every") {
      o.compile_every = static_cast<int>(parse_int(a, value(), 1, 1'000'000));
    } else if (a == "--gpu") {
      o.run.gpu = true;
    } else if (a == "--jobs") {
      o.jobs = static_cast<int>(parse_int(a, value(), 1, 1024));
    } else if (a == "--out") {
      out_dir = value();
    } else if (a == "--json") {
      json_path = value();
    } else if (a == "--replay") {
      replay = value();
    } else if (a == "--print-cpp") {
      print_cpp = value();
    } else if (a == "--print-cuda") {
      print_cuda = value();
    } else if (a == "--no-minimize") {
      do_minimize = false;
    } else if (a == "--verbose") {
      verbose = true;
    } else {
      usage_error("unknown option '" + a + "'");
    }
  }
  try {
    if (!print_cpp.empty()) {
      std::cout << cpp_reproducer(parse_case(read_file(print_cpp)));
      return 0;
    }
    if (!print_cuda.empty()) {
      const FuzzCase c = parse_case(read_file(print_cuda));
      tessel::JitOptions jo;
      jo.out_idx = output_indices(c);
      jo.arch = o.run.archs.empty() ? "sm_90a" : o.run.archs.front();
      std::cout << tessel::jit(build_program(c), jo).source();
      return 0;
    }
    if (o.run.gpu && !tessel::gpu_available()) {
      std::cerr << "tessel_fuzz: --gpu, but no GPU: " << tessel::gpu_unavailable_reason() << "\n";
      return 2;
    }
    if (!out_dir.empty()) fs::create_directories(out_dir);

    auto handle_failure = [&](const FuzzCase& c, const CaseResult& r) {
      std::cout << "FAIL " << r.signature() << ": " << c.summary() << "\n  " << r.detail << "\n";
      FuzzCase small = c;
      if (do_minimize) {
        small = minimize(c, r, o.run, 300);
        std::cout << "  minimized: " << small.summary() << "\n";
      }
      if (!out_dir.empty()) {
        const std::string stem = std::string(family_name(small.family)) + "-" + std::to_string(c.seed);
        write_file(fs::path(out_dir) / (stem + ".case"),
                   "# " + r.signature() + ": " + first_line_of(r.detail) + "\n" + small.to_text());
        write_file(fs::path(out_dir) / (stem + ".cpp"), cpp_reproducer(small));
        std::cout << "  written: " << (fs::path(out_dir) / (stem + ".case")).string() << " and .cpp\n";
      } else {
        std::cout << small.to_text();
      }
    };

    if (!replay.empty()) {
      const FuzzCase c = parse_case(read_file(replay));
      const CaseResult r = run_case(c, o.run);
      std::cout << outcome_name(r.outcome) << " " << c.summary() << " (" << r.seconds << " s)";
      if (r.outcome != Outcome::Pass) std::cout << "\n  " << r.signature() << ": " << r.detail;
      std::cout << "\n";
      if (r.outcome == Outcome::Fail) handle_failure(c, r);
      return r.outcome == Outcome::Fail ? 1 : 0;
    }

    std::mutex print;
    std::vector<std::pair<FuzzCase, CaseResult>> failures;
    int done = 0;
    o.on_start = [&](int worker, const FuzzCase& c) {
      // A crash takes the process with it: the case it was on stays behind.
      if (!out_dir.empty())
        write_file(fs::path(out_dir) / ("running-" + std::to_string(worker) + ".case"), c.to_text());
    };
    o.on_result = [&](int index, const FuzzCase& c, const CaseResult& r) {
      ++done;
      if (verbose || r.outcome == Outcome::Fail)
        std::cout << "[" << index << "] " << outcome_name(r.outcome) << " " << c.summary() << " ("
                  << static_cast<int>(r.seconds * 1000) << " ms" <<
            [&] {
              std::string s;
              for (const std::string& p : r.paths) s += "; " + p;
              return s;
            }() << ")"
                  << (r.outcome != Outcome::Pass ? "\n    " + r.signature() + ": " + r.detail : "")
                  << std::endl;
      else if (done % 100 == 0)
        std::cout << "... " << done << " / " << o.count << std::endl;
    };
    std::cout << "tessel_fuzz: seed " << o.seed << ", " << o.count << " programs, archs "
              << (o.run.archs.empty() ? std::string("none") : [&] {
                   std::string s;
                   for (const auto& a : o.run.archs) s += (s.empty() ? "" : ",") + a;
                   return s;
                 }())
              << (o.compile_every > 1 ? " (every " + std::to_string(o.compile_every) + "th program)" : "")
              << (o.run.gpu ? ", GPU" : "") << ", " << o.jobs << " jobs" << std::endl;
    const BatchReport report = run_batch(o);
    if (!out_dir.empty())
      for (int w = 0; w < o.jobs; ++w)
        fs::remove(fs::path(out_dir) / ("running-" + std::to_string(w) + ".case"));
    for (const auto& [c, r] : report.failures) handle_failure(c, r);
    std::cout << "tessel_fuzz: " << report.programs << " programs: " << report.passed << " passed, "
              << report.rejected << " rejected, " << report.failed << " failed";
    for (const auto& [arch, n] : report.compiled) std::cout << "; " << n << " compiled for " << arch;
    if (o.run.gpu) std::cout << "; " << report.gpu_runs << " run on the GPU";
    std::cout << "; " << report.seconds << " s; worst error / tolerance: interpreter "
              << report.worst_interp_ratio;
    if (o.run.gpu) std::cout << ", GPU " << report.worst_gpu_ratio;
    std::cout << "\n";
    if (const std::string fault = gpu_fault_case(); !fault.empty())
      std::cout << "  the GPU faulted in " << fault << "; the programs after it ran without the GPU\n";
    for (const auto& [why, n] : report.rejections) std::cout << "  rejected " << n << "x: " << why << "\n";
    for (const auto& [path, n] : report.paths) std::cout << "  " << n << " compiled to " << path << "\n";
    if (report.spilled)
      std::cout << "  " << report.spilled << " programs spilled registers (not a failure)\n";
    if (!json_path.empty()) write_file(json_path, report_json(o, report) + "\n");
    return report.failed ? 1 : 0;
  } catch (const std::exception& e) {
    std::cerr << "tessel_fuzz: " << e.what() << "\n";
    return 2;
  }
}
