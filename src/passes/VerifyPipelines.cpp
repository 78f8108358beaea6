// verify_pipelines
//   Does:     checks, from the IR the pipeline passes produced, the protocol of every kernel
//             with TMA rings or warp roles -- no mirror of a template: it executes the
//             protocol's statements (mbarrier arrive / expect_tx / wait, TMA loads, block and
//             named barriers, and the reads of ring tiles by gemms and copies) for the
//             kernel's producer and each consumer warp, with loop bounds, conditions and indices
//             evaluated for the first and the last block, and runs those agents on a model of
//             the hardware -- round-robin, then in random interleavings with TMA loads landing
//             at random moments, then with one agent at a time starved (the producer, consumer
//             warps 0 and 1, the first warp of each other warpgroup). It reports as an
//             InternalError:
//               (a) a deadlock: agents waiting on mbarrier phases or named barriers that nothing
//                   left will complete;
//               (b) a ring stage read before the load of that iteration landed, or after the
//                   next load into it was issued (an overwrite of data still being read);
//               (c) a named barrier arrived on more often than its generation takes (the next
//                   turn's arrival before this turn's waiter got there);
//               (d) TMA loads still landing when the kernel's agents are done.
//             An asynchronous gemm (place_gemm_waits) reads its ring stages from its issue until
//             the wgmma wait that retires it: its reads are checked at both points. One-element
//             Local integers (a persistent ring's carried position) are evaluated as each agent
//             writes them; a tile the window skips (below) skips its write too, so the agents
//             model a block with fewer tiles, whose ring positions the machine's phases match.
//             A read's use of its stage is the number of waits on the stage's `full` barrier
//             the agent made so far (every read of a loaded stage follows the wait that published
//             it; a wait followed by no read -- a tile whose ring loop runs no iteration still
//             waits for the tile it loaded once, plan_tile_loads -- is a use all the same).
//             Integers read from global memory (a trip count the program loads from a tensor)
//             are checked at each of a few values (0, 1, 2, 3, 7 and one past what the model
//             runs), every read taking the same one.
//   Requires: plan_pipelines, specialize_warps and schedule_warpgroups (it reads their output);
//             ctx.mbarriers for the arrival counts insert_barriers will initialize.
//   Ensures:  the IR is unchanged.
#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <sstream>

#include "passes/PassUtil.hpp"
#include "passes/Passes.hpp"
#include "tessel/ir/Mutator.hpp"
#include "tessel/ir/Printer.hpp"

namespace tessel::passes {

using namespace ir;

namespace {

// ---- the agents' event lists ------------------------------------------------------------------

enum class EventKind { Arrive, ExpectTx, Wait, Tma, Read, NamedSync, NamedArrive };

constexpr std::int64_t kLoopCap = 24;
// A persistent kernel's loop over tiles runs its first and last kTileLoopCap / 2 tiles: the
// first tile's start, the hand-over between tiles and the last tile's end are what differ; the
// rest repeats (and each tile's ring loop is long too).
constexpr std::int64_t kTileLoopCap = 8;

struct Event {
  EventKind kind;
  int bar = -1;               // mbarrier element (Arrive, ExpectTx, Wait, Tma) or named barrier id
  std::int64_t value = 0;     // Wait: parity; ExpectTx / Tma: bytes; Named*: thread count
  int tile = -1, stage = -1;  // Tma (written) and Read: the ring tile and stage
  std::int64_t use = 0;       // Read: which iteration of its loop it is in (one use of the stage)
  bool use_by_waits = false;  // Read: `use` counts the agent's waits on the stage's `full` barrier
  std::string what;           // for messages
};

bool has_protocol(const Stmt& s) {
  struct Finder : IRVisitor {
    bool found = false;
    void visit_node(const MbarrierStmt*) override { found = true; }
    void visit_node(const TmaLoadStmt*) override { found = true; }
    void visit_node(const BarrierStmt*) override { found = true; }
    void visit_node(const ProducerStmt*) override { found = true; }
    void visit_node(const AsyncGemmWait*) override { found = true; }
    void visit_node(const DeviceCall* op) override {
      found = found || op->callee.rfind("tessel::named_barrier", 0) == 0;
    }
  } f;
  f.visit(s);
  return f.found;
}

// Integer expressions under variable bindings (nullopt: something unknown).
class Evaluator {
 public:
  std::map<const ExprNode*, std::int64_t> env;
  // One-element Local integer buffers the agent has written (a persistent ring's carried
  // position, persist_tiles), by buffer id.
  std::map<int, std::int64_t> scalars;
  // The value every integer read of a global tensor takes in this check (a trip count the
  // program reads from memory: the check runs once per guess), or unknown.
  std::optional<std::int64_t> global_guess;

