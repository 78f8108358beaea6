// A TMA load (plan_tma_copies): reads a global box, writes a shared tile (completing its ring
// stage's mbarrier).
#include "ops/TileOp.hpp"

#include "ops/Lowering.hpp"

namespace tessel::ops {

namespace {

using namespace ir;

class TmaLoadOp final : public TileOp {
 public:
  const char* name() const override { return "tma_load"; }
  Access access(const ir::StmtNode& s) const override {
    const auto* t = static_cast<const ir::TmaLoadStmt*>(&s);
    return {{t->src}, {t->dst}};
  }

  // A TMA load: one box per panel of the tile's swizzle (device/tessel/pipeline.cuh), at the
  // region's start, coordinates innermost first.
  Stmt lower(const Stmt& s, LowerContext& lc) const override {
    const auto* op = s.as<TmaLoadStmt>();
    PassContext& ctx_ = lc.ctx;
    const TmaParam* p = nullptr;
    for (const TmaParam& t : ctx_.tma_params)
      if (t.var.same_as(op->map)) p = &t;
    TESSEL_INTERNAL_CHECK(p && !p->box.empty() && op->bars.defined(), "TMA load without its map or barrier");
    const SharedLayout& l = ctx_.shared_layouts.at(op->dst.buffer->id);
    const int elem = dtype_bytes(op->src.buffer->dtype);
    const int panel_cols = p->swizzle_bytes / elem;
    const std::int64_t panels = l.cols / panel_cols;
    const std::int64_t panel_bytes = l.rows * p->swizzle_bytes;
    const int rank = op->src.buffer.ndim();
    std::vector<DeviceCallArg> args{{Expr(), op->dst.buffer, linear_offset(op->dst)},
                                    {make_call("address_of", {op->map}, DType::i64), Buffer(), Expr()},
                                    {Expr(), op->bars, op->index}};
    for (int d = rank - 1; d >= 0; --d)
      args.push_back({make_cast(DType::i32, op->src.starts[static_cast<size_t>(d)]), Buffer(), Expr()});
    if (op->multicast > 1) {
      // Each CTA of the cluster loads its share of the rows into all of them (the map's box is
      // one share: multicast_cluster_loads).
      TESSEL_INTERNAL_CHECK(
          p->share_dim >= 0 && p->box[static_cast<size_t>(p->share_dim)] * op->multicast == l.rows,
          "a multicast TMA load whose map's box is not its share of the tile's rows");
      const int share_rows = p->box[static_cast<size_t>(p->share_dim)];
      return make_device_call("tessel::tma_load_tile_multicast",
                              {std::to_string(rank), std::to_string(panels), std::to_string(panel_cols),
                               std::to_string(panel_bytes), std::to_string(op->multicast),
                               std::to_string(rank - 1 - p->share_dim), std::to_string(share_rows),
                               std::to_string(share_rows * p->swizzle_bytes)},
                              args, op->where);
    }
    return make_device_call("tessel::tma_load_tile",
                            {std::to_string(rank), std::to_string(panels), std::to_string(panel_cols),
                             std::to_string(panel_bytes)},
                            args, op->where);
  }
};

}  // namespace

const TileOp& tma_load_op() {
  static const TmaLoadOp op;
  return op;
}

}  // namespace tessel::ops
