// fill(dst, value): writes every element of dst.
#include "ops/TileOp.hpp"

namespace tessel::ops {

namespace {

class FillOp final : public TileOp {
 public:
  const char* name() const override { return "fill"; }
  Access access(const ir::StmtNode& s) const override { return {{}, {static_cast<const ir::FillStmt*>(&s)->dst}}; }
};

}  // namespace

const TileOp& fill_op() {
  static const FillOp op;
  return op;
}

}  // namespace tessel::ops
