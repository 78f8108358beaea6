#include "tessel/ir/Mutator.hpp"

namespace tessel::ir {

// ---- visitor ---------------------------------------------------------------------------------------

void IRVisitor::visit(const Expr& e) {
  if (!e.defined()) return;
  switch (e->kind) {
#define TESSEL_DISPATCH(name) \
  case NodeKind::name:        \
    return visit_node(static_cast<const name*>(e.get()));
    TESSEL_EXPR_NODES(TESSEL_DISPATCH)
#undef TESSEL_DISPATCH
    default:
      throw_internal_error("expression handle holds a statement node");
  }
}

void IRVisitor::visit(const Stmt& s) {
  if (!s.defined()) return;
  switch (s->kind) {
#define TESSEL_DISPATCH(name) \
  case NodeKind::name:        \
    return visit_node(static_cast<const name*>(s.get()));
    TESSEL_STMT_NODES(TESSEL_DISPATCH)
#undef TESSEL_DISPATCH
    default:
      throw_internal_error("statement handle holds an expression node");
  }
}

void IRVisitor::visit_region(const Region& r) {
  visit_buffer(r.buffer);
  for (const Expr& e : r.starts) visit(e);
  for (const Expr& e : r.extents) visit(e);
}

void IRVisitor::visit_node(const IntImm*) {}
void IRVisitor::visit_node(const FloatImm*) {}
void IRVisitor::visit_node(const VarNode*) {}
void IRVisitor::visit_node(const Binary* op) {
  visit(op->a);
  visit(op->b);
}
void IRVisitor::visit_node(const Unary* op) {
  visit(op->a);
}
void IRVisitor::visit_node(const Select* op) {
  visit(op->cond);
  visit(op->true_value);
  visit(op->false_value);
}
void IRVisitor::visit_node(const Cast* op) {
  visit(op->value);
}
void IRVisitor::visit_node(const Call* op) {
  for (const Expr& a : op->args) visit(a);
}
void IRVisitor::visit_node(const BufferLoad* op) {
  visit_buffer(op->buffer);
  for (const Expr& i : op->indices) visit(i);
}
void IRVisitor::visit_node(const SeqStmt* op) {
  for (const Stmt& s : op->stmts) visit(s);
}
void IRVisitor::visit_node(const ForStmt* op) {
  visit(op->min);
  visit(op->extent);
  visit(op->body);
}
void IRVisitor::visit_node(const IfStmt* op) {
  visit(op->cond);
  visit(op->then_case);
  visit(op->else_case);
}
void IRVisitor::visit_node(const LetStmt* op) {
  visit(op->value);
  visit(op->body);
}
void IRVisitor::visit_node(const BufferStore* op) {
  visit_buffer(op->buffer);
  for (const Expr& i : op->indices) visit(i);
  visit(op->value);
}
void IRVisitor::visit_node(const DeclBuffer* op) {
  visit_buffer(op->buffer);
}
void IRVisitor::visit_node(const KernelStmt* op) {
  for (const Expr& g : op->grid) visit(g);
  visit(op->body);
}
void IRVisitor::visit_node(const CopyStmt* op) {
  visit_region(op->src);
  visit_region(op->dst);
  visit(op->pad);
}
void IRVisitor::visit_node(const GemmStmt* op) {
  visit_region(op->A);
  visit_region(op->B);
  visit_region(op->C);
}
void IRVisitor::visit_node(const FillStmt* op) {
  visit_region(op->dst);
  visit(op->value);
}
void IRVisitor::visit_node(const ReduceStmt* op) {
  visit_buffer(op->src);
  visit_buffer(op->dst);
}
void IRVisitor::visit_node(const SwizzleStmt*) {}
void IRVisitor::visit_node(const ClusterStmt*) {}
void IRVisitor::visit_node(const DeviceCall* op) {
  for (const auto& a : op->args) {
    if (a.buffer.defined()) visit_buffer(a.buffer);
    visit(a.expr);
    visit(a.offset);
    visit(a.lambda_body);
    visit(a.lambda_result);
  }
}
void IRVisitor::visit_node(const BarrierStmt*) {}
void IRVisitor::visit_node(const AsyncCommit*) {}
void IRVisitor::visit_node(const AsyncWait*) {}
void IRVisitor::visit_node(const MbarrierStmt* op) {
  visit_buffer(op->bars);
  visit(op->index);
  visit(op->value);
}
void IRVisitor::visit_node(const ClusterReduceStmt* op) {
  visit_buffer(op->acc);
  visit_buffer(op->scratch);
  visit_buffer(op->bars);
  visit(op->rank);
}
void IRVisitor::visit_node(const TmaLoadStmt* op) {
  visit_region(op->src);
  visit_region(op->dst);
  visit(op->map);
  if (op->bars.defined()) visit_buffer(op->bars);
  visit(op->index);
}
void IRVisitor::visit_node(const ProducerStmt* op) {
  visit(op->body);
}
void IRVisitor::visit_node(const SpecializeStmt* op) {
  visit(op->producer);
  visit(op->consumer);
}
void IRVisitor::visit_node(const AsyncGemmWait* op) {
  for (const Buffer& b : op->fence) visit_buffer(b);
  for (const Buffer& b : op->pinned) visit_buffer(b);
}

// ---- mutator ---------------------------------------------------------------------------------------

Expr IRMutator::mutate(const Expr& e) {
  if (!e.defined()) return e;
  switch (e->kind) {
#define TESSEL_DISPATCH(name) \
  case NodeKind::name:        \
    return mutate_node(static_cast<const name*>(e.get()), e);
    TESSEL_EXPR_NODES(TESSEL_DISPATCH)
#undef TESSEL_DISPATCH
    default:
      throw_internal_error("expression handle holds a statement node");
  }
}

Stmt IRMutator::mutate(const Stmt& s) {
  if (!s.defined()) return s;
  switch (s->kind) {
#define TESSEL_DISPATCH(name) \
  case NodeKind::name:        \
    return mutate_node(static_cast<const name*>(s.get()), s);
    TESSEL_STMT_NODES(TESSEL_DISPATCH)
#undef TESSEL_DISPATCH
    default:
      throw_internal_error("statement handle holds an expression node");
  }
}

std::vector<Expr> IRMutator::mutate_exprs(const std::vector<Expr>& v, bool* changed) {
  std::vector<Expr> out;
  out.reserve(v.size());
  for (const Expr& e : v) {
    out.push_back(mutate(e));
    if (!out.back().same_as(e)) *changed = true;
  }
  return out;
}

Region IRMutator::mutate_region(const Region& r, bool* changed) {
  Region out{mutate_buffer(r.buffer), mutate_exprs(r.starts, changed), mutate_exprs(r.extents, changed)};
  if (!out.buffer.same_as(r.buffer)) *changed = true;
  return out;
}

Expr IRMutator::mutate_node(const IntImm*, const Expr& self) {
  return self;
}
Expr IRMutator::mutate_node(const FloatImm*, const Expr& self) {
  return self;
}
Expr IRMutator::mutate_node(const VarNode*, const Expr& self) {
  return self;
}
Expr IRMutator::mutate_node(const Binary* op, const Expr& self) {
  Expr a = mutate(op->a), b = mutate(op->b);
  if (a.same_as(op->a) && b.same_as(op->b)) return self;
  return make_binary(op->op, a, b);
}
Expr IRMutator::mutate_node(const Unary* op, const Expr& self) {
  Expr a = mutate(op->a);
  return a.same_as(op->a) ? self : make_unary(op->op, a);
}
Expr IRMutator::mutate_node(const Select* op, const Expr& self) {
  Expr c = mutate(op->cond), t = mutate(op->true_value), f = mutate(op->false_value);
  if (c.same_as(op->cond) && t.same_as(op->true_value) && f.same_as(op->false_value)) return self;
  return make_select(c, t, f);
}
Expr IRMutator::mutate_node(const Cast* op, const Expr& self) {
  Expr v = mutate(op->value);
  return v.same_as(op->value) ? self : make_cast(op->dtype, v);
}
Expr IRMutator::mutate_node(const Call* op, const Expr& self) {
  bool changed = false;
  auto args = mutate_exprs(op->args, &changed);
  return changed ? make_call(op->name, args, op->dtype) : self;
}
Expr IRMutator::mutate_node(const BufferLoad* op, const Expr& self) {
  bool changed = false;
  Buffer b = mutate_buffer(op->buffer);
  auto idx = mutate_exprs(op->indices, &changed);
  if (!changed && b.same_as(op->buffer)) return self;
  return make_load(b, idx);
}

Stmt IRMutator::mutate_node(const SeqStmt* op, const Stmt& self) {
  bool changed = false;
  std::vector<Stmt> out;
  for (const Stmt& s : op->stmts) {
    out.push_back(mutate(s));
    if (!out.back().same_as(s)) changed = true;
  }
  return changed ? make_seq(out, op->where) : self;
}
Stmt IRMutator::mutate_node(const ForStmt* op, const Stmt& self) {
  Expr mn = mutate(op->min), ext = mutate(op->extent);
  Stmt body = mutate(op->body);
  if (mn.same_as(op->min) && ext.same_as(op->extent) && body.same_as(op->body)) return self;
  return make_for(op->var, mn, ext, op->kind, op->num_stages, body, op->where);
}
Stmt IRMutator::mutate_node(const IfStmt* op, const Stmt& self) {
  Expr c = mutate(op->cond);
  Stmt t = mutate(op->then_case), e = mutate(op->else_case);
  if (c.same_as(op->cond) && t.same_as(op->then_case) && e.same_as(op->else_case)) return self;
  return make_if(c, t, e, op->where);
}
Stmt IRMutator::mutate_node(const LetStmt* op, const Stmt& self) {
  Expr v = mutate(op->value);
  Stmt b = mutate(op->body);
  if (v.same_as(op->value) && b.same_as(op->body)) return self;
  return make_let(op->var, v, b, op->where);
}
Stmt IRMutator::mutate_node(const BufferStore* op, const Stmt& self) {
  bool changed = false;
  Buffer b = mutate_buffer(op->buffer);
  auto idx = mutate_exprs(op->indices, &changed);
  Expr v = mutate(op->value);
  if (!changed && b.same_as(op->buffer) && v.same_as(op->value)) return self;
  return make_store(b, idx, v, op->where);
}
Stmt IRMutator::mutate_node(const DeclBuffer* op, const Stmt& self) {
  Buffer b = mutate_buffer(op->buffer);
  return b.same_as(op->buffer) ? self : make_decl(b, op->where);
}
Stmt IRMutator::mutate_node(const KernelStmt* op, const Stmt& self) {
  bool changed = false;
  auto grid = mutate_exprs(op->grid, &changed);
  Stmt body = mutate(op->body);
  if (!changed && body.same_as(op->body)) return self;
  return make_kernel(grid, op->threads, op->block_vars, body, op->where);
}
Stmt IRMutator::mutate_node(const CopyStmt* op, const Stmt& self) {
  bool changed = false;
  Region s = mutate_region(op->src, &changed), d = mutate_region(op->dst, &changed);
  Expr pad = mutate(op->pad);
  if (!changed && pad.same_as(op->pad)) return self;
  return make_copy(s, d, pad, op->where, op->row_window);
}
Stmt IRMutator::mutate_node(const GemmStmt* op, const Stmt& self) {
  bool changed = false;
  Region a = mutate_region(op->A, &changed), b = mutate_region(op->B, &changed),
         c = mutate_region(op->C, &changed);
  if (!changed) return self;
  return make_gemm(a, b, c, op->trans_a, op->trans_b, op->policy, op->where, op->async);
}
Stmt IRMutator::mutate_node(const FillStmt* op, const Stmt& self) {
  bool changed = false;
  Region d = mutate_region(op->dst, &changed);
  Expr v = mutate(op->value);
  if (!changed && v.same_as(op->value)) return self;
  return make_fill(d, v, op->where);
}
Stmt IRMutator::mutate_node(const ReduceStmt* op, const Stmt& self) {
  Buffer s = mutate_buffer(op->src), d = mutate_buffer(op->dst);
  if (s.same_as(op->src) && d.same_as(op->dst)) return self;
  return make_reduce(s, d, op->op, op->dim, op->clear, op->where);
}
Stmt IRMutator::mutate_node(const SwizzleStmt*, const Stmt& self) {
  return self;
}
Stmt IRMutator::mutate_node(const ClusterStmt*, const Stmt& self) {
  return self;
}
Stmt IRMutator::mutate_node(const DeviceCall* op, const Stmt& self) {
  bool changed = false;
  std::vector<DeviceCallArg> args;
  for (const auto& a : op->args) {
    DeviceCallArg n{mutate(a.expr),        a.buffer.defined() ? mutate_buffer(a.buffer) : a.buffer,
                    mutate(a.offset),      a.lambda_params,
                    mutate(a.lambda_body), mutate(a.lambda_result)};
    if (!n.expr.same_as(a.expr) || !n.buffer.same_as(a.buffer) || !n.offset.same_as(a.offset) ||
        !n.lambda_body.same_as(a.lambda_body) || !n.lambda_result.same_as(a.lambda_result))
      changed = true;
    args.push_back(n);
  }
  return changed ? make_device_call(op->callee, op->template_args, args, op->where) : self;
}
Stmt IRMutator::mutate_node(const BarrierStmt*, const Stmt& self) {
  return self;
}
Stmt IRMutator::mutate_node(const AsyncCommit*, const Stmt& self) {
  return self;
}
Stmt IRMutator::mutate_node(const AsyncWait*, const Stmt& self) {
  return self;
}
Stmt IRMutator::mutate_node(const MbarrierStmt* op, const Stmt& self) {
  Buffer b = mutate_buffer(op->bars);
  Expr i = mutate(op->index), v = mutate(op->value);
  if (b.same_as(op->bars) && i.same_as(op->index) && v.same_as(op->value)) return self;
  return make_mbarrier(op->op, b, i, v, op->where);
}
Stmt IRMutator::mutate_node(const ClusterReduceStmt* op, const Stmt& self) {
  Buffer a = mutate_buffer(op->acc), s = mutate_buffer(op->scratch), b = mutate_buffer(op->bars);
  Expr r = mutate(op->rank);
  if (a.same_as(op->acc) && s.same_as(op->scratch) && b.same_as(op->bars) && r.same_as(op->rank)) return self;
  return make_cluster_reduce(a, s, b, r, op->ranks, op->where);
}
Stmt IRMutator::mutate_node(const TmaLoadStmt* op, const Stmt& self) {
  bool changed = false;
  Region s = mutate_region(op->src, &changed), d = mutate_region(op->dst, &changed);
  Buffer b = op->bars.defined() ? mutate_buffer(op->bars) : op->bars;
  Expr i = mutate(op->index);
  if (!changed && b.same_as(op->bars) && i.same_as(op->index)) return self;
  return make_tma_load(s, d, op->map, b, i, op->where, op->multicast);
}
Stmt IRMutator::mutate_node(const ProducerStmt* op, const Stmt& self) {
  Stmt b = mutate(op->body);
  return b.same_as(op->body) ? self : make_producer(b, op->where);
}
Stmt IRMutator::mutate_node(const SpecializeStmt* op, const Stmt& self) {
  Stmt p = mutate(op->producer), c = mutate(op->consumer);
  if (p.same_as(op->producer) && c.same_as(op->consumer)) return self;
  return make_specialize(op->consumer_threads, op->producer_threads, op->consumer_regs, op->producer_regs, p,
                         c, op->where);
}
Stmt IRMutator::mutate_node(const AsyncGemmWait* op, const Stmt& self) {
  bool changed = false;
  std::vector<Buffer> f, p;
  for (const Buffer& b : op->fence) {
    f.push_back(mutate_buffer(b));
    changed = changed || !f.back().same_as(b);
  }
  for (const Buffer& b : op->pinned) {
    p.push_back(mutate_buffer(b));
    changed = changed || !p.back().same_as(b);
  }
  return changed ? make_async_gemm_wait(op->pending, f, op->where, p) : self;
}

// ---- substitution ------------------------------------------------------------------------------------

namespace {
class Substituter : public IRMutator {
 public:
  explicit Substituter(const std::vector<std::pair<Var, Expr>>& m) : map_(m) {}

 protected:
  Expr mutate_node(const VarNode* op, const Expr& self) override {
    for (const auto& [v, e] : map_)
      if (v.get() == op) return e;
    return self;
  }

 private:
  const std::vector<std::pair<Var, Expr>>& map_;
};
}  // namespace

Expr substitute(const Expr& e, const std::vector<std::pair<Var, Expr>>& map) {
  return Substituter(map).mutate(e);
}
Stmt substitute(const Stmt& s, const std::vector<std::pair<Var, Expr>>& map) {
  return Substituter(map).mutate(s);
}

}  // namespace tessel::ir
