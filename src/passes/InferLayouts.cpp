// infer_layouts
//   Does:     picks how every fragment is spread over threads and how every shared tile is laid
//             out. gemm fixes the strictest layouts: its accumulator gets the BlockGemm
//             accumulator layout for the warp partition its policy chooses, and its shared
//             operands get the swizzled layout ldmatrix reads without bank conflicts. Every other
//             fragment gets the strided layout, every other shared tile row-major.
//             Rejects gemm tiles that do not divide the mma.sync m16n8k16 instruction shape.
//   Requires: verify_program (regions have extents; gemm operands are checked for scope/dtype).
//   Ensures:  ctx.fragment_layouts has every fragment, ctx.shared_layouts every shared buffer.
#include <numeric>

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

std::string layout_type(bool swizzled, std::int64_t rows, std::int64_t cols, int elem_bytes) {
  if (swizzled)
    return "tessel::SwizzledLayout<" + std::to_string(rows) + ", " + std::to_string(cols) + ", " +
           std::to_string(elem_bytes) + ">";
  return "tessel::RowMajorLayout<" + std::to_string(rows) + ", " + std::to_string(cols) + ">";
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

class LayoutInference : public IRVisitor {
 public:
  explicit LayoutInference(PassContext& ctx) : ctx_(ctx) {}

 protected:
  void visit_node(const DeclBuffer* op) override {
    decls_.push_back(op->buffer);
    IRVisitor::visit_node(op);
  }

  void visit_node(const GemmStmt* op) override {
    const Buffer &A = op->A.buffer, &B = op->B.buffer, &C = op->C.buffer;
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
      auto [rows, cols] = matrix_shape(*s);
      if ((cols * elem) % 16)
        TESSEL_USER_ERROR("gemm", op->where,
                          (*s)->name << " has rows of " << cols * elem << " bytes (" << cols
                                     << " elements); ldmatrix reads 16-byte rows, so its last "
                                     << "dimension must be a multiple of " << 16 / elem);
      set_shared(*s, swizzle_supported(cols, elem), op->where);
    }
    int warps = ctx_.threads / 32;
    auto [wm, wn] = partition_warps(BM, BN, warps, op->policy, op->where);
    FragmentLayout f;
    f.kind = FragmentLayout::Kind::GemmAccumulator;
    f.shape = {BM, BN};
    f.warps_m = wm;
    f.warps_n = wn;
    f.per_thread = static_cast<int>((BM / wm / kMmaM) * (BN / wn / kMmaN) * 4);
    f.gemm_type = "tessel::BlockGemm<" + std::string(dtype_cuda_name(A->dtype)) + ", " + std::to_string(BM) +
                  ", " + std::to_string(BN) + ", " + std::to_string(BK) + ", " + std::to_string(wm) + ", " +
                  std::to_string(wn) + ", " + (op->trans_a ? "true" : "false") + ", " +
                  (op->trans_b ? "true" : "false") + ", " + ctx_.shared_layouts.at(A->id).type_name + ", " +
                  ctx_.shared_layouts.at(B->id).type_name + ">";
    auto it = ctx_.fragment_layouts.find(C->id);
    if (it != ctx_.fragment_layouts.end() && it->second.gemm_type != f.gemm_type)
      TESSEL_USER_ERROR("gemm", op->where,
                        C->name << " is the accumulator of two gemms with different tiles or "
                                << "warp partitions; give each gemm its own accumulator");
    ctx_.fragment_layouts[C->id] = f;
  }

  void visit_node(const CopyStmt* op) override {
    // Fragments exchanged with global tensors move in 16-byte vectors of the global dtype.
    const Region &s = op->src, &d = op->dst;
    bool with_global = s.buffer->scope == Scope::Global || d.buffer->scope == Scope::Global;
    bool with_fragment = s.buffer->scope == Scope::Fragment || d.buffer->scope == Scope::Fragment;
    if (with_global && with_fragment) {
      int bytes = dtype_bytes(s.buffer->scope == Scope::Global ? s.buffer->dtype : d.buffer->dtype);
      vec_ = std::min(vec_, 16 / bytes);
    }
  }

  void visit_node(const ReduceStmt* op) override { reduces_.push_back(op); }

  // The fragments each outermost Parallel nest touches, for propagation in finish().
  void visit_node(const ForStmt* op) override {
    if (op->kind == ForKind::Parallel && !in_nest_) {
      nests_.push_back(fragments_used(op->body));
      in_nest_ = true;
      IRVisitor::visit_node(op);
      in_nest_ = false;
      return;
    }
    IRVisitor::visit_node(op);
  }

 public:
  void finish() {
    if (vec_ > 16) vec_ = 4;  // no fragment meets a global tensor: f32 vectors
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
    // Free: a 1-D fragment used in a Parallel nest beside a row-blocked tile or a row vector
    // takes that row layout (a running max next to a reduction's result, say), until nothing
    // changes; whatever is still free is strided.
    for (bool changed = true; changed;) {
      changed = false;
      for (const auto& nest : nests_) {
        const FragmentLayout* rows = nullptr;
        for (const Buffer& b : nest) {
          auto it = ctx_.fragment_layouts.find(b->id);
          if (it == ctx_.fragment_layouts.end()) continue;
          if (it->second.kind == FragmentLayout::Kind::RowOf ||
              it->second.kind == FragmentLayout::Kind::RowBlocked)
            rows = &it->second;
        }
        if (!rows) continue;
        FragmentLayout row_of = *rows;
        row_of.kind = FragmentLayout::Kind::RowOf;
        row_of.shape = {rows->shape[0]};
        row_of.per_thread = static_cast<int>(rows->shape[0] / rows->rows_per_pass);
        for (const Buffer& b : nest) {
          if (ctx_.fragment_layouts.count(b->id) || b.ndim() != 1 || b.const_shape()[0] != row_of.shape[0])
            continue;
          ctx_.fragment_layouts[b->id] = row_of;
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

  int vec_ = 1 << 20;
  std::vector<const ReduceStmt*> reduces_;
  std::vector<std::vector<Buffer>> nests_;
  bool in_nest_ = false;

 private:
  void set_shared(const Buffer& b, bool swizzled, std::source_location) {
    auto [rows, cols] = matrix_shape(b);
    SharedLayout l{swizzled, layout_type(swizzled, rows, cols, dtype_bytes(b->dtype)), rows, cols};
    ctx_.shared_layouts[b->id] = l;
  }

  PassContext& ctx_;
  std::vector<Buffer> decls_;
};

}  // namespace

Stmt infer_layouts(const Stmt& body, PassContext& ctx) {
  LayoutInference inference(ctx);
  inference.visit(body);
  inference.finish();
  return body;
}

}  // namespace tessel::passes
