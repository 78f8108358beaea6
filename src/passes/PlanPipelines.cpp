// plan_pipelines
//   Does:     software-pipelines each Pipelined loop over num_stages shared buffers. The
//             loop's global->shared copies (producers) for iteration k + S - 1 are issued while
//             iteration k computes (consumers), as cp.async groups:
//               for s in [0, S-1): if s < n: producers(s) into stage s; commit
//               for k in [0, n):   wait(S-2); barrier; if k+S-1 < n: producers(k+S-1) into
//                                  stage (k+S-1)%S; commit; consumers(k) on stage k%S
//               wait(0); barrier
//             The barrier at the top of iteration k both publishes tile k and proves every
//             thread finished reading the stage that the next copy overwrites (k-1's).
//             Each shared buffer a producer writes becomes [S, ...shape] and every use of it in
//             the loop points at one stage -- except a copy whose global rows provably start
//             off 16 bytes in a loop that keeps this generic schedule (not gemm_mainloop): it
//             becomes a realigned ring (its stages hold raw aligned words, copied by
//             copy_words_to_shared; the tile keeps one stage, written at the top of each
//             iteration by realign_words_to_shared and published by a second barrier before
//             the consumers; see RawRing), where shared memory allows.
//             A loop whose loads are TMA loads becomes an
//             mbarrier ring (see tma_ring). A Pipelined loop with nothing to overlap (no
//             producer, or one stage) becomes a Serial loop.
//             Shared-memory writes outside these loops were ordered by order_shared_writes; the
//             barriers here are plain (insert_proxy_fences adds the async-proxy fence in wgmma
//             kernels).
//   Requires: verify_program, infer_layouts (layouts are copied to the multi-buffered tiles),
//             order_shared_writes.
//   Ensures:  no ForStmt of kind Pipelined remains; every stage a producer overwrites is
//             ordered by a barrier or the ring's mbarriers against its readers.
#include <algorithm>
#include <map>

#include "ops/Lowering.hpp"
#include "ops/TileOp.hpp"
#include "passes/GlobalRegions.hpp"
#include "passes/PassUtil.hpp"
#include "passes/Passes.hpp"
#include "tessel/ir/Mutator.hpp"
#include "tessel/ir/Printer.hpp"

namespace tessel::passes {

using namespace ir;

namespace {

using ops::is_global_to_shared_copy;
using ops::is_shared_write;

// Points a region of an old single-stage buffer at `stage` of its multi-buffered replacement.
Region at_stage(const Region& r, const Buffer& staged, const Expr& stage) {
  Region out{staged, {stage}, {make_int(1)}};
  out.starts.insert(out.starts.end(), r.starts.begin(), r.starts.end());
  out.extents.insert(out.extents.end(), r.extents.begin(), r.extents.end());
  return out;
}

// Rewrites every tile-op operand that names a staged buffer to name one stage of it.
class StageRewriter : public IRMutator {
 public:
  StageRewriter(const std::map<int, Buffer>& staged, Expr stage)
      : staged_(staged), stage_(std::move(stage)) {}

 protected:
  Region restage(const Region& r) {
    auto it = staged_.find(r.buffer->id);
    return it == staged_.end() ? r : at_stage(r, it->second, stage_);
  }
  Stmt mutate_node(const CopyStmt* op, const Stmt&) override {
    return make_copy(restage(op->src), restage(op->dst), op->pad, op->where, op->row_window);
  }
  Stmt mutate_node(const GemmStmt* op, const Stmt&) override {
    return make_gemm(restage(op->A), restage(op->B), restage(op->C), op->trans_a, op->trans_b, op->policy,
                     op->where);
  }
  Buffer mutate_buffer(const Buffer& b) override {
    if (staged_.count(b->id))
      TESSEL_USER_ERROR("Pipelined", b->where,
                        b->name << " is filled by a copy in a Pipelined loop and read "
                                << "element-wise in it; pass it to gemm/copy instead, or use "
                                << "a Serial loop");
    return b;
  }

 private:
  const std::map<int, Buffer>& staged_;
  Expr stage_;
};

class PipelinePlanner : public IRMutator {
 public:
  explicit PipelinePlanner(PassContext& ctx) : ctx_(ctx) {}

