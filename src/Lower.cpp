// The pass pipeline, in one place. Each pass is in src/passes/<Name>.cpp with its contract;
// the comment at each step says why it sits where it does. After every pass the IR is
// checked (verify_ir) and can be printed: TESSEL_DUMP=after:<pass>[,after:<pass>...] or
// TESSEL_DUMP=after:all writes it to stderr.
#include "Lower.hpp"

#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "passes/Passes.hpp"
#include "tessel/ir/Mutator.hpp"
#include "tessel/ir/Printer.hpp"

namespace tessel {

namespace {

using PassFn = ir::Stmt (*)(const ir::Stmt&, passes::PassContext&);

struct PassEntry {
  const char* name;
  PassFn fn;
};

// The order, and why:
const PassEntry kPasses[] = {
    // First: every later pass assumes a well-formed program with region extents filled in,
    // and the author's mistakes must be reported before anything is rewritten.
    {"verify_program", passes::verify_program},
    // Branches that the ranges of block indices and loops decide go next, so that every later
    // pass sees the program as it runs: an `if` that never runs must not count as a branch in
    // a loop that rotate_async_gemms would overlap, nor as work in any plan.
    {"fold_proven_branches", passes::fold_proven_branches},
    // On sm_90a a whole tutorial-shaped GEMM kernel becomes the warp-specialized TMA + wgmma
    // kernel; it must see the tile ops as the author wrote them, before layouts are chosen
    // for the mma.sync path.
    {"select_hopper_gemm", passes::select_hopper_gemm},
    // Its pipeline's barrier protocol is checked for the plan's stages, warpgroups and split
    // right away, before anything is generated from it.
    {"verify_hopper_pipeline", passes::verify_hopper_pipeline},
    // Layouts next: gemm fixes the accumulator and operand layouts that copies, Parallel nests
    // and the pipeline's multi-buffered tiles must all follow.
    {"infer_layouts", passes::infer_layouts},
    // Right after layouts: they give each fragment's registers per thread, and a kernel past the
    // register budget must be refused before pipelining and lowering work on it (and long before
    // ptxas spends minutes spilling it).
    {"check_register_budget", passes::check_register_budget},
    // TMA needs the shared tile laid out as a TMA box writes it (the wgmma swizzle), so after
    // layouts; and before pipelining, which builds an mbarrier ring for TMA loads and a
    // cp.async schedule for other copies.
    {"plan_tma_copies", passes::plan_tma_copies},
    // Few output tiles over a long K loop: each tile's loop split over a 2-CTA cluster. It
    // needs the ring's loads to be TMA loads (so after plan_tma_copies: the drained ring holds
    // the partial sums) and the accumulator's registers (infer_layouts); before persist_tiles,
    // which then leaves the one-tile-per-CTA grid alone, and before plan_pipelines, which
    // builds the ring of the halved loop.
    {"split_k_clusters", passes::split_k_clusters},
    // use_cluster's multicast: the operand tiles a cluster's two blocks share, loaded once. It
    // needs TMA loads and their maps (after plan_tma_copies); after split_k_clusters, which
    // leaves kernels that ask for a cluster alone; before persist_tiles, which deals the
    // regridded kernel's tiles so that a cluster's blocks work on one pair at a time, and before
    // plan_pipelines, whose rings count both CTAs' consumers on the shared stages.
    {"multicast_cluster_loads", passes::multicast_cluster_loads},
    // A kernel of one TMA ring loop per output tile loops over its tiles in as many blocks as
    // the GPU runs at once: it needs the ring's loads to be TMA loads (so right after
    // plan_tma_copies), and comes before plan_pipelines, which counts the ring's phases over
    // the tiles of a block, and before specialize_warps, which splits the tile loop between the
    // roles so that the producer runs on into the next tile.
    {"persist_tiles", passes::persist_tiles},
    // Shared-memory writes outside the loops plan_pipelines schedules get their barriers while
    // they are still tile ops (a copy or fill into a shared buffer is visible as such), and
    // after plan_tma_copies (a loop of TMA loads is a ring, ordered by its mbarriers).
    {"order_shared_writes", passes::order_shared_writes},
    // Pipelining works on tile ops (it moves whole copies between iterations), so it runs
    // before they are lowered; it multi-buffers shared tiles, so after layouts are known.
    {"plan_pipelines", passes::plan_pipelines},
    // The TMA-store epilogue needs the accumulators' wgmma layouts and the rings' final sizes
    // (its staging tile must fit beside them), and comes before specialize_warps, which moves
    // its kernel-end drain into the consumers with the rest of their work.
    {"plan_tma_stores", passes::plan_tma_stores},
    // A persistent kernel's once-per-tile loads (attention's Q) become a two-slot TMA ring
    // indexed by the tile: after plan_pipelines (the tile loop must hold a ring, whose barriers
    // come first) and plan_tma_stores (the second slot must fit beside the staging tiles it
    // declared); before insert_proxy_fences and specialize_warps, which then see the loads as
    // producer work ordered by mbarriers rather than consumer writes behind block barriers.
    {"plan_tile_loads", passes::plan_tile_loads},
    // Once every block barrier that hands over shared writes exists (the two passes above),
    // wgmma kernels fence each for the async proxy; before place_gemm_waits, which drains
    // in-flight gemms at barriers and passes the fence through.
    {"insert_proxy_fences", passes::insert_proxy_fences},
    // Roles split the rings' producer work from everything else, so after the rings exist; and
    // before lowering, which then lowers the consumers' tile ops inside their role.
    {"specialize_warps", passes::specialize_warps},
    // Scheduling the consumer warpgroups needs their role, and sees the gemms as tile ops
    // (before lowering turns them into device calls).
    // Rotating a ring loop (its last gemm behind the next iteration's first) needs the ring's
    // waits and releases and the consumers' role, and comes before the warpgroups' turns are
    // scheduled around the gemm phases it forms.
    {"rotate_async_gemms", passes::rotate_async_gemms},
    {"schedule_warpgroups", passes::schedule_warpgroups},
    // Waits go in once the order of statements is final (after the rotation and the turns),
    // and before verify_pipelines, which models a gemm's reads of a stage as lasting until
    // its wait.
    {"place_gemm_waits", passes::place_gemm_waits},
    // The protocol the three passes above produced is checked right away, from the IR (its
    // gemms and copies still name the ring tiles they read), before anything is lowered.
    {"verify_pipelines", passes::verify_pipelines},
    // Parallel nests become per-register loops before tile ops are lowered, because lowering
    // replaces fragments by register arrays that the nests must index the same way.
    {"lower_parallel_loops", passes::lower_parallel_loops},
    // Reductions read and write fragments, so they are lowered while fragments still exist
    // and before lower_tile_ops turns every remaining fragment into registers.
    {"lower_reductions", passes::lower_reductions},
    {"lower_tile_ops", passes::lower_tile_ops},
    // Element loops over register arrays with shared tails become vector loops once every
    // fragment is a register array (and so every tail is known).
    {"vectorize_shared_tails", passes::vectorize_shared_tails},
    // Register loops that scale an array by another's factors get a test for factors of
    // exactly 1 once they are final (after lowering and the tails' vector loops), and before
    // insert_barriers and widen_indices, which do not look into them. Opt-in
    // (JitOptions::unit_scale_skips): measured slower than the multiplies on an H100.
    {"skip_unit_scales", passes::skip_unit_scales},
    // After every pass that emits barriers (lowering emits some for reductions and staged
    // copies): the consumers' become named barriers; the rings' mbarriers get initialized.
    {"insert_barriers", passes::insert_barriers},
    // Once every index expression exists (after lowering): sums and products that can leave
    // the 32-bit range, by the IR's bounds, are computed in 64 bits.
    {"widen_indices", passes::widen_indices},
    // The final set and sizes of shared buffers are known only after pipelining.
    {"plan_shared_memory", passes::plan_shared_memory},
    // Last: the kernel's outside (launch shape, shared memory, cluster, headers) is what every
    // pass before it decided; codegen and the JIT only read it.
    {"plan_kernel_abi", passes::plan_kernel_abi},
};

// What infer_layouts decided, as text under the IR (layouts live beside the IR, in the context).
std::string layouts_text(const ir::Stmt& body, const passes::PassContext& ctx) {
  struct Decls : ir::IRVisitor {
    std::vector<ir::Buffer> buffers;
    void visit_node(const ir::DeclBuffer* op) override { buffers.push_back(op->buffer); }
  } decls;
  decls.visit(body);
  std::string out;
  for (const ir::Buffer& b : decls.buffers) {
    if (auto f = ctx.fragment_layouts.find(b->id); f != ctx.fragment_layouts.end()) {
      const auto& l = f->second;
      out += "// layout " + b->name + ": " + l.describe() + ", " + std::to_string(l.per_thread) +
             " registers per thread\n";
    } else if (auto s = ctx.shared_layouts.find(b->id); s != ctx.shared_layouts.end()) {
      out += "// layout " + b->name + ": " + s->second.describe() + "\n";
    }
    if (auto o = ctx.smem_offsets.find(b->id); o != ctx.smem_offsets.end())
      out += "// smem " + b->name + ": offset " + std::to_string(o->second) + "\n";
  }
  return out;
}

bool dump_requested(const char* pass) {
  const char* env = std::getenv("TESSEL_DUMP");
  if (!env) return false;
  std::string spec = env;
  if (spec.find("after:all") != std::string::npos) return true;
  std::string want = std::string("after:") + pass;
  size_t pos = 0;
  while ((pos = spec.find(want, pos)) != std::string::npos) {
    size_t end = pos + want.size();
    if (end == spec.size() || spec[end] == ',') return true;
    pos = end;
  }
  return false;
}

}  // namespace

const std::vector<std::string>& pass_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& p : kPasses) n.push_back(p.name);
    return n;
  }();
  return names;
}

