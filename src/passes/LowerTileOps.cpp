// lower_tile_ops
//   Does:     replaces each tile op by thread-level code, through the op's TileOp::lower (src/ops/:
//             Copy.cpp, Gemm.cpp, Fill.cpp, TmaLoad.cpp; reductions are lower_reductions'):
//             - copy global->shared: tessel::copy_global_to_shared (16-byte cp.async when the
//               tensor's rows and the region's column start are 16-byte aligned, masked
//               element copies otherwise);
//             - copy gemm-accumulator fragment->global: tessel::store_accumulators;
//             - any other copy, and fill: element loops over the fragment's registers (its
//               layout gives each register's coordinates) or split flat over threads, with
//               reads past a global tensor's edge giving the pad value and writes dropped;
//             - copy fragment->fragment (one layout): register to register, converted;
//             - gemm: the instantiation infer_layouts chose (BlockGemm, or WarpgroupGemm on
//               sm_90a) ::run on the operands' stages, ::run_rs when A is a fragment (its
//               registers are the A operand);
//             - a TMA load: tessel::tma_load_tile, one box per panel of the tile's swizzle;
//             and fragments become per-thread register arrays. The pass walks the program, keeps
//             the ranges index expressions draw from, and hands both to each op (ops::LowerContext).
//   Requires: order_shared_writes and plan_pipelines (shared writes are ordered),
//             lower_parallel_loops, lower_reductions, infer_layouts.
//   Ensures:  no CopyStmt, GemmStmt, FillStmt or Fragment-scope buffer remains.
#include <numeric>

#include "ops/Lowering.hpp"
#include "ops/TileOp.hpp"
#include "passes/IntBounds.hpp"
#include "passes/Passes.hpp"
#include "tessel/ir/Mutator.hpp"
#include "tessel/ir/Printer.hpp"

namespace tessel::passes {

using namespace ir;

namespace {

class TileOpLowering : public IRMutator {
 public:
  explicit TileOpLowering(PassContext& ctx) : ctx_(ctx) {
    // The ranges index expressions draw from: the thread index, block indices of a static grid
    // and (mutate_node(ForStmt)) the enclosing loops of static extent.
    if (ctx_.threads > 0) ranges_.set(ctx_.thread_index, {0, ctx_.threads - 1});
    for (size_t d = 0; d < ctx_.block_vars.size() && d < ctx_.grid.size(); ++d)
      if (auto g = as_const_int(ctx_.grid[d]); g && *g > 0) ranges_.set(ctx_.block_vars[d], {0, *g - 1});
  }

 protected:
  Stmt mutate_node(const ForStmt* op, const Stmt& self) override {
    auto mn = as_const_int(op->min), ext = as_const_int(op->extent);
    if (mn && ext && *ext > 0) ranges_.set(op->var, {*mn, *mn + *ext - 1});
    Stmt out = IRMutator::mutate_node(op, self);
    ranges_.erase(op->var);
    return out;
  }

  Stmt mutate_node(const DeclBuffer* op, const Stmt& self) override {
    if (op->buffer->scope != Scope::Fragment) return self;
    const Buffer& regs = ctx_.registers_of(op->buffer);
    auto tail = ctx_.register_tails.find(regs->id);
    if (tail == ctx_.register_tails.end()) return make_decl(regs, op->where);
    // The shared slots first: the register array's declaration takes their address.
    return make_seq({make_decl(tail->second.slots, op->where), make_decl(regs, op->where)}, op->where);
  }

  // Fragments passed whole to device calls (a main loop's accumulators) become their registers.
  Buffer mutate_buffer(const Buffer& b) override {
    return b->scope == Scope::Fragment ? ctx_.registers_of(b) : b;
  }

  Expr mutate_node(const BufferLoad* op, const Expr& self) override {
    if (op->buffer->scope == Scope::Fragment)
      TESSEL_USER_ERROR("load", op->buffer->where,
                        "fragment " << op->buffer->name << " is read element-wise outside a "
                                    << "Parallel nest; use T::Parallel over the fragment");
    return IRMutator::mutate_node(op, self);
  }

  Stmt mutate_node(const BufferStore* op, const Stmt& self) override {
    if (op->buffer->scope == Scope::Fragment)
      TESSEL_USER_ERROR("store", op->where,
                        "fragment " << op->buffer->name << " is written element-wise outside a "
                                    << "Parallel nest; use T::Parallel over the fragment");
    return IRMutator::mutate_node(op, self);
  }

  // Tile ops lower themselves (src/ops/).
  Stmt mutate_node(const GemmStmt*, const Stmt& self) override { return lower_op(self); }
  Stmt mutate_node(const TmaLoadStmt*, const Stmt& self) override { return lower_op(self); }
  Stmt mutate_node(const ClusterReduceStmt*, const Stmt& self) override { return lower_op(self); }
  Stmt mutate_node(const CopyStmt*, const Stmt& self) override { return lower_op(self); }
  Stmt mutate_node(const FillStmt*, const Stmt& self) override { return lower_op(self); }

  // The registers a wait hands back are the fragments' register arrays.
  Stmt mutate_node(const AsyncGemmWait* op, const Stmt&) override {
    std::vector<Buffer> fence, pinned;
    for (const Buffer& b : op->fence) fence.push_back(b->scope == Scope::Fragment ? ctx_.registers_of(b) : b);
    for (const Buffer& b : op->pinned) pinned.push_back(b->scope == Scope::Fragment ? ctx_.registers_of(b) : b);
    return make_async_gemm_wait(op->pending, fence, op->where, pinned);
  }

 private:
  Stmt lower_op(const Stmt& s) {
    ops::LowerContext lc{ctx_, ranges_};
    return ops::tile_op(s)->lower(s, lc);
  }

  PassContext& ctx_;
  VarRanges ranges_;
};

}  // namespace

Stmt lower_tile_ops(const Stmt& body, PassContext& ctx) {
  return TileOpLowering(ctx).mutate(body);
}

}  // namespace tessel::passes
