// rotate_async_gemms
//   Does:     in a ring loop (TMA ring, plan_pipelines) whose iteration issues two or more wgmma
//             gemms with other work between them -- attention: S = Q K^T, the softmax of S,
//             O += P V -- moves the last gemm (with the ring waits right before it and the
//             stage releases after it) behind the first gemm of the next iteration:
//               for k in [min, min+n):  A_k; G1_k; B_k; W_k; G2_k; R_k
//             becomes
//               if (n > 0) { A_min; G1_min; B_min }               (the first iteration, peeled)
//               for k in [min+1, min+n):  A_k; G1_k; W_{k-1}; G2_{k-1}; R_{k-1}; B_k
//               if (n > 0) { W_last; G2_last; R_last }
//             so that, once place_gemm_waits makes the gemms asynchronous, G2 of iteration k - 1
//             runs on the tensor cores while B_k (the softmax of block k) runs on the others --
//             the intra-warpgroup overlap of FlashAttention 3. The first iteration is peeled
//             rather than guarding G2 with `k > min`: ptxas retires a wgmma issued under a branch
//             at the branches' join (measured on the H200: the guarded form ran 7-35 % slower
//             than no rotation at all).
//             Not applied where the work between the gemms branches (ptxas retires an in-flight
//             wgmma at a branch's join, so nothing would overlap): a loop whose top-level ifs all
//             turn true at one iteration (attention's mask) is split there first and each part
//             rotated; ifs that never or always run are gone already (fold_proven_branches). Nor
//             where two consumer warpgroups will take turns (schedule_warpgroups), which
//             measured faster than the rotation on the H200.
//             Opt-in (JitOptions::rotate_gemm_loops); kernels::flash_attention turns it on for its
//             192-row tiles on a two-stage ring (three consumer warpgroups): +2-4 % on an H100,
//             session 19; on the 128-row D = 128 ring it lost 1-5 %.
//   Requires: plan_pipelines (the ring's waits, releases and staged tiles; ctx.mbarriers names
//             the tile each `empty` array releases), specialize_warps (the loop is the consumers').
//             Applies on sm_90a with ctx.allow_async_gemm.
//   Ensures:  the moved statements commute with what now runs before them in the next iteration
//             (A_k; G1_k): neither writes a buffer the other names. Every shared tile the moved
//             gemm reads is a ring tile (a stage is reused only after its release, which moved with
//             it) and every ring it reads has two stages or more. The registers kept live through
//             the work between the gemms (both accumulators and the second gemm's register A
//             operand) leave the consumers' budget kRegisterHeadroom to spare; otherwise no rotation.
#include <optional>

#include "passes/PassUtil.hpp"
#include "passes/Passes.hpp"
#include "tessel/ir/Mutator.hpp"
#include "tessel/ir/Printer.hpp"

