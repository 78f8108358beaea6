// infer_layouts
//   Does:     picks how every fragment is spread over threads and how every shared tile is laid
//             out, and which instruction each gemm uses. gemm fixes the strictest layouts: its
//             accumulator gets the accumulator layout (gemm.cuh AccumulatorLayout) of the warp
//             partition its policy chooses, its shared operands the swizzled layout ldmatrix
//             reads without bank conflicts, and an A operand held in registers (a fragment) the
//             accumulator layout of its [BM, BK] tile, whose registers are the mma A fragments.
//             On sm_90a a gemm whose warps can stack 16 rows each along M (64 per warpgroup)
//             and whose N a wgmma shape covers lowers to WarpgroupGemm instead -- unless it is
//             the sole compute of a Pipelined loop that fills both its operands, which
//             plan_pipelines makes BlockGemm's gemm_mainloop (measured faster): its accumulator
//             layout is the same kind, its shared operands get the 128/64/32-byte swizzled
//             layouts its descriptors read (hopper_layout.cuh). A gemm whose accumulator
//             becomes a register A operand or is reduced along its rows (through Parallel
//             nests or fragment copies), and a register-A gemm itself, split warps along M
//             only. Fragments computed element by element from (or copied from) such tiles
//             take their layout; a row reduction of a gemm tile gives an AccumulatorRows
//             vector, and 1-D fragments beside row vectors or row-split gemm tiles take the
//             row layout; the rest: 2-D tiles row-blocked, others strided; every other shared
//             tile row-major.
//             Rejects gemm tiles that do not divide the mma.sync m16n8k16 instruction shape.
//             What an op decides itself is the op's (TileOp::infer_layouts, ops/Layouts.hpp),
//             called here with what the scans below found: at the Strict level gemm's choices
//             (instruction, warp split, accumulator, operand tiles, a register A operand,
//             ops/Gemm.cpp) and the copies' vector width (ops/Copy.cpp); at the Common level,
//             after the propagation from gemm tiles and the row-blocking of 2-D tiles, the
//             reductions' results (ops/Reduce.cpp). This pass propagates the rest and sets the
//             defaults.
//   Requires: verify_program (regions have extents; gemm operands are checked for scope/dtype).
//   Ensures:  ctx.fragment_layouts has every fragment, ctx.shared_layouts every shared buffer;
//             ctx.uses_wgmma when some gemm lowers to WarpgroupGemm; ctx.gemm_ring when a
//             Pipelined loop's sole gemm takes wgmma on a TMA ring (under gemm_from_passes: the
//             kernels persist_tiles, plan_tma_stores, split_k_clusters and multicast_cluster_loads
//             take without JitOptions::persistent_rings).
#include <numeric>
#include <optional>
#include <set>

#include "ops/Layouts.hpp"
#include "ops/TileOp.hpp"
#include "passes/FragmentCoordinates.hpp"
#include "passes/PassUtil.hpp"
#include "passes/Passes.hpp"
#include "tessel/ir/Mutator.hpp"
#include "tessel/ir/Printer.hpp"

namespace tessel::passes {

using namespace ir;

namespace {

// The tiles whose rows must stay within one warp: the A operand of a gemm held in registers and
// the sources of row reductions, and whatever Parallel nests and fragment copies link to them
// element by element. A gemm whose accumulator is among them splits its warps along M alone (a
// register-A gemm needs whole rows of A per warp; a row reduction of a gemm tile runs within a
// warp's quads).
class RowOperandScan : public IRVisitor {
 public:
  std::set<int> closure() const { return closure_of(operands_); }
  // The tiles that keep one warp layout with other gemms' operands or tiles: the closure of the
  // register A operands alone (no reductions) -- the accumulators that become a later gemm's
  // register operand -- and every gemm accumulator linked element by element with another's.
  std::set<int> shared_layout_tiles() const {
    std::set<int> out = closure_of(register_operands_);
    for (int acc : accumulators_) {
      const std::set<int> linked = closure_of({acc});
      for (int other : accumulators_)
        if (other != acc && linked.count(other)) out.insert(acc);
    }
    return out;
  }
  // The fragments that move element by element into each other: each outermost Parallel nest's,
  // each fragment-to-fragment copy's two. Layout inference propagates layouts along them.
  const std::vector<std::vector<Buffer>>& links() const { return links_; }

