// plan_tile_loads
//   Does:     in a persistent kernel (persist_tiles) on sm_90a, turns a global->shared copy that
//             the tile loop's body makes once per tile -- attention's Q tile, which
//             order_shared_writes bracketed `barrier; copy; commit; wait(0); barrier` -- into a
//             TMA load the producer issues into two slots, slot tile_i % 2, each with a `full`
//             and an `empty` mbarrier (one arrival; every consumer warp):
//               producer { wait(empty[slot], ((tile_i / 2) + 1) % 2); expect_tx(full[slot]);
//                          tma(tile -> buffer[slot]) }
//               ... wait(full[slot], (tile_i / 2) % 2); readers of the tile;
//                   warp_arrive(empty[slot]) ...
//             The consumers wait right before the first statement of the tile's body that reads
//             it and release it right after the last. The producer thus loads tile i + 1's copy
//             while the consumers still compute tile i (its slot was released at the end of
//             tile i - 1), where the consumers used to stall at every tile's start on a cp.async
//             load and two block barriers. Two slots, not one: the producer issues in program
//             order, so a load waiting for this tile's release would hold back the next tile's
//             ring loads behind it.
//             Applies when the Hopper switches, async_pipeline and tile_loads are on, the tile
//             loop holds a TMA ring (plan_pipelines), and for each copy: it is the only write of
//             its bracket, at the tile body's top level, before the ring loop; it could be a TMA
//             load (tma_box: 16-bit tensor, wgmma-swizzled destination, tile shape); nothing else
//             writes the buffer and only gemms read it, all inside the tile body; the ring loop
//             after it runs a trip count that varies by tile or is under 64 (the gain is one
//             load's latency a tile; long loops measured 1-2 % slower with it); and the
//             kernel's shared memory with a second copy of the buffer still fits the target
//             (after plan_tma_stores' staging tiles). Otherwise the copy keeps its bracket.
//   Requires: persist_tiles (the tile loop), order_shared_writes (the bracket), plan_pipelines
//             (the rings: the tile loop must hold one, and its mbarriers come first),
//             plan_tma_stores (the staging tiles' shared memory).
//   Ensures:  ctx.tile_loads lists each bracketed copy of the tile body, taken or not (and why
//             not); the buffer is declared [2, ...shape] and every gemm operand naming it names slot
//             tile_i % 2; its barrier arrays are declared at the kernel's top and in
//             ctx.mbarriers (`empty` releases the buffer, so place_gemm_waits retires the gemms
//             reading it before the release, and verify_pipelines models it as a ring tile); its
//             map is in ctx.tma_params.
#include <algorithm>

#include "passes/PassUtil.hpp"
#include "passes/Passes.hpp"
#include "tessel/ir/Mutator.hpp"

namespace tessel::passes {

using namespace ir;

namespace {

constexpr int kSlots = 2;
// Ring loops of this many iterations a tile or more keep the consumers' load (see eligible()).
constexpr std::int64_t kLongLoop = 64;

// Every use of the buffer: whether each is a gemm operand (the only reads this pass rewrites).
struct Uses : IRVisitor {
  int id = 0;
  int gemm_reads = 0;
  bool other = false;
  void visit_node(const GemmStmt* op) override {
    if (op->A.buffer->id == id || op->B.buffer->id == id) ++gemm_reads;
    if (op->C.buffer->id == id) other = true;
  }
  void visit_buffer(const Buffer& b) override { other = other || b->id == id; }
};

// Gemm operands naming `old` name slot `slot` of `slots` instead.
class SlotRewriter : public IRMutator {
 public:
  SlotRewriter(Buffer old, Buffer slots, Expr slot)
      : old_(std::move(old)), slots_(std::move(slots)), slot_(std::move(slot)) {}

 protected:
  Region at_slot(const Region& r) const {
    if (!r.buffer.same_as(old_)) return r;
    Region out{slots_, {slot_}, {make_int(1)}};
    out.starts.insert(out.starts.end(), r.starts.begin(), r.starts.end());
    out.extents.insert(out.extents.end(), r.extents.begin(), r.extents.end());
    return out;
  }
  Stmt mutate_node(const GemmStmt* op, const Stmt&) override {
    return make_gemm(at_slot(op->A), at_slot(op->B), op->C, op->trans_a, op->trans_b, op->policy, op->where,
                     op->async);
  }

 private:
  Buffer old_, slots_;
  Expr slot_;
};

bool reads(const Stmt& s, const Buffer& b) {
  Uses u;
  u.id = b->id;
  u.visit(s);
  return u.gemm_reads > 0;
}

bool holds_ring(const Stmt& s) {
  struct Find : IRVisitor {
    bool found = false;
    void visit_node(const TmaLoadStmt* op) override { found = found || op->bars.defined(); }
  } f;
  f.visit(s);
  return f.found;
}

class TileLoadPlanner : public IRMutator {
 public:
  TileLoadPlanner(PassContext& ctx, const Stmt& kernel) : ctx_(ctx), kernel_(kernel) {}
  std::vector<Buffer> decls;                       // the barrier arrays, for the kernel's top
  std::vector<std::pair<Buffer, Buffer>> slotted;  // old buffer -> its two-slot replacement

