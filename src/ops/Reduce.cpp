// reduce_max/min/sum(src, dst, dim[, clear]): reads the whole of src (and of dst when it
// combines with dst's old values), writes the whole of dst. Lowered (lower_reductions) to each
// thread's registers of a row combined, a butterfly of shuffles over the row's lanes, and one
// shared-memory word per warp for rows wider than a warp; a gemm tile through
// AccumulatorLayout::reduce_rows.
#include "ops/TileOp.hpp"

#include "ops/Lowering.hpp"
#include "tessel/Error.hpp"

namespace tessel::ops {

namespace {

using namespace ir;

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

// The lowering of one reduction (see lower()).
class ReductionLowering {
 public:
  explicit ReductionLowering(PassContext& ctx) : ctx_(ctx) {}

  Stmt lower(const ReduceStmt* op) {
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
      ctx_.shared_layouts[scratch->id] = SharedLayout::row_major(1, words);
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

class ReduceTileOp final : public TileOp {
 public:
  const char* name() const override { return "reduce"; }
  Access access(const ir::StmtNode& s) const override {
    const auto* r = static_cast<const ir::ReduceStmt*>(&s);
    Access a{{whole(r->src)}, {whole(r->dst)}};
    if (!r->clear) a.reads.push_back(whole(r->dst));
    return a;
  }
  // Called by lower_reductions, which runs before lower_tile_ops while fragments still exist.
  Stmt lower(const Stmt& s, LowerContext& lc) const override {
    return ReductionLowering(lc.ctx).lower(s.as<ReduceStmt>());
  }
};

}  // namespace

const TileOp& reduce_op() {
  static const ReduceTileOp op;
  return op;
}

}  // namespace tessel::ops