  // Multi-buffered replacements, by the id of the buffer they replace.
  std::map<int, Buffer> staged;
  // The raw-word rings declared beside their (single-stage) tiles, by the tile's buffer id.
  std::map<int, Buffer> raw_words;

 protected:
  Stmt mutate_node(const ForStmt* op, const Stmt& self) override {
    if (op->kind != ForKind::Pipelined) {
      ++loop_depth_;
      const bool tiles = op->kind == ForKind::Tiles;
      if (tiles) tile_loop_ = op;
      Stmt s = IRMutator::mutate_node(op, self);
      if (tiles) tile_loop_ = nullptr;
      --loop_depth_;
      return s;
    }
    std::vector<Stmt> body =
        op->body.as<SeqStmt>() ? op->body.as<SeqStmt>()->stmts : std::vector<Stmt>{op->body};
    std::vector<Stmt> producers, consumers;
    for (const Stmt& s : body)
      (is_global_to_shared_copy(s) || s.as<TmaLoadStmt>() ? producers : consumers).push_back(s);
    int S = op->num_stages;
    auto w = op->where;
    if (!producers.empty() && producers[0].as<TmaLoadStmt>()) return tma_ring(op, producers, consumers);
    if (producers.empty() || S == 1) {
      // Nothing to overlap: a plain loop (order_shared_writes ordered its shared writes).
      ++loop_depth_;
      Stmt inner = mutate(op->body);
      --loop_depth_;
      return make_for(op->var, op->min, op->extent, ForKind::Serial, 0, inner, w);
    }
    std::map<int, RawRing> raw;
    std::map<int, Buffer> local;
    for (const Stmt& p : producers) {
      const Buffer& b = p.as<CopyStmt>()->dst.buffer;
      if (local.count(b->id)) continue;
      std::vector<Expr> shape{make_int(S)};
      shape.insert(shape.end(), b->shape.begin(), b->shape.end());
      Buffer nb = Buffer::make(b->name, shape, b->dtype, Scope::Shared, b->where);
      ctx_.shared_layouts[nb->id] = ctx_.shared_layouts.at(b->id);
      local[b->id] = nb;
      staged[b->id] = nb;
    }
    for (const Stmt& c : consumers)
      if (is_shared_write(c))
        TESSEL_USER_ERROR("Pipelined", c->where,
                          "this loop also writes shared memory outside its global->shared "
                          "copies; only global->shared copies can be pipelined");
    const Expr n = op->extent;
    const Var& k = op->var;
    // The producers for tile `iter` into ring stage `stage`.
    auto issue_at = [&](const Expr& iter, const Expr& stage) {
      std::vector<Stmt> out;
      for (const Stmt& p : producers) {
        Stmt at = substitute(p, {{k, iter}});
        const auto* c = at.as<CopyStmt>();
        auto r = raw.find(c->dst.buffer->id);
        out.push_back(r == raw.end() ? StageRewriter(local, stage).mutate(at)
                                     : copy_words(c, r->second, stage));
      }
      return make_seq(out, w);
    };
    auto issue = [&](const Expr& iter) {
      return issue_at(iter, make_binary(BinaryOp::Mod, iter, make_int(S)));
    };
    if (Stmt fused = gemm_mainloop(op, consumers, local, issue_at); fused.defined()) return fused;
    // The generic schedule: tiles whose rows provably start off 16 bytes go through realigned
    // rings (their stages hold raw words, the tile itself one stage) where shared memory allows.
    for (const Stmt& p : producers)
      if (std::optional<RawRing> r = realigned_ring(p.as<CopyStmt>(), producers, S)) raw[r->tile->id] = *r;
    if (!raw.empty()) {
      const std::int64_t extra = raw_rings_extra_bytes(raw, S);
      if (kernel_shared_bytes_ + extra +
              1024 * (kernel_shared_buffers_ + static_cast<std::int64_t>(raw.size())) <=
          ctx_.target.smem_cap) {
        // A later loop of the same kernel counts these rings too.
        kernel_shared_bytes_ += extra;
        kernel_shared_buffers_ += static_cast<std::int64_t>(raw.size());
      } else {
        raw.clear();
      }
    }
    for (const auto& [id, r] : raw) {
      local.erase(id);
      staged.erase(id);
      raw_words[id] = r.raw;
    }
    Var s("s");
    Stmt prologue = make_for(
        s, make_int(0), make_int(S - 1), ForKind::Unrolled, 0,
        make_seq({make_if(make_binary(BinaryOp::LT, s, n), issue(s), Stmt(), w), make_async_commit(w)}, w),
        w);
    Expr next = make_binary(BinaryOp::Add, k, make_int(S - 1));
    std::vector<Stmt> steady{make_async_wait(S - 2, w), barrier(w),
                             make_if(make_binary(BinaryOp::LT, next, n), issue(next), Stmt(), w),
                             make_async_commit(w)};
    Expr stage = make_binary(BinaryOp::Mod, k, make_int(S));
    // A realigned ring's tiles are written from their stage's words first, then published.
    if (!raw.empty()) {
      for (const Stmt& p : producers)
        if (auto r = raw.find(p.as<CopyStmt>()->dst.buffer->id); r != raw.end())
          steady.push_back(realign_words(p.as<CopyStmt>(), r->second, stage));
      steady.push_back(barrier(w));
    }
    for (const Stmt& c : consumers) steady.push_back(StageRewriter(local, stage).mutate(c));
    Stmt main = make_for(k, op->min, n, ForKind::Serial, 0, make_seq(steady, w), w);
    return make_seq({prologue, main, make_async_wait(0, w), barrier(w)}, w);
  }