namespace tessel::passes {

using namespace ir;

namespace {

constexpr int kRegisterHeadroom = 32;

bool is_full_wait(const Stmt& s) {
  const auto* m = s.as<MbarrierStmt>();
  return m && m->op == MbarrierOp::Wait;
}

// Buffers a statement names, without the mbarrier arrays (synchronization, not data).
std::vector<Buffer> data_buffers(const Stmt& s, const PassContext& ctx) {
  std::vector<Buffer> out;
  for (const Buffer& b : buffers_used(s)) {
    bool bars = false;
    for (const MbarrierArray& a : ctx.mbarriers) bars = bars || a.bars.same_as(b);
    if (!bars) out.push_back(b);
  }
  return out;
}

// An if, or a loop whose trip count is not a constant (both branch in the generated code).
bool has_branch(const Stmt& s) {
  struct Finder : IRVisitor {
    bool found = false;
    void visit_node(const IfStmt*) override { found = true; }
    void visit_node(const ForStmt* f) override {
      found = found || (f->kind == ForKind::Serial && !as_const_int(f->extent));
      IRVisitor::visit_node(f);
    }
  } f;
  f.visit(s);
  return f.found;
}

bool is_not(const Expr& e) {
  const auto* u = e.as<Unary>();
  return u && u->op == UnaryOp::Not;
}

// The first value of k from which `cond` holds, when it is false below it and true from it on
// (comparisons `lhs > rhs` or `lhs >= rhs` increasing in k, joined by || or &&, or the negation
// of such a condition); undefined otherwise.
Expr turns_true_at(const Expr& cond, const Var& k) {
  if (const auto* u = cond.as<Unary>(); u && u->op == UnaryOp::Not) return turns_true_at(u->a, k);
  const auto* b = cond.as<Binary>();
  if (!b) return Expr();
  if (b->op == BinaryOp::Or || b->op == BinaryOp::And) {
    Expr x = turns_true_at(b->a, k), y = turns_true_at(b->b, k);
    if (!x.defined() || !y.defined()) return Expr();
    return make_binary(b->op == BinaryOp::Or ? BinaryOp::Min : BinaryOp::Max, x, y);
  }
  if (b->op != BinaryOp::GT && b->op != BinaryOp::GE) return Expr();
  auto d = linear_in(make_binary(BinaryOp::Sub, b->a, b->b), k);
  if (!d || d->a <= 0) return Expr();
  // a k + r > 0  <=>  k >= floor(-r / a) + 1;   a k + r >= 0  <=>  k >= floor((-r + a - 1) / a).
  const Expr neg_r = d->rest.defined() ? make_binary(BinaryOp::Sub, make_int(0), d->rest) : make_int(0);
  if (b->op == BinaryOp::GT)
    return make_binary(BinaryOp::Add, make_binary(BinaryOp::FloorDiv, neg_r, make_int(d->a)), make_int(1));
  return make_binary(BinaryOp::FloorDiv, make_binary(BinaryOp::Add, neg_r, make_int(d->a - 1)), make_int(d->a));
}

class Rotator : public IRMutator {
 public:
  explicit Rotator(const PassContext& ctx) : ctx_(ctx) {}
  int rotated = 0;

 protected:
  Stmt mutate_node(const ForStmt* op, const Stmt& self) override {
    if (op->kind != ForKind::Serial) return IRMutator::mutate_node(op, self);
    Stmt r = rotate(op);
    if (r.defined()) {
      ++rotated;
      return r;
    }
    // Branches whose condition flips once along the loop (attention's mask: the blocks past the
    // last unmasked one): split the loop there, so that each part is branch-free, and rotate
    // each part.
    if (auto parts = split(op)) {
      std::vector<Stmt> out;
      for (const Stmt& part : *parts) {
        Stmt p = rotate(part.as<ForStmt>());
        if (p.defined()) ++rotated;
        out.push_back(p.defined() ? p : part);
      }
      if (rotated > 0) {
        ++split_loops;
        return make_seq(out, op->where);
      }
    }
    return IRMutator::mutate_node(op, self);
  }
  // The producer's loops are not the consumers'.
  Stmt mutate_node(const ProducerStmt*, const Stmt& self) override { return self; }
  Stmt mutate_node(const SpecializeStmt* op, const Stmt& self) override {
    // Two consumer warpgroups that will take turns (schedule_warpgroups): not rotated. Measured
    // on the H200 (bf16, 8x16x16x4096^2, D = 128): rotated with turns 441 TFLOP/s, rotated
    // without 506, turns without rotation (each gemm retired at once) 533 -- ptxas retires an
    // in-flight wgmma at the join of the softmax's mask branches, so the rotated gemm overlaps
    // little, and the turns then make each warpgroup wait for the other's gemms too.
    if (ctx_.allow_pingpong && op->consumer_threads == 256) return self;
    return make_specialize(op->consumer_threads, op->producer_threads, op->consumer_regs, op->producer_regs,
                           op->producer, mutate(op->consumer), op->where);
  }