 protected:
  Stmt mutate_node(const ForStmt* op, const Stmt& self) override {
    if (op->kind != ForKind::Tiles || !op->var.same_as(ctx_.tile_loop.var) || !holds_ring(op->body))
      return IRMutator::mutate_node(op, self);
    tile_ = op->var;
    known_ = ctx_.block_vars;
    known_.push_back(op->var);
    return make_for(op->var, op->min, op->extent, op->kind, op->num_stages, tile_body(op->body), op->where);
  }

 private:
  // The tile body, under the lets that bind the tile's block indices.
  Stmt tile_body(const Stmt& s) {
    if (const auto* l = s.as<LetStmt>()) {
      known_.push_back(l->var);
      return make_let(l->var, l->value, tile_body(l->body), l->where);
    }
    std::vector<Stmt> stmts = flatten_seq(s);
    for (size_t i = 0; i + 4 < stmts.size(); ++i) {
      const auto* before = stmts[i].as<BarrierStmt>();
      const auto* copy = stmts[i + 1].as<CopyStmt>();
      const auto* drain = stmts[i + 3].as<AsyncWait>();
      const auto* after = stmts[i + 4].as<BarrierStmt>();
      if (!before || before->id != 0 || !copy || !stmts[i + 2].as<AsyncCommit>() || !drain ||
          drain->pending != 0 || !after || after->id != 0)
        continue;
      std::vector<Stmt> rest(stmts.begin() + static_cast<long>(i) + 5, stmts.end());
      std::string why;
      std::optional<TmaParam> box = eligible(copy, rest, why);
      ctx_.tile_loads.push_back({copy->src.buffer->name, copy->dst.buffer->name, box.has_value(), why});
      if (!box) continue;
      stmts = plan(stmts, i, copy, *box);
    }
    return make_seq(stmts, s->where);
  }

 private:
  // The TMA box of a copy this pass can take, else nullopt and in `why` the rule it breaks (the
  // rules in the header).
  std::optional<TmaParam> eligible(const CopyStmt* c, const std::vector<Stmt>& rest, std::string& why) const {
    const Buffer& b = c->dst.buffer;
    auto no = [&](const std::string& reason) {
      why = reason;
      return std::nullopt;
    };
    if (c->src.buffer->scope != Scope::Global || b->scope != Scope::Shared || c->pad.defined() ||
        c->row_window)
      return no("not a plain global->shared copy");
    for (size_t d = 0; d < c->dst.starts.size(); ++d)
      if (!is_const_int(c->dst.starts[d], 0) ||
          !(as_const_int(c->dst.extents[d]) == as_const_int(b->shape[d])))
        return no("it fills part of " + b->name);
    // The producer computes the tile's place from what it knows: the block and tile indices.
    for (const Expr& e : c->src.starts)
      if (!reads_only(e, known_, kernel_)) return no("its place reads what only the consumers compute");
    auto layout = ctx_.shared_layouts.find(b->id);
    if (layout == ctx_.shared_layouts.end()) return no("no shared layout");
    std::optional<TmaParam> box = tma_box(c, layout->second);
    if (!box) return no("a TMA load cannot make it (dtype, strides, tile shape or layout)");
    // Read by gemms of the tile body only, written by nothing else in the kernel.
    Uses in_body;
    in_body.id = b->id;
    for (const Stmt& s : rest) in_body.visit(s);
    Uses in_kernel;
    in_kernel.id = b->id;
    in_kernel.visit(kernel_);
    if (in_body.gemm_reads == 0 || in_body.other || in_kernel.gemm_reads != in_body.gemm_reads)
      return no(b->name + " is used other than as a gemm operand of the tile");
    // Worth it where the tile's ring loop is short (the load it hides is one per tile): a trip
    // count that varies by tile (causal), or under kLongLoop iterations. On longer loops it
    // measured 1-2 % slower (H100, session 25: D = 64 and 128 at 16384 keys, 128 key blocks a
    // tile; +0.6-4 % at 8 to 32 blocks), for a reason not found (the loop's SASS is unchanged).
    for (const Stmt& s : rest)
      if (const auto* f = s.as<ForStmt>(); f && holds_ring(s)) {
        if (auto n = as_const_int(f->extent); n && *n >= kLongLoop)
          return no("the ring loop runs " + std::to_string(*n) + " iterations a tile (from " +
                    std::to_string(kLongLoop) + " on, measured slower)");
        break;
      }
    // A second copy of the buffer beside everything else.
    const std::int64_t bytes = b.const_numel() * dtype_bytes(b->dtype);
    if (const std::int64_t need = kernel_shared_bytes(kernel_, ctx_, bytes); need > ctx_.target.smem_cap)
      return no("a second slot of " + b->name + " would take the kernel to " + std::to_string(need) +
                " bytes of shared memory (at most " + std::to_string(ctx_.target.smem_cap) + ")");
    return box;
  }

