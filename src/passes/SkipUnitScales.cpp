// skip_unit_scales
//   Does:     puts each unrolled register loop that only scales an f32 register array by factors
//             of another, `for l in [a, b): X[l] = X[l] * F[f(l)]` (either operand order; lets
//             the store does not read may sit between the loop and the store), inside a serial
//             loop, under `if (F[i] != 1 || F[j] != 1 || ...)` over the registers f(l) reaches --
//             each factor register is read once by the test, which the multiplies read anyway.
//             Multiplying by exactly 1 is the identity in IEEE arithmetic (for every x,
//             including -0, the infinities, NaN and denormals: the kernels are compiled without
//             flush-to-zero), so when every factor of the thread is 1 the loop is skipped with
//             nothing changed, and a NaN factor (NaN != 1) still multiplies. FlashAttention's
//             rescale of O by exp2(m_prev - m) is such a loop: it is 1 in every row whose
//             running max did not move this key block (every row, most blocks, with
//             AttentionConfig::lazy_rescale), and its 32-64 FMULs a thread and block are skipped
//             for two compares and a branch.
//   Requires: lower_tile_ops and vectorize_shared_tails (register loops final; fragments are
//             Local register arrays).
//   Ensures:  the same values in every register for every input. Loops outside any serial loop
//             (run once a kernel or tile) and loops of fewer than 4 multiplies a factor register
//             are left alone (the test would cost what it saves), and so are kernels that ask for
//             several blocks an SM (a register cap the branch's live ranges can break). Opt-in
//             (JitOptions::unit_scale_skips / TESSEL_ENABLE=unit_scale_skips): on an H100 the
//             branch cost attention more than the FMULs it skips (docs/perf-notes.md, session 31).
#include <set>

#include "passes/IntBounds.hpp"
#include "passes/PassUtil.hpp"
#include "passes/Passes.hpp"
#include "tessel/ir/Mutator.hpp"

namespace tessel::passes {

using namespace ir;

namespace {

// A register array of f32: the only arrays whose multiply by 1 the pass reasons about.
bool f32_registers(const Buffer& b) {
  return b->scope == Scope::Local && b->dtype == DType::f32 && b->shape.size() == 1 && b->shared_tail == 0;
}

// `X[l] * F[idx]` or `F[idx] * X[l]` stored to X[l]: F's load, or null.
const BufferLoad* scale_factor(const BufferStore* st, const Var& l) {
  if (!f32_registers(st->buffer) || st->indices.size() != 1 || st->indices[0].get() != l.get())
    return nullptr;
  const auto* mul = st->value.as<Binary>();
  if (!mul || mul->op != BinaryOp::Mul || mul->dtype != DType::f32) return nullptr;
  auto is_self = [&](const Expr& e) {
    const auto* ld = e.as<BufferLoad>();
    return ld && ld->buffer.same_as(st->buffer) && ld->indices.size() == 1 && ld->indices[0].get() == l.get();
  };
  const Expr& other = is_self(mul->a) ? mul->b : is_self(mul->b) ? mul->a : Expr();
  if (!other.defined()) return nullptr;
  const auto* f = other.as<BufferLoad>();
  if (!f || !f32_registers(f->buffer) || f->buffer.same_as(st->buffer) || f->indices.size() != 1)
    return nullptr;
  return f;
}

class UnitScaleSkipper : public IRMutator {
 public:
  int guarded = 0;

 protected:
  Stmt mutate_node(const ForStmt* op, const Stmt& self) override {
    if (op->kind != ForKind::Unrolled) {
      ++serial_depth_;
      Stmt out = IRMutator::mutate_node(op, self);
      --serial_depth_;
      return out;
    }
    if (serial_depth_ > 0)
      if (Stmt g = guard(op, self); g.defined()) return g;
    return IRMutator::mutate_node(op, self);
  }

 private:
  int serial_depth_ = 0;

  // The loop under its test, or an undefined Stmt when it is not a scaling loop worth one.
  Stmt guard(const ForStmt* op, const Stmt& self) {
    const auto mn = as_const_int(op->min), ext = as_const_int(op->extent);
    if (!mn || !ext || *ext <= 0) return Stmt();
    // Lets that the store does not read (codegen's coordinates of each register) may wrap it.
    Stmt inner = op->body;
    std::vector<Var> lets;
    while (const auto* let = inner.as<LetStmt>()) {
      lets.push_back(let->var);
      inner = let->body;
    }
    const auto* st = inner.as<BufferStore>();
    if (!st) return Stmt();
    for (const Var& v : lets)
      if (uses_var(st->value, v)) return Stmt();
    const BufferLoad* f = scale_factor(st, op->var);
    if (!f) return Stmt();
    // The factor registers the loop reads: its index evaluated at every iteration (it may read
    // nothing but the loop variable).
    std::set<std::int64_t> regs;
    VarRanges at;
    for (std::int64_t l = *mn; l < *mn + *ext; ++l) {
      at.set(op->var, {l, l});
      const auto r = int_bounds(f->indices[0], at);
      if (!r || r->lo != r->hi) return Stmt();
      regs.insert(r->lo);
    }
    if (*ext < 4 * static_cast<std::int64_t>(regs.size())) return Stmt();
    Expr any_not_one;
    for (std::int64_t r : regs) {
      Expr ne = make_binary(BinaryOp::NE, make_load(f->buffer, {make_int(r)}), make_float(1.0));
      any_not_one = any_not_one.defined() ? make_binary(BinaryOp::Or, any_not_one, ne) : ne;
    }
    ++guarded;
    return make_if(any_not_one, self, Stmt(), op->where);
  }
};

}  // namespace

Stmt skip_unit_scales(const Stmt& body, PassContext& ctx) {
  // A kernel that asks ptxas for several blocks an SM (JitOptions::min_blocks_per_sm: attention's
  // cp.async kernel at D = 64, two blocks at 128 registers) has no register to spare for the
  // branch: the test made that kernel spill 32 bytes on sm_80.
  if (!ctx.unit_scale_skips || ctx.requested_min_blocks_per_sm > 1) return body;
  UnitScaleSkipper s;
  return s.mutate(body);
}

}  // namespace tessel::passes