int default_smem_cap(const std::string& arch) {
  if (arch.rfind("sm_90", 0) == 0 || arch.rfind("sm_100", 0) == 0) return 232448;  // 227 KB
  if (arch == "sm_80" || arch == "sm_87") return 166912;                           // 163 KB
  if (arch.rfind("sm_8", 0) == 0 || arch.rfind("sm_12", 0) == 0) return 101376;    // 99 KB
  return 49152;
}

LoweredFunc lower(const ir::PrimFuncNode& f, const passes::Target& target, bool keep_stages) {
  return lower(f, target, passes::PassContext::Switches{}, keep_stages);
}

namespace {
LoweredFunc lower_to(const ir::PrimFuncNode& f, const passes::Target& target,
                     const passes::PassContext::Switches& s, bool keep_stages, const std::string& last_pass);
}

LoweredFunc lower(const ir::PrimFuncNode& f, const passes::Target& target,
                  const passes::PassContext::Switches& s, bool keep_stages) {
  return lower_to(f, target, s, keep_stages, "");
}

LoweredFunc lower_until(const ir::PrimFuncNode& f, const passes::Target& target, const std::string& last_pass,
                        const passes::PassContext::Switches& s) {
  const auto& names = pass_names();
  if (std::find(names.begin(), names.end(), last_pass) == names.end())
    throw_internal_error("lower_until: no pass named " + last_pass);
  return lower_to(f, target, s, false, last_pass);
}

