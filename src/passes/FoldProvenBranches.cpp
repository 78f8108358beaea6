// fold_proven_branches
//   Does:     replaces each `if` whose condition int bounds decide (passes/IntBounds: prove) by
//             the branch that runs -- its then-case, its else-case or nothing -- under the ranges
//             of the kernel's block indices (a grid of constant extents), of loops (the range
//             of `min + [0, extent)` where both are bounded: a Pipelined loop over
//             ceildiv(SK, BN) key blocks is [0, SK / BN - 1]) and of let-bound integers.
//             Attention's "is this block of keys past SK" test, `(j + 1) * BN > SK`, is false
//             on every iteration when BN divides SK: the loop body then has no branch, which
//             rotate_async_gemms needs (ptxas retires an in-flight wgmma at a branch's join)
//             and which costs nothing to drop.
//   Requires: verify_program (ctx.grid and ctx.block_vars name the kernel's launch).
//   Ensures:  the program computes what it did for every value its variables can take: only a
//             condition proven for the whole range is folded; nothing else changes.
#include "passes/IntBounds.hpp"
#include "passes/Passes.hpp"
#include "tessel/ir/Mutator.hpp"

namespace tessel::passes {

using namespace ir;

namespace {

class BranchFolder : public IRMutator {
 public:
  explicit BranchFolder(const PassContext& ctx) {
    for (size_t d = 0; d < ctx.block_vars.size() && d < ctx.grid.size(); ++d)
      if (auto g = int_bounds(ctx.grid[d], ranges_); g && g->lo == g->hi && g->lo > 0)
        ranges_.set(ctx.block_vars[d], {0, g->lo - 1});
  }

 protected:
  Stmt mutate_node(const ForStmt* op, const Stmt& self) override {
    auto mn = int_bounds(op->min, ranges_), ext = int_bounds(op->extent, ranges_);
    // A loop that may run no iteration constrains nothing inside it (nothing there runs); one
    // that runs, runs with var in [min, min + extent - 1].
    if (mn && ext && ext->hi >= 1) ranges_.set(op->var, {mn->lo, mn->hi + ext->hi - 1});
    Stmt out = IRMutator::mutate_node(op, self);
    ranges_.erase(op->var);
    return out;
  }

  Stmt mutate_node(const LetStmt* op, const Stmt& self) override {
    if (auto r = is_integer(op->value.dtype()) ? int_bounds(op->value, ranges_) : std::nullopt)
      ranges_.set(op->var, *r);
    Stmt out = IRMutator::mutate_node(op, self);
    ranges_.erase(op->var);
    return out;
  }

  Stmt mutate_node(const IfStmt* op, const Stmt& self) override {
    if (auto taken = prove(op->cond, ranges_)) {
      if (*taken) return mutate(op->then_case);
      return op->else_case.defined() ? mutate(op->else_case) : make_seq({}, op->where);
    }
    return IRMutator::mutate_node(op, self);
  }

 private:
  VarRanges ranges_;
};

}  // namespace

Stmt fold_proven_branches(const Stmt& body, PassContext& ctx) {
  return BranchFolder(ctx).mutate(body);
}

}  // namespace tessel::passes
