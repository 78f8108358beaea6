// tessel tutorial: the seven sections of the tile-language tutorial Tessel grew from, run on this
// machine. Sections 2 and 3 live in TutorialGemm.cpp, 4 in TutorialSoftmax.cpp, 5 in
// TutorialAttention.cpp, 6 in TutorialUnderTheHood.cpp, 7 in TutorialTune.cpp.
#include <algorithm>
#include <iostream>
#include <memory>
#include <set>

#include "tools/tessel/Commands.hpp"
#include "tools/tessel/Output.hpp"
#include "tools/tessel/Parse.hpp"
#include "tools/tessel/System.hpp"
#include "tools/tessel/Tutorial.hpp"

namespace tessel::cli {

namespace {

struct TutorialOptions {
  std::vector<int> sections;
  std::string json_file;
  int repeats = 20;
  int warmup = 5;
  bool cpu = false;
};

int run_tutorial(const TutorialOptions& o) {
  std::set<int> chosen(o.sections.begin(), o.sections.end());
  if (chosen.empty()) chosen = {1, 2, 3, 4, 5, 6, 7};

  TutorialContext ctx;
  ctx.repeats = o.repeats;
  ctx.warmup = o.warmup;
  std::cout << "Tessel " << TESSEL_VERSION
            << " tutorial: high-performance GPU kernels from a tile language\n";
  for (int n : chosen) {
    std::cout << "\n";
    switch (n) {
      case 1:
        section_setup(ctx);
        break;
      case 2:
        o.cpu ? section_gemm_cpu(ctx) : section_gemm(ctx);
        break;
      case 3:
        o.cpu ? section_knobs_cpu(ctx) : section_knobs(ctx);
        break;
      case 4:
        section_softmax(ctx, o.cpu);
        break;
      case 5:
        section_attention(ctx, o.cpu);
        break;
      case 7:
        section_autotune(ctx, o.cpu);
        break;
      default:
        section_under_the_hood(ctx);
        break;
    }
    std::cout.flush();
  }

  if (!o.json_file.empty()) {
    nlohmann::json j = provenance_json();
    j["tool"] = "tessel tutorial";
    j["backend"] = o.cpu ? "interpreter" : (system_info().gpu ? "gpu" : "compile-only");
    j["sections"] = ctx.sections;
    j["problems"] = ctx.problems;
    write_json_file(o.json_file, j);
  }
  if (ctx.problems > 0) {
    std::cout << "\n" << ctx.problems << " problem(s): see the lines marked above\n";
    return kExitCheckFailed;
  }
  return kExitOk;
}

}  // namespace

void print_banner(const std::string& title) {
  std::cout << "== " << title << " " << std::string(title.size() < 90 ? 90 - title.size() : 0, '=') << "\n";
}

GemmBench& TutorialContext::gpu_bench() {
  if (!bench) bench = std::make_unique<GemmBench>();
  return *bench;
}

int default_num_stages(int smem_cap) {
  // The tutorial's rule: a 128x128x32 f16 tile pair per stage, 3 stages if they fit.
  constexpr int kStageBytes = (128 * 32 + 32 * 128) * 2;
  int stages = 3;
  while (stages > 1 && kStageBytes * stages > smem_cap) --stages;
  return stages;
}

std::string describe_build(const JitKernel& k) {
  const Resources& r = k.resources();
  const KernelInfo& i = k.info();
  const int smem = i.dynamic_smem_bytes + r.static_smem_bytes;
  std::string s = (r.registers >= 0 ? std::to_string(r.registers) : std::string("?")) + " registers, " +
                  std::to_string(r.spill_store_bytes + r.spill_load_bytes) + " B spilled, " +
                  fixed(smem / 1024.0, 1) + " KB shared memory, ";
  s += r.cache_hit ? "from the kernel cache in " + fixed(r.compile_ms, 1) + " ms"
                   : "compiled in " + fixed(r.compile_ms, 0) + " ms";
  return s;
}

std::string describe_instructions(const JitKernel& k) {
  std::string used, unused;
  const auto& have = k.info().instructions;
  for (const char* name : {"mma.sync", "wgmma", "ldmatrix", "cp.async"}) {
    const bool found = std::find(have.begin(), have.end(), name) != have.end();
    std::string& list = found ? used : unused;
    list += (list.empty() ? "" : " ") + std::string(name);
  }
  return (used.empty() ? std::string("none of them") : used) +
         (unused.empty() ? "" : "   (not: " + unused + ")");
}

void section_setup(TutorialContext& ctx) {
  print_banner("1. Setup");
  const SystemInfo& s = system_info();
  nlohmann::json j;
  if (s.gpu) {
    const DeviceInfo& d = s.device;
    std::cout << "  device:           " << d.name << " (compute capability " << d.cc_major << "."
              << d.cc_minor << ", kernels compile for " << d.arch() << ")\n"
              << "  SMs:              " << d.sm_count << "\n"
              << "  smem per block:   " << d.smem_optin_per_block / 1024 << " KB with opt-in ("
              << d.smem_optin_per_block << " bytes)\n";
  } else {
    std::cout << "  device:           no GPU — " << s.no_gpu_reason << "\n"
              << "                    kernels still compile here (NVRTC, for " << s.arch()
              << "); running and timing them needs an NVIDIA GPU\n"
              << "  smem per block:   " << s.smem_cap() / 1024 << " KB assumed (" << s.arch()
              << "'s opt-in cap, for planning compile-only configs)\n";
  }
  const int stages = default_num_stages(s.smem_cap());
  std::cout << "  num_stages:       " << stages << " by default ((128*32 + 32*128) * 2 B * " << stages
            << " = " << (128 * 32 + 32 * 128) * 2 * stages / 1024 << " KB fits)\n";
  std::cout << "  CUDA driver:      "
            << (s.gpu ? cuda_version_string(s.device.driver_version) : std::string("none")) << "\n"
            << "  NVRTC:            " << cuda_version_string(s.nvrtc_version) << "\n"
            << "  cuBLAS:           " << cublas_version_string(s.cublas_version) << "\n";
  j = device_json();
  j["default_num_stages"] = stages;
  j["smem_cap_bytes"] = s.smem_cap();
  j["nvrtc_version"] = cuda_version_string(s.nvrtc_version);
  j["cublas_version"] = cublas_version_string(s.cublas_version);
  ctx.sections["1"] = j;
}

Command add_tutorial_command(CLI::App& root) {
  auto o = std::make_shared<TutorialOptions>();
  CLI::App* app =
      root.add_subcommand("tutorial",
                          "Run the tutorial: 1 setup, 2 tensor-core GEMM, 3 knobs, 4 fused "
                          "softmax, 5 FlashAttention (multi-head, causal and not, vs cuDNN), 6 under the "
                          "hood (the passes, layouts, pipeline, instruction mix and resources of the GEMM "
                          "and of attention; compiles only), 7 autotuning. Without a GPU, sections 2-5 "
                          "and 7 compile their kernels and report instructions and resources instead of "
                          "timings");
  app->add_option("--section", o->sections, "Sections to run, e.g. 2 or 1,2,3 (default: all)")
      ->delimiter(',')
      ->check(integer_in(1, 7))
      ->type_name("N[,N...]");
  app->add_option("--json", o->json_file, "Also write the sections' results as JSON to FILE")
      ->type_name("FILE");
  app->add_option("--repeats", o->repeats, "Timed runs per kernel (median reported)")
      ->capture_default_str()
      ->check(integer_in(1, kMaxRepeats));
  app->add_option("--warmup", o->warmup, "Untimed runs before timing")
      ->capture_default_str()
      ->check(integer_in(0, kMaxRepeats));
  app->add_flag("--cpu", o->cpu,
                "Run sections 2-5 on the CPU reference interpreter at small sizes, checked against float64 "
                "(no GPU needed; checks results, times nothing that matters); section 7 then shows its "
                "space only, since tuning needs GPU timings");
  return {app, [o] { return run_tutorial(*o); }};
}

}  // namespace tessel::cli
