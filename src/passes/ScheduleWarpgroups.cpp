// schedule_warpgroups
//   Does:     ping-pong between the two consumer warpgroups of a warp-specialized kernel whose
//             ring loop runs gemms with other work between them (attention: S = Q K^T, the
//             softmax, O += P V). Left alone, both warpgroups wait on the same ring barriers
//             and fall into step: both in their gemms, then both in the softmax, the tensor cores
//             idle meanwhile. The pass makes each warpgroup's gemm phase -- the last gemm of
//             iteration j and the first of iteration j + 1, adjacent across the loop's back edge
//             -- take turns with the other's, so one warpgroup's softmax runs while the other's
//             gemms do, through named barriers 2 (warpgroup 0's turn) and 3 (warpgroup 1's):
//               before the loop:   warpgroup 1 waits for its turn
//               each iteration:    first gemm; give the other warpgroup its turn;
//                                  ... (the softmax); wait for this warpgroup's turn; last gemm
//               after the loop:    warpgroup 0 gives warpgroup 1 its last turn
//             A loop rotate_async_gemms rotated issues its gemms as one run (the first gemm of
//             iteration j, then -- after its ring wait -- the last of iteration j - 1): the run
//             is the phase -- each
//             iteration: the run; give the other its turn; ...; wait for this warpgroup's turn.
//             Each barrier completes once per turn: between two of a warpgroup's arrivals on the
//             other's barrier lies its own wait, which needs the other's arrival, which the
//             other makes only after waiting on the first -- so arrivals never run a turn ahead.
//             The loop may sit inside a persistent kernel's tile loop (and the lets that bind its
//             tile): the turns then start and end within each tile, the same protocol per tile,
//             which needs the warpgroups to meet between tiles (else warpgroup 0 gives tile i + 1's
//             first turn before warpgroup 1 took tile i's last, two arrivals in one generation):
//             a tile body with no block barrier before the loop (its Q by TMA, plan_tile_loads)
//             gets one at its top.
//   Requires: specialize_warps (the consumer role); no block or named barrier inside the loop
//             (insert_barriers names those later: the consumers' barrier 1).
//   Ensures:  warpgroup 0 arrives on barrier 3 as often as warpgroup 1 waits on it, and
//             warpgroup 1 on barrier 2 as often as warpgroup 0 waits on it.
#include "passes/PassUtil.hpp"
#include "passes/Passes.hpp"
#include "tessel/ir/Mutator.hpp"

namespace tessel::passes {

using namespace ir;

namespace {

bool has_barrier_or_gemm(const Stmt& s) {
  struct Finder : IRVisitor {
    bool found = false;
    void visit_node(const BarrierStmt*) override { found = true; }
    void visit_node(const GemmStmt*) override { found = true; }
  } f;
  f.visit(s);
  return f.found;
}

class PingPong : public IRMutator {
 public:
  explicit PingPong(const PassContext& ctx) : ctx_(ctx) {}
  bool applied = false;

 protected:
  Stmt mutate_node(const SpecializeStmt* op, const Stmt& self) override {
    if (op->consumer_threads != 256) return self;
    Stmt consumer = take_turns(op->consumer);
    if (!consumer.defined()) return self;
    applied = true;
    return make_specialize(op->consumer_threads, op->producer_threads, op->consumer_regs, op->producer_regs,
                           op->producer, consumer, op->where);
  }

