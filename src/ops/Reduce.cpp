// reduce_max/min/sum(src, dst, dim[, clear]): reads the whole of src (and of dst when it
// combines with dst's old values), writes the whole of dst. Lowered (lower_reductions) to each
// thread's registers of a row combined, a butterfly of shuffles over the row's lanes, and one
// shared-memory word per warp for rows wider than a warp; a gemm tile through
// AccumulatorLayout::reduce_rows. infer_layouts (Common): the result along the rows of its source
// (a row-blocked tile's RowOf vector, a gemm tile's AccumulatorRows).
#include "ops/TileOp.hpp"

#include "ops/Layouts.hpp"
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

const char* reduce_name(const ReduceStmt* r) {
  switch (r->op) {
    case ReduceOp::Max:
      return "reduce_max";
    case ReduceOp::Min:
      return "reduce_min";
    case ReduceOp::Sum:
      return "reduce_sum";
  }
  return "reduce";
}

// The result of a reduction along the rows of `src`: a 1-D fragment of its rows, laid out along
// them (row_layout_of), the same layout for every reduction into it.
void place_result(PassContext& ctx_, const ReduceStmt* r, const FragmentLayout& src) {
  if (r->dst.ndim() != 1 || r->dst.const_shape()[0] != src.shape[0])
    TESSEL_USER_ERROR(reduce_name(r), r->where,
                      "the result " << r->dst->name << " must be a 1-D fragment of " << src.shape[0]
                                    << " elements (one per row of " << r->src->name << ")");
  const FragmentLayout d = *row_layout_of(src);
  auto old = ctx_.fragment_layouts.find(r->dst->id);
  if (old != ctx_.fragment_layouts.end() && !same_fragment_layout(old->second, d))
    TESSEL_USER_ERROR(reduce_name(r), r->where,
                      r->dst->name << " receives reductions of tiles laid out differently; reduce tiles "
                                   << "of one shape (and, for gemm tiles, one warp split) into it");
  ctx_.fragment_layouts[r->dst->id] = d;
}

