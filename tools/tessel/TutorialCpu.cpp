// `tessel tutorial --cpu`: sections 2 and 3 on the reference interpreter (src/interp) instead of
// the GPU — the same tile programs at small sizes, checked against a float64 product of the same
// rounded inputs. What this shows is correctness, not speed: the times are the interpreter's.
#include <chrono>
#include <cmath>
#include <iostream>

#include "tessel/interp/Interpreter.hpp"
#include "tessel/kernels/gemm/Matmul.hpp"
#include "tools/tessel/GemmConfigs.hpp"
#include "tools/tessel/Output.hpp"
#include "tools/tessel/System.hpp"
#include "tools/tessel/Tutorial.hpp"

namespace tessel::cli {

namespace {

// The interpreter's bar (issue #3): tighter than the GPU check, the inputs are identical.
constexpr double kCpuTolerance = 1e-2;

struct CpuRun {
  double rel_error;
  double ms;
};

// Runs the program on the interpreter and checks it against C = A * B in float64.
CpuRun run_gemm_on_cpu(const GemmShape& s, const kernels::MatmulConfig& c, std::uint64_t seed) {
  const auto A = interp::HostTensor::random(c.dtype, {s.M, s.K}, seed);
  const auto B = interp::HostTensor::random(c.dtype, {s.K, s.N}, seed + 1);
  const PrimFunc f = kernels::matmul_program(s.M, s.N, s.K, c);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<interp::HostTensor> out = interp::run_on_cpu(f, {A, B}, {-1});
  const auto t1 = std::chrono::steady_clock::now();
  const std::vector<double> a = A.to_values(), b = B.to_values();
  std::vector<double> want(static_cast<std::size_t>(s.M) * s.N, 0.0);
  for (int m = 0; m < s.M; ++m)
    for (int k = 0; k < s.K; ++k) {
      const double am = a[static_cast<std::size_t>(m) * s.K + k];
      for (int n = 0; n < s.N; ++n)
        want[static_cast<std::size_t>(m) * s.N + n] += am * b[static_cast<std::size_t>(k) * s.N + n];
    }
  return {interp::relative_frobenius_error(out.at(0).to_values(), want),
          std::chrono::duration<double, std::milli>(t1 - t0).count()};
}

bool passes(double e) {
  return std::isfinite(e) && e <= kCpuTolerance;
}

std::string verdict(double e) {
  return passes(e) ? "OK" : "NUMERICALLY WRONG";
}

}  // namespace

void section_gemm_cpu(TutorialContext& ctx) {
  print_banner("2. Tensor-core GEMM, on the CPU reference interpreter");
  const GemmShape shape{256, 256, 256};
  kernels::MatmulConfig c;  // the tutorial's 128x128x32, 128 threads
  c.num_stages = default_num_stages(system_info().smem_cap());
  c = fit_stages(c, system_info().smem_cap());
  std::cout << "  config:  " << format_matmul_config(c) << " (the GPU section's), at " << shape.describe()
            << " f16 so that the interpreter finishes quickly\n";
  nlohmann::json j = {
      {"backend", "interpreter"}, {"shape", {shape.M, shape.N, shape.K}}, {"config", config_json(c)}};
  try {
    const CpuRun r = run_gemm_on_cpu(shape, c, 200);
    std::cout << "  check:   relative Frobenius error vs a float64 reference " << scientific(r.rel_error)
              << " (bar " << scientific(kCpuTolerance) << "): " << verdict(r.rel_error) << "\n"
              << "  ran in " << fixed(r.ms, 0)
              << " ms on the interpreter (its speed says nothing about the GPU's)\n";
    j.update({{"rel_error", r.rel_error}, {"ok", passes(r.rel_error)}, {"interpreter_ms", r.ms}});
    if (!passes(r.rel_error)) ++ctx.problems;
  } catch (const std::exception& e) {
    std::cout << "  failed:  " << error_kind(e) << ": " << e.what() << "\n";
    j["error"] = {{"kind", error_kind(e)}, {"message", e.what()}};
    ++ctx.problems;
  }
  ctx.sections["2"] = j;
}

void section_knobs_cpu(TutorialContext& ctx) {
  print_banner("3. Knobs, on the CPU reference interpreter");
  // Not a multiple of any candidate's tile: the edges of every schedule get exercised.
  const GemmShape shape{200, 136, 72};
  const int cap = system_info().smem_cap();
  std::cout << "  the six candidates at " << shape.describe() << " f16 (partial tiles at the edges)\n"
            << "  " << right("tile", 12) << right("stg", 5) << right("thr", 5) << right("swz", 5)
            << right("smem", 8) << right("rel.err", 10) << right("interp", 10) << "\n";
  nlohmann::json rows = nlohmann::json::array();
  for (const kernels::MatmulConfig& c : tutorial_candidates()) {
    const long long need = kernels::matmul_smem_bytes(c);
    nlohmann::json row = {{"config", config_json(c)}, {"smem_bytes", need}};
    const std::string prefix =
        "  " +
        right(std::to_string(c.block_M) + "x" + std::to_string(c.block_N) + "x" + std::to_string(c.block_K),
              12) +
        right(std::to_string(c.num_stages), 5) + right(std::to_string(c.threads), 5) +
        right(c.use_swizzle ? "yes" : "no", 5) + right(std::to_string(need / 1024) + "KB", 8);
    if (need > cap) {
      std::cout << prefix << "   SKIPPED (over smem budget)\n";
      row["status"] = "skipped";
    } else {
      try {
        const CpuRun r = run_gemm_on_cpu(shape, c, 300);
        std::cout << prefix << right(scientific(r.rel_error), 10) << right(fixed(r.ms, 0) + "ms", 10)
                  << (passes(r.rel_error) ? "" : "   <- NUMERICALLY WRONG") << "\n";
        row.update({{"status", passes(r.rel_error) ? "ok" : "wrong"},
                    {"rel_error", r.rel_error},
                    {"interpreter_ms", r.ms}});
        if (!passes(r.rel_error)) ++ctx.problems;
      } catch (const std::exception& e) {
        std::cout << prefix << "   failed: " << error_kind(e) << " (" << error_summary(e, 100) << ")\n";
        row["status"] = "failed";
        row["error"] = {{"kind", error_kind(e)}, {"message", e.what()}};
        ++ctx.problems;
      }
    }
    rows.push_back(row);
  }
  std::cout << "  every schedule computes the same product; which one is fastest only a GPU can say\n";
  ctx.sections["3"] = {{"backend", "interpreter"}, {"shape", {shape.M, shape.N, shape.K}}, {"rows", rows}};
}

}  // namespace tessel::cli