 protected:
  void visit_node(const GemmStmt* op) override {
    accumulators_.insert(op->C.buffer->id);
    if (op->A.buffer->scope != Scope::Fragment) return;
    operands_.insert(op->A.buffer->id);
    register_operands_.insert(op->A.buffer->id);
  }
  void visit_node(const ReduceStmt* op) override {
    if (op->src->scope == Scope::Fragment && op->dim == 1) operands_.insert(op->src->id);
  }
  void visit_node(const CopyStmt* op) override {
    if (op->src.buffer->scope == Scope::Fragment && op->dst.buffer->scope == Scope::Fragment)
      links_.push_back({op->src.buffer, op->dst.buffer});
  }
  void visit_node(const ForStmt* op) override {
    if (op->kind == ForKind::Parallel && !in_nest_) {
      links_.push_back(fragments_used(op->body));
      in_nest_ = true;
      IRVisitor::visit_node(op);
      in_nest_ = false;
      return;
    }
    IRVisitor::visit_node(op);
  }

 private:
  std::set<int> closure_of(std::set<int> out) const {
    for (bool changed = true; changed;) {
      changed = false;
      for (const auto& group : links_) {
        bool touches = false;
        for (const Buffer& b : group) touches = touches || out.count(b->id);
        if (!touches) continue;
        for (const Buffer& b : group)
          if (b.ndim() == 2 && out.insert(b->id).second) changed = true;
      }
    }
    return out;
  }

  std::set<int> operands_, register_operands_, accumulators_;
  std::vector<std::vector<Buffer>> links_;
  bool in_nest_ = false;
};

// The gemms plan_pipelines hands to gemm_mainloop: the only compute of a Pipelined loop (S > 1)
// whose copies fill both operands. BlockGemm's pipeline there carries fragments across K tiles;
// a WarpgroupGemm waits for its wgmmas at every tile, and measured 0.67x of it (H200, the plain
// GEMM at 128x256x32 t256, docs/perf-notes.md session 7), so those stay on mma.sync -- except,
// under JitOptions::gemm_from_passes on sm_90a, a loop whose copies can all be TMA loads into
// the wgmma layouts: plan_tma_copies makes it an mbarrier ring that a producer warpgroup fills
// and place_gemm_waits keeps one wgmma group in flight across tiles, so its gemm takes wgmma.
class MainLoopGemmScan : public IRVisitor {
 public:
  explicit MainLoopGemmScan(const PassContext& ctx) : ctx_(ctx) {}
  std::set<const GemmStmt*> gemms;
  bool gemm_ring = false;  // a loop whose sole gemm becomes_tma_ring (PassContext::gemm_ring)

 protected:
  void visit_node(const ForStmt* op) override {
    if (op->kind == ForKind::Pipelined && op->num_stages > 1) {
      const std::vector<Stmt> body =
          op->body.as<SeqStmt>() ? op->body.as<SeqStmt>()->stmts : std::vector<Stmt>{op->body};
      std::set<int> filled;
      std::vector<const CopyStmt*> copies;
      std::vector<const GemmStmt*> gemm;
      bool other = false;
      for (const Stmt& st : body) {
        const auto* c = st.as<CopyStmt>();
        if (c && c->src.buffer->scope == Scope::Global && c->dst.buffer->scope == Scope::Shared) {
          filled.insert(c->dst.buffer->id);
          copies.push_back(c);
        } else if (const auto* g = st.as<GemmStmt>())
          gemm.push_back(g);
        else
          other = true;
      }
      if (!other && gemm.size() == 1 && filled.count(gemm[0]->A.buffer->id) &&
          filled.count(gemm[0]->B.buffer->id)) {
        if (becomes_tma_ring(*gemm[0], copies))
          gemm_ring = true;
        else
          gemms.insert(gemm[0]);
      }
    }
    ++depth_;
    IRVisitor::visit_node(op);
    --depth_;
  }

