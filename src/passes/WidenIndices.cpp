// widen_indices
//   Does:     computes in 64 bits every 32-bit integer sum, difference or product whose value can
//             leave the 32-bit range, as the IR's bounds say: the thread index in [0, threads),
//             block indices in [0, grid), loop variables in their constant ranges, let-bound
//             values in theirs (IntBounds.cpp, in exact integers). `bx * 1024 + i` over a tensor
//             of 2^31 + 2048 elements becomes `(long long)bx * 1024 + i`, so the element index
//             and the bounds test that guards it agree with the exact arithmetic the earlier
//             passes reasoned in (a test they proved true stays true). Expressions of unknown
//             range (a loaded value, a lambda's parameter) are left as they are.
//   Requires: lowering done (every index expression exists).
//   Ensures:  no i32 Add/Sub/Mul whose exact range leaves [-2^31, 2^31 - 1].
#include <climits>

#include "passes/IntBounds.hpp"
#include "passes/PassUtil.hpp"
#include "passes/Passes.hpp"
#include "tessel/ir/Mutator.hpp"

namespace tessel::passes {

using namespace ir;

namespace {

class Widener : public IRMutator {
 public:
  explicit Widener(const PassContext& ctx) {
    if (ctx.threads > 0) ranges_.set(ctx.thread_index, {0, std::max(ctx.threads, ctx.launch_threads) - 1});
    for (size_t d = 0; d < ctx.block_vars.size() && d < ctx.grid.size(); ++d)
      if (auto g = as_const_int(ctx.grid[d]); g && *g > 0) ranges_.set(ctx.block_vars[d], {0, *g - 1});
  }
  int widened = 0;

 protected:
  Expr mutate_node(const Binary* op, const Expr& self) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    const bool arithmetic = op->op == BinaryOp::Add || op->op == BinaryOp::Sub || op->op == BinaryOp::Mul;
    if (arithmetic && op->dtype == DType::i32) {
      auto r = int_bounds(self, ranges_);
      if (r && (r->lo < INT32_MIN || r->hi > INT32_MAX)) {
        ++widened;
        return make_binary(op->op, a.dtype() == DType::i64 ? a : i64(a),
                           b.dtype() == DType::i64 ? b : i64(b));
      }
    }
    if (a.same_as(op->a) && b.same_as(op->b)) return self;
    return make_binary(op->op, a, b);
  }

  Stmt mutate_node(const ForStmt* op, const Stmt& self) override {
    auto mn = as_const_int(op->min), ext = as_const_int(op->extent);
    if (mn && ext && *ext > 0) ranges_.set(op->var, {*mn, *mn + *ext - 1});
    Stmt out = IRMutator::mutate_node(op, self);
    ranges_.erase(op->var);
    return out;
  }

  Stmt mutate_node(const LetStmt* op, const Stmt& self) override {
    if (auto r = int_bounds(op->value, ranges_)) ranges_.set(op->var, *r);
    Expr value = mutate(op->value);
    Stmt body = mutate(op->body);
    ranges_.erase(op->var);
    if (value.same_as(op->value) && body.same_as(op->body)) return self;
    if (value.dtype() == DType::i64 && op->var.dtype() == DType::i32) {
      // The value is 64-bit now: so is the variable that holds it.
      Var wide(op->var.name(), DType::i64);
      return make_let(wide, value, substitute(body, {{op->var, wide}}), op->where);
    }
    return make_let(op->var, value, body, op->where);
  }

 private:
  VarRanges ranges_;
};

}  // namespace

Stmt widen_indices(const Stmt& body, PassContext& ctx) {
  Widener w(ctx);
  return w.mutate(body);
}

}  // namespace tessel::passes