  std::optional<std::int64_t> eval(const Expr& e) const {
    if (!e.defined()) return std::nullopt;
    if (auto c = as_const_int(e)) return *c;
    if (const auto* l = e.as<BufferLoad>()) {
      auto it = scalars.find(l->buffer->id);
      if (it != scalars.end()) return it->second;
      if (l->buffer->scope == Scope::Global && is_integer(l->dtype)) return global_guess;
      return std::nullopt;
    }
    if (e.as<VarNode>()) {
      auto it = env.find(e.get());
      if (it == env.end()) return std::nullopt;
      return it->second;
    }
    if (const auto* c = e.as<Cast>())
      return is_integer(c->dtype) || c->dtype == DType::boolean ? eval(c->value) : std::nullopt;
    if (const auto* u = e.as<Unary>()) {
      auto a = eval(u->a);
      if (!a) return std::nullopt;
      return u->op == UnaryOp::Neg ? -*a : (*a == 0 ? 1 : 0);
    }
    if (const auto* s = e.as<Select>()) {
      auto c = eval(s->cond);
      if (!c) return std::nullopt;
      return eval(*c ? s->true_value : s->false_value);
    }
    const auto* b = e.as<Binary>();
    if (!b) return std::nullopt;
    auto x = eval(b->a), y = eval(b->b);
    if (!x || !y) return std::nullopt;
    switch (b->op) {
      case BinaryOp::Add:
        return *x + *y;
      case BinaryOp::Sub:
        return *x - *y;
      case BinaryOp::Mul:
        return *x * *y;
      case BinaryOp::Div:
        return *y == 0 ? std::nullopt : std::optional<std::int64_t>(*x / *y);
      case BinaryOp::Mod:
        return *y == 0 ? std::nullopt : std::optional<std::int64_t>(*x % *y);
      case BinaryOp::FloorDiv: {
        if (*y == 0) return std::nullopt;
        std::int64_t q = *x / *y;
        if ((*x % *y != 0) && ((*x < 0) != (*y < 0))) --q;
        return q;
      }
      case BinaryOp::FloorMod:
        return *y == 0 ? std::nullopt : std::optional<std::int64_t>(((*x % *y) + *y) % *y);
      case BinaryOp::Min:
        return std::min(*x, *y);
      case BinaryOp::Max:
        return std::max(*x, *y);
      case BinaryOp::EQ:
        return *x == *y;
      case BinaryOp::NE:
        return *x != *y;
      case BinaryOp::LT:
        return *x < *y;
      case BinaryOp::LE:
        return *x <= *y;
      case BinaryOp::GT:
        return *x > *y;
      case BinaryOp::GE:
        return *x >= *y;
      case BinaryOp::And:
        return *x && *y;
      case BinaryOp::Or:
        return *x || *y;
    }
    return std::nullopt;
  }
};

// What the walker needs to know about the kernel's barriers and ring tiles.
struct Layout {
  std::map<int, int> base;  // mbarrier array id -> index of its first element
  std::vector<int> counts;  // arrivals per phase, per element
  std::vector<std::string> names;
  std::map<int, int> tiles;  // ring tile (a TMA destination) id -> index
  std::vector<std::string> tile_names;
  // `full` mbarrier array id -> the ring tiles its phases publish (tiles the same statements
  // read share one barrier pair)
  std::map<int, std::vector<int>> fills;
  std::int64_t period = 2;  // 2 * the lcm of the rings' stage counts: every ring's protocol repeats
};

class Walker {
 public:
  // The window of iterations long loops skip: [first, first + length), one for the block per
  // depth of protocol loops (a persistent kernel's tile loop, the ring loop inside it), set by
  // the first long loop at that depth any agent meets (the producer is walked first).
  struct Window {
    bool set = false;
    std::int64_t first = 0, length = 0;
  };
  // `trips`: a persistent ring's trip count per tile when it varies (ctx.tile_loop.trips), else
  // undefined.
  Walker(const Layout& l, Evaluator ev, bool runs_producer, std::int64_t* use_counter,
         std::vector<Window>* windows, Expr trips = Expr())
      : layout_(l),
        ev_(std::move(ev)),
        runs_producer_(runs_producer),
        use_(use_counter),
        windows_(windows),
        trips_(std::move(trips)) {}
  std::vector<Event> events;
  size_t gemms_in_flight() const { return groups_.size(); }