 private:
  // The rotated loop and what follows it, or undefined when the loop is not of the shape above.
  Stmt rotate(const ForStmt* loop) {
    std::vector<Stmt> body = flatten_seq(loop->body);
    std::vector<int> gemms;
    for (int i = 0; i < static_cast<int>(body.size()); ++i) {
      if (as_wgmma_gemm(body[i], ctx_))
        gemms.push_back(i);
      else if (count_wgmma_gemms(body[i], ctx_) > 0)
        return Stmt();  // a gemm nested in other statements: not a shape this pass knows
    }
    if (gemms.size() < 2) return Stmt();
    const int first = gemms.front(), last = gemms.back();
    if (last == first + 1) return Stmt();  // nothing between them to overlap
    int begin = last;
    while (begin - 1 > first && is_full_wait(body[static_cast<size_t>(begin - 1)])) --begin;
    std::vector<Stmt> issue(body.begin() + begin, body.begin() + last + 1);
    std::vector<Stmt> releases(body.begin() + last + 1, body.end());
    for (const Stmt& r : releases)
      if (!is_release(r)) return Stmt();
    // Every shared tile the moved gemm reads is a ring tile with two stages or more, released
    // by the moved statements.
    const auto* g = body[static_cast<size_t>(last)].as<GemmStmt>();
    for (const Region* r : {&g->A, &g->B}) {
      if (r->buffer->scope != Scope::Shared) continue;
      bool released = false;
      for (const Stmt& s : releases) {
        const auto* m = s.as<MbarrierStmt>();
        for (const MbarrierArray& a : ctx_.mbarriers)
          if (a.bars.same_as(m->bars) && a.bars.const_numel() >= 2)
            for (const Buffer& t : a.releases) released = released || t.same_as(r->buffer);
      }
      if (!released) return Stmt();
    }
    // The work the moved gemm would overlap must be free of branches: ptxas retires a wgmma in
    // flight at the join of a branch, so B_k would run after the gemm anyway -- measured on
    // the H200 with attention's mask branches: causal 8x16x16x4096^2 D = 128 rotated 413 vs 417
    // TFLOP/s unrotated, 2x16x16x16384^2 461 vs 496, GQA 410 vs 430.
    for (int i = first + 1; i < begin; ++i)
      if (has_branch(body[static_cast<size_t>(i)])) return Stmt();
    // Registers: through B_k the moved gemm's accumulator and its A operand (packed, 16-bit
    // pairs) stay live beside the first gemm's accumulator, which B_k works on. Leave the
    // softmax kRegisterHeadroom registers of the consumers' budget, or do not rotate. (Session 9's
    // kernels spilled 548 bytes at 128x192 tiles, D = 64 -- 96 + 48 + 32 registers under 240 --
    // with 80 to spare required; session 19's -- fast_exp2, the folded scale -- compile with no
    // spill there and at 192x128 on three warpgroups, 128 live under 160: 32 to spare.)
    const auto* g1 = body[static_cast<size_t>(first)].as<GemmStmt>();
    auto regs = [&](const Buffer& b, bool packed) {
      auto l = ctx_.fragment_layouts.find(b->id);
      const int n = l == ctx_.fragment_layouts.end() ? 0 : l->second.per_thread;
      return packed ? (n + 1) / 2 : n;
    };
    const int live = regs(g1->C.buffer, false) + regs(g->C.buffer, false) +
                     (g->A.buffer->scope == Scope::Fragment ? regs(g->A.buffer, true) : 0);
    const int budget = ctx_.consumer_regs > 0 ? ctx_.consumer_regs : ctx_.entry_regs > 0 ? ctx_.entry_regs : 255;
    if (live > budget - kRegisterHeadroom) return Stmt();
    // The moved statements must commute with A_k; G1_k: no buffer written by one and named by
    // the other. Names are compared (not reads against writes): conservative and enough here.
    std::vector<Buffer> moved;
    for (const Stmt& s : issue)
      for (const Buffer& b : data_buffers(s, ctx_))
        if (!contains_buffer(moved, b)) moved.push_back(b);
    for (int i = 0; i <= first; ++i)
      for (const Buffer& b : data_buffers(body[static_cast<size_t>(i)], ctx_))
        if (contains_buffer(moved, b)) return Stmt();

    auto w = loop->where;
    const Var& k = loop->var;
    auto at = [&](const std::vector<Stmt>& v, const Expr& iter) {
      std::vector<Stmt> out;
      for (const Stmt& s : v) out.push_back(substitute(s, {{k, iter}}));
      return make_seq(out, w);
    };
    // Guarded by n > 0 unless the trip count is a positive constant.
    auto when_any = [&](Stmt s) {
      auto n = as_const_int(loop->extent);
      if (n && *n > 0) return s;
      return make_if(make_binary(BinaryOp::GT, loop->extent, make_int(0)), s, Stmt(), w);
    };
    // The first iteration, peeled: no gemm of a previous one to issue (a conditional gemm would
    // make ptxas retire it at the branches' join).
    std::vector<Stmt> head(body.begin(), body.begin() + begin);
    Stmt first_iteration = when_any(at(head, loop->min));
    std::vector<Stmt> out(body.begin(), body.begin() + first + 1);
    out.push_back(at(issue, sub(k, make_int(1))));
    if (!releases.empty()) out.push_back(at(releases, sub(k, make_int(1))));
    out.insert(out.end(), body.begin() + first + 1, body.begin() + begin);
    Stmt rotated = make_for(k, add(loop->min, make_int(1)), sub(loop->extent, make_int(1)), loop->kind,
                            loop->num_stages, make_seq(out, w), w);
    // The last iteration's gemm, after the loop.
    std::vector<Stmt> tail = issue;
    tail.insert(tail.end(), releases.begin(), releases.end());
    Stmt last_iteration = when_any(at(tail, sub(add(loop->min, loop->extent), make_int(1))));
    return make_seq({first_iteration, rotated, last_iteration}, w);
  }