 private:
  // __syncthreads (insert_proxy_fences fences it for the async proxy in wgmma kernels).
  static Stmt barrier(std::source_location w) { return make_barrier(w); }

  // A realigned ring: a copy whose global rows provably start off 16 bytes (a constant row
  // length that is not a multiple of 16 bytes: an odd K or N of a 16-bit GEMM) would take
  // copy_global_to_shared's realigned chunks, which wait for each load -- nothing of the ring
  // stays in flight while the loop computes. Instead the ring's S stages hold each tile row's
  // covering aligned 16-byte words (`raw`: [S, rows, cols + 16 bytes' elements], row-major),
  // copied by cp.async like any stage (tessel::copy_words_to_shared), and the tile keeps one
  // stage, written at the top of each iteration from its stage's words shifted into place
  // (tessel::realign_words_to_shared) and published by a second barrier before the consumers:
  //   wait(S-2); barrier; producers(k+S-1) -> raw[(k+S-1)%S]; commit;
  //   realign(raw[k%S] -> tile); barrier; consumers(k)
  // (the first barrier also proves every reader of iteration k-1's tile done). Needs 2- or
  // 4-byte elements of the same dtype on both sides, contiguous rows, whole 16-byte chunks in a
  // tile row and a tile of two or more rows that no other producer writes; off under
  // JitOptions::disable_realigned_rings.
  struct RawRing {
    Buffer tile, raw;
    std::int64_t rows = 0, cols = 0;
  };
  std::optional<RawRing> realigned_ring(const CopyStmt* c, const std::vector<Stmt>& producers, int S) {
    if (!ctx_.allow_realigned_rings || c->pad.defined() || c->row_window) return std::nullopt;
    const Buffer &g = c->src.buffer, &t = c->dst.buffer;
    const int elem = dtype_bytes(g->dtype);
    if (g->scope != Scope::Global || t->dtype != g->dtype || (elem != 2 && elem != 4)) return std::nullopt;
    std::optional<GlobalMatrix> m = global_matrix(c->src);
    if (!m || !is_const_int(m->col_stride, 1)) return std::nullopt;
    const std::optional<std::int64_t> ld = as_const_int(m->ld);
    const SharedLayout& layout = ctx_.shared_layouts.at(t->id);
    const std::int64_t rows = layout.rows, cols = layout.cols;
    if (!ld || rows < 2 || (cols * elem) % 16 != 0 || (*ld * elem) % 16 == 0 ||
        t.const_numel() != rows * cols)
      return std::nullopt;
    for (const Stmt& p : producers)
      if (p.as<CopyStmt>() != c && p.as<CopyStmt>()->dst.buffer.same_as(t)) return std::nullopt;
    RawRing r{t, Buffer(), rows, cols};
    const std::int64_t raw_cols = cols + 16 / elem;
    r.raw = Buffer::make(t->name + "_words", {make_int(S), make_int(rows), make_int(raw_cols)}, t->dtype,
                         Scope::Shared, t->where);
    ctx_.shared_layouts[r.raw->id] = SharedLayout::row_major(rows, raw_cols);
    return r;
  }
  // The shared bytes these rings add to the kernel: each ring's stages and its single-stage tile
  // in place of the tile's S stages. The loop takes them only if the kernel still fits the target
  // with them -- every shared buffer the kernel declares (a tile a Pipelined loop of S stages
  // fills counted S times, as plan_pipelines stages it; the rings of earlier loops), plus
  // plan_shared_memory's alignment (up to 1 KB a buffer); over the cap it keeps its staged tiles
  // and the synchronous realigned chunks, which fit wherever they did.
  static std::int64_t raw_rings_extra_bytes(const std::map<int, RawRing>& raw, int S) {
    std::int64_t bytes = 0;
    for (const auto& [id, r] : raw) {
      const std::int64_t e = dtype_bytes(r.tile->dtype);
      const std::int64_t raw_cols = *as_const_int(r.raw->shape[2]);
      bytes += e * (S * r.rows * raw_cols + r.rows * r.cols - S * r.rows * r.cols);
    }
    return bytes;
  }
  // The element offset of `stage` in a raw ring.
  static Expr raw_stage_offset(const RawRing& r, const Expr& stage) {
    return mul(i64(stage), make_int(r.rows * *as_const_int(r.raw->shape[2])));
  }
  // The asynchronous half: copy's words into `stage` of the raw ring.
  Stmt copy_words(const CopyStmt* c, const RawRing& r, const Expr& stage) const {
    const GlobalMatrix m = *global_matrix(c->src);
    std::vector<DeviceCallArg> args{{Expr(), r.raw, raw_stage_offset(r, stage)},
                                    {Expr(), c->src.buffer, m.offset},
                                    {i64(m.ld), Buffer(), Expr()},
                                    {m.rows_valid, Buffer(), Expr()},
                                    {m.cols_valid, Buffer(), Expr()}};
    return make_device_call("tessel::copy_words_to_shared",
                            {ops::dtype_cuda(r.tile->dtype), std::to_string(r.rows), std::to_string(r.cols),
                             std::to_string(ctx_.threads)},
                            args, c->where);
  }
  // The synchronous half: the tile from `stage`'s words, each row shifted by its start's offset.
  Stmt realign_words(const CopyStmt* c, const RawRing& r, const Expr& stage) const {
    const GlobalMatrix m = *global_matrix(c->src);
    std::vector<DeviceCallArg> args{{Expr(), r.tile, linear_offset(c->dst)},
                                    {Expr(), r.raw, raw_stage_offset(r, stage)},
                                    {Expr(), c->src.buffer, m.offset},
                                    {i64(m.ld), Buffer(), Expr()}};
    return make_device_call("tessel::realign_words_to_shared",
                            {ops::dtype_cuda(r.tile->dtype), std::to_string(r.rows), std::to_string(r.cols),
                             ctx_.shared_layouts.at(r.tile->id).device_type(), std::to_string(ctx_.threads)},
                            args, c->where);
  }