  void walk(const Stmt& s) {
    if (!s.defined()) return;
    if (const auto* seq = s.as<SeqStmt>()) {
      for (const Stmt& c : seq->stmts) walk(c);
    } else if (const auto* f = s.as<ForStmt>()) {
      if (!has_protocol(f->body) && !reads_tiles(f->body)) return;
      auto mn = ev_.eval(f->min), ext = ev_.eval(f->extent);
      if (!mn || !ext)
        fail("a loop whose bounds it cannot evaluate holds pipeline statements: " + to_string(f->extent));
      // A ring's protocol repeats every 2 * stages iterations (stage k % S, parity (k / S) % 2):
      // a long loop runs its first kLoopCap / 2 iterations and its last ones, skipping a multiple
      // of every ring's period between them, so that what follows the loop (a rotated loop's
      // last gemm, at the real last iteration) meets the rings in the state it would; the check's
      // cost stays independent of the sequence length. Every agent skips the same iterations.
      // The window skipped is the same absolute range of the loop variable for every loop of
      // every agent (the producer's loop from 0, a rotated or split consumers' loop from 1 or
      // from the split), set by the first long loop met at its depth. A persistent kernel's ring
      // loop (inside its tile loop) skips a multiple of the period of every tile's iterations,
      // the tile loop a multiple of the period of tiles: a ring iteration i * n + k moves by
      // multiples of the period either way.
      // A ring loop whose trip count n varies by tile (inside the tile loop, depth 1) skips the
      // window its tile's n gives, [kLoopCap / 2, kLoopCap / 2 + a multiple of the period below
      // n - kLoopCap), which every agent computes alike from the tile (the ring loop starts at
      // 0; a rotated or split consumers' loop skips the part of that range it holds).
      const std::int64_t end = *mn + *ext;
      if (windows_->size() <= depth_) windows_->resize(depth_ + 1);
      Window& window = (*windows_)[depth_];
      Window here;
      if (trips_.defined() && depth_ == 1) {
        const std::int64_t n = value(trips_, "the persistent ring's trip count");
        if (n > kLoopCap) here = {true, kLoopCap / 2, (n - kLoopCap) / layout_.period * layout_.period};
      } else {
        const std::int64_t cap = f->kind == ForKind::Tiles ? kTileLoopCap : kLoopCap;
        if (!window.set && *ext > cap) {
          window.set = true;
          window.first = *mn + cap / 2;
          window.length = (*ext - cap) / layout_.period * layout_.period;
        }
        here = window;
      }
      ++depth_;
      for (std::int64_t i = *mn; i < end; ++i) {
        if (here.set && i >= here.first && i < here.first + here.length) i = here.first + here.length;
        if (i >= end) break;
        ev_.env[f->var.get()] = i;
        ++*use_;
        walk(f->body);
      }
      --depth_;
      ev_.env.erase(f->var.get());
    } else if (const auto* i = s.as<IfStmt>()) {
      if (!has_protocol(s) && !reads_tiles(s)) return;
      auto c = ev_.eval(i->cond);
      if (!c) fail("a condition it cannot evaluate guards pipeline statements: " + to_string(i->cond));
      walk(*c ? i->then_case : i->else_case);
    } else if (const auto* l = s.as<LetStmt>()) {
      if (auto v = ev_.eval(l->value)) ev_.env[l->var.get()] = *v;
      walk(l->body);
    } else if (const auto* p = s.as<ProducerStmt>()) {
      if (runs_producer_) walk(p->body);
    } else if (const auto* st = s.as<BufferStore>();
               st && st->buffer->scope == Scope::Local && is_integer(st->buffer->dtype) &&
               st->buffer.const_numel() == 1) {
      // A scalar the ring indices may read (a persistent ring's carried position): its value,
      // or unknown (a read of it then fails to evaluate, which is reported where it is read).
      if (auto v = ev_.eval(st->value))
        ev_.scalars[st->buffer->id] = *v;
      else
        ev_.scalars.erase(st->buffer->id);
    } else if (const auto* m = s.as<MbarrierStmt>()) {
      mbarrier(m);
    } else if (const auto* t = s.as<TmaLoadStmt>()) {
      Event e{EventKind::Tma};
      e.bar = element(t->bars, t->index);
      e.tile = tile_of(t->dst.buffer);
      e.stage = static_cast<int>(value(t->dst.starts[0], "the TMA load's stage"));
      e.value = 1;
      for (const Expr& x : t->dst.extents) e.value *= value(x, "a TMA load's extent");
      e.value *= dtype_bytes(t->dst.buffer->dtype);
      e.what = "TMA load into " + t->dst.buffer->name + " stage " + std::to_string(e.stage);
      events.push_back(e);
    } else if (const auto* b = s.as<BarrierStmt>()) {
      Event e{EventKind::NamedSync};
      e.bar = b->id;
      e.value = b->threads;  // 0: every thread of the role
      e.what = "barrier " + std::to_string(b->id);
      events.push_back(e);
    } else if (const auto* dc = s.as<DeviceCall>();
               dc && dc->callee.rfind("tessel::named_barrier_", 0) == 0) {
      Event e{dc->callee == "tessel::named_barrier_sync" ? EventKind::NamedSync : EventKind::NamedArrive};
      e.bar = static_cast<int>(value(dc->args.at(0).expr, "a named barrier's id"));
      e.value = value(dc->args.at(1).expr, "a named barrier's thread count");
      e.what = dc->callee + "(" + std::to_string(e.bar) + ")";
      events.push_back(e);
    } else if (const auto* gw = s.as<AsyncGemmWait>()) {
      // The gemms this wait retires read their stages until now: their reads happen again here,
      // so a stage released (and refilled) before the wait shows up as an overwrite.
      while (static_cast<int>(groups_.size()) > gw->pending) {
        for (Event e : groups_.front()) {
          e.what += " (by its gemm, until the wait that retires it)";
          events.push_back(e);
        }
        groups_.erase(groups_.begin());
      }
    } else {
      const size_t first = events.size();
      reads(s);
      if (const auto* g = s.as<GemmStmt>(); g && g->async)
        groups_.emplace_back(events.begin() + static_cast<long>(first), events.end());
    }
  }

