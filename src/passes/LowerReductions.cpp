// lower_reductions
//   Does:     turns reduce_max/min/sum of a row-blocked fragment (or a gemm tile) along its rows into
//   thread-level
//             code: each thread combines its own registers of a row, a butterfly of warp
//             shuffles combines the row's lanes, and rows wider than a warp go through one
//             shared-memory word per warp (tessel::reduce_warps_inplace, which holds the block's
//             barriers). The result lands in every lane of the row (the RowOf layout), combined
//             with the old value when clear is false. A gemm tile (warps splitting M only) is
//             reduced by AccumulatorLayout::reduce_rows into an AccumulatorRows vector: each
//             thread's registers of a row, then the row's quad of lanes.
//   Requires: infer_layouts (src is RowBlocked and dst RowOf, or src GemmAccumulator and dst
//             AccumulatorRows; checked there with the author's
//             line). Reductions run in uniform control flow: every thread reaches them.
//   Ensures:  no ReduceStmt remains; any scratch tile is declared (plan_shared_memory places it).
#include "passes/Passes.hpp"
#include "tessel/ir/Mutator.hpp"

namespace tessel::passes {

using namespace ir;

namespace {

const char* op_type(ReduceOp op) {
  switch (op) {
    case ReduceOp::Max:
      return "tessel::ReduceMaxOp";
    case ReduceOp::Min:
      return "tessel::ReduceMinOp";
    case ReduceOp::Sum:
      return "tessel::ReduceSumOp";
  }
  return "?";
}

class ReductionLowering : public IRMutator {
 public:
  explicit ReductionLowering(PassContext& ctx) : ctx_(ctx) {}

 protected:
  Stmt mutate_node(const ReduceStmt* op, const Stmt&) override {
    auto w = op->where;
    const FragmentLayout& src = ctx_.fragment_layouts.at(op->src->id);
    if (op->src->dtype != DType::f32 || op->dst->dtype != DType::f32)
      TESSEL_USER_ERROR("reduce", w,
                        "reduces " << dtype_name(op->src->dtype) << " " << op->src->name << " into "
                                   << dtype_name(op->dst->dtype) << " " << op->dst->name
                                   << "; reductions take f32 fragments (accumulate in f32)");
    const Buffer& in = ctx_.registers_of(op->src);
    const Buffer& out = ctx_.registers_of(op->dst);
    if (src.kind == FragmentLayout::Kind::GemmAccumulator) return gemm_tile_rows(op, src, in, out);
    TESSEL_INTERNAL_CHECK(src.kind == FragmentLayout::Kind::RowBlocked, "reduce source is not row-blocked");
    const int per_row = src.chunks * src.vec;
    const int row_slots = static_cast<int>(src.shape[0] / src.rows_per_pass);
    const int lanes_in_warp = std::min(src.lanes, 32);
    const int warps_per_row = src.lanes / lanes_in_warp;
    std::string opname = op_type(op->op);
    std::vector<Stmt> stmts;
    Buffer partial = Buffer::make(op->dst->name + "_partial", {make_int(1)}, DType::f32, Scope::Local, w);
    stmts.push_back(make_decl(partial, w));
    Buffer scratch;
    if (warps_per_row > 1) {
      std::int64_t words = ctx_.threads / 32;
      scratch = Buffer::make(op->dst->name + "_scratch", {make_int(words)}, DType::f32, Scope::Shared, w);
      ctx_.shared_layouts[scratch->id] =
          SharedLayout{false, "tessel::RowMajorLayout<1, " + std::to_string(words) + ">", 1, words};
      stmts.push_back(make_decl(scratch, w));
    }
    Var slot("r");
    std::vector<Stmt> body;
    body.push_back(make_device_call(
        "tessel::reduce_registers", {opname, std::to_string(per_row)},
        {{Expr(), in, make_binary(BinaryOp::Mul, slot, make_int(per_row))}, {Expr(), partial, Expr()}}, w));
    if (lanes_in_warp > 1)
      body.push_back(make_device_call("tessel::reduce_lanes_inplace", {opname, std::to_string(lanes_in_warp)},
                                      {{Expr(), partial, Expr()}}, w));
    if (warps_per_row > 1)
      body.push_back(make_device_call("tessel::reduce_warps_inplace", {opname, std::to_string(warps_per_row)},
                                      {{Expr(), partial, Expr()}, {Expr(), scratch, Expr()}}, w));
    Expr value = make_load(partial, {make_int(0)});
    if (!op->clear) value = make_call(opname + "::combine", {make_load(out, {slot}), value}, DType::f32);
    body.push_back(make_store(out, {slot}, value, w));
    stmts.push_back(
        make_for(slot, make_int(0), make_int(row_slots), ForKind::Unrolled, 0, make_seq(body, w), w));
    return make_seq(stmts, w);
  }

 private:
  // A gemm tile along its rows (warps split M only): AccumulatorLayout::reduce_rows combines each
  // thread's registers of a row and the row's quad of lanes; no shared memory, no barrier.
  Stmt gemm_tile_rows(const ReduceStmt* op, const FragmentLayout& src, const Buffer& in, const Buffer& out) {
    auto w = op->where;
    const FragmentLayout& dst = ctx_.fragment_layouts.at(op->dst->id);
    TESSEL_INTERNAL_CHECK(dst.kind == FragmentLayout::Kind::AccumulatorRows && src.warps_n == 1,
                          "reduce of a gemm tile into " << op->dst->name << " without its row layout");
    const std::string opname = op_type(op->op);
    Buffer partial =
        Buffer::make(op->dst->name + "_partial", {make_int(dst.per_thread)}, DType::f32, Scope::Local, w);
    const std::string layout = "tessel::AccumulatorLayout<" + std::to_string(src.shape[0]) + ", " +
                               std::to_string(src.shape[1]) + ", " + std::to_string(src.warps_m) + ", 1>";
    std::vector<Stmt> stmts{make_decl(partial, w),
                            make_device_call(layout + "::template reduce_rows", {opname},
                                             {{Expr(), in, Expr()}, {Expr(), partial, Expr()}}, w)};
    Var r("r");
    Expr value = make_load(partial, {r});
    if (!op->clear) value = make_call(opname + "::combine", {make_load(out, {r}), value}, DType::f32);
    stmts.push_back(make_for(r, make_int(0), make_int(dst.per_thread), ForKind::Unrolled, 0,
                             make_store(out, {r}, value, w), w));
    return make_seq(stmts, w);
  }

  PassContext& ctx_;
};

}  // namespace

Stmt lower_reductions(const Stmt& body, PassContext& ctx) {
  return ReductionLowering(ctx).mutate(body);
}

}  // namespace tessel::passes