  // A loop whose only compute is one gemm on the staged tiles becomes tessel::gemm_mainloop
  // (device/tessel/mainloop.cuh), which carries the gemm's register fragments across tiles so
  // that the next tile's first loads overlap the current tile's last mmas; the copies go in as
  // a lambda of (tile, stage). Anything else keeps the generic schedule.
  template <class IssueAt>
  Stmt gemm_mainloop(const ForStmt* op, const std::vector<Stmt>& consumers,
                     const std::map<int, Buffer>& local, IssueAt&& issue_at) {
    if (consumers.size() != 1 || !is_const_int(op->min, 0)) return Stmt();
    const auto* g = consumers[0].as<GemmStmt>();
    if (!g || !local.count(g->A.buffer->id) || !local.count(g->B.buffer->id) || local.size() != 2)
      return Stmt();
    auto layout = ctx_.fragment_layouts.find(g->C.buffer->id);
    if (layout == ctx_.fragment_layouts.end() || layout->second.kind != FragmentLayout::Kind::GemmAccumulator)
      return Stmt();
    // gemm_mainloop carries BlockGemm's ldmatrix fragments; a WarpgroupGemm has none.
    if (layout->second.wgmma) return Stmt();
    // Small warp tiles gain nothing from carrying fragments across tiles (and ptxas spilled
    // the 32x32-per-warp case on sm_80); they keep the generic schedule.
    if (layout->second.per_thread < kGemmMainloopMinAccumulators) return Stmt();
    const Buffer& a = local.at(g->A.buffer->id);
    const Buffer& b = local.at(g->B.buffer->id);
    Var tile("k_tile"), stage("stage");
    std::vector<DeviceCallArg> args{{op->extent, Buffer(), Expr()},
                                    {Expr(), a, Expr()},
                                    {Expr(), b, Expr()},
                                    {make_int(g->A.buffer.const_numel()), Buffer(), Expr()},
                                    {make_int(g->B.buffer.const_numel()), Buffer(), Expr()},
                                    {Expr(), g->C.buffer, Expr()},
                                    {Expr(), Buffer(), Expr(), {tile, stage}, issue_at(tile, stage)}};
    ctx_.epilogue_scratch[g->C.buffer->id] = PassContext::EpilogueScratch{a, b};
    return make_device_call("tessel::gemm_mainloop",
                            {layout->second.gemm.device_type(), std::to_string(op->num_stages)}, args,
                            g->where);
  }