 private:
  // The asynchronous gemms in flight (oldest first), each with the ring reads it makes.
  std::vector<std::vector<Event>> groups_;

  [[noreturn]] static void fail(const std::string& why) {
    throw_internal_error("verify_pipelines: cannot model the kernel's pipeline: " + why);
  }
  std::int64_t value(const Expr& e, const char* what) const {
    auto v = ev_.eval(e);
    if (!v) fail(std::string(what) + " " + to_string(e) + " does not evaluate");
    return *v;
  }
  int element(const Buffer& bars, const Expr& index) const {
    auto it = layout_.base.find(bars->id);
    if (it == layout_.base.end()) fail("mbarrier array " + bars->name + " is not in the kernel's rings");
    return it->second + static_cast<int>(value(index, "an mbarrier index"));
  }
  int tile_of(const Buffer& b) const {
    auto it = layout_.tiles.find(b->id);
    return it == layout_.tiles.end() ? -1 : it->second;
  }
  bool reads_tiles(const Stmt& s) const {
    struct Finder : IRVisitor {
      const Layout* l;
      bool found = false;
      void visit_buffer(const Buffer& b) override { found = found || l->tiles.count(b->id); }
    } f;
    f.l = &layout_;
    f.visit(s);
    return f.found;
  }
  void mbarrier(const MbarrierStmt* m) {
    Event e{EventKind::Arrive};
    e.bar = element(m->bars, m->index);
    e.what = std::string("mbarrier.") + mbarrier_op_name(m->op) + " " + m->bars->name + "[" +
             std::to_string(e.bar - layout_.base.at(m->bars->id)) + "]";
    switch (m->op) {
      case MbarrierOp::Init:
        return;  // counts come from ctx.mbarriers
      case MbarrierOp::Arrive:
        break;  // one arrival per agent: a warp, or the producer's one thread
      case MbarrierOp::WarpArrive:
        if (m->value.defined()) {
          // In each CTA of the cluster (a ring of multicast loads). The model runs one CTA and
          // takes its peers to run the same program: the peer warp's arrival on this CTA's
          // barrier stands with its own, as this warp's does in the peer.
          const std::int64_t ctas = value(m->value, "a cluster arrival's CTAs");
          for (std::int64_t i = 1; i < ctas; ++i) events.push_back(e);
        }
        break;
      case MbarrierOp::ArriveExpectTx:
        e.kind = EventKind::ExpectTx;
        e.value = value(m->value, "expect_tx bytes");
        break;
      case MbarrierOp::Wait:
        e.kind = EventKind::Wait;
        e.value = value(m->value, "a wait's parity");
        // A consumer's wait on a tile's `full` barrier starts its next use of that stage.
        if (auto f = layout_.fills.find(m->bars->id); f != layout_.fills.end())
          for (int tile : f->second) ++waits_[{tile, e.bar - layout_.base.at(m->bars->id)}];
        break;
    }
    events.push_back(e);
  }
  // Gemms and copies that read a ring tile: one Read per tile region, its stage evaluated.
  void reads(const Stmt& s) {
    std::vector<const Region*> regions;
    if (const auto* g = s.as<GemmStmt>()) regions = {&g->A, &g->B};
    if (const auto* c = s.as<CopyStmt>()) regions = {&c->src};
    for (const Region* r : regions) {
      const int tile = tile_of(r->buffer);
      if (tile < 0) continue;
      Event e{EventKind::Read};
      e.tile = tile;
      e.stage = static_cast<int>(value(r->starts[0], "a ring tile's stage"));
      // Which use of the stage: the count of this agent's waits on its `full` barrier (every
      // read of a loaded stage follows the wait that published it), else the loop iteration.
      auto w = waits_.find({tile, e.stage});
      e.use = w != waits_.end() ? w->second : *use_;
      e.use_by_waits = w != waits_.end();
      e.what = "read of " + r->buffer->name + " stage " + std::to_string(e.stage);
      events.push_back(e);
    }
  }

