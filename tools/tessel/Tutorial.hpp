// The tutorial's sections, shared between TutorialCommand.cpp (options, section 1),
// TutorialGemm.cpp (sections 2 and 3 on the GPU, or compiled only), TutorialCpu.cpp (2 and 3
// on the reference interpreter), TutorialSoftmax.cpp (4), TutorialAttention.cpp (5),
// TutorialUnderTheHood.cpp (6) and TutorialTune.cpp (7).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessel/Jit.hpp"
#include "tessel/kernels/gemm/Matmul.hpp"
#include "tools/tessel/GemmBench.hpp"

namespace tessel::cli {

struct TutorialContext {
  int warmup = 5;
  int repeats = 20;
  int problems = 0;  // wrong results and failed kernels; nonzero makes the exit code 1
  nlohmann::json sections = nlohmann::json::object();
  std::unique_ptr<GemmBench> bench;  // created on first use, GPU only
  GemmBench& gpu_bench();
};

void print_banner(const std::string& title);

// The tutorial's default num_stages: 3 if a 128x128x32 f16 pipeline of 3 stages fits `smem_cap`,
// else fewer.
int default_num_stages(int smem_cap);

// "96 registers, 0 B spilled, 48 KB shared memory, compiled in 412 ms" (a cache hit says so).
std::string describe_build(const JitKernel& k);
// "mma.sync ldmatrix cp.async" — which of the tutorial's instructions of interest the PTX holds.
std::string describe_instructions(const JitKernel& k);

// The tutorial's six knob candidates (section 3), f16.
std::vector<kernels::MatmulConfig> tutorial_candidates();

void section_setup(TutorialContext& ctx);
void section_gemm(TutorialContext& ctx);
void section_knobs(TutorialContext& ctx);
// The same two sections on the CPU reference interpreter (`--cpu`), at small sizes.
void section_gemm_cpu(TutorialContext& ctx);
void section_knobs_cpu(TutorialContext& ctx);
// Section 4, the fused softmax: on the GPU, compile-only, or on the interpreter (cpu).
void section_softmax(TutorialContext& ctx, bool cpu);
// Section 5, FlashAttention (TutorialAttention.cpp): on the GPU, compile-only, or on the
// interpreter (cpu).
void section_attention(TutorialContext& ctx, bool cpu);
// Section 6, under the hood (TutorialUnderTheHood.cpp): the GEMM's and attention's passes,
// layouts, pipeline, instruction mix and resources; compiles only.
void section_under_the_hood(TutorialContext& ctx);
// Section 7, autotuning (TutorialTune.cpp): a tuning run on the GPU; compile-only without one;
// with `cpu` the space only (timing needs a GPU).
void section_autotune(TutorialContext& ctx, bool cpu);

}  // namespace tessel::cli