  // A loop whose loads are TMA loads (plan_tma_copies) becomes a ring of S stages per loaded
  // tile, each stage with a `full` mbarrier (the producer's arrive_expect_tx plus the TMA's
  // bytes complete it) and an `empty` one (every consumer warp arrives once it is done with the
  // stage). The producer -- one thread, or a warpgroup of its own after specialize_warps --
  // issues iteration it = k + S - 1 into stage it % S after waiting that stage's empty barrier
  // for the phase of iteration it - S (parity ((it / S) & 1) ^ 1: the first pass over the ring
  // waits on the phase before phase 0, which has completed). The consumers wait a tile's full
  // barrier (parity (k / S) & 1) right before the first statement that reads it and release its
  // stage right after the last:
  //   producer { for s in [0, S-1): if s < n: expect_tx(full[s]); tma(tile s -> stage s) }
  //   for k in [0, n):
  //     producer { if k+S-1 < n: wait(empty[st], ...); expect_tx(full[st]); tma(...) }
  //     ... wait(full[k%S], (k/S)&1); readers of the tile; warp_arrive(empty[k%S]) ...
  // Inside a persistent kernel's tile loop (persist_tiles; i its variable, n the ring loop's
  // constant trip count) the ring runs on across the block's tiles: iteration k of tile i is
  // ring iteration it = i * n + k (or ring_base[0] + k, when n depends on the tile and
  // persist_tiles carries the position in ctx.tile_loop.base), its stage it % S and its
  // phases (it / S) & 1, and the
  // producer has no prologue -- it waits for every stage's release, the first S of the block
  // included (they pass at once), so that specialize_warps' producer warps run ahead into the
  // next tile as far as the ring's free stages allow:
  //   for k in [0, n):
  //     producer { wait(empty[it%S], ((it/S)&1)^1); expect_tx(full[it%S]); tma(tile k) }
  //     ... wait(full[it%S], (it/S)&1); readers; warp_arrive(empty[it%S]) ...
  Stmt tma_ring(const ForStmt* op, const std::vector<Stmt>& producers, const std::vector<Stmt>& consumers) {
    const int S = op->num_stages;
    auto w = op->where;
    TESSEL_INTERNAL_CHECK(is_const_int(op->min, 0), "a TMA ring over a loop that does not start at 0");
    struct Tile {
      Buffer old, staged;
      std::vector<const TmaLoadStmt*> loads;
      std::int64_t bytes = 0;
    };
    std::vector<Tile> tiles;
    for (const Stmt& p : producers) {
      const auto* t = p.as<TmaLoadStmt>();
      TESSEL_INTERNAL_CHECK(t != nullptr, "a TMA ring with a producer that is not a TMA load");
      const Buffer& b = t->dst.buffer;
      auto it = std::find_if(tiles.begin(), tiles.end(), [&](const Tile& x) { return x.old.same_as(b); });
      if (it == tiles.end()) {
        Tile x;
        x.old = b;
        std::vector<Expr> shape{make_int(S)};
        shape.insert(shape.end(), b->shape.begin(), b->shape.end());
        x.staged = Buffer::make(b->name, shape, b->dtype, Scope::Shared, b->where);
        ctx_.shared_layouts[x.staged->id] = ctx_.shared_layouts.at(b->id);
        staged[b->id] = x.staged;
        tiles.push_back(x);
        it = tiles.end() - 1;
      }
      it->loads.push_back(t);
      std::int64_t n = dtype_bytes(b->dtype);
      for (const Expr& e : t->dst.extents) n *= *as_const_int(e);
      it->bytes += n;
    }
    for (const Stmt& c : consumers)
      if (is_shared_write(c))
        TESSEL_USER_ERROR("Pipelined", c->where,
                          "this loop also writes shared memory outside its global->shared "
                          "copies; only global->shared copies can be pipelined");
    std::map<int, Buffer> local;
    for (const Tile& t : tiles) local[t.old->id] = t.staged;
    const Expr n = op->extent;
    const Var& k = op->var;
    const Expr Sx = make_int(S);
    // The ring iteration of loop iteration `iter`: itself, or counted over a persistent block's
    // tiles.
    const bool persistent = tile_loop_ != nullptr;
    const Buffer& base = ctx_.tile_loop.base;
    if (persistent && !base.defined())
      TESSEL_INTERNAL_CHECK(as_const_int(n).has_value(), "a persistent ring loop with a trip count "
                                                             << to_string(n) << " that is not constant");
    auto ring_iter = [&](const Expr& iter) {
      if (!persistent) return iter;
      if (base.defined()) return make_binary(BinaryOp::Add, make_load(base, {make_int(0)}), iter);
      return make_binary(BinaryOp::Add, make_binary(BinaryOp::Mul, tile_loop_->var, n), iter);
    };
    const Expr stage = make_binary(BinaryOp::Mod, ring_iter(k), Sx);
    const Expr parity = make_binary(BinaryOp::Mod, make_binary(BinaryOp::Div, ring_iter(k), Sx), make_int(2));
    std::vector<Stmt> body;
    for (const Stmt& c : consumers) body.push_back(StageRewriter(local, stage).mutate(c));

    // Tiles read first and last by the same statements share one barrier pair: one wait on
    // `full` for all their bytes, one release of their stages (the tutorial GEMM's A and B, both
    // read by its gemm). Tiles nothing reads stay alone.
    struct Group {
      std::vector<size_t> tiles;
      Buffer full, empty;
      std::int64_t bytes = 0;
      int cluster = 1;  // the CTAs whose producers fill its stages (multicast loads)
    };
    auto readers = [&](const Tile& t) {
      int first = -1, last = -1;
      for (int i = 0; i < static_cast<int>(body.size()); ++i)
        if (reads_buffer(body[static_cast<size_t>(i)], t.staged)) {
          if (first < 0) first = i;
          last = i;
        }
      return std::pair<int, int>{first, last};
    };
    std::vector<Group> groups;
    std::vector<std::pair<int, int>> group_readers;
    for (size_t i = 0; i < tiles.size(); ++i) {
      const std::pair<int, int> r = readers(tiles[i]);
      size_t g = 0;
      while (g < groups.size() && (r.first < 0 || group_readers[g] != r)) ++g;
      if (g == groups.size()) {
        groups.emplace_back();
        group_readers.push_back(r);
      }
      groups[g].tiles.push_back(i);
      groups[g].bytes += tiles[i].bytes;
      for (const TmaLoadStmt* l : tiles[i].loads)
        groups[g].cluster = std::max(groups[g].cluster, l->multicast);
    }
    // A stage that multicast loads fill (multicast_cluster_loads) is written by the producers of
    // every CTA of the cluster, each into every CTA: a producer may refill it only once the
    // consumers of all of them released it, so each consumer warp arrives on the stage's `empty`
    // barrier in every CTA. Its `full` barrier expects the whole stage's bytes, as always: the
    // shares of the other CTAs land in this one too.
    for (Group& g : groups) {
      const Tile& first = tiles[g.tiles[0]];
      std::vector<Buffer> released;
      for (size_t i : g.tiles) released.push_back(tiles[i].staged);
      g.full = mbarrier_array(first.old->name + "_full", S, 1, first.old->where);
      g.empty = mbarrier_array(first.old->name + "_empty", S, ctx_.threads / 32 * g.cluster, first.old->where,
                               released);
    }

    // The producer's work for iteration `iter` into stage `at`.
    auto issue = [&](const Expr& iter, const Expr& at, bool wait_empty) {
      std::vector<Stmt> out;
      for (const Group& g : groups) {
        if (wait_empty) {
          Expr empty_parity = make_binary(
              BinaryOp::Mod,
              make_binary(BinaryOp::Add, make_binary(BinaryOp::Div, ring_iter(iter), Sx), make_int(1)),
              make_int(2));
          out.push_back(make_mbarrier(MbarrierOp::Wait, g.empty, at, empty_parity, w));
        }
        out.push_back(make_mbarrier(MbarrierOp::ArriveExpectTx, g.full, at, make_int(g.bytes), w));
        for (size_t i : g.tiles)
          for (const TmaLoadStmt* l : tiles[i].loads) {
            Stmt moved = substitute(
                make_tma_load(l->src, l->dst, l->map, Buffer(), Expr(), l->where, l->multicast), {{k, iter}});
            const auto* sub = moved.as<TmaLoadStmt>();
            out.push_back(make_tma_load(sub->src, at_stage(sub->dst, tiles[i].staged, at), sub->map, g.full,
                                        at, l->where, l->multicast));
          }
      }
      return make_seq(out, w);
    };
    Var s("s");
    Stmt prologue;
    std::vector<Stmt> steady;
    if (persistent) {
      steady.push_back(make_producer(issue(k, stage, true), w));
    } else {
      prologue =
          make_producer(make_for(s, make_int(0), make_int(S - 1), ForKind::Unrolled, 0,
                                 make_if(make_binary(BinaryOp::LT, s, n), issue(s, s, false), Stmt(), w), w),
                        w);
      Expr next = make_binary(BinaryOp::Add, k, make_int(S - 1));
      steady.push_back(
          make_producer(make_if(make_binary(BinaryOp::LT, next, n),
                                issue(next, make_binary(BinaryOp::Mod, next, Sx), true), Stmt(), w),
                        w));
    }
    // Each group's wait before its first reader, its release after its last.
    for (const Group& g : groups) {
      int first = -1, last = -1;
      for (size_t i : g.tiles) {
        const auto [f, l] = readers(tiles[i]);
        if (f >= 0 && (first < 0 || f < first)) first = f;
        last = std::max(last, l);
      }
      Stmt wait = make_mbarrier(MbarrierOp::Wait, g.full, stage, parity, w);
      Stmt release = make_mbarrier(MbarrierOp::WarpArrive, g.empty, stage,
                                   g.cluster > 1 ? make_int(g.cluster) : Expr(), w);
      if (first < 0) {
        body.push_back(wait);
        body.push_back(release);
        continue;
      }
      body.insert(body.begin() + last + 1, release);
      body.insert(body.begin() + first, wait);
    }
    steady.insert(steady.end(), body.begin(), body.end());
    Stmt main = make_for(k, op->min, n, ForKind::Serial, 0, make_seq(steady, w), w);
    return prologue.defined() ? make_seq({prologue, main}, w) : main;
  }