  const Layout& layout_;
  Evaluator ev_;
  bool runs_producer_;
  std::int64_t* use_;
  std::vector<Window>* windows_;
  Expr trips_;
  size_t depth_ = 0;  // protocol loops around the statement being walked
  std::map<std::pair<int, int>, std::int64_t> waits_;  // (tile, stage) -> `full` waits so far
};

// ---- the model --------------------------------------------------------------------------------

struct Agent {
  std::string name;
  std::vector<Event> events;
  size_t pc = 0;
  int threads = 32;  // a warp, or the producer's one thread (counted as 1)
  std::map<std::pair<int, int>, std::pair<std::int64_t, int>> uses;  // (tile, stage) -> (last use, count)
};

struct Machine {
  std::vector<int> count, arrived;
  std::vector<std::int64_t> tx, phase;
  struct Landing {
    int bar, tile, stage;
    std::int64_t bytes;
  };
  std::vector<Landing> in_flight;
  std::map<std::pair<int, int>, int> written, issued;  // (tile, stage) -> loads landed / issued
  // Named barriers: the warps (and their thread counts) arrived in the current generation.
  std::map<int, int> named_threads;
  std::map<int, std::set<int>> named_arrivals;  // the agents arrived in the current generation
  std::map<int, std::int64_t> named_generation;
  std::map<std::pair<int, int>, std::int64_t> waiting;  // (barrier, agent) -> generation waited for

  void complete(int b) {
    if (arrived[b] >= count[b] && tx[b] == 0) {
      arrived[b] = 0;
      ++phase[b];
    }
  }
};

class Simulation {
 public:
  Simulation(const Layout& l, std::vector<Agent> agents, const std::string& where)
      : layout_(l), agents_(std::move(agents)), where_(where) {
    m_.count = l.counts;
    m_.arrived.assign(l.counts.size(), 0);
    m_.tx.assign(l.counts.size(), 0);
    m_.phase.assign(l.counts.size(), 0);
  }

  // rng null: round-robin. Otherwise random; with `starve` >= 0 that agent moves only when no
  // other can -- the schedule that exposes a stage released before its last reader read it.
  void run(std::mt19937* rng, int starve = -1) {
    std::vector<int> ready;  // reused: a step's allocation was a fifth of the check's time
    ready.reserve(agents_.size());
    for (std::int64_t steps = 0;; ++steps) {
      ready.clear();
      for (int a = 0; a < static_cast<int>(agents_.size()); ++a)
        if (agents_[static_cast<size_t>(a)].pc < agents_[static_cast<size_t>(a)].events.size() && enabled(a))
          ready.push_back(a);
      if (starve >= 0 && ready.size() > 1)
        ready.erase(std::remove(ready.begin(), ready.end(), starve), ready.end());
      const bool landings = !m_.in_flight.empty();
      if (ready.empty() && !landings) break;
      // A load lands either when nothing else can move or, in random runs, at any moment.
      if (landings && (ready.empty() || (rng && (*rng)() % 4 == 0))) {
        const size_t i = rng ? (*rng)() % m_.in_flight.size() : 0;
        land(i);
        continue;
      }
      const int a = rng ? ready[(*rng)() % ready.size()] : ready[static_cast<size_t>(steps) % ready.size()];
      step(a);
    }
    std::string stuck;
    for (const Agent& a : agents_)
      if (a.pc < a.events.size())
        stuck += (stuck.empty() ? "" : "; ") + a.name + " waits forever at " + a.events[a.pc].what + " " +
                 state(a.events[a.pc]);
    if (!stuck.empty()) report("deadlock: " + stuck);
  }