namespace {
LoweredFunc lower_to(const ir::PrimFuncNode& f, const passes::Target& target,
                     const passes::PassContext::Switches& s, bool keep_stages, const std::string& last_pass) {
  LoweredFunc out;
  out.ctx.allow_tma = s.allow_tma;
  out.ctx.allow_wgmma = s.allow_wgmma;
  out.ctx.allow_split_k = s.allow_split_k;
  out.ctx.allow_tma_store = s.allow_tma_store;
  out.ctx.allow_multicast = s.allow_multicast;
  out.ctx.allow_async_pipeline = s.allow_async_pipeline;
  out.ctx.allow_warp_specialization = s.allow_warp_specialization;
  out.ctx.allow_register_spills = s.allow_register_spills;
  out.ctx.allow_pingpong = s.allow_pingpong;
  out.ctx.allow_async_gemm = s.allow_async_gemm;
  out.ctx.allow_gemm_chains = s.allow_gemm_chains;
  out.ctx.unit_scale_skips = s.unit_scale_skips;
  out.ctx.allow_loop_rotation = s.allow_loop_rotation;
  out.ctx.allow_row_staging = s.allow_row_staging;
  out.ctx.async_span_copy = s.async_span_copy;
  out.ctx.realigned_span_reads = s.realigned_span_reads;
  out.ctx.realigned_global_loads = s.realigned_global_loads;
  out.ctx.allow_realigned_global_loads = s.allow_realigned_global_loads;
  out.ctx.programmatic_launch = s.programmatic_launch;
  out.ctx.uniform_roles = s.uniform_roles;
  out.ctx.allow_uniform_roles = s.allow_uniform_roles;
  out.ctx.gemm_from_passes = s.gemm_from_passes;
  out.ctx.allow_persistent_tiles = s.allow_persistent_tiles;
  out.ctx.allow_tile_loads = s.allow_tile_loads;
  out.ctx.max_persistent_ctas = s.max_persistent_ctas;
  out.ctx.persistent_rings = s.persistent_rings;
  out.ctx.requested_min_blocks_per_sm = s.min_blocks_per_sm;
  out.ctx.allow_realigned_rings = s.allow_realigned_rings;
  out.name = f.name;
  out.params = f.params;
  out.ctx.target = target;
  out.ctx.func_name = f.name;
  out.ctx.params = f.params;
  if (!f.body.defined())
    TESSEL_USER_ERROR("jit", std::source_location(), f.name << " has no body; call PrimFunc::body() first");
  ir::Stmt body = f.body;
  for (const auto& p : kPasses) {
    try {
      body = p.fn(body, out.ctx);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      // A library exception escaping a pass (a missing map entry, say) is the compiler's bug.
      throw InternalError(std::string("pass ") + p.name + " on " + f.name + " failed: " + e.what() +
                              " (a compiler bug: please report it with TESSEL_DUMP=after:all output)",
                          std::source_location::current());
    }
    passes::verify_ir(body, out.ctx, p.name);
    if (keep_stages || dump_requested(p.name)) {
      ir::PrimFuncNode stage{f.name, f.params, body};
      std::string text = ir::to_string(stage) + layouts_text(body, out.ctx);
      if (dump_requested(p.name)) std::cerr << "// TESSEL_DUMP after " << p.name << "\n" << text;
      if (keep_stages) out.stages.emplace_back(p.name, text);
    }
    if (last_pass == p.name) break;
  }
  out.body = body;
  return out;
}
}  // namespace

}  // namespace tessel