 private:
  // Under gemm_from_passes: whether plan_tma_copies will make this loop a TMA ring once the
  // gemm's operand tiles take the wgmma layouts (its conditions, asked ahead of time; a loop
  // inside another keeps cp.async).
  bool becomes_tma_ring(const GemmStmt& g, const std::vector<const CopyStmt*>& copies) const {
    if (!ctx_.gemm_from_passes || ctx_.target.sm != 90 || !ctx_.allow_tma || !ctx_.allow_wgmma ||
        !ctx_.allow_warp_specialization || !ctx_.allow_async_pipeline || depth_ > 0)
      return false;
    for (const CopyStmt* c : copies) {
      if (c->pad.defined()) return false;
      const bool is_a = c->dst.buffer.same_as(g.A.buffer);
      if (!is_a && !c->dst.buffer.same_as(g.B.buffer)) return false;
      const std::optional<SharedLayout> l = ops::wgmma_layout(c->dst.buffer, is_a ? !g.trans_a : g.trans_b);
      if (!l || !tma_box(c, *l)) return false;
    }
    return true;
  }

  const PassContext& ctx_;
  int depth_ = 0;
};

// The fragments a FlatRows layout cannot serve: gemm operands and accumulators, either side of a
// fragment-to-fragment copy, a fragment copied to or from anything but a global tensor or
// through copy_window, a fragment with a shared tail, and the source of a reduction along any
// dimension but 1 (flat_rows in LayoutInference adds the Parallel nests' constraint).
class FlatUseScan : public IRVisitor {
 public:
  std::set<int> barred;

 protected:
  void visit_node(const DeclBuffer* op) override {
    if (op->buffer->scope == Scope::Fragment && op->buffer->shared_tail > 0) barred.insert(op->buffer->id);
    IRVisitor::visit_node(op);
  }
  void visit_node(const GemmStmt* op) override {
    for (const Buffer& b : {op->A.buffer, op->B.buffer, op->C.buffer}) barred.insert(b->id);
  }
  void visit_node(const CopyStmt* op) override {
    const Buffer &s = op->src.buffer, &d = op->dst.buffer;
    const bool global = s->scope == Scope::Global || d->scope == Scope::Global;
    for (const Buffer& b : {s, d})
      if (b->scope == Scope::Fragment && (!global || op->row_window)) barred.insert(b->id);
  }
  void visit_node(const ReduceStmt* op) override {
    if (op->dim != 1) barred.insert(op->src->id);
  }
};

class LayoutInference : public IRVisitor {
 public:
  LayoutInference(PassContext& ctx, std::set<int> row_operand_tiles, std::set<int> shared_layout_tiles,
                  std::set<const GemmStmt*> main_loop_gemms, std::vector<std::vector<Buffer>> links)
      : ctx_(ctx),
        row_operand_tiles_(std::move(row_operand_tiles)),
        shared_layout_tiles_(std::move(shared_layout_tiles)),
        main_loop_gemms_(std::move(main_loop_gemms)),
        links_(std::move(links)),
        lc_{ctx_, row_operand_tiles_, shared_layout_tiles_, main_loop_gemms_} {}

 protected:
  void visit_node(const DeclBuffer* op) override {
    decls_.push_back(op->buffer);
    IRVisitor::visit_node(op);
  }

  void visit_node(const GemmStmt* op) override {
    ops::gemm_op().infer_layouts(*op, lc_, ops::LayoutLevel::Strict);
  }

  void visit_node(const CopyStmt* op) override {
    ops::copy_op().infer_layouts(*op, lc_, ops::LayoutLevel::Strict);
  }

  void visit_node(const ReduceStmt* op) override { reduces_.push_back(op); }

