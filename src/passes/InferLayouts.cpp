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
//   Requires: verify_program (regions have extents; gemm operands are checked for scope/dtype).
//   Ensures:  ctx.fragment_layouts has every fragment, ctx.shared_layouts every shared buffer;
//             ctx.uses_wgmma when some gemm lowers to WarpgroupGemm.
#include <numeric>
#include <optional>
#include <set>

#include "passes/FragmentCoordinates.hpp"
#include "passes/PassUtil.hpp"
#include "passes/Passes.hpp"
#include "tessel/ir/Mutator.hpp"
#include "tessel/ir/Printer.hpp"

namespace tessel::passes {

using namespace ir;

namespace {

constexpr int kMmaM = 16, kMmaN = 8, kMmaK = 16;

bool swizzle_supported(std::int64_t cols, int elem_bytes) {
  if (cols <= 0 || (cols * elem_bytes) % 16 != 0) return false;
  std::int64_t chunks = cols * elem_bytes / 16;
  return (chunks & (chunks - 1)) == 0 || chunks % 8 == 0;
}

// The 2-D matrix a shared buffer holds: [prod(leading dims), last dim].
std::pair<std::int64_t, std::int64_t> matrix_shape(const Buffer& b) {
  auto s = b.const_shape();
  std::int64_t rows = 1;
  for (size_t i = 0; i + 1 < s.size(); ++i) rows *= s[i];
  return {rows, s.back()};
}

// Splits warps over the BM x BN tile so each warp owns whole m16n8 tiles. Square keeps warp
// tiles as square as possible (fewest shared-memory reads per mma); FullRow gives every warp
// whole rows of the tile, FullCol whole columns.
std::pair<int, int> partition_warps(std::int64_t BM, std::int64_t BN, int warps, GemmWarpPolicy policy,
                                    std::source_location where) {
  std::pair<int, int> best{0, 0};
  double best_score = 1e30;
  for (int wm = 1; wm <= warps; ++wm) {
    if (warps % wm) continue;
    int wn = warps / wm;
    if (BM % (wm * kMmaM) || BN % (wn * kMmaN)) continue;
    if (policy == GemmWarpPolicy::FullRow && wn != 1) continue;
    if (policy == GemmWarpPolicy::FullCol && wm != 1) continue;
    double tm = double(BM) / wm, tn = double(BN) / wn;
    double score = std::abs(tm - tn) + (tm > tn ? 0.5 : 0);  // ties: wider warp tiles along N
    if (score < best_score) {
      best_score = score;
      best = {wm, wn};
    }
  }
  if (best.first == 0)
    TESSEL_USER_ERROR("gemm", where,
                      "the " << BM << "x" << BN << " C tile cannot be split over " << warps
                             << " warps with policy " << gemm_warp_policy_name(policy)
                             << " into whole m16n8 mma.sync tiles; need BM a multiple of 16*warps_m "
                             << "and BN a multiple of 8*warps_n for some warps_m*warps_n = " << warps);
  return best;
}

// The tiles whose rows must stay within one warp: the A operand of a gemm held in registers and
// the sources of row reductions, and whatever Parallel nests and fragment copies link to them
// element by element. A gemm whose accumulator is among them splits its warps along M alone (a
// register-A gemm needs whole rows of A per warp; a row reduction of a gemm tile runs within a
// warp's quads).
class RowOperandScan : public IRVisitor {
 public:
  std::set<int> closure() const {
    std::set<int> out = operands_;
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
  // The fragments that move element by element into each other: each outermost Parallel nest's,
  // each fragment-to-fragment copy's two. Layout inference propagates layouts along them.
  const std::vector<std::vector<Buffer>>& links() const { return links_; }

 protected:
  void visit_node(const GemmStmt* op) override {
    if (op->A.buffer->scope == Scope::Fragment) operands_.insert(op->A.buffer->id);
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
  std::set<int> operands_;
  std::vector<std::vector<Buffer>> links_;
  bool in_nest_ = false;
};

// The gemms plan_pipelines hands to gemm_mainloop: the only compute of a Pipelined loop (S > 1)
// whose copies fill both operands. BlockGemm's pipeline there carries fragments across K tiles;
// a WarpgroupGemm waits for its wgmmas at every tile, and measured 0.67x of it (H200, the plain
// GEMM at 128x256x32 t256, docs/perf-notes.md session 7), so those stay on mma.sync.
class MainLoopGemmScan : public IRVisitor {
 public:
  std::set<const GemmStmt*> gemms;

 protected:
  void visit_node(const ForStmt* op) override {
    if (op->kind == ForKind::Pipelined && op->num_stages > 1) {
      const std::vector<Stmt> body =
          op->body.as<SeqStmt>() ? op->body.as<SeqStmt>()->stmts : std::vector<Stmt>{op->body};
      std::set<int> filled;
      std::vector<const GemmStmt*> gemm;
      bool other = false;
      for (const Stmt& st : body) {
        const auto* c = st.as<CopyStmt>();
        if (c && c->src.buffer->scope == Scope::Global && c->dst.buffer->scope == Scope::Shared)
          filled.insert(c->dst.buffer->id);
        else if (const auto* g = st.as<GemmStmt>())
          gemm.push_back(g);
        else
          other = true;
      }
      if (!other && gemm.size() == 1 && filled.count(gemm[0]->A.buffer->id) &&
          filled.count(gemm[0]->B.buffer->id))
        gemms.insert(gemm[0]);
    }
    IRVisitor::visit_node(op);
  }
};

class LayoutInference : public IRVisitor {
 public:
  LayoutInference(PassContext& ctx, std::set<int> row_operand_tiles,
                  std::set<const GemmStmt*> main_loop_gemms, std::vector<std::vector<Buffer>> links)
      : ctx_(ctx),
        row_operand_tiles_(std::move(row_operand_tiles)),
        main_loop_gemms_(std::move(main_loop_gemms)),
        links_(std::move(links)) {}

 protected:
  void visit_node(const DeclBuffer* op) override {
    decls_.push_back(op->buffer);
    IRVisitor::visit_node(op);
  }

  void visit_node(const GemmStmt* op) override {
    const Buffer &A = op->A.buffer, &B = op->B.buffer, &C = op->C.buffer;
    const bool a_in_registers = A->scope == Scope::Fragment;
    auto a = matrix_shape(A), c = matrix_shape(C);
    std::int64_t BM = c.first, BN = c.second, BK = op->trans_a ? a.first : a.second;
    int elem = dtype_bytes(A->dtype);
    if (BK % kMmaK)
      TESSEL_USER_ERROR("gemm", op->where,
                        "the K tile is " << BK << ", not a multiple of " << kMmaK
                                         << " (mma.sync m16n8k16); legal block_K: 16, 32, 48, 64, ...");
    if (BM % kMmaM || BN % kMmaN)
      TESSEL_USER_ERROR("gemm", op->where,
                        "the C tile " << BM << "x" << BN << " does not divide into m16n8 mma.sync "
                                      << "tiles; BM must be a multiple of 16 and BN of 8");
    for (const Buffer* s : {&A, &B}) {
      if ((*s)->scope != Scope::Shared) continue;
      auto [rows, cols] = matrix_shape(*s);
      if ((cols * elem) % 16)
        TESSEL_USER_ERROR("gemm", op->where,
                          (*s)->name << " has rows of " << cols * elem << " bytes (" << cols
                                     << " elements); ldmatrix reads 16-byte rows, so its last "
                                     << "dimension must be a multiple of " << 16 / elem);
    }
    const int warps = ctx_.threads / 32;
    // A in registers: every warp needs whole rows of A, which only it holds, so the warps
    // split M alone; so does a gemm whose accumulator becomes such an operand.
    GemmWarpPolicy policy = op->policy;
    if (a_in_registers || row_operand_tiles_.count(C->id)) {
      if (policy == GemmWarpPolicy::FullCol && warps > 1)
        TESSEL_USER_ERROR(
            "gemm", op->where,
            (a_in_registers ? "A " + A->name + " is a fragment (registers)"
                            : "the accumulator " + C->name +
                                  " is reduced along its rows or becomes the register A operand of "
                                  "a later gemm") +
                std::string(", so the warps must split M alone (policy FullRow); policy "
                            "FullCol asks for the opposite"));
      policy = GemmWarpPolicy::FullRow;
    }
    // wgmma stacks the warps along M whatever the policy (a policy shapes mma.sync warp tiles).
    const bool wgmma = wgmma_applies(op, BM, BN);
    auto [wm, wn] = wgmma ? std::pair<int, int>{warps, 1} : partition_warps(BM, BN, warps, policy, op->where);
    for (const Buffer* s : {&A, &B}) {
      if ((*s)->scope != Scope::Shared) continue;
      const bool k_major = s == &A ? !op->trans_a : op->trans_b;
      if (wgmma) {
        set_wgmma_shared(*s, k_major);
      } else if (!ctx_.shared_layouts.count((*s)->id) || !ctx_.shared_layouts.at((*s)->id).wgmma()) {
        // A tile a wgmma gemm reads keeps its layout: BlockGemm reads any layout.
        auto [rows, cols] = matrix_shape(*s);
        set_shared(*s, swizzle_supported(cols, elem), op->where);
      }
    }
    FragmentLayout f;
    f.kind = FragmentLayout::Kind::GemmAccumulator;
    f.shape = {BM, BN};
    f.warps_m = wm;
    f.warps_n = wn;
    f.wgmma = wgmma;
    f.per_thread = static_cast<int>((BM / wm / kMmaM) * (BN / wn / kMmaN) * 4);
    GemmEngine& e = f.gemm;
    e.kind = wgmma ? GemmEngine::Kind::WarpgroupGemm : GemmEngine::Kind::BlockGemm;
    e.rows = BM, e.cols = BN, e.k = BK;
    e.dtype = dtype_cuda_name(A->dtype);
    if (wgmma) {
      e.warpgroups = ctx_.threads / 128;
    } else {
      e.warps_m = wm, e.warps_n = wn;
    }
    e.trans_a = op->trans_a, e.trans_b = op->trans_b;
    e.a = a_in_registers ? SharedLayout::row_major(BM, BK) : ctx_.shared_layouts.at(A->id);
    e.b = ctx_.shared_layouts.at(B->id);
    ctx_.uses_wgmma = ctx_.uses_wgmma || wgmma;
    auto it = ctx_.fragment_layouts.find(C->id);
    if (it != ctx_.fragment_layouts.end() && it->second.gemm != f.gemm)
      TESSEL_USER_ERROR("gemm", op->where,
                        C->name << " is the accumulator of two gemms with different tiles or "
                                << "warp partitions; give each gemm its own accumulator");
    ctx_.fragment_layouts[C->id] = f;
    if (a_in_registers) set_register_operand(op, BM, BK, wm);
  }

  void visit_node(const CopyStmt* op) override {
    const Region &s = op->src, &d = op->dst;
    // Fragments exchanged with global tensors move in 16-byte vectors of the global dtype.
    bool with_global = s.buffer->scope == Scope::Global || d.buffer->scope == Scope::Global;
    bool with_fragment = s.buffer->scope == Scope::Fragment || d.buffer->scope == Scope::Fragment;
    if (with_global && with_fragment) {
      int bytes = dtype_bytes(s.buffer->scope == Scope::Global ? s.buffer->dtype : d.buffer->dtype);
      vec_ = std::min(vec_, 16 / bytes);
    }
  }

  void visit_node(const ReduceStmt* op) override { reduces_.push_back(op); }

 public:
  void finish() {
    if (vec_ > 16) vec_ = 4;  // no fragment meets a global tensor: f32 vectors
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
        follow.gemm = accumulator_layout(acc->shape[0], acc->shape[1], acc->warps_m, acc->warps_n);
        for (const Buffer& b : group) {
          if (ctx_.fragment_layouts.count(b->id) || b.ndim() != 2 || b.const_shape() != acc->shape) continue;
          ctx_.fragment_layouts[b->id] = follow;
          changed = true;
        }
      }
    }
    // Strict: gemm accumulators (done). Common: 2-D tiles get the row-blocked layout.
    for (const Buffer& b : decls_) {
      if (b->scope == Scope::Fragment && !ctx_.fragment_layouts.count(b->id) && b.ndim() == 2)
        if (auto l = row_blocked(b.const_shape())) ctx_.fragment_layouts[b->id] = *l;
      if (b->scope == Scope::Shared && !ctx_.shared_layouts.count(b->id)) set_shared(b, false, b->where);
    }
    // A reduction's result follows the rows of its source.
    for (const ReduceStmt* r : reduces_) {
      if (r->src->scope != Scope::Fragment || r->dst->scope != Scope::Fragment)
        TESSEL_USER_ERROR(reduce_name(r), r->where,
                          "reduces " << r->src->name << " into " << r->dst->name
                                     << "; both must be fragments (T::alloc_fragment)");
      auto found = ctx_.fragment_layouts.find(r->src->id);
      FragmentLayout src = found != ctx_.fragment_layouts.end() ? found->second : strided(r->src);
      if (src.kind == FragmentLayout::Kind::GemmAccumulator) {
        reduce_gemm_tile(r, src);
        continue;
      }
      if (src.kind != FragmentLayout::Kind::RowBlocked || r->dim != 1)
        TESSEL_USER_ERROR(reduce_name(r), r->where,
                          "cannot lay out "
                              << r->src->name << " " << shape_text(src.shape) << " for a reduction over "
                              << "dim " << r->dim << " with " << ctx_.threads << " threads; this version "
                              << "reduces 2-D tiles along dim 1 whose columns are a multiple of " << vec_
                              << " (one 16-byte vector) and whose rows divide evenly over the "
                              << "threads");
      if (r->dst.ndim() != 1 || r->dst.const_shape()[0] != src.shape[0])
        TESSEL_USER_ERROR(reduce_name(r), r->where,
                          "the result " << r->dst->name << " must be a 1-D fragment of " << src.shape[0]
                                        << " elements (one per row of " << r->src->name << ")");
      FragmentLayout d = src;
      d.kind = FragmentLayout::Kind::RowOf;
      d.shape = {src.shape[0]};
      d.per_thread = static_cast<int>(src.shape[0] / src.rows_per_pass);
      auto old = ctx_.fragment_layouts.find(r->dst->id);
      if (old != ctx_.fragment_layouts.end() && old->second.kind == FragmentLayout::Kind::RowOf &&
          (old->second.lanes != d.lanes || old->second.rows_per_pass != d.rows_per_pass))
        TESSEL_USER_ERROR(reduce_name(r), r->where,
                          r->dst->name << " receives reductions of tiles laid out "
                                       << "differently; reduce tiles of one shape into it");
      ctx_.fragment_layouts[r->dst->id] = d;
    }
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
          if (auto r = row_layout_of(it->second)) rows = r;
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
        ctx_.fragment_layouts[b->id] = strided(b);
  }

