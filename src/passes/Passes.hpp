// The lowering passes, one per file; src/Lower.cpp runs them in order and says why.
#pragma once

#include <optional>

#include "passes/PassContext.hpp"
#include "tessel/ir/IR.hpp"

namespace tessel::passes {

ir::Stmt verify_program(const ir::Stmt& body, PassContext& ctx);
ir::Stmt fold_proven_branches(const ir::Stmt& body, PassContext& ctx);
ir::Stmt select_hopper_gemm(const ir::Stmt& body, PassContext& ctx);
ir::Stmt verify_hopper_pipeline(const ir::Stmt& body, PassContext& ctx);
ir::Stmt infer_layouts(const ir::Stmt& body, PassContext& ctx);
ir::Stmt plan_tma_copies(const ir::Stmt& body, PassContext& ctx);
ir::Stmt split_k_clusters(const ir::Stmt& body, PassContext& ctx);
ir::Stmt multicast_cluster_loads(const ir::Stmt& body, PassContext& ctx);
ir::Stmt persist_tiles(const ir::Stmt& body, PassContext& ctx);
ir::Stmt plan_tma_stores(const ir::Stmt& body, PassContext& ctx);
ir::Stmt plan_tile_loads(const ir::Stmt& body, PassContext& ctx);
// The shared memory a kernel takes with `leading` bytes of tiles declared ahead of its buffers,
// placed as plan_shared_memory places them, plus the slack that realigns them at run time.
std::int64_t kernel_shared_bytes(const ir::Stmt& body, const PassContext& ctx, std::int64_t leading);
// The TMA box (and swizzle) that loads copy `c`'s global tile into a shared tile laid out as
// `dst`, or nullopt when no TMA load can (plan_tma_copies' rules; infer_layouts asks it ahead
// of time, with the wgmma layout a tile would take). The result's map variable is unset.
std::optional<TmaParam> tma_box(const ir::CopyStmt* c, const SharedLayout& dst);
// The kernel parameter of the tensor map a TMA load with `want`'s tensor, box and swizzle reads:
// one per (tensor, box, swizzle), `<tensor>_map`, added to ctx.tma_params the first time.
ir::Var tma_load_map(PassContext& ctx, const TmaParam& want);
// The most registers a thread can have, and check_register_budget's limit on the values a
// thread keeps in registers (fragments and local arrays): twice that, past which ptxas spills
// heavily (JitOptions::allow_register_spills lifts it).
inline constexpr int kMaxRegistersPerThread = 255;
inline constexpr int kRegisterBudget = 2 * kMaxRegistersPerThread;
ir::Stmt check_register_budget(const ir::Stmt& body, PassContext& ctx);
ir::Stmt order_shared_writes(const ir::Stmt& body, PassContext& ctx);
// plan_pipelines makes a cp.async loop whose only compute is one mma.sync gemm into
// tessel::gemm_mainloop when the gemm's accumulator holds this many values a thread or more;
// smaller warp tiles keep the generic schedule (where rows off 16 bytes load through realigned
// rings). kernels::plan_matmul's model reads the same bound.
inline constexpr int kGemmMainloopMinAccumulators = 64;
ir::Stmt plan_pipelines(const ir::Stmt& body, PassContext& ctx);
ir::Stmt insert_proxy_fences(const ir::Stmt& body, PassContext& ctx);
ir::Stmt specialize_warps(const ir::Stmt& body, PassContext& ctx);
ir::Stmt rotate_async_gemms(const ir::Stmt& body, PassContext& ctx);
ir::Stmt schedule_warpgroups(const ir::Stmt& body, PassContext& ctx);
ir::Stmt place_gemm_waits(const ir::Stmt& body, PassContext& ctx);
ir::Stmt verify_pipelines(const ir::Stmt& body, PassContext& ctx);
ir::Stmt insert_barriers(const ir::Stmt& body, PassContext& ctx);
ir::Stmt widen_indices(const ir::Stmt& body, PassContext& ctx);
ir::Stmt lower_reductions(const ir::Stmt& body, PassContext& ctx);
ir::Stmt lower_tile_ops(const ir::Stmt& body, PassContext& ctx);
ir::Stmt vectorize_shared_tails(const ir::Stmt& body, PassContext& ctx);
ir::Stmt skip_unit_scales(const ir::Stmt& body, PassContext& ctx);
ir::Stmt lower_parallel_loops(const ir::Stmt& body, PassContext& ctx);
ir::Stmt plan_shared_memory(const ir::Stmt& body, PassContext& ctx);
ir::Stmt plan_kernel_abi(const ir::Stmt& body, PassContext& ctx);
// Structural invariants of lowered IR (every variable bound, every buffer declared); throws
// InternalError naming the pass that broke them.
void verify_ir(const ir::Stmt& body, const PassContext& ctx, const char* after_pass);

}  // namespace tessel::passes