  // The loop split at the iteration where the conditions of its top-level ifs turn true, each
  // if replaced by its branch in each part; nullopt when the body has no such if, or ifs whose
  // conditions do not flip at one shared, computable iteration.
  std::optional<std::vector<Stmt>> split(const ForStmt* loop) {
    std::vector<Stmt> body = flatten_seq(loop->body);
    Expr at;
    std::string at_text;
    bool any = false;
    for (const Stmt& s : body) {
      const auto* i = s.as<IfStmt>();
      if (!i) {
        if (has_branch(s)) return std::nullopt;
        continue;
      }
      if (has_branch(i->then_case) || (i->else_case.defined() && has_branch(i->else_case))) return std::nullopt;
      Expr t = turns_true_at(i->cond, loop->var);
      if (!t.defined()) return std::nullopt;
      if (any && to_string(t) != at_text) return std::nullopt;
      at = t, at_text = to_string(t), any = true;
    }
    if (!any) return std::nullopt;
    auto w = loop->where;
    const Expr end = add(loop->min, loop->extent);
    const Expr cut = make_binary(BinaryOp::Min, make_binary(BinaryOp::Max, at, loop->min), end);
    auto part = [&](bool value, const Expr& from, const Expr& to) {
      std::vector<Stmt> out;
      for (const Stmt& s : body) {
        const auto* i = s.as<IfStmt>();
        if (!i) {
          out.push_back(s);
          continue;
        }
        const bool c = is_not(i->cond) ? !value : value;
        if (c)
          out.push_back(i->then_case);
        else if (i->else_case.defined())
          out.push_back(i->else_case);
      }
      return make_for(loop->var, from, sub(to, from), loop->kind, loop->num_stages, make_seq(out, w), w);
    };
    return std::vector<Stmt>{part(false, loop->min, cut), part(true, cut, end)};
  }

  const PassContext& ctx_;

 public:
  int split_loops = 0;
};

}  // namespace

Stmt rotate_async_gemms(const Stmt& body, PassContext& ctx) {
  if (ctx.target.sm != 90 || !ctx.allow_async_gemm || !ctx.allow_loop_rotation || ctx.mbarriers.empty())
    return body;
  Rotator r(ctx);
  Stmt out = r.mutate(body);
  ctx.rotated_gemm_loops = r.rotated;
  ctx.split_gemm_loops = r.split_loops;
  return out;
}

}  // namespace tessel::passes
