// place_gemm_waits
//   Does:     issues every wgmma gemm asynchronously (one commit group; GemmStmt::async) and
//             places its wait (AsyncGemmWait: wgmma.wait_group N) right before the first
//             statement that needs it retired, walking each statement list in order with the
//             groups in flight (oldest first):
//               - a statement naming a register array an in-flight gemm writes (its accumulator)
//                 or reads (an A operand in registers), or writing a shared buffer one reads,
//                 waits until the youngest such gemm retired: N = the groups issued after it
//                 (groups retire in order); the retired gemms' accumulators are fenced after
//                 it, and the fragments computed since the previous wait are pinned before it
//                 (otherwise the CUDA compiler sinks that arithmetic past the wait -- measured:
//                 the whole softmax behind `wgmma.wait_group 0`);
//               - a gemm accumulating into the accumulator of an in-flight gemm does not wait
//                 (the tensor cores chain them); one whose register A operand an in-flight gemm
//                 writes, or whose accumulator one reads as A, does;
//               - a ring stage's release (the consumers' arrival on its `empty` mbarrier) moves
//                 down to the wait that retires the gemms reading that tile;
//               - a block barrier, and any statement holding gemms of its own (a nested loop or
//                 condition), first waits for everything (wait_group 0); their bodies are placed
//                 the same way, each ending with nothing in flight.
//             Across a loop's back edge: the gemms still in flight at the end of an iteration
//             stay in flight into the next when every stage release waiting for them is on a
//             ring of two stages or more and the loop does not issue its own ring loads (a
//             producer without warp roles would wait for a release the carry holds back) -- they retire by the end of that next iteration (so
//             the GEMM main loop keeps one wgmma group in flight: wait_group 1, then release the
//             previous stage) -- and their releases follow, re-indexed to the previous iteration
//             (`if (k > min)`); after the loop everything retires and the last iteration's
//             releases follow (`if (n > 0)`). The counts assume the previous iteration's groups
//             exist; in the first iteration they do not and the waits are merely early.
//   Requires: specialize_warps, rotate_async_gemms and schedule_warpgroups (the statement order is
//             final); tile ops not yet lowered (gemms, copies and Parallel nests name their
//             fragments). Applies on sm_90a with ctx.allow_async_gemm; otherwise every wgmma waits
//             right after it is issued (WarpgroupGemm::run).
//   Ensures:  on every path, a gemm is retired before its registers are touched, before the
//             shared stages it reads are released or rewritten, and before the kernel ends; the
//             wait counts hold on every path (a gemm under a condition or in a nested loop is
//             placed within it, and everything retires before and after such a statement).
#include <algorithm>
#include <map>

#include "passes/PassUtil.hpp"
#include "ops/TileOp.hpp"
#include "passes/Passes.hpp"
#include "tessel/ir/Mutator.hpp"

