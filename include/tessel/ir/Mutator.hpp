// Generic traversal of the IR. IRVisitor walks every node; IRMutator rebuilds a tree bottom-up
// and returns the very same node when none of its children changed, so passes can compare
// handles (same_as) to see whether they did anything. Both dispatch over the one node list.
#pragma once

#include "tessel/ir/IR.hpp"

namespace tessel::ir {

class IRVisitor {
 public:
  virtual ~IRVisitor() = default;
  virtual void visit(const Expr& e);
  virtual void visit(const Stmt& s);

 protected:
#define TESSEL_VISIT_DECL(name) virtual void visit_node(const name* op);
  TESSEL_EXPR_NODES(TESSEL_VISIT_DECL)
  TESSEL_STMT_NODES(TESSEL_VISIT_DECL)
#undef TESSEL_VISIT_DECL
  // Called for every buffer a node names (loads, stores, declarations, tile-op operands).
  virtual void visit_buffer(const Buffer&) {}
  void visit_region(const Region& r);
};

class IRMutator {
 public:
  virtual ~IRMutator() = default;
  virtual Expr mutate(const Expr& e);
  virtual Stmt mutate(const Stmt& s);

 protected:
#define TESSEL_MUTATE_EXPR_DECL(name) virtual Expr mutate_node(const name* op, const Expr& self);
  TESSEL_EXPR_NODES(TESSEL_MUTATE_EXPR_DECL)
#undef TESSEL_MUTATE_EXPR_DECL
#define TESSEL_MUTATE_STMT_DECL(name) virtual Stmt mutate_node(const name* op, const Stmt& self);
  TESSEL_STMT_NODES(TESSEL_MUTATE_STMT_DECL)
#undef TESSEL_MUTATE_STMT_DECL
  // Substitution hook for every buffer a node names; the identity by default.
  virtual Buffer mutate_buffer(const Buffer& b) {
    return b;
  }
  Region mutate_region(const Region& r, bool* changed);
  std::vector<Expr> mutate_exprs(const std::vector<Expr>& v, bool* changed);
};

// Replaces variables by expressions (by node identity).
Expr substitute(const Expr& e, const std::vector<std::pair<Var, Expr>>& map);
Stmt substitute(const Stmt& s, const std::vector<std::pair<Var, Expr>>& map);

}  // namespace tessel::ir
