// Tutorial section 6, under the hood: what the compiler did to two programs -- the tutorial GEMM
// and FlashAttention -- read from the compiler itself: the passes in order (src/Lower.cpp) with
// what each one changed, the layouts infer_layouts chose, the pipeline the Hopper passes built
// (TMA maps, mbarrier rings, warp roles and register budgets, the warpgroups' turns), the
// instruction mix of the PTX and the resources ptxas reports. Compiles only: no GPU needed.
#include <iostream>
#include <sstream>

#include "tessel/kernels/attention/FlashAttention.hpp"
#include "tessel/kernels/gemm/Matmul.hpp"
#include "tools/tessel/Output.hpp"
#include "tools/tessel/System.hpp"
#include "tools/tessel/Tutorial.hpp"

namespace tessel::cli {

namespace {

// Constructs whose first appearance after a pass says what the pass did.
const char* const kConstructs[] = {
    "// layout",
    "tma_load(",
    "tiles tile_i",
    "_staging",
    "drain_tma_stores",
    "mbarrier.wait(",
    "mbarrier.warp_arrive(",
    "producer {",
    "specialize(",
    "named_barrier",
    "barrier(id=",
    "mbarrier.init(",
    "async_wait(",
    "gemm_mainloop",
    "HopperGemm",
    "::run(",
    "::run_rs(",
    "copy_global_to_shared",
    "store_accumulators_tma<",
    "store_accumulators<",
    "gemm_wait(",
    "reduce_rows",
    "tma_load_tile",
    "// smem",
};

std::size_t count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + needle.size()))
    ++n;
  return n;
}

std::size_t lines(const std::string& text) {
  return count(text, "\n");
}

nlohmann::json explain(const std::string& title, const JitKernel& k) {
  nlohmann::json j = {{"kernel", title}, {"path", k.info().path}};
  std::cout << "\n  " << title << "\n    path: " << k.info().path
            << "\n    passes (src/Lower.cpp), IR lines after each, "
            << "and what first appears there:\n";
  nlohmann::json stages = nlohmann::json::array();
  std::string before;
  for (const auto& [pass, text] : k.ir_stages()) {
    std::string appeared;
    for (const char* c : kConstructs)
      if (count(text, c) > 0 && count(before, c) == 0)
        appeared += (appeared.empty() ? "" : ", ") + std::string(c);
    const bool changed = text != before;
    const std::string what = before.empty()     ? "the program as recorded"
                             : !changed         ? "(unchanged)"
                             : appeared.empty() ? "(rewritten)"
                                                : appeared;
    std::cout << "      " << left(pass, 24) << right(std::to_string(lines(text)), 6) << "  " << what << "\n";
    stages.push_back(
        {{"pass", pass}, {"ir_lines", lines(text)}, {"changed", changed}, {"appeared", appeared}});
    before = text;
  }
  j["passes"] = stages;
  // The layouts: infer_layouts' lines under its IR.
  for (const auto& [pass, text] : k.ir_stages()) {
    if (pass != "infer_layouts") continue;
    std::cout << "    layouts (infer_layouts):\n";
    std::istringstream in(text);
    nlohmann::json layouts = nlohmann::json::array();
    for (std::string line; std::getline(in, line);)
      if (line.rfind("// layout ", 0) == 0) {
        std::cout << "      " << line.substr(3) << "\n";
        layouts.push_back(line.substr(3));
      }
    j["layouts"] = layouts;
  }
  const KernelInfo& info = k.info();
  std::cout << "    pipeline:\n";
  if (info.tma_maps.empty() && info.mbarriers.empty())
    std::cout << "      no TMA rings of the generic passes"
              << (info.persistent ? " (the Hopper GEMM's own kernel)" : "") << "\n";
  for (const std::string& m : info.tma_maps) std::cout << "      TMA map " << m << "\n";
  for (const std::string& b : info.mbarriers) std::cout << "      mbarriers " << b << "\n";
  if (info.persistent && !info.mbarriers.empty())
    std::cout
        << "      persistent: as many blocks as SMs, each looping over its tiles; the ring's phases run on "
           "across them (persist_tiles)\n";
  for (const std::string& t : info.tile_loads)
    std::cout << "      tile loads: " << t
              << ", by the producer's TMA into two slots, a tile ahead of the consumers (plan_tile_loads)\n";
  if (info.producer_threads > 0)
    std::cout << "      roles: " << info.consumer_threads << " consumer threads"
              << (info.consumer_regs ? " at " + std::to_string(info.consumer_regs) + " registers"
                                     : std::string())
              << ", " << info.producer_threads << " producer threads"
              << (info.producer_regs ? " at " + std::to_string(info.producer_regs) + " registers"
                                     : std::string())
              << (info.pingpong ? "; the two consumer warpgroups take turns for their gemms" : "") << "\n";
  for (const std::string& d : info.declined) std::cout << "      not taken: " << d << "\n";
  j["pipeline"] = {{"tma_maps", info.tma_maps},           {"mbarriers", info.mbarriers},
                   {"declined", info.declined},           {"consumer_threads", info.consumer_threads},
                   {"consumer_regs", info.consumer_regs}, {"producer_threads", info.producer_threads},
                   {"producer_regs", info.producer_regs}, {"pingpong", info.pingpong},
                   {"tile_loads", info.tile_loads}};
  // The instruction mix: how often each instruction of interest appears in the PTX.
  static const char* const kInstructions[] = {
      "wgmma.mma_async", "mma.sync",          "cp.async.bulk.tensor", "cp.async.cg", "ldmatrix",
      "stmatrix",        "mbarrier.try_wait", "mbarrier.arrive",      "bar.sync",    "bar.arrive",
      "setmaxnreg",      "shfl.sync",         "ex2.approx",           "st.global",   "ld.global"};
  std::cout << "    PTX instruction mix (static counts):";
  nlohmann::json mix = nlohmann::json::object();
  int shown = 0;
  for (const char* ins : kInstructions) {
    const std::size_t n = count(k.ptx(), ins);
    mix[ins] = n;
    if (n == 0) continue;
    std::cout << (shown++ % 4 == 0 ? "\n      " : "  ") << left(ins, 20) << right(std::to_string(n), 5);
  }
  std::cout << "\n    resources: " << describe_build(k) << "\n";
  j["instructions"] = mix;
  j["resources"] = {{"registers", k.resources().registers},
                    {"spill_store_bytes", k.resources().spill_store_bytes},
                    {"dynamic_smem_bytes", info.dynamic_smem_bytes},
                    {"threads", info.threads}};
  return j;
}

}  // namespace