namespace tessel::passes {

using namespace ir;

namespace {

struct Group {
  int id = 0;
  std::vector<Buffer> writes;  // the accumulator
  std::vector<Buffer> reads;   // an A operand in registers, and the shared tiles it reads
  bool carried = false;        // issued by the previous iteration of the enclosing loop
};

struct PendingRelease {
  Stmt release;
  int after = 0;  // the id of the group that must retire first
  bool carried = false;
};

// The buffers a statement writes (stores and tile-op destinations).
std::vector<Buffer> buffers_written(const Stmt& s) {
  struct Writes : IRVisitor {
    std::vector<Buffer> out;
    void add(const Buffer& b) {
      if (!contains_buffer(out, b)) out.push_back(b);
    }
    void visit_node(const BufferStore* op) override {
      add(op->buffer);
      IRVisitor::visit_node(op);
    }
    // Tile ops say what they write (src/ops/).
    void tile(const StmtNode* s) {
      for (const Region& r : ops::access(s).writes) add(r.buffer);
    }
    void visit_node(const CopyStmt* op) override { tile(op); }
    void visit_node(const FillStmt* op) override { tile(op); }
    void visit_node(const GemmStmt* op) override { tile(op); }
    void visit_node(const ReduceStmt* op) override { tile(op); }
    void visit_node(const TmaLoadStmt* op) override { tile(op); }
    void visit_node(const ClusterReduceStmt* op) override { tile(op); }
  } w;
  w.visit(s);
  return w.out;
}

// Statements that order threads or memory without touching a gemm's registers.
bool is_passive(const Stmt& s) {
  if (s.as<DeclBuffer>() || s.as<AsyncCommit>() || s.as<AsyncWait>() || s.as<ProducerStmt>()) return true;
  if (const auto* m = s.as<MbarrierStmt>()) return m->op != MbarrierOp::WarpArrive;
  if (const auto* d = s.as<DeviceCall>())
    return d->callee.rfind("tessel::named_barrier_", 0) == 0 || d->callee == "tessel::fence_proxy_async_shared";
  return false;
}

// A release, or `if (c) { releases }`.
bool is_release_stmt(const Stmt& s) {
  if (is_release(s)) return true;
  const auto* i = s.as<IfStmt>();
  if (!i || i->else_case.defined()) return false;
  std::vector<Stmt> then = flatten_seq(i->then_case);
  if (then.empty()) return false;
  return std::all_of(then.begin(), then.end(), [](const Stmt& x) { return is_release(x); });
}

Stmt async_copy(const GemmStmt* g) {
  return make_gemm(g->A, g->B, g->C, g->trans_a, g->trans_b, g->policy, g->where, true);
}

class Placer {
 public:
  Placer(PassContext& ctx, const ForStmt* loop, int* next_id) : ctx_(ctx), loop_(loop), next_id_(next_id) {}

  std::vector<Stmt> out;
  std::vector<Group> flight;             // oldest first
  std::vector<PendingRelease> pending;  // in program order

  void place(const Stmt& s) {
    if (!s.defined()) return;
    if (const auto* seq = s.as<SeqStmt>()) {
      for (const Stmt& c : seq->stmts) place(c);
    } else if (const auto* g = as_wgmma_gemm(s, ctx_)) {
      before_gemm(g);
      out.push_back(async_copy(g));
      issue(g);
    } else if (is_release_stmt(s)) {
      defer(s);
    } else if (s.as<BarrierStmt>()) {
      retire_all();
      out.push_back(s);
    } else if (is_passive(s)) {
      out.push_back(s);
    } else if (count_wgmma_gemms(s, ctx_) > 0) {
      retire_all();
      out.push_back(compound(s));
    } else {
      int youngest = -1;
      const std::vector<Buffer> used = buffers_used(s), written = buffers_written(s);
      for (int i = 0; i < static_cast<int>(flight.size()); ++i) {
        const Group& gr = flight[static_cast<size_t>(i)];
        bool hit = false;
        for (const Buffer& b : gr.writes) hit = hit || contains_buffer(used, b);
        for (const Buffer& b : gr.reads)
          hit = hit || (b->scope == Scope::Shared ? contains_buffer(written, b) : contains_buffer(used, b));
        if (hit) youngest = i;
      }
      if (youngest >= 0) retire_through(youngest);
      out.push_back(s);
      for (const Buffer& b : fragments_used(s))
        if (!contains_buffer(touched_, b)) touched_.push_back(b);
    }
  }

  void retire_all() {
    if (!flight.empty()) retire_through(static_cast<int>(flight.size()) - 1);
    flush();
  }

