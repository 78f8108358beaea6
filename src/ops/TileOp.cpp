// tile_op(): the dispatch from a statement to its op's interface, and what every op shares.
#include "ops/TileOp.hpp"

namespace tessel::ops {

using namespace ir;

const TileOp* tile_op(const StmtNode* s) {
  if (!s) return nullptr;
  switch (s->kind) {
    case NodeKind::CopyStmt:
      return &copy_op();
    case NodeKind::GemmStmt:
      return &gemm_op();
    case NodeKind::FillStmt:
      return &fill_op();
    case NodeKind::ReduceStmt:
      return &reduce_op();
    case NodeKind::TmaLoadStmt:
      return &tma_load_op();
    case NodeKind::ClusterReduceStmt:
      return &cluster_reduce_op();
    default:
      return nullptr;
  }
}

Access access(const StmtNode* s) {
  const TileOp* op = tile_op(s);
  return op ? op->access(*s) : Access{};
}

bool writes_scope(const Stmt& s, Scope scope) {
  for (const Region& r : access(s).writes)
    if (r.buffer->scope == scope) return true;
  return false;
}

bool is_global_to_shared_copy(const Stmt& s) {
  const auto* c = s.as<CopyStmt>();
  return c && c->src.buffer->scope == Scope::Global && c->dst.buffer->scope == Scope::Shared;
}

bool is_shared_write(const Stmt& s) {
  return (s.as<CopyStmt>() || s.as<FillStmt>()) && writes_scope(s, Scope::Shared);
}

Region whole(const Buffer& b) {
  Region r{b, {}, {}};
  for (const Expr& e : b->shape) {
    r.starts.push_back(make_int(0));
    r.extents.push_back(e);
  }
  return r;
}

}  // namespace tessel::ops
