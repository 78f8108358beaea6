// verify_program
//   Does:     checks the program as the author wrote it and reports misuse as CompileError at the
//             author's line: one Kernel at the top; buffers used only inside the kernel that
//             declares them; no integer division or remainder by a constant zero; and each tile
//             op through its own verify() (src/ops/: copies between regions of equal extents that
//             stay inside their tiles, gemm operands in the right scopes, dtypes and chained
//             shapes), which fills in the extents of copy regions written as `buf(i, j)` from the
//             other side.
//   Requires: a program straight from the frontend.
//   Ensures:  every Region has as many extents as its buffer has dimensions; ctx.threads,
//             ctx.grid and ctx.block_vars are set.
#include "passes/Passes.hpp"

#include "ops/TileOp.hpp"

#include <set>

#include "tessel/ir/Mutator.hpp"
#include "tessel/ir/Printer.hpp"

namespace tessel::passes {

using namespace ir;

namespace {

class ProgramVerifier : public IRMutator {
 public:
  explicit ProgramVerifier(PassContext& ctx) : ctx_(ctx) {
    for (const Buffer& p : ctx.params) visible_.insert(p->id);
  }

  // Every statement, so that an expression's error can name the statement's line.
  Stmt mutate(const Stmt& s) override {
    if (!s.defined()) return s;
    const std::source_location outer = where_;
    where_ = s->where;
    Stmt out = IRMutator::mutate(s);
    where_ = outer;
    return out;
  }
  using IRMutator::mutate;

 protected:
  // i / 0 and i % 0 are undefined behaviour in the generated C++ (and the interpreter would trap):
  // the author's mistake, at their line.
  Expr mutate_node(const Binary* op, const Expr& self) override {
    const bool division = op->op == BinaryOp::Div || op->op == BinaryOp::Mod ||
                          op->op == BinaryOp::FloorDiv || op->op == BinaryOp::FloorMod;
    if (division && is_integer(op->dtype) && is_const_int(op->b, 0))
      TESSEL_USER_ERROR(
          "expression", where_,
          "integer " << (op->op == BinaryOp::Div || op->op == BinaryOp::FloorDiv ? "division" : "remainder")
                     << " by zero in " << to_string(self) << "; the divisor must not be 0");
    return IRMutator::mutate_node(op, self);
  }

  Stmt mutate_node(const KernelStmt* op, const Stmt& self) override {
    if (in_kernel_) TESSEL_USER_ERROR("Kernel", op->where, "kernels cannot nest");
    if (++kernels_ > 1)
      TESSEL_USER_ERROR(
          "Kernel", op->where,
          ctx_.func_name << " launches more than one Kernel; this version supports one Kernel per PrimFunc");
    ctx_.threads = op->threads;
    ctx_.grid = op->grid;
    ctx_.block_vars = op->block_vars;
    in_kernel_ = true;
    Stmt out = IRMutator::mutate_node(op, self);
    in_kernel_ = false;
    return out;
  }

  Stmt mutate_node(const DeclBuffer* op, const Stmt& self) override {
    visible_.insert(op->buffer->id);
    return self;
  }

  Buffer mutate_buffer(const Buffer& b) override {
    if (!visible_.count(b->id))
      TESSEL_USER_ERROR("kernel", b->where,
                        b->name << " is used outside the kernel that allocates it; "
                                << "allocate it inside the Kernel body that uses it");
    return b;
  }

  // Each tile op checks itself (src/ops/): copy fills in the extents a side left out.
  Stmt mutate_node(const CopyStmt* op, const Stmt& self) override {
    return ops::copy_op().verify(IRMutator::mutate_node(op, self));
  }

  Stmt mutate_node(const GemmStmt* op, const Stmt& self) override {
    return ops::gemm_op().verify(IRMutator::mutate_node(op, self));
  }

 private:
  PassContext& ctx_;
  std::source_location where_;
  std::set<int> visible_;
  bool in_kernel_ = false;
  int kernels_ = 0;
};

}  // namespace

Stmt verify_program(const Stmt& body, PassContext& ctx) {
  Stmt out = ProgramVerifier(ctx).mutate(body);
  if (ctx.threads == 0)
    TESSEL_USER_ERROR("PrimFunc", std::source_location(),
                      ctx.func_name << " has no Kernel; call T::Kernel(...) in its body");
  return out;
}

}  // namespace tessel::passes