  // The consumers' statements with the first ring loop that can take turns scheduled (at the top
  // level, or inside a persistent kernel's tile loop and the lets that bind its tile: the turns
  // then start and end within each tile), or undefined when there is none.
  Stmt take_turns(const Stmt& s) {
    if (const auto* l = s.as<LetStmt>()) {
      Stmt body = take_turns(l->body);
      return body.defined() ? make_let(l->var, l->value, body, l->where) : Stmt();
    }
    if (const auto* f = s.as<ForStmt>(); f && f->kind == ForKind::Tiles) {
      ++tile_depth_;
      Stmt body = take_turns(f->body);
      --tile_depth_;
      return body.defined() ? make_for(f->var, f->min, f->extent, ForKind::Tiles, 0, body, f->where) : Stmt();
    }
    std::vector<Stmt> body = flatten_seq(s);
    for (size_t i = 0; i < body.size(); ++i) {
      const auto* loop = body[i].as<ForStmt>();
      if (loop && loop->kind == ForKind::Tiles) {
        Stmt inner = take_turns(body[i]);
        if (!inner.defined()) continue;
        body[i] = inner;
        return make_seq(body, s->where);
      }
      if (const auto* l = body[i].as<LetStmt>()) {
        Stmt inner = take_turns(body[i]);
        if (!inner.defined()) continue;
        body[i] = inner;
        return make_seq(body, l->where);
      }
      if (!loop || loop->kind != ForKind::Serial) continue;
      Stmt scheduled = schedule(loop);
      if (!scheduled.defined()) continue;
      auto w = loop->where;
      const Expr wg0 = lt(ctx_.thread_index, make_int(128));
      body[i] = make_seq({make_if(make_unary(UnaryOp::Not, wg0), sync(make_int(3), w), Stmt(), w), scheduled,
                          make_if(wg0, arrive(make_int(3), w), Stmt(), w)},
                         w);
      // In a tile loop, the warpgroups meet before this tile's turns start (the header).
      bool met = false;
      for (size_t j = 0; j < i; ++j) met = met || body[j].as<BarrierStmt>() != nullptr;
      if (tile_depth_ > 0 && !met) body.insert(body.begin(), make_barrier(w));
      return make_seq(body, w);
    }
    return Stmt();
  }

 private:
  // The loop with its gemm phases alternated, or undefined when it is not a loop of wgmma gemms
  // with other work between them.
  Stmt schedule(const ForStmt* loop) {
    std::vector<Stmt> body = flatten_seq(loop->body);
    std::vector<int> gemms;
    for (int i = 0; i < static_cast<int>(body.size()); ++i) {
      if (const auto* g = body[i].as<GemmStmt>()) {
        auto l = ctx_.fragment_layouts.find(g->C.buffer->id);
        if (l == ctx_.fragment_layouts.end() || !l->second.wgmma) return Stmt();
        gemms.push_back(i);
      } else if (has_barrier_or_gemm(body[i])) {
        return Stmt();  // a gemm or barrier nested in other statements: not a shape this pass knows
      }
    }
    if (gemms.empty()) return Stmt();
    const int first = gemms.front(), last = gemms.back();
    auto w = loop->where;
    const Expr wg0 = lt(ctx_.thread_index, make_int(128));
    const Expr other = make_select(wg0, make_int(3), make_int(2));
    const Expr mine = make_select(wg0, make_int(2), make_int(3));
    // One run: the gemms separated by nothing but ring waits.
    bool run = gemms.size() >= 2;
    for (int i = first; run && i <= last; ++i) {
      const auto* m = body[static_cast<size_t>(i)].as<MbarrierStmt>();
      run = body[static_cast<size_t>(i)].as<GemmStmt>() || (m && m->op == MbarrierOp::Wait);
    }
    if (run) {
      // One run of gemms (a rotated loop): the run is the phase; the other warpgroup's turn
      // starts after it, and this warpgroup's next turn is awaited at the end of the iteration.
      if (last + 1 == static_cast<int>(body.size())) return Stmt();  // nothing after them to overlap
      body.insert(body.begin() + last + 1, arrive(other, w));
      body.push_back(sync(mine, w));
    } else {
      if (last <= first + 1) return Stmt();
      body.insert(body.begin() + last, sync(mine, w));
      body.insert(body.begin() + first + 1, arrive(other, w));
    }
    return make_for(loop->var, loop->min, loop->extent, loop->kind, loop->num_stages, make_seq(body, w), w);
  }

  static Stmt sync(const Expr& id, std::source_location w) {
    return make_device_call("tessel::named_barrier_sync", {},
                            {{id, Buffer(), Expr()}, {make_int(256), Buffer(), Expr()}}, w);
  }
  static Stmt arrive(const Expr& id, std::source_location w) {
    return make_device_call("tessel::named_barrier_arrive", {},
                            {{id, Buffer(), Expr()}, {make_int(256), Buffer(), Expr()}}, w);
  }

  const PassContext& ctx_;
  int tile_depth_ = 0;  // tile loops around the statements take_turns is looking at
};

}  // namespace

Stmt schedule_warpgroups(const Stmt& body, PassContext& ctx) {
  if (!ctx.allow_pingpong || ctx.launch_threads == 0) return body;
  PingPong p(ctx);
  Stmt out = p.mutate(body);
  ctx.pingpong = p.applied;
  return out;
}

}  // namespace tessel::passes
