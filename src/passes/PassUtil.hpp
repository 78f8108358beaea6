// Small helpers the passes share: index arithmetic that folds as it builds, the fragments a
// statement touches, and shapes as text for messages.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ops/TileOp.hpp"
#include "passes/PassContext.hpp"
#include "tessel/ir/IR.hpp"
#include "tessel/ir/Mutator.hpp"

namespace tessel::passes {

inline ir::Expr add(ir::Expr a, ir::Expr b) {
  return ir::make_binary(ir::BinaryOp::Add, std::move(a), std::move(b));
}
inline ir::Expr sub(ir::Expr a, ir::Expr b) {
  return ir::make_binary(ir::BinaryOp::Sub, std::move(a), std::move(b));
}
inline ir::Expr mul(ir::Expr a, ir::Expr b) {
  return ir::make_binary(ir::BinaryOp::Mul, std::move(a), std::move(b));
}
inline ir::Expr lt(ir::Expr a, ir::Expr b) {
  return ir::make_binary(ir::BinaryOp::LT, std::move(a), std::move(b));
}
inline ir::Expr i64(ir::Expr e) {
  return ir::make_cast(DType::i64, std::move(e));
}

// The kernel of a lowered body: the body itself, or the first kernel in its statement sequence.
inline const ir::KernelStmt* find_kernel(const ir::Stmt& s) {
  if (const auto* k = s.as<ir::KernelStmt>()) return k;
  if (const auto* seq = s.as<ir::SeqStmt>())
    for (const ir::Stmt& c : seq->stmts)
      if (const auto* k = find_kernel(c)) return k;
  return nullptr;
}

// The fragments a statement reads or writes, in first-use order.
inline std::vector<ir::Buffer> fragments_used(const ir::Stmt& s) {
  struct Uses : ir::IRVisitor {
    std::vector<ir::Buffer> fragments;
    void visit_buffer(const ir::Buffer& b) override {
      if (b->scope != ir::Scope::Fragment) return;
      for (const ir::Buffer& f : fragments)
        if (f.same_as(b)) return;
      fragments.push_back(b);
    }
  } uses;
  uses.visit(s);
  return uses.fragments;
}

// The statements of nested SeqStmts, in order, as one list (undefined: none).
inline std::vector<ir::Stmt> flatten_seq(const ir::Stmt& s) {
  std::vector<ir::Stmt> out;
  if (!s.defined()) return out;
  if (const auto* seq = s.as<ir::SeqStmt>()) {
    for (const ir::Stmt& c : seq->stmts) {
      auto f = flatten_seq(c);
      out.insert(out.end(), f.begin(), f.end());
    }
    return out;
  }
  out.push_back(s);
  return out;
}

// Every buffer a statement names (loads, stores, tile-op regions, declarations), once each.
inline std::vector<ir::Buffer> buffers_used(const ir::Stmt& s) {
  struct Uses : ir::IRVisitor {
    std::vector<ir::Buffer> buffers;
    void visit_buffer(const ir::Buffer& b) override {
      for (const ir::Buffer& f : buffers)
        if (f.same_as(b)) return;
      buffers.push_back(b);
    }
  } uses;
  uses.visit(s);
  return uses.buffers;
}

// Whether expression e names the variable k.
inline bool uses_var(const ir::Expr& e, const ir::Var& k) {
  struct Finder : ir::IRVisitor {
    const ir::ExprNode* k = nullptr;
    bool found = false;
    void visit_node(const ir::VarNode* v) override { found = found || static_cast<const ir::ExprNode*>(v) == k; }
  } f;
  f.k = k.get();
  f.visit(e);
  return f.found;
}

// e as a * k + rest (a constant, rest free of k; undefined rest: 0), or nullopt.
struct Linear {
  std::int64_t a = 0;
  ir::Expr rest{};
};
inline std::optional<Linear> linear_in(const ir::Expr& e, const ir::Var& k) {
  using ir::BinaryOp;
  if (!uses_var(e, k)) return Linear{0, e};
  if (e.get() == k.get()) return Linear{1, ir::Expr()};
  const auto* b = e.as<ir::Binary>();
  if (!b) return std::nullopt;
  auto x = linear_in(b->a, k), y = linear_in(b->b, k);
  if (!x || !y) return std::nullopt;
  auto plus = [](const ir::Expr& p, const ir::Expr& q, bool minus) -> ir::Expr {
    if (!q.defined()) return p;
    if (!p.defined()) return minus ? ir::make_binary(BinaryOp::Sub, ir::make_int(0), q) : q;
    return ir::make_binary(minus ? BinaryOp::Sub : BinaryOp::Add, p, q);
  };
  switch (b->op) {
    case BinaryOp::Add:
      return Linear{x->a + y->a, plus(x->rest, y->rest, false)};
    case BinaryOp::Sub:
      return Linear{x->a - y->a, plus(x->rest, y->rest, true)};
    case BinaryOp::Mul: {
      // One side a constant.
      const Linear* lin = x->a != 0 ? &*x : &*y;
      const ir::Expr other = x->a != 0 ? b->b : b->a;
      auto c = ir::as_const_int(other);
      if (!c || (x->a != 0 && y->a != 0)) return std::nullopt;
      return Linear{lin->a * *c,
                    lin->rest.defined() ? ir::make_binary(BinaryOp::Mul, lin->rest, ir::make_int(*c)) : ir::Expr()};
    }
    default:
      return std::nullopt;
  }
}

inline bool contains_buffer(const std::vector<ir::Buffer>& v, const ir::Buffer& b) {
  for (const ir::Buffer& x : v)
    if (x.same_as(b)) return true;
  return false;
}

// A gemm that lowers to tessel::WarpgroupGemm (wgmma: asynchronous on the tensor cores).
inline const ir::GemmStmt* as_wgmma_gemm(const ir::Stmt& s, const PassContext& ctx) {
  const auto* g = s.as<ir::GemmStmt>();
  if (!g) return nullptr;
  auto l = ctx.fragment_layouts.find(g->C.buffer->id);
  return l != ctx.fragment_layouts.end() && l->second.wgmma ? g : nullptr;
}

// How many wgmma gemms a statement holds, at any depth.
inline int count_wgmma_gemms(const ir::Stmt& s, const PassContext& ctx) {
  struct Finder : ir::IRVisitor {
    const PassContext* ctx;
    int n = 0;
    void visit_node(const ir::GemmStmt* g) override {
      auto l = ctx->fragment_layouts.find(g->C.buffer->id);
      if (l != ctx->fragment_layouts.end() && l->second.wgmma) ++n;
    }
  } f;
  f.ctx = &ctx;
  f.visit(s);
  return f.n;
}

// Whether a statement holds a TMA load (a ring's load, after plan_tma_copies) at any depth.
inline bool holds_tma_load(const ir::Stmt& s) {
  struct Finder : ir::IRVisitor {
    bool found = false;
    void visit_node(const ir::TmaLoadStmt*) override { found = true; }
  } f;
  f.visit(s);
  return f.found;
}

// Whether a statement holds a ring's producer work (ProducerStmt) at any depth.
inline bool contains_producer(const ir::Stmt& s) {
  struct Finder : ir::IRVisitor {
    bool found = false;
    void visit_node(const ir::ProducerStmt*) override { found = true; }
  } f;
  f.visit(s);
  return f.found;
}

// A ring stage's release: the consumers' arrival on an `empty` mbarrier.
inline bool is_release(const ir::Stmt& s) {
  const auto* m = s.as<ir::MbarrierStmt>();
  return m && m->op == ir::MbarrierOp::WarpArrive;
}

// "[128, 64]"
inline std::string shape_text(const std::vector<std::int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// Whether `body` may write buffer `b`: a store to it, a tile op writing it, or a device call
// naming it (conservatively: a call may write any buffer it is passed).
inline bool may_write(const ir::Stmt& body, const ir::Buffer& b) {
  struct Writes : ir::IRVisitor {
    int id = 0;
    bool found = false;
    void visit_node(const ir::BufferStore* op) override {
      found = found || op->buffer->id == id;
      ir::IRVisitor::visit_node(op);
    }
    void tile(const ir::StmtNode* s) {
      for (const ir::Region& r : ops::access(s).writes) found = found || r.buffer->id == id;
    }
    void visit_node(const ir::CopyStmt* op) override { tile(op); }
    void visit_node(const ir::FillStmt* op) override { tile(op); }
    void visit_node(const ir::GemmStmt* op) override { tile(op); }
    void visit_node(const ir::ReduceStmt* op) override { tile(op); }
    void visit_node(const ir::TmaLoadStmt* op) override { tile(op); }
    void visit_node(const ir::ClusterReduceStmt* op) override { tile(op); }
    void visit_node(const ir::DeviceCall* op) override {
      for (const ir::DeviceCallArg& a : op->args) found = found || (a.buffer.defined() && a.buffer->id == id);
      ir::IRVisitor::visit_node(op);
    }
  } w;
  w.id = b->id;
  w.visit(body);
  return w.found;
}

// Whether `e` reads nothing but `vars`, constants and global tensors that `body` never writes
// (a trip count that every role of a kernel can compute on its own, the same for all).
inline bool reads_only(const ir::Expr& e, const std::vector<ir::Var>& vars, const ir::Stmt& body) {
  struct Check : ir::IRVisitor {
    const std::vector<ir::Var>* vars;
    const ir::Stmt* body;
    bool ok = true;
    void visit_node(const ir::VarNode* v) override {
      bool known = false;
      for (const ir::Var& a : *vars) known = known || a.get() == v;
      ok = ok && known;
    }
    void visit_node(const ir::BufferLoad* op) override {
      ok = ok && op->buffer->scope == ir::Scope::Global && !may_write(*body, op->buffer);
      ir::IRVisitor::visit_node(op);
    }
  } c;
  c.vars = &vars;
  c.body = &body;
  c.visit(e);
  return c.ok;
}

}  // namespace tessel::passes