 public:
  void finish() {
    if (lc_.vec > 16) lc_.vec = 4;  // no fragment meets a global tensor: f32 vectors
    // A fragment computed element by element from a gemm accumulator (or a register A
    // operand), or copied from one, takes its layout: the work stays in each thread's
    // registers. Until nothing changes, so that chains (S -> scaled S -> P) follow.
    for (bool changed = true; changed;) {
      changed = false;
      for (const auto& group : links_) {
        const FragmentLayout* acc = nullptr;
        for (const Buffer& b : group)
          if (auto it = ctx_.fragment_layouts.find(b->id);
              it != ctx_.fragment_layouts.end() && it->second.kind == FragmentLayout::Kind::GemmAccumulator)
            acc = &it->second;
        if (!acc) continue;
        FragmentLayout follow = *acc;
        follow.wgmma = false;
        follow.gemm = acc->accumulator_layout(acc->shape[0], acc->shape[1]);
        for (const Buffer& b : group) {
          if (ctx_.fragment_layouts.count(b->id) || b.ndim() != 2 || b.const_shape() != acc->shape) continue;
          ctx_.fragment_layouts[b->id] = follow;
          changed = true;
        }
      }
    }
    // Strict: gemm accumulators (done). Common: 2-D tiles whose rows are not whole vectors get
    // the flat-rows layout where every use allows it, the others the row-blocked layout.
    const std::set<int> flat = flat_rows_tiles();
    for (const Buffer& b : decls_) {
      if (b->scope == Scope::Fragment && !ctx_.fragment_layouts.count(b->id) && b.ndim() == 2) {
        if (flat.count(b->id))
          ctx_.fragment_layouts[b->id] = *flat_rows(b.const_shape());
        else if (auto l = row_blocked(b.const_shape()))
          ctx_.fragment_layouts[b->id] = *l;
      }
      if (b->scope == Scope::Shared && !ctx_.shared_layouts.count(b->id))
        ops::set_shared_layout(ctx_, b, false);
    }
    // A reduction's result follows the rows of its source (the op's Common-level layouts).
    for (const ReduceStmt* r : reduces_) ops::reduce_op().infer_layouts(*r, lc_, ops::LayoutLevel::Common);
    // Free: a 1-D fragment used in a Parallel nest (or a copy) beside a row-blocked tile, a gemm
    // tile whose warps split M only, or a row vector of either takes that row layout (a running
    // max next to a reduction's result, say), until nothing changes; whatever is still free is
    // strided.
    for (bool changed = true; changed;) {
      changed = false;
      for (const auto& group : links_) {
        std::optional<FragmentLayout> rows;
        for (const Buffer& b : group) {
          auto it = ctx_.fragment_layouts.find(b->id);
          if (it == ctx_.fragment_layouts.end()) continue;
          if (auto r = ops::row_layout_of(it->second)) rows = r;
        }
        if (!rows) continue;
        for (const Buffer& b : group) {
          if (ctx_.fragment_layouts.count(b->id) || b.ndim() != 1 || b.const_shape()[0] != rows->shape[0])
            continue;
          ctx_.fragment_layouts[b->id] = *rows;
          changed = true;
        }
      }
    }
    for (const Buffer& b : decls_)
      if (b->scope == Scope::Fragment && !ctx_.fragment_layouts.count(b->id))
        ctx_.fragment_layouts[b->id] = ops::strided_layout(b, ctx_.threads);
  }

 private:
  // Rows over threads: as many lanes per row as the columns allow (whole vectors, a power of
  // two dividing the block), the remaining threads on further rows. Where that leaves rows that
  // do not divide evenly -- a block whose warps are not a power of two (11 warps: 352 threads) --
  // each row goes over all of the block's threads, one row a pass, when every thread gets whole
  // vectors of it: a row of 1025 vectors sits on 352 lanes x 3 vectors (3 % padding) where
  // powers of two give 256 x 5 (20 %).
  std::optional<FragmentLayout> row_blocked(const std::vector<std::int64_t>& shape) const {
    std::int64_t R = shape[0], C = shape[1];
    int vec = lc_.vec;
    while (vec > 1 && C % vec) vec /= 2;
    std::int64_t max_lanes = 1;
    while (max_lanes * 2 <= ctx_.threads && C % (max_lanes * 2 * vec) == 0) max_lanes *= 2;
    // Up to four vectors of a row per thread before the row spreads over more lanes (fewer
    // shuffle steps per element), up to a warp per row (reductions stay in shuffles); wider
    // only when the rows run out.
    std::int64_t target = 1;
    while (target * 2 <= C / (vec * 4)) target *= 2;
    std::int64_t lanes = std::min<std::int64_t>(std::min<std::int64_t>(max_lanes, 32), target);
    while (lanes < max_lanes && R % (ctx_.threads / lanes)) lanes *= 2;
    std::int64_t rows_per_pass = ctx_.threads / lanes;
    if (ctx_.threads % lanes || R % rows_per_pass) {
      const std::int64_t threads = ctx_.threads;
      if (threads % 32 != 0 || C % (threads * vec) != 0) return std::nullopt;
      lanes = threads, rows_per_pass = 1;
    }
    FragmentLayout f;
    f.kind = FragmentLayout::Kind::RowBlocked;
    f.shape = shape;
    f.vec = vec;
    f.lanes = static_cast<int>(lanes);
    f.rows_per_pass = static_cast<int>(rows_per_pass);
    f.chunks = static_cast<int>(C / (lanes * vec));
    f.per_thread = static_cast<int>(R / rows_per_pass) * f.chunks * vec;
    return f;
  }

