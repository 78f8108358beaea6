// copy(src, dst): reads src, writes dst (any pair of global, shared and fragment regions).
#include "ops/TileOp.hpp"

namespace tessel::ops {

namespace {

class CopyOp final : public TileOp {
 public:
  const char* name() const override { return "copy"; }
  Access access(const ir::StmtNode& s) const override {
    const auto* c = static_cast<const ir::CopyStmt*>(&s);
    return {{c->src}, {c->dst}};
  }
};

}  // namespace

const TileOp& copy_op() {
  static const CopyOp op;
  return op;
}

}  // namespace tessel::ops
