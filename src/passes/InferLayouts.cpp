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
    TESSEL_USER_ERROR("gemm", where, "the " << BM << "x" << BN << " C tile cannot be split over " << warps
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
      TESSEL_USER_ERROR("gemm", op->where, "the K tile is " << BK << ", not a multiple of " << kMmaK
                                                            << " (mma.sync m16n8k16); legal block_K: 16, 32, 48, 64, ...");
    if (BM % kMmaM || BN % kMmaN)
      TESSEL_USER_ERROR("gemm", op->where, "the C tile " << BM << "x" << BN << " does not divide into m16n8 mma.sync "
                                                         << "tiles; BM must be a multiple of 16 and BN of 8");
    for (const Buffer* s : {&A, &B}) {
      auto [rows, cols] = matrix_shape(*s);
      if ((cols * elem) % 16)
        TESSEL_USER_ERROR("gemm", op->where, (*s)->name << " has rows of " << cols * elem << " bytes (" << cols
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
    f.gemm_type = "tessel::BlockGemm<" + std::string(dtype_cuda_name(A->dtype)) + ", " + std::to_string(BM) + ", " +
                  std::to_string(BN) + ", " + std::to_string(BK) + ", " + std::to_string(wm) + ", " +
                  std::to_string(wn) + ", " + (op->trans_a ? "true" : "false") + ", " +
                  (op->trans_b ? "true" : "false") + ", " + ctx_.shared_layouts.at(A->id).type_name + ", " +
                  ctx_.shared_layouts.at(B->id).type_name + ">";
    auto it = ctx_.fragment_layouts.find(C->id);
    if (it != ctx_.fragment_layouts.end() && it->second.gemm_type != f.gemm_type)
      TESSEL_USER_ERROR("gemm", op->where, C->name << " is the accumulator of two gemms with different tiles or "
                                                   << "warp partitions; give each gemm its own accumulator");
    ctx_.fragment_layouts[C->id] = f;
  }

 public:
  void finish() {
    for (const Buffer& b : decls_) {
      if (b->scope == Scope::Fragment && !ctx_.fragment_layouts.count(b->id)) {
        FragmentLayout f;
        f.kind = FragmentLayout::Kind::Strided;
        f.shape = b.const_shape();
        f.per_thread = static_cast<int>((b.const_numel() + ctx_.threads - 1) / ctx_.threads);
        ctx_.fragment_layouts[b->id] = f;
      } else if (b->scope == Scope::Shared && !ctx_.shared_layouts.count(b->id)) {
        set_shared(b, false, b->where);
      }
    }
  }

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
