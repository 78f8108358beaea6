// lower_reductions
//   Does:     turns reduce_max/min/sum of a row-blocked fragment (or a gemm tile) along its rows into
//             thread-level code, through the op's TileOp::lower (src/ops/Reduce.cpp): each thread combines its own registers of a row, a butterfly of warp
//             shuffles combines the row's lanes, and rows wider than a warp go through one
//             shared-memory word per warp (tessel::reduce_warps_inplace, which holds the block's
//             barriers). The result lands in every lane of the row (the RowOf layout), combined
//             with the old value when clear is false. A gemm tile (warps splitting M only) is
//             reduced by AccumulatorLayout::reduce_rows into an AccumulatorRows vector: each
//             thread's registers of a row, then the row's quad of lanes. A flat-rows tile goes
//             through tessel::reduce_flat_rows into a FlatRowOf vector (each thread's run's two
//             row parts, a group of lanes per row over shared memory, the rows' results back).
//   Requires: infer_layouts (src is RowBlocked and dst RowOf, src GemmAccumulator and dst
//             AccumulatorRows, or src FlatRows and dst FlatRowOf; checked there with the author's
//             line). Reductions run in uniform control flow: every thread reaches them.
//   Ensures:  no ReduceStmt remains; any scratch tile is declared (plan_shared_memory places it).
#include "ops/Lowering.hpp"
#include "ops/TileOp.hpp"
#include "passes/IntBounds.hpp"
#include "passes/Passes.hpp"
#include "tessel/ir/Mutator.hpp"

namespace tessel::passes {

using namespace ir;

namespace {

// Reductions lower themselves (src/ops/Reduce.cpp).
class ReductionLowering : public IRMutator {
 public:
  explicit ReductionLowering(PassContext& ctx) : ctx_(ctx) {}

 protected:
  Stmt mutate_node(const ReduceStmt*, const Stmt& self) override {
    VarRanges none;
    ops::LowerContext lc{ctx_, none};
    return ops::tile_op(self)->lower(self, lc);
  }

 private:
  PassContext& ctx_;
};

}  // namespace

Stmt lower_reductions(const Stmt& body, PassContext& ctx) {
  return ReductionLowering(ctx).mutate(body);
}

}  // namespace tessel::passes
