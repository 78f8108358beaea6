// fill(dst, value): writes every element of dst.
#include "ops/TileOp.hpp"

#include "ops/Lowering.hpp"

namespace tessel::ops {

namespace {

using namespace ir;

class FillOp final : public TileOp {
 public:
  const char* name() const override { return "fill"; }
  Access access(const ir::StmtNode& s) const override { return {{}, {static_cast<const ir::FillStmt*>(&s)->dst}}; }
  Stmt lower(const Stmt& s, LowerContext& lc) const override {
    const auto* op = s.as<FillStmt>();
    PassContext& ctx_ = lc.ctx;
    const Region& r = op->dst;
    auto w = op->where;
    if (r.buffer->scope == Scope::Fragment) {
      const FragmentLayout& l = ctx_.fragment_layouts.at(r.buffer->id);
      if (!covers_whole_buffer(r))
        TESSEL_USER_ERROR("fill", w,
                          "fills part of fragment " << r.buffer->name << "; fill the whole fragment, or use "
                                                    << "T::Parallel with a condition");
      Var v("l");
      return make_for(v, make_int(0), make_int(l.per_thread), ForKind::Unrolled, 0,
                      make_store(ctx_.registers_of(r.buffer), {v}, op->value, w), w);
    }
    return over_region(
        lc, r, w, [&](const std::vector<Expr>& idx) { return guarded_store(r, idx, op->value, lc.ranges, w); });
  }
};

}  // namespace

const TileOp& fill_op() {
  static const FillOp op;
  return op;
}

}  // namespace tessel::ops
