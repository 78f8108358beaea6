// persist_tiles
//   Does:     on sm_90a, makes a kernel whose work is one TMA ring loop per output tile
//             persistent: it launches P = min(tiles, SMs) blocks, and block `pid` computes tiles
//             pid, pid + P, pid + 2P, ... in a `tiles` loop,
//               kernel grid(P) (pid) {
//                 <shared declarations>
//                 tiles i in [0, ceildiv(T - pid, P)) {
//                   let t = pid + i * P; let bx = ..., by = ..., bz = ...   (the author's block
//                   <the rest of the body>                                 indices of tile t)
//                 }
//               }
//             so that, once specialize_warps gives the ring's loads their own warps, the
//             producer runs on into the next tile's loads while the consumers finish this one
//             (its epilogue, its last gemms): plan_pipelines counts the ring's stages and phases
//             over the tiles of a block (iteration i * n + k) instead of restarting them. When
//             the ring loop's trip count n(tile) depends on the tile, the position of a tile's
//             first iteration is carried in a Local scalar instead (ctx.tile_loop.base):
//               local ring_base: i32[1]; ring_base[0] = 0
//               tiles i in [...) { let ...; <the body>; ring_base[0] += max(n(tile), 0) }
//             (iteration ring_base[0] + k; specialize_warps gives the scalar to both roles), and
//             the tiles are dealt in serpentine rounds (block pid takes tile i * P + pid in even
//             rounds, i * P + P - 1 - pid in odd ones), which balances unequal tiles. The
//             tile order is the grid's, row-major (x fastest); use_swizzle(panel) becomes the
//             same panel order over the tiles (tessel::rasterize's arithmetic, block.cuh, as lets)
//             instead of a remap of blockIdx. Applies when all of these hold, else the IR is unchanged:
//               - ctx.ring_epilogues(): JitOptions::persistent_rings, or gemm_from_passes (the
//                 default) and a K loop of one gemm on a TMA ring (ctx.gemm_ring), the
//                 Hopper switches and async_pipeline and persistent_tiles are on, and the
//                 kernel's threads are whole warpgroups (specialize_warps will split the roles:
//                 without a producer of its own, a block would not overlap anything);
//               - the grid's extents are constants, no more than 2^31 - 1 tiles (a grid of
//                 one wave too: its blocks take one tile each, and the kernel is the same
//                 code as the multi-wave one -- no producer prologue, no run-time remap of a
//                 2-D blockIdx; H200 session 14, docs/perf-notes.md);
//               - exactly one top-level statement is a Pipelined loop from 0, whose loads are
//                 all TMA loads (plan_tma_copies made it a ring), and nothing else holds a loop
//                 with TMA loads; its trip count is a constant or reads only the block indices
//                 (causal attention: query block i sees i + 1 key blocks) and tensors the kernel
//                 does not write (a length in memory);
//               - every shared buffer is one of that loop's TMA destinations or written once, by a
//                 copy from global memory at the kernel's top level (attention's Q tile, ordered
//                 after the previous tile's readers by order_shared_writes' barrier), and no
//                 fragment keeps a tail in shared memory.
//             P is the target's SM count (132 when unknown, the H200's; at most
//             JitOptions::max_persistent_ctas when that is set; rounded down to even in
//             multicast_cluster_loads' 2-CTA clusters, whose trip count is constant, so the
//             blocks of a cluster hold the two tiles of a pair); the grid is that
//             constant, so the JIT launches exactly P blocks and the loop's stride is known to
//             every pass after this one (verify_pipelines evaluates it).
//   Requires: plan_tma_copies (the ring's loads are TmaLoadStmts); verify_program (ctx.grid,
//             ctx.block_vars).
//   Ensures:  when applied: ctx.grid = {P}, ctx.block_vars = {pid}, ctx.tile_loop describes the
//             loop (and the carried base, when the trip count varies); no SwizzleStmt is left
//             (its panel is in the tile coordinates).
#include <algorithm>

#include "passes/PassUtil.hpp"
#include "passes/Passes.hpp"
#include "tessel/ir/Mutator.hpp"