  // End of a loop iteration: the previous iteration's gemms retire; this iteration's stay in
  // flight into the next when their releases allow it.
  void end_iteration() {
    int carried = -1;
    for (int i = 0; i < static_cast<int>(flight.size()); ++i)
      if (flight[static_cast<size_t>(i)].carried) carried = i;
    if (carried >= 0) retire_through(carried);
    // Not where the loop issues its own ring loads (no warp roles: one consumer thread waits at
    // the top of an iteration for the stage the previous one used, whose release a carried gemm
    // would hold back -- a deadlock).
    bool can_carry = loop_ != nullptr && !contains_producer(loop_->body);
    for (const PendingRelease& p : pending) can_carry = can_carry && !p.carried && ring_stages(p.release) >= 2;
    if (!can_carry) {
      retire_all();
      return;
    }
    for (Group& g : flight) g.carried = true;
    for (PendingRelease& p : pending) p.carried = true;
  }

 private:
  void before_gemm(const GemmStmt* g) {
    // RAW on a register A operand, WAR on an accumulator another gemm reads as A.
    int youngest = -1;
    for (int i = 0; i < static_cast<int>(flight.size()); ++i) {
      const Group& gr = flight[static_cast<size_t>(i)];
      if (g->A.buffer->scope == Scope::Fragment && contains_buffer(gr.writes, g->A.buffer)) youngest = i;
      if (contains_buffer(gr.reads, g->C.buffer)) youngest = i;
    }
    if (youngest >= 0) retire_through(youngest);
  }

  void issue(const GemmStmt* g) {
    Group gr;
    gr.id = (*next_id_)++;
    gr.writes = {g->C.buffer};
    for (const Region* r : {&g->A, &g->B})
      if (!contains_buffer(gr.reads, r->buffer)) gr.reads.push_back(r->buffer);
    flight.push_back(gr);
  }

  void defer(const Stmt& s) {
    int after = -1;
    for (const Stmt& r : flatten_seq(s.as<IfStmt>() ? s.as<IfStmt>()->then_case : s))
      for (const Buffer& tile : released_tiles(r))
        for (const Group& g : flight)
          if (contains_buffer(g.reads, tile)) after = std::max(after, g.id);
    if (after < 0) {
      out.push_back(s);
      return;
    }
    pending.push_back({s, after, false});
  }

  std::vector<Buffer> released_tiles(const Stmt& release) const {
    const auto* m = release.as<MbarrierStmt>();
    for (const MbarrierArray& a : ctx_.mbarriers)
      if (m && a.bars.same_as(m->bars)) return a.releases;
    return {};
  }
  int ring_stages(const Stmt& s) const {
    std::int64_t stages = 1 << 30;
    for (const Stmt& r : flatten_seq(s.as<IfStmt>() ? s.as<IfStmt>()->then_case : s))
      if (const auto* m = r.as<MbarrierStmt>()) stages = std::min(stages, m->bars.const_numel());
    return static_cast<int>(stages);
  }

  void retire_through(int index) {
    const int pending_after = static_cast<int>(flight.size()) - 1 - index;
    TESSEL_INTERNAL_CHECK(pending_after <= 7, "place_gemm_waits: more than 7 wgmma groups in flight");
    // Only accumulators are fenced: a register A operand is packed into the wgmma's own input
    // registers when the gemm is issued (ptxas keeps those until the wait), and fencing the
    // fragment would keep its registers live for nothing.
    std::vector<Buffer> fence;
    for (int i = 0; i <= index; ++i)
      for (const Buffer& b : flight[static_cast<size_t>(i)].writes)
        if (!contains_buffer(fence, b)) fence.push_back(b);
    // The fragments computed since the last wait are pinned before this one (the work that
    // overlaps the gemms), except registers an in-flight gemm uses.
    std::vector<Buffer> pinned;
    for (const Buffer& b : touched_) {
      bool busy = false;
      for (const Group& g : flight) busy = busy || contains_buffer(g.writes, b) || contains_buffer(g.reads, b);
      const bool pinnable = b->dtype == DType::f32 || b->dtype == DType::f16 || b->dtype == DType::bf16;
      if (!busy && pinnable) pinned.push_back(b);
    }
    touched_.clear();
    flight.erase(flight.begin(), flight.begin() + index + 1);
    // Registers a gemm still in flight uses are not handed to other code yet.
    std::vector<Buffer> handed;
    for (const Buffer& b : fence) {
      bool busy = false;
      for (const Group& g : flight) busy = busy || contains_buffer(g.writes, b) || contains_buffer(g.reads, b);
      if (!busy) handed.push_back(b);
    }
    out.push_back(
        make_async_gemm_wait(pending_after, handed, loop_ ? loop_->where : std::source_location(), pinned));
    flush();
  }