  static bool reads_buffer(const Stmt& s, const Buffer& b) {
    struct Finder : IRVisitor {
      int id;
      bool found = false;
      void visit_buffer(const Buffer& x) override { found = found || x->id == id; }
    } f;
    f.id = b->id;
    f.visit(s);
    return f.found;
  }

  Buffer mbarrier_array(const std::string& name, int n, int count, std::source_location w,
                        std::vector<Buffer> releases = {}) {
    Buffer b = Buffer::make(name, {make_int(n)}, DType::i64, Scope::Shared, w);
    ctx_.shared_layouts[b->id] = SharedLayout::row_major(1, n);
    ctx_.mbarriers.push_back(MbarrierArray{b, count, releases});
    return b;
  }

  PassContext& ctx_;
  int loop_depth_ = 0;

 public:
  // The kernel's shared bytes before any realigned ring (set by plan_pipelines before planning).
  std::int64_t kernel_shared_bytes_ = 0, kernel_shared_buffers_ = 0;

 private:
  const ForStmt* tile_loop_ = nullptr;  // the persistent kernel's loop over tiles, when inside it
};

// Replaces the declarations of staged buffers by their multi-buffered versions and checks
// that nothing outside the pipelined loop still names the single-stage buffer.
class DeclRewriter : public IRMutator {
 public:
  DeclRewriter(const std::map<int, Buffer>& staged, const std::map<int, Buffer>& raw_words)
      : staged_(staged), raw_words_(raw_words) {}