namespace tessel::passes {

using namespace ir;

namespace {

// The ring loop (the one top-level Pipelined loop with TMA loads).
const ForStmt* ring_loop(const KernelStmt& k) {
  for (const Stmt& s : flatten_seq(k.body))
    if (const auto* f = s.as<ForStmt>(); f && f->kind == ForKind::Pipelined && holds_tma_load(f->body)) return f;
  return nullptr;
}

// Why the kernel cannot be made persistent; empty when it can.
std::string why_not(const KernelStmt& k, const PassContext& ctx, std::int64_t& tiles) {
  if (k.threads % 128 != 0) return "the kernel's threads are not whole warpgroups";
  tiles = 1;
  for (const Expr& g : k.grid) {
    auto v = as_const_int(g);
    if (!v) return "the grid is not constant";
    tiles *= *v;
  }
  if (tiles > 0x7fffffff) return "more than 2^31 - 1 tiles";
  const ForStmt* ring = nullptr;
  std::vector<int> tma_tiles;
  for (const Stmt& s : flatten_seq(k.body)) {
    const auto* f = s.as<ForStmt>();
    if (f && f->kind == ForKind::Pipelined && holds_tma_load(f->body)) {
      if (ring) return "two ring loops";
      ring = f;
      for (const Stmt& b : flatten_seq(f->body))
        if (const auto* t = b.as<TmaLoadStmt>())
          tma_tiles.push_back(t->dst.buffer->id);
        else if (holds_tma_load(b))
          return "a TMA load nested in the ring loop's statements";
      continue;
    }
    if (holds_tma_load(s)) return "a TMA load outside the ring loop";
  }
  if (!ring) return "no ring loop";
  if (!is_const_int(ring->min, 0)) return "the ring loop does not start at 0";
  if (!as_const_int(ring->extent) && !reads_only(ring->extent, k.block_vars, k.body))
    return "the ring loop's trip count reads more than the block indices, constants and tensors the kernel "
           "does not write";
  struct Shared : IRVisitor {
    std::vector<Buffer> buffers;
    bool tails = false;
    void visit_node(const DeclBuffer* op) override {
      if (op->buffer->scope == Scope::Shared) buffers.push_back(op->buffer);
      if (op->buffer->scope == Scope::Fragment && op->buffer->shared_tail > 0) tails = true;
    }
  } shared;
  shared.visit(k.body);
  if (shared.tails) return "a fragment keeps a tail in shared memory";
  // Other shared tiles only as destinations of whole copies from global memory at the kernel's
  // top level (attention's Q): order_shared_writes puts a block barrier before each such copy,
  // which now also orders it after the previous tile's reads (and place_gemm_waits retires the
  // gemms still reading the tile at that barrier).
  std::vector<int> loaded;
  for (const Stmt& s : flatten_seq(k.body))
    if (const auto* c = s.as<CopyStmt>();
        c && c->src.buffer->scope == Scope::Global && c->dst.buffer->scope == Scope::Shared)
      loaded.push_back(c->dst.buffer->id);
  struct SharedWrites : IRVisitor {
    std::vector<int> written;
    void visit_node(const CopyStmt* op) override {
      if (op->dst.buffer->scope == Scope::Shared) written.push_back(op->dst.buffer->id);
    }
    void visit_node(const FillStmt* op) override {
      if (op->dst.buffer->scope == Scope::Shared) written.push_back(op->dst.buffer->id);
    }
    void visit_node(const BufferStore* op) override {
      if (op->buffer->scope == Scope::Shared) written.push_back(op->buffer->id);
    }
  } writes;
  writes.visit(k.body);
  for (const Buffer& b : shared.buffers) {
    if (std::find(tma_tiles.begin(), tma_tiles.end(), b->id) != tma_tiles.end()) continue;
    const auto n = std::count(writes.written.begin(), writes.written.end(), b->id);
    if (n != 1 || std::find(loaded.begin(), loaded.end(), b->id) == loaded.end())
      return "shared buffer " + b->name +
             " is neither a ring tile nor one copy from global memory at the top level";
  }
  (void)ctx;
  return "";
}

}  // namespace

Stmt persist_tiles(const Stmt& body, PassContext& ctx) {
  // GEMM-shaped kernels (gemm_from_passes) or any ring under persistent_rings: other kernels keep
  // the launch shape they were measured with (attention asks per config).
  if (ctx.target.sm != 90 || !ctx.allow_tma || !ctx.allow_wgmma || ctx.hopper.selected) return body;
  if (!ctx.ring_epilogues()) {
    ctx.tile_loop.why_not = ctx.ring_epilogues_why_not();
    return body;
  }
  if (!ctx.allow_persistent_tiles) {
    ctx.tile_loop.why_not = "turned off (JitOptions::disable_persistent_tiles)";
    return body;
  }
  if (!ctx.allow_warp_specialization || !ctx.allow_async_pipeline) {
    ctx.tile_loop.why_not = "needs warp specialization and the asynchronous pipeline, which are turned off";
    return body;
  }
  if (ctx.cluster_split.applied) {
    ctx.tile_loop.why_not = "split_k_clusters split each tile's K loop over a cluster: one tile per CTA";
    return body;
  }
  const auto* k = body.as<KernelStmt>();
  if (!k) return body;
  std::int64_t sms = ctx.target.sms();
  if (ctx.max_persistent_ctas > 0) sms = std::min<std::int64_t>(sms, ctx.max_persistent_ctas);
  std::int64_t tiles = 0;
  if (std::string why = why_not(*k, ctx, tiles); !why.empty()) {
    ctx.tile_loop.why_not = why;
    return body;
  }
  const auto w = k->where;
  // Multicast clusters (multicast_cluster_loads: pairs of blocks along x, an even number of
  // tiles): an even number of blocks, so that the two blocks of a cluster (pid, pid + 1, pid
  // even) always hold the two tiles of one pair (t, t + 1) -- the same trip count of the tile
  // loop, and the tiles that share the multicast operand.
  if (ctx.cluster_multicast.applied) sms = std::max<std::int64_t>(2, sms - sms % 2);
  const std::int64_t P = std::min(tiles, sms);
  TESSEL_INTERNAL_CHECK(!ctx.cluster_multicast.applied || P % 2 == 0,
                        "persist_tiles: " << P << " blocks in 2-CTA clusters");
  std::vector<Stmt> decls, rest;
  int panel = 0;
  for (const Stmt& s : flatten_seq(k->body)) {
    if (const auto* d = s.as<DeclBuffer>(); d && d->buffer->scope == Scope::Shared)
      decls.push_back(s);
    else if (const auto* sw = s.as<SwizzleStmt>())
      panel = sw->panel_size;
    else
      rest.push_back(s);
  }
  Var pid("pid"), i("tile_i"), t("tile");
  // The author's block indices of tile t: x fastest (or the use_swizzle panel order on a 2-D
  // grid), then y, then z.
  std::vector<std::int64_t> g;
  for (const Expr& e : k->grid) g.push_back(*as_const_int(e));
  // A trip count that depends on the tile: the ring's position is carried across the tiles in
  // a Local scalar, zero before the first tile and bumped by the tile's trip count after the
  // tile's last statement (after the releases that follow the ring loop, which read it).
  const ForStmt* ring = ring_loop(*k);
  Buffer base;
  Expr trips_here;
  if (!as_const_int(ring->extent)) {
    base = Buffer::make("ring_base", {make_int(1)}, DType::i32, Scope::Local, w);
    decls.push_back(make_decl(base, w));
    decls.push_back(make_store(base, {make_int(0)}, make_int(0), w));
    const auto* mx = ring->extent.as<Binary>();
    trips_here = mx && mx->op == BinaryOp::Max && is_const_int(mx->b, 0)
                                ? ring->extent
                                : make_binary(BinaryOp::Max, ring->extent, make_int(0));
    rest.push_back(make_store(base, {make_int(0)}, add(make_load(base, {make_int(0)}), trips_here), w));
  }
  Stmt inner = make_seq(rest, w);
  const std::vector<Var>& bv = k->block_vars;
  if (bv.size() == 1) {
    inner = make_let(bv[0], t, inner, w);
  } else if (bv.size() == 2 && panel > 0 && panel < g[0]) {
    // use_swizzle(panel)'s order over the tiles (tessel::rasterize, block.cuh, in IR arithmetic:
    // every pass after this one -- the pipeline verifier evaluating a ring's trip count of the
    // block indices, the index widening -- reads it): the grid's columns in panels of `panel`,
    // the last one narrower, each walked row by row.
    Var first("panel_x"), in_panel("in_panel"), width("panel_width");
    inner = make_let(bv[0], add(first, make_binary(BinaryOp::Mod, in_panel, width)), inner, w);
    inner = make_let(bv[1], make_binary(BinaryOp::Div, in_panel, width), inner, w);
    inner = make_let(width, make_binary(BinaryOp::Min, sub(make_int(g[0]), first), make_int(panel)), inner, w);
    inner = make_let(in_panel, make_binary(BinaryOp::Mod, t, make_int(panel * g[1])), inner, w);
    inner = make_let(first, mul(make_binary(BinaryOp::Div, t, make_int(panel * g[1])), make_int(panel)), inner, w);
  } else {
    const Expr plane = make_int(g[0] * g[1]);
    if (bv.size() == 3) inner = make_let(bv[2], make_binary(BinaryOp::Div, t, plane), inner, w);
    const Expr in_plane = bv.size() == 3 ? make_binary(BinaryOp::Mod, t, plane) : t;
    inner = make_let(bv[1], make_binary(BinaryOp::Div, in_plane, make_int(g[0])), inner, w);
    inner = make_let(bv[0], make_binary(BinaryOp::Mod, in_plane, make_int(g[0])), inner, w);
  }
  Expr trips;
  if (!base.defined()) {
    // Tiles of equal work, round-robin: block pid takes pid, pid + P, ... below T, that is
    // ceildiv(T - pid, P) = (T - pid + P - 1) / P of them.
    inner = make_let(t, add(pid, mul(i, make_int(P))), inner, w);
    trips = make_binary(BinaryOp::Div, add(sub(make_int(tiles), pid), make_int(P - 1)), make_int(P));
  } else {
    // Tiles of unequal work (the ring's trip count depends on the tile: causal attention's
    // query blocks see 1 to n key blocks): round-robin would give the same blocks the long tiles
    // round after round wherever P and the grid's period share a factor (causal S = 1024: 8 query
    // blocks a head, P = 132 -- blocks pid = 0 mod 4 get the 8- and 4-block tiles, pid = 3 mod 4
    // the 5- and 1-block ones: 1.34x the mean on the slowest block). Serpentine instead: round r
    // goes left to right when r is even, right to left when odd, so a block that took a long
    // tile takes a short one next (within 3 % of the mean on the causal shapes, as
    // close as a greedy dynamic scheduler; docs/perf-notes.md, session 16). Each round is the
    // same P consecutive tiles as round-robin's, so what runs at once -- and shares the L2 -- is
    // unchanged.
    const Expr even = make_binary(BinaryOp::EQ, make_binary(BinaryOp::Mod, i, make_int(2)), make_int(0));
    inner = make_let(t, add(mul(i, make_int(P)), make_select(even, pid, sub(make_int(P - 1), pid))), inner, w);
    // Rounds: T / P whole ones, and in the last, partial one (rem tiles) the blocks it reaches:
    // the first rem from the left when that round is even, the last rem when odd.
    const std::int64_t full = tiles / P, rem = tiles % P;
    trips = make_int(full);
    if (rem > 0) {
      const Expr reached = full % 2 == 0 ? make_binary(BinaryOp::LT, pid, make_int(rem))
                                         : make_binary(BinaryOp::GE, pid, make_int(P - rem));
      trips = add(make_int(full), make_select(reached, make_int(1), make_int(0)));
    }
  }
  decls.push_back(make_for(i, make_int(0), trips, ForKind::Tiles, 0, inner, w));
  ctx.grid = {make_int(P)};
  ctx.block_vars = {pid};
  ctx.tile_loop = {true, i, tiles, P, panel, base, trips_here, ""};
  return make_kernel({make_int(P)}, k->threads, {pid}, make_seq(decls, w), w);
}

}  // namespace tessel::passes
