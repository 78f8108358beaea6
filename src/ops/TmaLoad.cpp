// A TMA load (plan_tma_copies): reads a global box, writes a shared tile (completing its ring
// stage's mbarrier).
#include "ops/TileOp.hpp"

namespace tessel::ops {

namespace {

class TmaLoadOp final : public TileOp {
 public:
  const char* name() const override { return "tma_load"; }
  Access access(const ir::StmtNode& s) const override {
    const auto* t = static_cast<const ir::TmaLoadStmt*>(&s);
    return {{t->src}, {t->dst}};
  }
};

}  // namespace

const TileOp& tma_load_op() {
  static const TmaLoadOp op;
  return op;
}

}  // namespace tessel::ops