 private:
  [[noreturn]] void report(const std::string& what) const {
    throw_internal_error("verify_pipelines: " + where_ + ": " + what);
  }
  std::string state(const Event& e) const {
    if (e.kind == EventKind::Wait)
      return "(parity " + std::to_string(e.value) + "; the barrier completed " +
             std::to_string(m_.phase[static_cast<size_t>(e.bar)]) + " phases, " +
             std::to_string(m_.arrived[static_cast<size_t>(e.bar)]) + " of " +
             std::to_string(m_.count[static_cast<size_t>(e.bar)]) + " arrivals in the current one)";
    return "";
  }
  bool enabled(int a) {
    const Agent& ag = agents_[static_cast<size_t>(a)];
    const Event& e = ag.events[ag.pc];
    if (e.kind == EventKind::Wait) return (m_.phase[static_cast<size_t>(e.bar)] % 2) != e.value;
    if (e.kind == EventKind::NamedSync) {
      auto w = m_.waiting.find({e.bar, a});
      return w == m_.waiting.end() || m_.named_generation[e.bar] > w->second;
    }
    return true;
  }
  void arrive(int b) {
    ++m_.arrived[static_cast<size_t>(b)];
    m_.complete(static_cast<size_t>(b));
  }
  void land(size_t i) {
    const auto l = m_.in_flight[i];
    m_.in_flight.erase(m_.in_flight.begin() + static_cast<long>(i));
    ++m_.written[{l.tile, l.stage}];
    m_.tx[static_cast<size_t>(l.bar)] -= l.bytes;
    m_.complete(static_cast<size_t>(l.bar));
  }
  // Named barrier `id` over `threads` threads (0: every consumer thread): arrivals count warps'
  // threads; a generation completes when they reach the count.
  void named_arrive(int id, std::int64_t threads, int agent, bool wait) {
    const std::int64_t need = threads > 0 ? threads : consumer_threads_;
    if (!m_.named_arrivals[id].insert(agent).second)
      report("named barrier " + std::to_string(id) + ": " + agents_[static_cast<size_t>(agent)].name +
             " arrived twice in one generation: arrivals meant for two turns met (an arrival for the next "
             "turn came before this turn completed)");
    m_.named_threads[id] += agents_[static_cast<size_t>(agent)].threads;
    if (m_.named_threads[id] > need)
      report("named barrier " + std::to_string(id) + " got " + std::to_string(m_.named_threads[id]) +
             " threads' arrivals for a generation of " + std::to_string(need) +
             " (an arrival for the next turn came before this turn completed)");
    const std::int64_t gen = m_.named_generation[id];
    if (wait) m_.waiting[{id, agent}] = gen;
    if (m_.named_threads[id] == need) {
      bool waited = false;
      for (const auto& [key, g] : m_.waiting) waited = waited || (key.first == id && g == gen);
      if (!waited)
        report(
            "named barrier " + std::to_string(id) + " completed a generation that no thread waited on: " +
            "arrivals meant for two turns met (an arrival for the next turn came before this turn's waiter)");
      m_.named_threads[id] = 0;
      m_.named_arrivals[id].clear();
      ++m_.named_generation[id];
    }
  }
  void step(int a) {
    Agent& ag = agents_[static_cast<size_t>(a)];
    const Event& e = ag.events[ag.pc];
    switch (e.kind) {
      case EventKind::Arrive:
        arrive(e.bar);
        break;
      case EventKind::ExpectTx:
        m_.tx[static_cast<size_t>(e.bar)] += e.value;
        arrive(e.bar);
        break;
      case EventKind::Wait:
        break;
      case EventKind::Tma:
        ++m_.issued[{e.tile, e.stage}];
        m_.in_flight.push_back({e.bar, e.tile, e.stage, e.value});
        break;
      case EventKind::Read: {
        auto& [last, count] = ag.uses[{e.tile, e.stage}];
        if (e.use_by_waits) {
          // The use is the wait that published it: a wait with no read after it (a tile whose
          // ring loop runs no iteration still waits for its Q) is a use too.
          last = e.use;
          count = static_cast<int>(e.use);
        } else if (count == 0 || last != e.use) {
          last = e.use;
          ++count;
        }
        const int written = m_.written[{e.tile, e.stage}], issued = m_.issued[{e.tile, e.stage}];
        const std::string name = layout_.tile_names[static_cast<size_t>(e.tile)];
        if (written < count)
          report(ag.name + " reads " + name + " stage " + std::to_string(e.stage) + " for its use " +
                 std::to_string(count) + " before that load landed (" + std::to_string(written) + " landed)");
        if (issued > count || written > count)
          report(ag.name + " reads " + name + " stage " + std::to_string(e.stage) + " for its use " +
                 std::to_string(count) + " after load " + std::to_string(issued) +
                 " into it was issued: the stage was refilled while it was still being read" +
                 (e.what.find("(by its gemm") != std::string::npos ? " (by an asynchronous gemm, until its wait)" : ""));
        break;
      }
      case EventKind::NamedSync:
        // Arrive once, then wait (this event stays current) until the generation completes.
        if (!m_.waiting.count({e.bar, a})) named_arrive(e.bar, e.value, a, true);
        if (m_.named_generation[e.bar] <= m_.waiting[{e.bar, a}]) return;
        m_.waiting.erase({e.bar, a});
        break;
      case EventKind::NamedArrive:
        named_arrive(e.bar, e.value, a, false);
        break;
    }
    ++ag.pc;
  }