// reduce_max/min/sum of a gemm tile along its rows: the result is an AccumulatorRows vector.
void reduce_gemm_tile(PassContext& ctx_, const ReduceStmt* r, const FragmentLayout& src) {
  if (r->dim != 1 || src.warps_n != 1)
    TESSEL_USER_ERROR(reduce_name(r), r->where,
                      "reduces the gemm tile " << r->src->name << " " << shape_text(src.shape) << " over dim "
                                               << r->dim << " with its warps split " << src.warps_m << "x"
                                               << src.warps_n << " (M x N); a gemm tile reduces along dim 1, "
                                               << "with its warps splitting M only (gemm policy FullRow)");
  place_result(ctx_, r, src);
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
    if (src.kind == FragmentLayout::Kind::FlatRows) return flat_rows(op, src, in, out);
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
    // The tile's plain layout, AccumulatorLayout<rows, cols, warps_m, 1[, true]>, reduces it.
    const std::string layout = src.accumulator_layout(src.shape[0], src.shape[1]).device_type();
    std::vector<Stmt> stmts{make_decl(partial, w),
                            make_device_call(layout + "::template reduce_rows", {opname},
                                             {{Expr(), in, Expr()}, {Expr(), partial, Expr()}}, w)};
    stmts.push_back(write_back(op, partial, out, dst.per_thread));
    return make_seq(stmts, w);
  }

  // A flat-rows tile along its rows (tessel::reduce_flat_rows, reduce.cuh): each thread's run's
  // two parts combined in registers, the parts through shared memory to the rows' lanes and the
  // rows' results back to every thread that holds a part of them (three block barriers).
  Stmt flat_rows(const ReduceStmt* op, const FragmentLayout& src, const Buffer& in, const Buffer& out) {
    auto w = op->where;
    const FragmentLayout& dst = ctx_.fragment_layouts.at(op->dst->id);
    TESSEL_INTERNAL_CHECK(dst.kind == FragmentLayout::Kind::FlatRowOf && dst.chunks == src.chunks,
                          "reduce of a flat-rows tile into " << op->dst->name << " without its row layout");
    const std::string opname = op_type(op->op);
    const std::int64_t floats = 2 * std::int64_t(ctx_.threads) + src.shape[0];
    std::vector<Stmt> stmts;
    Buffer scratch = Buffer::make(op->dst->name + "_scratch", {make_int(floats)}, DType::f32, Scope::Shared, w);
    ctx_.shared_layouts[scratch->id] = SharedLayout::row_major(1, floats);
    stmts.push_back(make_decl(scratch, w));
    Buffer partial =
        Buffer::make(op->dst->name + "_partial", {make_int(dst.per_thread)}, DType::f32, Scope::Local, w);
    stmts.push_back(make_decl(partial, w));
    stmts.push_back(make_device_call(
        "tessel::reduce_flat_rows",
        {opname, std::to_string(src.chunks * src.vec), std::to_string(ctx_.threads), std::to_string(src.shape[0]),
         std::to_string(src.shape[1])},
        {{Expr(), in, Expr()}, {Expr(), partial, Expr()}, {Expr(), scratch, Expr()}}, w));
    stmts.push_back(write_back(op, partial, out, dst.per_thread));
    return make_seq(stmts, w);
  }

  // out[r] = partial[r] for each of a thread's `count` row registers, combined with out's old
  // value when the reduction does not clear it.
  Stmt write_back(const ReduceStmt* op, const Buffer& partial, const Buffer& out, int count) {
    Var r("r");
    Expr value = make_load(partial, {r});
    if (!op->clear) value = make_call(std::string(op_type(op->op)) + "::combine", {make_load(out, {r}), value}, DType::f32);
    return make_for(r, make_int(0), make_int(count), ForKind::Unrolled, 0, make_store(out, {r}, value, op->where),
                    op->where);
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
  // Common: the result lies along the rows of its source (a row-blocked tile's RowOf vector, a
  // gemm tile's AccumulatorRows), once the source's layout is known.
  void infer_layouts(const StmtNode& s, LayoutContext& lc, LayoutLevel level) const override {
    if (level != LayoutLevel::Common) return;
    const auto* r = static_cast<const ReduceStmt*>(&s);
    PassContext& ctx_ = lc.ctx;
    if (r->src->scope != Scope::Fragment || r->dst->scope != Scope::Fragment)
      TESSEL_USER_ERROR(reduce_name(r), r->where,
                        "reduces " << r->src->name << " into " << r->dst->name
                                   << "; both must be fragments (T::alloc_fragment)");
    auto found = ctx_.fragment_layouts.find(r->src->id);
    FragmentLayout src =
        found != ctx_.fragment_layouts.end() ? found->second : strided_layout(r->src, ctx_.threads);
    if (src.kind == FragmentLayout::Kind::GemmAccumulator) {
      reduce_gemm_tile(ctx_, r, src);
      return;
    }
    if (src.kind == FragmentLayout::Kind::FlatRows && r->dim == 1) {
      place_result(ctx_, r, src);
      return;
    }
    if (src.kind != FragmentLayout::Kind::RowBlocked || r->dim != 1)
      TESSEL_USER_ERROR(reduce_name(r), r->where,
                        "cannot lay out "
                            << r->src->name << " " << shape_text(src.shape) << " for a reduction over "
                            << "dim " << r->dim << " with " << ctx_.threads << " threads; this version "
                            << "reduces 2-D tiles along dim 1 whose columns are a multiple of " << lc.vec
                            << " (one 16-byte vector) and whose rows divide evenly over the "
                            << "threads, or whose rows x columns are a multiple of " << lc.vec
                            << " with more than " << lc.vec << " columns and at most 8 vectors a thread"
                            << ", each thread's run no longer than the row plus one");
    place_result(ctx_, r, src);
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
