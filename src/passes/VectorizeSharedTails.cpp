// vectorize_shared_tails
//   Does:     rewrites each unrolled element loop `for l in [0, n): ... a[l] ...` over register
//             arrays with a shared tail (ctx.register_tails) into a loop over their vectors:
//             the vector is read into a 16-byte local once (tessel::split_read_vector: register
//             moves, or one 16-byte shared load for a tail vector), the element loop runs on the
//             local, and a vector the loop writes goes back once (split_write_vector). Without
//             it every element of a tail is its own 2-byte shared access (336 loads and 112
//             stores per thread for a 64 K f16 softmax row).
//   Requires: lower_tile_ops (fragments are register arrays; tails are known).
//   Ensures:  inside a rewritten loop, tail arrays are only touched by the vector calls.
//             Loops that index a tail array by anything but the loop variable are left alone.
#include "passes/PassUtil.hpp"
#include "passes/Passes.hpp"
#include "tessel/ir/Mutator.hpp"

namespace tessel::passes {

using namespace ir;

namespace {

// The tail arrays a loop body touches, and whether each is only indexed by `l` itself.
struct TailAccesses : IRVisitor {
  const PassContext& ctx;
  const ExprNode* l;
  std::vector<Buffer> buffers;
  std::vector<bool> written;
  bool other_index = false;
  TailAccesses(const PassContext& c, const ExprNode* v) : ctx(c), l(v) {}
  int slot(const Buffer& b) {
    for (size_t i = 0; i < buffers.size(); ++i)
      if (buffers[i].same_as(b)) return static_cast<int>(i);
    buffers.push_back(b);
    written.push_back(false);
    return static_cast<int>(buffers.size() - 1);
  }
  bool is_tail(const Buffer& b) const { return ctx.register_tails.count(b->id) > 0; }
  void check(const std::vector<Expr>& idx) {
    if (idx.size() != 1 || idx[0].get() != l) other_index = true;
  }
  void visit_node(const BufferLoad* op) override {
    if (is_tail(op->buffer)) {
      slot(op->buffer);
      check(op->indices);
    }
    IRVisitor::visit_node(op);
  }
  void visit_node(const BufferStore* op) override {
    if (is_tail(op->buffer)) {
      written[slot(op->buffer)] = true;
      check(op->indices);
    }
    IRVisitor::visit_node(op);
  }
  void visit_node(const DeviceCall* op) override {
    for (const DeviceCallArg& a : op->args)
      if (a.buffer.defined() && is_tail(a.buffer)) other_index = true;  // left to the call
    IRVisitor::visit_node(op);
  }
};

// a[l] -> tmp[e] for each tail array a.
struct ToLocals : IRMutator {
  const std::vector<Buffer>& from;
  const std::vector<Buffer>& to;
  Var e;
  ToLocals(const std::vector<Buffer>& f, const std::vector<Buffer>& t, Var ev)
      : from(f), to(t), e(std::move(ev)) {}
  int find(const Buffer& b) const {
    for (size_t i = 0; i < from.size(); ++i)
      if (from[i].same_as(b)) return static_cast<int>(i);
    return -1;
  }
  Expr mutate_node(const BufferLoad* op, const Expr& self) override {
    if (int i = find(op->buffer); i >= 0) return make_load(to[i], {e});
    return IRMutator::mutate_node(op, self);
  }
  Stmt mutate_node(const BufferStore* op, const Stmt& self) override {
    if (int i = find(op->buffer); i >= 0) return make_store(to[i], {e}, mutate(op->value), op->where);
    return IRMutator::mutate_node(op, self);
  }
};

class Vectorize : public IRMutator {
 public:
  explicit Vectorize(const PassContext& ctx) : ctx_(ctx) {}

 protected:
  Stmt mutate_node(const ForStmt* op, const Stmt& self) override {
    auto mn = as_const_int(op->min), ext = as_const_int(op->extent);
    if (op->kind != ForKind::Unrolled || !mn || *mn != 0 || !ext) return IRMutator::mutate_node(op, self);
    TailAccesses acc(ctx_, op->var.get());
    acc.visit(op->body);
    if (acc.buffers.empty() || acc.other_index) return IRMutator::mutate_node(op, self);
    const int vec = ctx_.register_tails.at(acc.buffers[0]->id).vec;
    for (const Buffer& b : acc.buffers)
      if (ctx_.register_tails.at(b->id).vec != vec) return IRMutator::mutate_node(op, self);
    if (*ext % vec != 0) return IRMutator::mutate_node(op, self);
    auto w = op->where;
    Var g(op->var.name() + "_v"), e(op->var.name() + "_e");
    std::vector<Buffer> locals;
    std::vector<Stmt> before, after;
    for (size_t i = 0; i < acc.buffers.size(); ++i) {
      const Buffer& b = acc.buffers[i];
      Buffer t = Buffer::make(b->name + "_vec", {make_int(vec)}, b->dtype, Scope::Local, w);
      locals.push_back(t);
      std::vector<std::string> targs{std::string(dtype_cuda_name(b->dtype)), std::to_string(vec)};
      before.push_back(make_decl(t, w));
      before.push_back(make_device_call("tessel::split_read_vector", targs,
                                        {{Expr(), b, mul(g, make_int(vec))}, {Expr(), t, make_int(0)}}, w));
      if (acc.written[i])
        after.push_back(make_device_call("tessel::split_write_vector", targs,
                                         {{Expr(), b, mul(g, make_int(vec))}, {Expr(), t, make_int(0)}}, w));
    }
    Stmt inner = ToLocals(acc.buffers, locals, e).mutate(op->body);
    inner = substitute(inner, {{op->var, add(mul(g, make_int(vec)), e)}});
    std::vector<Stmt> seq = before;
    seq.push_back(make_for(e, make_int(0), make_int(vec), ForKind::Unrolled, 0, inner, w));
    seq.insert(seq.end(), after.begin(), after.end());
    return make_for(g, make_int(0), make_int(*ext / vec), ForKind::Unrolled, 0, make_seq(seq, w), w);
  }

 private:
  const PassContext& ctx_;
};

}  // namespace

Stmt vectorize_shared_tails(const Stmt& body, PassContext& ctx) {
  if (ctx.register_tails.empty()) return body;
  return Vectorize(ctx).mutate(body);
}

}  // namespace tessel::passes