  // The deferred releases whose gemms retired, in program order (releases of different stages
  // or rings need no order among themselves).
  void flush() {
    const int oldest = flight.empty() ? *next_id_ : flight.front().id;
    std::vector<PendingRelease> keep;
    for (const PendingRelease& p : pending) {
      if (p.after < oldest)
        out.push_back(p.carried ? previous_iteration(p.release) : p.release);
      else
        keep.push_back(p);
    }
    pending = keep;
  }

  Stmt previous_iteration(const Stmt& s) const {
    TESSEL_INTERNAL_CHECK(loop_ != nullptr, "place_gemm_waits: a carried release outside a loop");
    const Var& k = loop_->var;
    const auto* m = s.as<MbarrierStmt>();
    const Stmt previous = m ? make_mbarrier(m->op, m->bars, previous_stage(m->index, k), m->value, m->where)
                            : substitute(s, {{k, sub(k, make_int(1))}});
    return make_if(make_binary(BinaryOp::GT, k, loop_->min), previous, Stmt(), s->where);
  }

  // A ring stage index one iteration back. The ring's `e % S`, e = k + (terms free of k)
  // (plan_pipelines' form: the ring's position, up by one per iteration and never negative, so
  // C's % is the floor modulo), becomes the current stage's predecessor, `s == 0 ? S - 1 : s - 1`
  // of the very `s` the iteration's full-barrier wait computes, instead of a second division: the
  // release sits right after the wgmma wait, on the path from the consumers to the producer's
  // next load (SASS, H200 session 14: a division chain there, none in the template). A
  // power-of-two S (a mask) or any other index: k - 1 substituted.
  static Expr previous_stage(const Expr& index, const Var& k) {
    const auto* mod = index.as<Binary>();
    std::optional<std::int64_t> stages;
    if (mod && (mod->op == BinaryOp::Mod || mod->op == BinaryOp::FloorMod)) stages = as_const_int(mod->b);
    if (stages && *stages >= 3 && (*stages & (*stages - 1)) != 0) {  // a power of two: a mask already
      const std::optional<Linear> e = linear_in(mod->a, k);
      if (e && e->a == 1)
        return make_select(make_binary(BinaryOp::EQ, index, make_int(0)), make_int(static_cast<int>(*stages - 1)),
                           sub(index, make_int(1)));
    }
    return substitute(index, {{k, sub(k, make_int(1))}});
  }

  Stmt compound(const Stmt& s);