  std::vector<Stmt> plan(const std::vector<Stmt>& stmts, size_t at, const CopyStmt* c, const TmaParam& box) {
    const auto w = c->where;
    const Buffer& old = c->dst.buffer;
    std::vector<Expr> shape{make_int(kSlots)};
    shape.insert(shape.end(), old->shape.begin(), old->shape.end());
    Buffer slots = Buffer::make(old->name, shape, old->dtype, Scope::Shared, old->where);
    ctx_.shared_layouts[slots->id] = ctx_.shared_layouts.at(old->id);
    slotted.emplace_back(old, slots);
    Buffer full = mbarriers(old->name + "_full", 1, {}, w);
    Buffer empty = mbarriers(old->name + "_empty", ctx_.threads / 32, {slots}, w);
    const Expr S = make_int(kSlots);
    const Expr slot = make_binary(BinaryOp::Mod, tile_, S);
    const Expr round = make_binary(BinaryOp::Div, tile_, S);
    const Expr parity = make_binary(BinaryOp::Mod, round, make_int(2));
    const Expr empty_parity = make_binary(BinaryOp::Mod, add(round, make_int(1)), make_int(2));
    const std::int64_t bytes = old.const_numel() * dtype_bytes(old->dtype);
    Region dst{slots, {slot}, {make_int(1)}};
    dst.starts.insert(dst.starts.end(), c->dst.starts.begin(), c->dst.starts.end());
    dst.extents.insert(dst.extents.end(), c->dst.extents.begin(), c->dst.extents.end());
    Stmt issue =
        make_producer(make_seq({make_mbarrier(MbarrierOp::Wait, empty, slot, empty_parity, w),
                                make_mbarrier(MbarrierOp::ArriveExpectTx, full, slot, make_int(bytes), w),
                                make_tma_load(c->src, dst, tma_load_map(ctx_, box), full, slot, w)},
                               w),
                      w);
    std::vector<Stmt> out(stmts.begin(), stmts.begin() + static_cast<long>(at));
    out.push_back(issue);
    SlotRewriter rewrite(old, slots, slot);
    std::vector<Stmt> rest;
    for (size_t i = at + 5; i < stmts.size(); ++i) rest.push_back(rewrite.mutate(stmts[i]));
    int first = -1, last = -1;
    for (int i = 0; i < static_cast<int>(rest.size()); ++i)
      if (reads(rest[static_cast<size_t>(i)], slots)) {
        if (first < 0) first = i;
        last = i;
      }
    TESSEL_INTERNAL_CHECK(first >= 0, "plan_tile_loads: " << old->name << " is not read after its copy");
    rest.insert(rest.begin() + last + 1, make_mbarrier(MbarrierOp::WarpArrive, empty, slot, Expr(), w));
    rest.insert(rest.begin() + first, make_mbarrier(MbarrierOp::Wait, full, slot, parity, w));
    out.insert(out.end(), rest.begin(), rest.end());
    return out;
  }

  Buffer mbarriers(const std::string& name, int count, std::vector<Buffer> releases, std::source_location w) {
    Buffer b = Buffer::make(name, {make_int(kSlots)}, DType::i64, Scope::Shared, w);
    ctx_.shared_layouts[b->id] = SharedLayout::row_major(1, kSlots);
    ctx_.mbarriers.push_back(MbarrierArray{b, count, std::move(releases)});
    decls.push_back(b);
    return b;
  }

  PassContext& ctx_;
  const Stmt& kernel_;
  Var tile_;
  std::vector<Var> known_;  // block indices, the tile loop's variable and its lets
};

// The two-slot buffers' declarations in place of the old ones, the barrier arrays first.
class Declare : public IRMutator {
 public:
  Declare(const std::vector<std::pair<Buffer, Buffer>>& slotted, const std::vector<Buffer>& bars)
      : slotted_(slotted), bars_(bars) {}

 protected:
  Stmt mutate_node(const KernelStmt* op, const Stmt&) override {
    std::vector<Stmt> body;
    for (const Buffer& b : bars_) body.push_back(make_decl(b, op->where));
    body.push_back(mutate(op->body));
    return make_kernel(op->grid, op->threads, op->block_vars, make_seq(body, op->where), op->where);
  }
  Stmt mutate_node(const DeclBuffer* op, const Stmt& self) override {
    for (const auto& [old, slots] : slotted_)
      if (op->buffer.same_as(old)) return make_decl(slots, op->where);
    return self;
  }

 private:
  const std::vector<std::pair<Buffer, Buffer>>& slotted_;
  const std::vector<Buffer>& bars_;
};

}  // namespace

Stmt plan_tile_loads(const Stmt& body, PassContext& ctx) {
  if (ctx.target.sm != 90 || !ctx.allow_tma || !ctx.allow_wgmma || !ctx.allow_warp_specialization ||
      !ctx.allow_async_pipeline || !ctx.allow_tile_loads || ctx.hopper.selected || !ctx.tile_loop.applied ||
      ctx.mbarriers.empty())
    return body;
  const auto* k = body.as<KernelStmt>();
  if (!k) return body;
  TileLoadPlanner planner(ctx, body);
  Stmt out = planner.mutate(body);
  if (planner.slotted.empty()) return body;
  return Declare(planner.slotted, planner.decls).mutate(out);
}

}  // namespace tessel::passes