void section_under_the_hood(TutorialContext& ctx) {
  print_banner("6. Under the hood");
  const SystemInfo& sys = system_info();
  std::cout << "  what the compiler did, for " << sys.arch()
            << " (compiled only; TESSEL_DUMP=after:<pass> prints "
            << "the whole IR after any pass):\n";
  nlohmann::json j = {{"implemented", true}, {"arch", sys.arch()}};
  JitOptions o;
  o.keep_ir_stages = true;
  // The library's config for the tutorial's program at 2048^3 (what make_matmul(M, N, K, dtype)
  // compiles without a tuned entry).
  o.arch = sys.arch();
  const kernels::MatmulConfig gemm_config = kernels::default_matmul_config(
      2048, 2048, 2048, DType::f16, sys.arch(), sys.gpu ? sys.device.sm_count : 132);
  j["gemm"] = explain("the tutorial GEMM, 2048 x 2048 x 2048 f16 (" + gemm_config.describe() + ")",
                      kernels::make_matmul(2048, 2048, 2048, gemm_config, o));
  if (sys.arch() == "sm_90a") {
    // The same program through select_hopper_gemm's hand-written template (JitOptions::
    // gemm_from_passes = false; the passes' kernel above is the default since session 29): one
    // device call where the passes show each Hopper construct they decided.
    JitOptions templ = o;
    templ.gemm_from_passes = false;
    j["gemm_template"] = explain(
        "the same GEMM through the hand-written template (JitOptions::gemm_from_passes = false; the "
        "ring, roles, waits, persistence and epilogue above are the passes' decisions, here one device call)",
        kernels::make_matmul(2048, 2048, 2048, gemm_config, templ));
  }
  kernels::AttentionShape s;
  s.batch = 2, s.heads = 16, s.kv_heads = 16, s.seqlen_q = 4096, s.seqlen_k = 4096, s.dim = 128;
  kernels::AttentionOptions a;
  a.jit = o;
  j["attention"] =
      explain("FlashAttention, " + s.describe() + " bf16", kernels::make_flash_attention(s, DType::bf16, a));
  ctx.sections["6"] = j;
}

}  // namespace tessel::cli