  // Rows that are not whole 16-byte vectors of the global dtype (127 f16 columns) but whose
  // rows * cols elements are, as the contiguous run they are in a row-major tensor (FlatRows):
  // every word of it aligned, each thread a run of consecutive words that holds parts of at most
  // two rows (a run no longer than cols + 1), at most 8 words a thread (the register budget of
  // the row-blocked tiles' four 16-byte vectors, twice). The row-blocked layout cannot take such
  // a tile at all (a row of 127 on 8-element vectors).
  std::optional<FragmentLayout> flat_rows(const std::vector<std::int64_t>& shape) const {
    const std::int64_t R = shape[0], C = shape[1], vec = lc_.vec;
    if (vec < 2 || vec > 16 || C % vec == 0 || C <= vec || (R * C) % vec != 0) return std::nullopt;
    const std::int64_t words = R * C / vec, per_thread = (words + ctx_.threads - 1) / ctx_.threads;
    if (per_thread > 8 || per_thread * vec > C + 1) return std::nullopt;
    FragmentLayout f;
    f.kind = FragmentLayout::Kind::FlatRows;
    f.shape = shape;
    f.vec = static_cast<int>(vec);
    f.chunks = static_cast<int>(per_thread);
    f.row_length = C;
    f.per_thread = static_cast<int>(per_thread * vec);
    return f;
  }

  // The fragments that take the flat-rows layout: 2-D, without a layout yet, of a shape
  // flat_rows takes, used only as FlatUseScan allows, and in Parallel nests only beside 2-D
  // fragments that take it too (one layout a nest) -- until nothing changes.
  std::set<int> flat_rows_tiles() const {
    std::set<int> out;
    for (const Buffer& b : decls_)
      if (b->scope == Scope::Fragment && b.ndim() == 2 && !ctx_.fragment_layouts.count(b->id) &&
          !flat_barred_.count(b->id) && flat_rows(b.const_shape()))
        out.insert(b->id);
    for (bool changed = true; changed;) {
      changed = false;
      for (const auto& group : links_) {
        std::vector<std::int64_t> shape;
        bool mixed = false, any = false;
        for (const Buffer& b : group) {
          if (b.ndim() != 2) continue;
          if (out.count(b->id)) any = true;
          else mixed = true;
          if (!shape.empty() && shape != b.const_shape()) mixed = true;
          shape = b.const_shape();
        }
        if (!any || !mixed) continue;
        for (const Buffer& b : group) changed = out.erase(b->id) > 0 || changed;
      }
    }
    return out;
  }

 public:
  void bar_flat(std::set<int> barred) { flat_barred_ = std::move(barred); }

  std::vector<const ReduceStmt*> reduces_;

 private:
  std::set<int> flat_barred_;
  PassContext& ctx_;
  std::set<int> row_operand_tiles_, shared_layout_tiles_;
  std::set<const GemmStmt*> main_loop_gemms_;
  std::vector<std::vector<Buffer>> links_;  // RowOperandScan::links()
  std::vector<Buffer> decls_;
  ops::LayoutContext lc_;  // after the members it refers to
};

}  // namespace

Stmt infer_layouts(const Stmt& body, PassContext& ctx) {
  RowOperandScan scan;
  scan.visit(body);
  MainLoopGemmScan main_loops(ctx);
  main_loops.visit(body);
  ctx.gemm_ring = main_loops.gemm_ring;
  LayoutInference inference(ctx, scan.closure(), scan.shared_layout_tiles(), main_loops.gemms, scan.links());
  FlatUseScan flat;
  flat.visit(body);
  inference.bar_flat(std::move(flat.barred));
  inference.visit(body);
  inference.finish();
  return body;
}

}  // namespace tessel::passes