 private:
  static const char* reduce_name(const ReduceStmt* r) {
    switch (r->op) {
      case ReduceOp::Max:
        return "reduce_max";
      case ReduceOp::Min:
        return "reduce_min";
      case ReduceOp::Sum:
        return "reduce_sum";
    }
    return "reduce";
  }

  FragmentLayout strided(const Buffer& b) const {
    FragmentLayout f;
    f.kind = FragmentLayout::Kind::Strided;
    f.shape = b.const_shape();
    f.per_thread = static_cast<int>((b.const_numel() + ctx_.threads - 1) / ctx_.threads);
    return f;
  }

  // Rows over threads: as many lanes per row as the columns allow (whole vectors, a power of
  // two dividing the block), the remaining threads on further rows.
  std::optional<FragmentLayout> row_blocked(const std::vector<std::int64_t>& shape) const {
    std::int64_t R = shape[0], C = shape[1];
    int vec = vec_;
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
    if (ctx_.threads % lanes || R % rows_per_pass) return std::nullopt;
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

  // The layout a row vector beside a tile of layout `l` takes (nullopt: none).
  static std::optional<FragmentLayout> row_layout_of(const FragmentLayout& l) {
    FragmentLayout r = l;
    switch (l.kind) {
      case FragmentLayout::Kind::RowOf:
      case FragmentLayout::Kind::AccumulatorRows:
        return l;
      case FragmentLayout::Kind::RowBlocked:
        r.kind = FragmentLayout::Kind::RowOf;
        r.shape = {l.shape[0]};
        r.per_thread = static_cast<int>(l.shape[0] / l.rows_per_pass);
        return r;
      case FragmentLayout::Kind::GemmAccumulator:
        if (l.warps_n != 1) return std::nullopt;
        r.kind = FragmentLayout::Kind::AccumulatorRows;
        r.shape = {l.shape[0]};
        r.per_thread = static_cast<int>(l.shape[0] / l.warps_m / kMmaM * 2);
        r.wgmma = false;
        r.gemm = accumulator_layout(l.shape[0], l.shape[1], l.warps_m, 1);
        return r;
      case FragmentLayout::Kind::Strided:
        return std::nullopt;
    }
    return std::nullopt;
  }

  // reduce_max/min/sum of a gemm tile along its rows: the result is an AccumulatorRows vector.
  void reduce_gemm_tile(const ReduceStmt* r, const FragmentLayout& src) {
    if (r->dim != 1 || src.warps_n != 1)
      TESSEL_USER_ERROR(reduce_name(r), r->where,
                        "reduces the gemm tile " << r->src->name << " " << shape_text(src.shape)
                                                 << " over dim " << r->dim << " with its warps split "
                                                 << src.warps_m << "x" << src.warps_n
                                                 << " (M x N); a gemm tile reduces along dim 1, "
                                                 << "with its warps splitting M only (gemm policy FullRow)");
    if (r->dst.ndim() != 1 || r->dst.const_shape()[0] != src.shape[0])
      TESSEL_USER_ERROR(reduce_name(r), r->where,
                        "the result " << r->dst->name << " must be a 1-D fragment of " << src.shape[0]
                                      << " elements (one per row of " << r->src->name << ")");
    const FragmentLayout d = *row_layout_of(src);
    auto old = ctx_.fragment_layouts.find(r->dst->id);
    if (old != ctx_.fragment_layouts.end() && !same_fragment_layout(old->second, d))
      TESSEL_USER_ERROR(reduce_name(r), r->where,
                        r->dst->name << " receives reductions of tiles laid out differently; reduce tiles "
                                     << "of one shape and warp split into it");
    ctx_.fragment_layouts[r->dst->id] = d;
  }

  static GemmEngine accumulator_layout(std::int64_t rows, std::int64_t cols, int wm, int wn) {
    GemmEngine e;
    e.kind = GemmEngine::Kind::AccumulatorLayout;
    e.rows = rows, e.cols = cols, e.warps_m = wm, e.warps_n = wn;
    return e;
  }

  // The WgmmaSwizzleLayout a wgmma descriptor reads `b` through: K-major tiles (K along the
  // columns) swizzle by their row size, 128, 64 or 32 bytes; M/N-major tiles need 128-byte
  // panels. Empty when there is none.
  static int wgmma_swizzle(const Buffer& b, bool k_major) {
    auto [rows, cols] = matrix_shape(b);
    const std::int64_t bytes = cols * dtype_bytes(b->dtype);
    if (rows % 8) return 0;
    int swizzle = bytes % 128 == 0 ? 128 : bytes % 64 == 0 ? 64 : bytes % 32 == 0 ? 32 : 0;
    if (swizzle == 0 || (!k_major && swizzle != 128)) return 0;
    return swizzle;
  }
  static std::optional<SharedLayout> wgmma_layout(const Buffer& b, bool k_major) {
    auto [rows, cols] = matrix_shape(b);
    const int swizzle = wgmma_swizzle(b, k_major);
    if (swizzle == 0) return std::nullopt;
    return SharedLayout::wgmma_swizzle(rows, cols, dtype_bytes(b->dtype), swizzle);
  }

  // Whether this gemm lowers to tessel::WarpgroupGemm (device/tessel/warpgroup_gemm.cuh):
  // sm_90a with the Hopper features allowed, whole warpgroups, the warps stacked along M 16 rows each (one
  // m64 wgmma per warpgroup), an N the wgmma shapes cover, and shared operands that can take
  // (or already have) the layout its descriptors read.
  bool wgmma_applies(const GemmStmt* op, std::int64_t BM, std::int64_t BN) const {
    // The Hopper switches come as one: turning any of them off keeps every gemm on mma.sync.
    if (ctx_.target.sm != 90 || !ctx_.allow_wgmma || !ctx_.allow_tma || !ctx_.allow_warp_specialization)
      return false;
    if (ctx_.threads % 128 != 0) return false;
    if (op->policy == GemmWarpPolicy::FullCol && ctx_.threads > 32) return false;
    if (main_loop_gemms_.count(op)) return false;
    if (BM != 16 * (ctx_.threads / 32) || BN < 64 || BN > 256 || BN % 32) return false;
    for (const Buffer* s : {&op->A.buffer, &op->B.buffer}) {
      if ((*s)->scope != Scope::Shared) continue;
      const bool k_major = s == &op->A.buffer ? !op->trans_a : op->trans_b;
      const std::optional<SharedLayout> want = wgmma_layout(*s, k_major);
      if (!want) return false;
      auto it = ctx_.shared_layouts.find((*s)->id);
      if (it != ctx_.shared_layouts.end() && it->second.wgmma() && it->second != *want) return false;
    }
    return true;
  }

  void set_wgmma_shared(const Buffer& b, bool k_major) {
    const std::optional<SharedLayout> l = wgmma_layout(b, k_major);
    TESSEL_INTERNAL_CHECK(l.has_value(), "wgmma layout for " << b->name << " chosen without one");
    ctx_.shared_layouts[b->id] = *l;
  }

  // The A operand of a gemm held in registers: laid out like the accumulator of a [BM, BK]
  // tile over the gemm's warps (all along M), so that register i is a0..a7 of the mma / wgmma
  // A fragment in order (gemm.cuh, pack_a_operand).
  void set_register_operand(const GemmStmt* op, std::int64_t BM, std::int64_t BK, int wm) {
    const Buffer& A = op->A.buffer;
    FragmentLayout f;
    f.kind = FragmentLayout::Kind::GemmAccumulator;
    f.shape = {BM, BK};
    f.warps_m = wm;
    f.warps_n = 1;
    f.per_thread = static_cast<int>((BM / wm / kMmaM) * (BK / kMmaN) * 4);
    f.gemm = accumulator_layout(BM, BK, wm, 1);
    auto it = ctx_.fragment_layouts.find(A->id);
    if (it != ctx_.fragment_layouts.end() && it->second.gemm != f.gemm)
      TESSEL_USER_ERROR("gemm", op->where,
                        A->name << " is the register A operand of gemms whose warps split it differently ("
                                << it->second.warps_m << " and " << wm
                                << " warps along M); use one tile shape");
    ctx_.fragment_layouts[A->id] = f;
  }

  int vec_ = 1 << 20;
  std::vector<const ReduceStmt*> reduces_;

 private:
  void set_shared(const Buffer& b, bool swizzled, std::source_location) {
    auto [rows, cols] = matrix_shape(b);
    ctx_.shared_layouts[b->id] = swizzled ? SharedLayout::swizzled_for(rows, cols, dtype_bytes(b->dtype))
                                          : SharedLayout::row_major(rows, cols);
  }

  PassContext& ctx_;
  std::set<int> row_operand_tiles_;
  std::set<const GemmStmt*> main_loop_gemms_;
  std::vector<std::vector<Buffer>> links_;  // RowOperandScan::links()
  std::vector<Buffer> decls_;
};

}  // namespace

Stmt infer_layouts(const Stmt& body, PassContext& ctx) {
  RowOperandScan scan;
  scan.visit(body);
  MainLoopGemmScan main_loops;
  main_loops.visit(body);
  LayoutInference inference(ctx, scan.closure(), main_loops.gemms, scan.links());
  inference.visit(body);
  inference.finish();
  return body;
}

}  // namespace tessel::passes
