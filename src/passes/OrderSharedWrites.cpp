// order_shared_writes
//   Does:     orders every shared-memory write outside a pipelined loop against the threads
//             that read the buffer: a run of adjacent writes (copies into shared memory, fills
//             of shared buffers) becomes
//               barrier; the writes; [commit; wait(0) when a write is a global->shared copy]; barrier
//             -- the first barrier proves earlier readers done, the second publishes the data
//             (cp.async groups drained first). A lone write outside any sequence (a branch's
//             only statement) is bracketed the same way. Loops that plan_pipelines turns into a
//             cp.async schedule or an mbarrier ring are left alone: their producers' ordering
//             is the schedule's own; a Pipelined loop with nothing to overlap (no producer, or
//             one stage) is walked like any loop.
//   Requires: verify_program; plan_tma_copies (a loop whose loads became TMA loads is a ring).
//   Ensures:  every shared-memory write outside the loops plan_pipelines schedules is
//             preceded and followed by a block barrier. The barriers are plain; in kernels with
//             wgmma gemms insert_proxy_fences precedes each with the async-proxy fence.
#include "ops/TileOp.hpp"
#include "passes/Passes.hpp"
#include "tessel/ir/Mutator.hpp"

namespace tessel::passes {

using namespace ir;

namespace {

using ops::is_global_to_shared_copy;
using ops::is_shared_write;

// Whether plan_pipelines schedules this Pipelined loop (a cp.async schedule over two or more
// stages, or a TMA ring) rather than turning it into a plain loop.
bool scheduled(const ForStmt* op) {
  std::vector<Stmt> body = op->body.as<SeqStmt>() ? op->body.as<SeqStmt>()->stmts : std::vector<Stmt>{op->body};
  bool producers = false, tma = false;
  for (const Stmt& s : body) {
    producers = producers || is_global_to_shared_copy(s);
    tma = tma || s.as<TmaLoadStmt>();
  }
  return tma || (producers && op->num_stages > 1);
}

class SharedWriteOrder : public IRMutator {
 protected:
  Stmt mutate_node(const ForStmt* op, const Stmt& self) override {
    if (op->kind == ForKind::Pipelined && scheduled(op)) return self;
    return IRMutator::mutate_node(op, self);
  }
  Stmt mutate_node(const SeqStmt* op, const Stmt&) override {
    std::vector<Stmt> out, run;
    auto flush = [&] {
      if (run.empty()) return;
      out.push_back(bracket(run));
      run.clear();
    };
    for (const Stmt& s : op->stmts) {
      if (is_shared_write(s)) {
        run.push_back(s);
      } else {
        flush();
        out.push_back(mutate(s));
      }
    }
    flush();
    return make_seq(out, op->where);
  }
  Stmt mutate_node(const CopyStmt*, const Stmt& self) override { return bracket({self}); }
  Stmt mutate_node(const FillStmt*, const Stmt& self) override { return bracket({self}); }

 private:
  static Stmt bracket(const std::vector<Stmt>& writes) {
    if (writes.size() == 1 && !is_shared_write(writes[0])) return writes[0];
    auto w = writes[0]->where;
    std::vector<Stmt> out{make_barrier(w)};
    bool async = false;
    for (const Stmt& s : writes) {
      out.push_back(s);
      async = async || is_global_to_shared_copy(s);
    }
    if (async) {
      out.push_back(make_async_commit(w));
      out.push_back(make_async_wait(0, w));
    }
    out.push_back(make_barrier(w));
    return make_seq(out, w);
  }
};

}  // namespace

Stmt order_shared_writes(const Stmt& body, PassContext&) { return SharedWriteOrder().mutate(body); }

}  // namespace tessel::passes
