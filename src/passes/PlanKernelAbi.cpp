// plan_kernel_abi
//   Does:     gathers what the passes decided about the kernel's outside into ctx.abi: the
//             device headers it needs, threads per block at launch (a warp-specialized kernel's
//             producer warpgroup included; the Hopper GEMM's own count), __launch_bounds__'s
//             blocks-per-SM argument, the cluster size, the dynamic shared memory (size and
//             alignment), the grid, whether it is persistent, the rasterization panel of
//             use_swizzle (wherever the passes left the statement: in a warp role, say),
//             whether the kernel prefetches its tensor maps' descriptors at entry, and whether
//             it is a programmatic dependent launch (JitOptions::programmatic_launch; sm_90
//             generic kernels).
//   Requires: every other pass (it is the last): select_hopper_gemm's plan, specialize_warps'
//             roles, plan_shared_memory's size, lowering's use of wgmma and mbarriers.
//   Ensures:  ctx.abi is complete; codegen prints the kernel's signature and preamble from it and
//             the JIT launches by it, neither deciding any of it.
#include "passes/PassUtil.hpp"
#include "passes/Passes.hpp"
#include "tessel/ir/Mutator.hpp"

namespace tessel::passes {

using namespace ir;

Stmt plan_kernel_abi(const Stmt& body, PassContext& ctx) {
  const KernelStmt* k = find_kernel(body);
  TESSEL_INTERNAL_CHECK(k != nullptr, "plan_kernel_abi: the lowered body has no kernel");
  PassContext::KernelAbi& abi = ctx.abi;
  abi = {};
  const HopperPlan& hopper = ctx.hopper;
  if (hopper.selected) abi.headers.push_back("tessel/hopper_gemm.cuh");
  if (ctx.uses_wgmma) abi.headers.push_back("tessel/warpgroup_gemm.cuh");
  if (!ctx.mbarriers.empty()) abi.headers.push_back("tessel/pipeline.cuh");
  if (!ctx.tma_stores.empty()) abi.headers.push_back("tessel/tma_epilogue.cuh");
  // A warp-specialized kernel's block-wide device code synchronizes its consumers only.
  if (ctx.launch_threads > 0) abi.consumer_threads = ctx.threads;
  abi.threads = ctx.launch_threads > 0 ? ctx.launch_threads : k->threads;
  TESSEL_INTERNAL_CHECK(!hopper.selected || hopper.launch_threads == abi.threads,
                        "plan_kernel_abi: the Hopper GEMM launches "
                            << hopper.launch_threads << " threads but its kernel declares " << abi.threads);
  // setmaxnreg (the Hopper GEMM, warp-specialized kernels with register budgets) only takes
  // effect under a register cap at entry: (threads, 1). A kernel that keeps fragment tails in
  // shared memory is register-bound by design: it asks for the blocks per SM its shared memory
  // allows (plan_shared_memory), so that ptxas fits the registers to that occupancy.
  if (hopper.selected || ctx.consumer_regs > 0)
    abi.min_blocks_per_sm = 1;
  else if (ctx.min_blocks_per_sm > 1)
    abi.min_blocks_per_sm = ctx.min_blocks_per_sm;
  if (hopper.selected && hopper.cluster_size > 1) abi.cluster_size = hopper.cluster_size;
  if (ctx.cluster_multicast.applied) abi.cluster_size = ctx.cluster_multicast.ctas;
  if (ctx.cluster_split.applied) {
    abi.cluster_size = ctx.cluster_split.ranks;
    abi.headers.push_back("tessel/cluster_reduce.cuh");
  }
  // The wgmma operand tiles of a generic kernel sit at 1024-byte multiples from a run-time
  // realigned base (plan_shared_memory keeps 1024 bytes of slack for the shift; __align__ alone
  // does not promise the address); the Hopper GEMM's array is declared 1024-byte aligned.
  abi.smem_realigned = ctx.uses_wgmma;
  abi.smem_alignment = hopper.selected ? 1024 : 128;
  abi.dynamic_smem_bytes = hopper.selected ? hopper.smem_bytes : ctx.smem_bytes;
  abi.grid = ctx.grid;
  abi.persistent = hopper.selected || ctx.tile_loop.applied;
  abi.grid_capped_at_launch = hopper.selected;
  struct FindSwizzle : IRVisitor {
    int panel = 0;
    void visit_node(const SwizzleStmt* op) override { panel = op->panel_size; }
  } swizzle;
  swizzle.visit(k->body);
  // The Hopper GEMM rasterizes its own tiles (its panel is a run() argument).
  if (!hopper.selected) abi.raster_panel = swizzle.panel;
  // A descriptor fetch at the first TMA load (and again at the first store) sits on the critical
  // path of a one-wave kernel: about a microsecond of a 9 us GEMM (H200, 1024^3, docs/perf-notes.md
  // session 14). Prefetched at entry, it overlaps the barrier set-up.
  abi.prefetch_tensor_maps = !hopper.selected && !ctx.tma_params.empty();
  // griddepcontrol is sm_90's; the Hopper GEMM template prints its own preamble (not here).
  abi.programmatic_launch = ctx.programmatic_launch && ctx.target.sm >= 90 && !hopper.selected;
  // Only a generic warp-specialized kernel has role tests to print (the template has its own).
  // A role test on a warp-uniform value lets ptxas keep what the consumers' branch builds (the
  // wgmma descriptors) in uniform registers. At one consumer warpgroup that is all it takes
  // (WarpgroupGemm's index is a constant): the passes' 1024^3 GEMM 0.89 -> 0.99x the template on
  // an H100, attention's one-warpgroup kernels within noise (session 25). With several, the
  // warpgroup index must be broadcast as well, and that measured 1-4 % slower in attention's
  // two- and three-warpgroup kernels: only when asked for (uniform_roles).
  const bool one_consumer_warpgroup = abi.consumer_threads > 0 && abi.consumer_threads <= 128;
  abi.uniform_roles = ctx.allow_uniform_roles && abi.consumer_threads > 0 && !hopper.selected &&
                      (ctx.uniform_roles || one_consumer_warpgroup);
  abi.uniform_warpgroup = abi.uniform_roles && !one_consumer_warpgroup;
  return body;
}

}  // namespace tessel::passes