 protected:
  Stmt mutate_node(const DeclBuffer* op, const Stmt& self) override {
    if (auto r = raw_words_.find(op->buffer->id); r != raw_words_.end())
      return make_seq({self, make_decl(r->second, op->where)}, op->where);
    auto it = staged_.find(op->buffer->id);
    return it == staged_.end() ? self : make_decl(it->second, op->where);
  }
  // A cluster_reduce after the loop (split_k_clusters) takes the drained ring, all its stages,
  // for its scratch: the loop's readers are done with it by then (a receiver's threads arrive on
  // their sender's hand-off barrier only after their gemms completed).
  Stmt mutate_node(const ClusterReduceStmt* op, const Stmt& self) override {
    auto it = staged_.find(op->scratch->id);
    if (it == staged_.end()) return IRMutator::mutate_node(op, self);
    return make_cluster_reduce(op->acc, it->second, op->bars, mutate(op->rank), op->ranks, op->where);
  }
  Buffer mutate_buffer(const Buffer& b) override {
    if (staged_.count(b->id))
      TESSEL_USER_ERROR("Pipelined", b->where,
                        b->name << " is filled in a Pipelined loop and also used outside it; "
                                << "after the loop its contents are undefined — copy what you "
                                << "need into another buffer inside the loop");
    return b;
  }