  PassContext& ctx_;
  const ForStmt* loop_;
  int* next_id_;
  std::vector<Buffer> touched_;  // fragments the statements since the last wait used
};

// A statement list placed on its own, ending with nothing in flight.
Stmt place_region(const Stmt& s, PassContext& ctx, int* next_id) {
  Placer p(ctx, nullptr, next_id);
  p.place(s);
  p.retire_all();
  return make_seq(p.out, s.defined() ? s->where : std::source_location());
}

Stmt place_loop(const ForStmt* f, PassContext& ctx, int* next_id) {
  auto w = f->where;
  // First pass: what an iteration leaves in flight when it starts with nothing.
  int scratch = *next_id;
  Placer first(ctx, f, &scratch);
  first.place(f->body);
  first.end_iteration();
  // Second pass: the steady state, starting with that in flight as the previous iteration's.
  Placer steady(ctx, f, next_id);
  std::map<int, int> renamed;  // first pass's group ids -> the steady state's
  for (Group g : first.flight) {
    renamed[g.id] = *next_id;
    g.id = (*next_id)++;
    steady.flight.push_back(g);
  }
  for (PendingRelease p : first.pending) {
    TESSEL_INTERNAL_CHECK(renamed.count(p.after), "place_gemm_waits: a carried release of a retired gemm");
    p.after = renamed.at(p.after);
    steady.pending.push_back(p);
  }
  steady.place(f->body);
  steady.end_iteration();
  TESSEL_INTERNAL_CHECK(steady.flight.size() == first.flight.size() && steady.pending.size() == first.pending.size(),
                        "place_gemm_waits: an iteration leaves a different set of gemms in flight in steady state");
  std::vector<Stmt> out{make_for(f->var, f->min, f->extent, f->kind, f->num_stages, make_seq(steady.out, w), w)};
  if (!steady.flight.empty()) {
    std::vector<Buffer> fence;
    for (const Group& g : steady.flight)
      for (const Buffer& b : g.writes)
        if (!contains_buffer(fence, b)) fence.push_back(b);
    out.push_back(make_async_gemm_wait(0, fence, w));
  }
  if (!steady.pending.empty()) {
    const Expr last = sub(add(f->min, f->extent), make_int(1));
    std::vector<Stmt> releases;
    for (const PendingRelease& p : steady.pending) releases.push_back(substitute(p.release, {{f->var, last}}));
    auto n = as_const_int(f->extent);
    if (n && *n > 0)
      out.push_back(make_seq(releases, w));
    else
      out.push_back(make_if(make_binary(BinaryOp::GT, f->extent, make_int(0)), make_seq(releases, w), Stmt(), w));
  }
  return make_seq(out, w);
}

Stmt Placer::compound(const Stmt& s) {
  auto w = s->where;
  if (const auto* f = s.as<ForStmt>()) return place_loop(f, ctx_, next_id_);
  if (const auto* i = s.as<IfStmt>())
    return make_if(i->cond, place_region(i->then_case, ctx_, next_id_),
                   i->else_case.defined() ? place_region(i->else_case, ctx_, next_id_) : Stmt(), w);
  if (const auto* l = s.as<LetStmt>()) return make_let(l->var, l->value, place_region(l->body, ctx_, next_id_), w);
  if (const auto* sp = s.as<SpecializeStmt>())
    return make_specialize(sp->consumer_threads, sp->producer_threads, sp->consumer_regs, sp->producer_regs,
                           sp->producer, place_region(sp->consumer, ctx_, next_id_), w);
  if (const auto* k = s.as<KernelStmt>())
    return make_kernel(k->grid, k->threads, k->block_vars, place_region(k->body, ctx_, next_id_), w);
  throw_internal_error(std::string("place_gemm_waits: a wgmma gemm inside a ") + node_kind_name(s->kind) +
                       ", which it cannot place waits in");
}

struct Counter : IRVisitor {
  int gemms = 0, waits = 0;
  void visit_node(const GemmStmt* g) override { gemms += g->async ? 1 : 0; }
  void visit_node(const AsyncGemmWait*) override { ++waits; }
};

}  // namespace

Stmt place_gemm_waits(const Stmt& body, PassContext& ctx) {
  if (ctx.target.sm != 90 || !ctx.allow_async_gemm || !ctx.uses_wgmma || count_wgmma_gemms(body, ctx) == 0) return body;
  int next_id = 0;
  Stmt out = place_region(body, ctx, &next_id);
  // place_region wraps the kernel in a sequence of one; the kernel is the body.
  std::vector<Stmt> top = flatten_seq(out);
  TESSEL_INTERNAL_CHECK(top.size() == 1 && top[0].as<KernelStmt>(), "place_gemm_waits: the body is not one kernel");
  Counter c;
  c.visit(top[0]);
  ctx.async_gemms = c.gemms;
  ctx.gemm_waits = c.waits;
  return top[0];
}

}  // namespace tessel::passes