 public:
  int consumer_threads_ = 0;

 private:
  const Layout& layout_;
  std::vector<Agent> agents_;
  std::string where_;
  Machine m_;
};

struct TileFinder : IRVisitor {
  std::vector<Buffer> tiles;
  std::map<int, std::vector<Buffer>> fills;  // a ring's `full` mbarrier array id -> the tiles its loads fill
  bool has_specialize = false;
  void visit_node(const TmaLoadStmt* op) override {
    if (op->bars.defined()) {
      std::vector<Buffer>& f = fills[op->bars->id];
      if (std::none_of(f.begin(), f.end(), [&](const Buffer& b) { return b.same_as(op->dst.buffer); }))
        f.push_back(op->dst.buffer);
    }
    for (const Buffer& b : tiles)
      if (b.same_as(op->dst.buffer)) return;
    tiles.push_back(op->dst.buffer);
  }
  void visit_node(const SpecializeStmt* op) override {
    has_specialize = true;
    IRVisitor::visit_node(op);
  }
};

}  // namespace

Stmt verify_pipelines(const Stmt& body, PassContext& ctx) {
  if (ctx.mbarriers.empty()) return body;
  const auto* kernel = body.as<KernelStmt>();
  TESSEL_INTERNAL_CHECK(kernel != nullptr, "verify_pipelines: the body is not one kernel");
  Layout layout;
  for (const MbarrierArray& a : ctx.mbarriers) {
    layout.base[a.bars->id] = static_cast<int>(layout.counts.size());
    for (std::int64_t i = 0; i < a.bars.const_numel(); ++i) {
      layout.counts.push_back(a.count);
      layout.names.push_back(a.bars->name + "[" + std::to_string(i) + "]");
    }
  }
  for (const MbarrierArray& a : ctx.mbarriers) layout.period = std::lcm(layout.period, 2 * a.bars.const_numel());
  TileFinder tiles;
  tiles.visit(body);
  for (const Buffer& t : tiles.tiles) {
    layout.tiles[t->id] = static_cast<int>(layout.tile_names.size());
    layout.tile_names.push_back(t->name);
  }
  for (const auto& [bars, filled] : tiles.fills)
    for (const Buffer& tile : filled) layout.fills[bars].push_back(layout.tiles.at(tile->id));
  // The roles: a SpecializeStmt's producer and consumers, or (not specialized) the consumers with
  // the producer work run by warp 0.
  const SpecializeStmt* roles = nullptr;
  std::vector<Stmt> before;
  for (const Stmt& s :
       kernel->body.as<SeqStmt>() ? kernel->body.as<SeqStmt>()->stmts : std::vector<Stmt>{kernel->body}) {
    if (const auto* sp = s.as<SpecializeStmt>())
      roles = sp;
    else if (!roles)
      before.push_back(s);
  }
  const int consumer_warps = ctx.threads / 32;
  // Integers the program reads from global memory (a trip count from a tensor): the protocol is
  // checked for each of a few values they may take -- none, one, a ring's worth, more than the
  // model runs -- every read taking the same one.
  struct GlobalReads : IRVisitor {
    bool found = false;
    void visit_node(const BufferLoad* op) override {
      found = found || (op->buffer->scope == Scope::Global && is_integer(op->dtype));
      IRVisitor::visit_node(op);
    }
  } global_reads;
  global_reads.visit(kernel->body);
  std::vector<std::optional<std::int64_t>> guesses{std::nullopt};
  if (global_reads.found) guesses = {0, 1, 2, 3, 7, 2 * kLoopCap + 1};
  // First and last block along x, the others at 0: the loop bounds and guards vary with them.
  std::vector<std::vector<std::int64_t>> blocks;
  std::vector<std::int64_t> last(ctx.block_vars.size(), 0);
  if (!ctx.grid.empty())
    if (auto g = as_const_int(ctx.grid[0])) last[0] = *g - 1;
  blocks.push_back(std::vector<std::int64_t>(ctx.block_vars.size(), 0));
  if (last != blocks[0]) blocks.push_back(last);
  for (const std::optional<std::int64_t>& guess : guesses)
  for (const auto& block : blocks) {
    std::vector<Agent> agents;
    std::int64_t uses = 0;
    std::vector<Walker::Window> windows;
    auto evaluator = [&](int warp) {
      Evaluator ev;
      for (size_t d = 0; d < ctx.block_vars.size(); ++d) ev.env[ctx.block_vars[d].get()] = block[d];
      ev.env[ctx.thread_index.get()] = warp * 32;
      ev.global_guess = guess;
      return ev;
    };
    if (roles) {
      Walker producer(layout, evaluator(consumer_warps), true, &uses, &windows, ctx.tile_loop.trips);
      producer.walk(roles->producer);
      agents.push_back({"the producer", producer.events, 0, 1, {}});
    }
    for (int w = 0; w < consumer_warps; ++w) {
      Walker walker(layout, evaluator(w), !roles && w == 0, &uses, &windows, ctx.tile_loop.trips);
      if (roles) {
        for (const Stmt& s : before) walker.walk(s);
        walker.walk(roles->consumer);
      } else {
        walker.walk(kernel->body);
      }
      if (walker.gemms_in_flight() > 0)
        throw_internal_error("verify_pipelines: " + ctx.func_name + ": " + std::to_string(walker.gemms_in_flight()) +
                             " asynchronous gemm group(s) of consumer warp " + std::to_string(w) +
                             " still in flight when the kernel ends (no wgmma wait retires them)");
      agents.push_back({"consumer warp " + std::to_string(w), walker.events, 0, 32, {}});
    }
    std::ostringstream where;
    where << ctx.func_name << " at block (";
    for (size_t d = 0; d < block.size(); ++d) where << (d ? ", " : "") << block[d];
    where << ")";
    if (guess) where << " with every integer read from global memory = " << *guess;
    // Round-robin, random interleavings, and agents starved in turn: the producer, consumer
    // warps 0 and 1 (warp 0 may do what the others do not: a lone producer's loads, `tx == 0`
    // work) and the first warp of every other warpgroup (the warps of one warpgroup run the same
    // statements; warpgroups differ under ping-pong). Starving all of them cost a third of the
    // check's time for nothing more (a 8192^3 GEMM's kernel: 71 ms).
    std::vector<int> starved;
    const int first_consumer = roles ? 1 : 0;
    if (roles) starved.push_back(0);
    for (int w = 0; w < consumer_warps; ++w)
      if (w < 2 || w % 4 == 0) starved.push_back(first_consumer + w);
    const int random_runs = 4, runs = 1 + random_runs + static_cast<int>(starved.size());
    for (int run = 0; run < runs; ++run) {
      Simulation sim(layout, agents, where.str());
      sim.consumer_threads_ = ctx.threads;
      std::mt19937 rng(static_cast<unsigned>(run * 7919 + 1));
      if (run == 0)
        sim.run(nullptr);
      else if (run <= random_runs)
        sim.run(&rng);
      else
        sim.run(&rng, starved[static_cast<size_t>(run - random_runs - 1)]);
    }
  }
  return body;
}

}  // namespace tessel::passes
