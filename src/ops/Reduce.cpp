// reduce_max/min/sum(src, dst, dim[, clear]): reads the whole of src (and of dst when it
// combines with dst's old values), writes the whole of dst.
#include "ops/TileOp.hpp"

#include "tessel/Error.hpp"

namespace tessel::ops {

namespace {

class ReduceOp final : public TileOp {
 public:
  const char* name() const override { return "reduce"; }
  Access access(const ir::StmtNode& s) const override {
    const auto* r = static_cast<const ir::ReduceStmt*>(&s);
    Access a{{whole(r->src)}, {whole(r->dst)}};
    if (!r->clear) a.reads.push_back(whole(r->dst));
    return a;
  }
  // lower_reductions, which runs before lower_tile_ops, lowers every reduction (its per-thread
  // partials, shuffles and shared memory depend on the source's layout across warps).
  ir::Stmt lower(const ir::Stmt& s, LowerContext&) const override {
    throw_internal_error("a reduction reached lower_tile_ops at line " + std::to_string(s->where.line()) +
                         "; lower_reductions lowers every reduction first");
  }
};

}  // namespace

const TileOp& reduce_op() {
  static const ReduceOp op;
  return op;
}

}  // namespace tessel::ops