 private:
  const std::map<int, Buffer>& staged_;
  const std::map<int, Buffer>& raw_words_;
};

}  // namespace

// Declares the rings' mbarrier arrays first thing in the kernel (insert_barriers initializes
// them there).
class MbarrierDecls : public IRMutator {
 public:
  explicit MbarrierDecls(const std::vector<MbarrierArray>& a) : arrays_(a) {}

 protected:
  Stmt mutate_node(const KernelStmt* op, const Stmt&) override {
    std::vector<Stmt> body;
    for (const MbarrierArray& a : arrays_) body.push_back(make_decl(a.bars, op->where));
    body.push_back(op->body);
    return make_kernel(op->grid, op->threads, op->block_vars, make_seq(body, op->where), op->where);
  }

 private:
  const std::vector<MbarrierArray>& arrays_;
};

// The shared bytes plan_pipelines' staged tiles make a kernel take, before any realigned ring:
// each shared buffer once, a tile a Pipelined loop of two or more stages fills (by a cp.async
// copy or a TMA load) num_stages times.
class SharedBytes : public IRVisitor {
 public:
  std::int64_t bytes = 0, buffers = 0;
  void visit_node(const ForStmt* op) override {
    if (op->kind == ForKind::Pipelined && op->num_stages > 1) {
      std::vector<Stmt> body =
          op->body.as<SeqStmt>() ? op->body.as<SeqStmt>()->stmts : std::vector<Stmt>{op->body};
      for (const Stmt& s : body) {
        if (const auto* c = s.as<CopyStmt>(); c && is_global_to_shared_copy(s))
          stages[c->dst.buffer->id] = op->num_stages;
        if (const auto* t = s.as<TmaLoadStmt>()) stages[t->dst.buffer->id] = op->num_stages;
      }
    }
    IRVisitor::visit_node(op);
  }
  void visit_node(const DeclBuffer* op) override {
    if (op->buffer->scope == Scope::Shared) decls.push_back(op->buffer);
    IRVisitor::visit_node(op);
  }
  void finish() {
    for (const Buffer& b : decls) {
      auto it = stages.find(b->id);
      bytes += static_cast<std::int64_t>(dtype_bytes(b->dtype)) * b.const_numel() *
               (it == stages.end() ? 1 : it->second);
      ++buffers;
    }
  }

 private:
  std::map<int, int> stages;
  std::vector<Buffer> decls;
};

Stmt plan_pipelines(const Stmt& body, PassContext& ctx) {
  PipelinePlanner planner(ctx);
  SharedBytes shared;
  shared.visit(body);
  shared.finish();
  planner.kernel_shared_bytes_ = shared.bytes;
  planner.kernel_shared_buffers_ = shared.buffers;
  Stmt out = planner.mutate(body);
  if (planner.staged.empty() && planner.raw_words.empty()) return out;
  out = DeclRewriter(planner.staged, planner.raw_words).mutate(out);
  if (!ctx.mbarriers.empty()) out = MbarrierDecls(ctx.mbarriers).mutate(out);
  return out;
}

}  // namespace tessel::passes
