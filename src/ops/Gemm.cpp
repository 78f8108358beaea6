// gemm(A, B, C): C += op(A) op(B); reads A, B and the accumulator C, writes C.
#include "ops/TileOp.hpp"

namespace tessel::ops {

namespace {

class GemmOp final : public TileOp {
 public:
  const char* name() const override { return "gemm"; }
  Access access(const ir::StmtNode& s) const override {
    const auto* g = static_cast<const ir::GemmStmt*>(&s);
    return {{g->A, g->B, g->C}, {g->C}};
  }
};

}  // namespace

const TileOp& gemm_op() {
  static const GemmOp op;
  return op;
}

}  // namespace tessel::ops
