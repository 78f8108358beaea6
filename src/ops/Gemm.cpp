// gemm(A, B, C): C += op(A) op(B); reads A, B and the accumulator C, writes C. verify: A a shared
// tile or a whole 2-D fragment (not transposed), B a shared tile, C an f32 fragment, A and B both
// f16 or both bf16, 2-D tiles whose shapes chain. infer_layouts: the instruction (WarpgroupGemm's
// wgmma on sm_90a where the warps stack along M and N fits a wgmma shape, else BlockGemm's
// mma.sync), the warp split its policy allows, the accumulator's layout, the operand tiles'
// (swizzled for ldmatrix, or the wgmma descriptor's swizzle) and a register A operand's.
#include "ops/TileOp.hpp"

#include <algorithm>
#include <optional>
#include <set>

#include "ops/Checks.hpp"
#include "ops/Layouts.hpp"
#include "ops/Lowering.hpp"
#include "tessel/Error.hpp"
#include "tessel/ir/Printer.hpp"

namespace tessel::ops {

namespace {

using namespace ir;

// ---- layout inference (TileOp::infer_layouts) ----

// Whether tessel::SwizzledLayout can hold rows of `cols` elements: whole 16-byte chunks, a
// power of two of them or a multiple of 8.
bool swizzle_supported(std::int64_t cols, int elem_bytes) {
  if (cols <= 0 || (cols * elem_bytes) % 16 != 0) return false;
  std::int64_t chunks = cols * elem_bytes / 16;
  return (chunks & (chunks - 1)) == 0 || chunks % 8 == 0;
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

// The independent accumulator chains a BlockGemm run() spreads a K tile's k steps over
// (device/tessel/gemm.cuh, KChains). A warp tile of one m16n8 block (two) issues one (two) mma a
// k step, each waiting for the previous step's result, so the warp runs at the mma's latency,
// not its rate: four chains (two) keep about four mmas in flight. Only where every k step's
// fragments fit in registers at once (run() loads them all first, 4 registers of A per m16 and 2
// of B per n8 a step, at most 128) and the A operand comes from shared memory (run_rs keeps one
// chain).
int accumulator_chains(std::int64_t warp_m, std::int64_t warp_n, std::int64_t BK, bool a_in_registers) {
  const std::int64_t blocks = (warp_m / kMmaM) * (warp_n / kMmaN);
  const std::int64_t k_steps = BK / kMmaK;
  if (a_in_registers || blocks > 2 || k_steps < 2) return 1;
  const std::int64_t fragment_regs = k_steps * (4 * (warp_m / kMmaM) + 2 * (warp_n / kMmaN));
  if (fragment_regs > 128) return 1;
  return static_cast<int>(std::min<std::int64_t>(k_steps, blocks == 1 ? 4 : 2));
}

// Whether this gemm lowers to tessel::WarpgroupGemm (device/tessel/warpgroup_gemm.cuh), and if not,
// why: sm_90a with the Hopper features allowed, whole warpgroups, the warps stacked along M in
// 16-row strips, an N the wgmma shapes cover, and shared operands that can take (or already
// have) the layout its descriptors read. Each warpgroup computes `blocks` m64 row blocks with one
// instruction apiece per k16 step: 1 (BM = 64 per warpgroup), or, under gemm_from_passes (the
// default), 2 or more for a gemm whose A comes from shared memory and whose
// accumulator shares its layout with no other gemm's operand or tile (not a later gemm's register
// operand, not met element by element with another accumulator), within 128 accumulator registers a thread
// (blocks * BN / 2) -- the tutorial GEMM's 128-row tiles on one consumer warpgroup.
struct WgmmaChoice {
  bool applies = false;
  std::int64_t blocks = 0;
  // When it does not apply on a target and switches that allow wgmma: the reason, for
  // KernelInfo::declined (empty otherwise).
  std::string why_not;
};

WgmmaChoice wgmma_choice(const PassContext& ctx_, const LayoutContext& lc, const GemmStmt* op,
                         std::int64_t BM, std::int64_t BN) {
  WgmmaChoice c;
  // The Hopper switches come as one: turning any of them off keeps every gemm on mma.sync.
  if (ctx_.target.sm != 90 || !ctx_.allow_wgmma || !ctx_.allow_tma || !ctx_.allow_warp_specialization)
    return c;
  auto refuse = [&](const std::string& why) {
    c.why_not = why;
    return c;
  };
  const std::int64_t warps = ctx_.threads / 32, strip = 16 * warps;
  if (ctx_.threads % 128 != 0)
    return refuse("the block's " + std::to_string(ctx_.threads) +
                  " threads are not whole warpgroups (wgmma: a multiple of 128)");
  if (op->policy == GemmWarpPolicy::FullCol && ctx_.threads > 32)
    return refuse("policy FullCol splits the warps along N; wgmma stacks them along M");
  if (lc.main_loop_gemms.count(op))
    return refuse(
        std::string("the sole gemm of a cp.async Pipelined loop keeps BlockGemm's mma.sync main loop") +
        (ctx_.gemm_from_passes
             ? " (the loop's loads cannot all be TMA loads into the wgmma layouts)"
             : " (a TMA ring with wgmma needs JitOptions::gemm_from_passes, which is off, and "
               "loads TMA can make)"));
  if (BN < 64 || BN > 256 || BN % 16)
    return refuse("the tile is " + std::to_string(BN) +
                  " columns wide; wgmma takes 64 to 256, a multiple of 16");
  const std::string tile = "a " + std::to_string(BM) + "-row tile on " + std::to_string(warps) + " warps";
  if (BM == strip) {
    c.blocks = 1;
  } else if (BM % strip) {
    return refuse(tile + ": wgmma stacks the warps 16 rows each, so the rows must be a multiple of " +
                  std::to_string(strip));
  } else if (!ctx_.gemm_from_passes) {
    return refuse(tile + " is " + std::to_string(BM / strip) +
                  " m64 blocks a warpgroup, taken only under JitOptions::gemm_from_passes, which is off");
  } else if (op->A.buffer->scope != Scope::Shared) {
    return refuse(tile + " with A in registers: several m64 blocks a warpgroup read A from shared memory");
  } else if (lc.shared_layout_tiles.count(op->C.buffer->id)) {
    return refuse(
        tile +
        " whose accumulator becomes a gemm's register operand or meets another gemm's tile "
        "element by element: several m64 blocks a warpgroup only for a layout no other gemm shares");
  } else if (BM / strip * BN > 256) {
    return refuse(tile + " and " + std::to_string(BN) + " columns: " + std::to_string(BM / strip * BN / 2) +
                  " accumulator registers a thread, past 128");
  } else {
    c.blocks = BM / strip;
  }
  for (const Buffer* s : {&op->A.buffer, &op->B.buffer}) {
    if ((*s)->scope != Scope::Shared) continue;
    const bool k_major = s == &op->A.buffer ? !op->trans_a : op->trans_b;
    const std::optional<SharedLayout> want = wgmma_layout(*s, k_major);
    if (!want)
      return refuse(
          "shared tile " + (*s)->name + " has no layout a wgmma descriptor reads (" +
          (k_major ? "K-major rows a multiple of 32 bytes" : "MN-major rows a multiple of 128 bytes") +
          ", 8-row multiples)");
    auto it = ctx_.shared_layouts.find((*s)->id);
    if (it != ctx_.shared_layouts.end() && it->second.wgmma() && it->second != *want)
      return refuse("shared tile " + (*s)->name + " already has another gemm's wgmma layout (" +
                    it->second.describe() + ")");
  }
  c.applies = true;
  return c;
}

void set_wgmma_shared(PassContext& ctx_, const Buffer& b, bool k_major) {
  const std::optional<SharedLayout> l = wgmma_layout(b, k_major);
  TESSEL_INTERNAL_CHECK(l.has_value(), "wgmma layout for " << b->name << " chosen without one");
  ctx_.shared_layouts[b->id] = *l;
}

// The A operand of a gemm held in registers: laid out like the accumulator of a [BM, BK]
// tile over the gemm's warps (all along M), so that register i is a0..a7 of the mma / wgmma
// A fragment in order (gemm.cuh, pack_a_operand).
void set_register_operand(PassContext& ctx_, const GemmStmt* op, std::int64_t BM, std::int64_t BK, int wm) {
  const Buffer& A = op->A.buffer;
  FragmentLayout f;
  f.kind = FragmentLayout::Kind::GemmAccumulator;
  f.shape = {BM, BK};
  f.warps_m = wm;
  f.warps_n = 1;
  f.per_thread = static_cast<int>((BM / wm / kMmaM) * (BK / kMmaN) * 4);
  f.gemm = GemmEngine::accumulator(BM, BK, wm, 1);
  auto it = ctx_.fragment_layouts.find(A->id);
  if (it != ctx_.fragment_layouts.end() && it->second.gemm != f.gemm)
    TESSEL_USER_ERROR("gemm", op->where,
                      A->name << " is the register A operand of gemms whose warps split it differently ("
                              << it->second.warps_m << " and " << wm
                              << " warps along M); use one tile shape");
  ctx_.fragment_layouts[A->id] = f;
}

class GemmOp final : public TileOp {
 public:
  const char* name() const override { return "gemm"; }
  Access access(const StmtNode& s) const override {
    const auto* g = static_cast<const GemmStmt*>(&s);
    return {{g->A, g->B, g->C}, {g->C}};
  }

  void infer_layouts(const StmtNode& s, LayoutContext& lc, LayoutLevel level) const override {
    if (level != LayoutLevel::Strict) return;
    const auto* op = static_cast<const GemmStmt*>(&s);
    PassContext& ctx_ = lc.ctx;
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
    if (a_in_registers || lc.row_operand_tiles.count(C->id)) {
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
    const WgmmaChoice choice = wgmma_choice(ctx_, lc, op, BM, BN);
    const bool wgmma = choice.applies;
    if (!choice.why_not.empty()) {
      const std::string said =
          "gemm at " + format_location(op->where) + " (" + C->name + "): " + choice.why_not;
      if (std::find(ctx_.wgmma_declined.begin(), ctx_.wgmma_declined.end(), said) ==
          ctx_.wgmma_declined.end())
        ctx_.wgmma_declined.push_back(said);
    }
    auto [wm, wn] = wgmma ? std::pair<int, int>{warps, 1} : partition_warps(BM, BN, warps, policy, op->where);
    for (const Buffer* s : {&A, &B}) {
      if ((*s)->scope != Scope::Shared) continue;
      const bool k_major = s == &A ? !op->trans_a : op->trans_b;
      if (wgmma) {
        set_wgmma_shared(ctx_, *s, k_major);
      } else if (!ctx_.shared_layouts.count((*s)->id) || !ctx_.shared_layouts.at((*s)->id).wgmma()) {
        // A tile a wgmma gemm reads keeps its layout: BlockGemm reads any layout.
        auto [rows, cols] = matrix_shape(*s);
        set_shared_layout(ctx_, *s, swizzle_supported(cols, elem));
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
    // Several m64 blocks a warpgroup: each warp's 16-row strips interleave (accumulator.cuh).
    e.interleaved = wgmma && choice.blocks > 1;
    e.kind = wgmma ? GemmEngine::Kind::WarpgroupGemm : GemmEngine::Kind::BlockGemm;
    e.rows = BM, e.cols = BN, e.k = BK;
    e.dtype = dtype_cuda_name(A->dtype);
    if (wgmma) {
      e.warpgroups = ctx_.threads / 128;
    } else {
      e.warps_m = wm, e.warps_n = wn;
      if (ctx_.allow_gemm_chains) e.k_chains = accumulator_chains(BM / wm, BN / wn, BK, a_in_registers);
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
    if (a_in_registers) set_register_operand(ctx_, op, BM, BK, wm);
  }

  Stmt lower(const Stmt& s, LowerContext& lc) const override {
    const auto* op = s.as<GemmStmt>();
    PassContext& ctx_ = lc.ctx;
    const FragmentLayout& l = ctx_.fragment_layouts.at(op->C.buffer->id);
    const bool a_in_registers = op->A.buffer->scope == Scope::Fragment;
    DeviceCallArg a = a_in_registers ? DeviceCallArg{Expr(), ctx_.registers_of(op->A.buffer), Expr()}
                                     : DeviceCallArg{Expr(), op->A.buffer, linear_offset(op->A)};
    std::vector<DeviceCallArg> args{
        a, {Expr(), op->B.buffer, linear_offset(op->B)}, {Expr(), ctx_.registers_of(op->C.buffer), Expr()}};
    const std::string run = std::string(a_in_registers ? "::run_rs" : "::run") + (op->async ? "_async" : "");
    return make_device_call(l.gemm.device_type() + run, {}, args, op->where);
  }

  Stmt verify(const Stmt& s) const override {
    const auto* op = s.as<GemmStmt>();
    const Buffer &A = op->A.buffer, &B = op->B.buffer, &C = op->C.buffer;
    const char* name = "gemm";
    if ((A->scope != Scope::Shared && A->scope != Scope::Fragment) || B->scope != Scope::Shared)
      TESSEL_USER_ERROR(
          name, op->where,
          "A must be a shared-memory tile or a fragment (registers) and B a shared-memory tile; got "
              << buffer_desc(A) << " and " << buffer_desc(B));
    if (A->scope == Scope::Fragment && op->trans_a)
      TESSEL_USER_ERROR(name, op->where,
                        "A " << A->name << " is a fragment, held in registers as [M, K]; transpose_A "
                             << "applies to shared-memory tiles only");
    if (C->scope != Scope::Fragment)
      TESSEL_USER_ERROR(name, op->where, "C must be a fragment (T::alloc_fragment); got " << buffer_desc(C));
    if (A->dtype != B->dtype || (A->dtype != DType::f16 && A->dtype != DType::bf16))
      TESSEL_USER_ERROR(name, op->where,
                        "A and B must both be f16 or both bf16; got " << dtype_name(A->dtype) << " and "
                                                                      << dtype_name(B->dtype));
    if (C->dtype != DType::f32)
      TESSEL_USER_ERROR(name, op->where,
                        "the accumulator " << C->name << " is " << dtype_name(C->dtype) << "; legal: f32");
    auto a = squeeze(op->A.extents), b = squeeze(op->B.extents), c = squeeze(op->C.extents);
    if (a.size() != 2 || b.size() != 2 || c.size() != 2)
      TESSEL_USER_ERROR(name, op->where,
                        "operands must be 2-D tiles; got A " << shape_str(a) << ", B " << shape_str(b)
                                                             << ", C " << shape_str(c));
    std::int64_t M = *as_const_int(op->trans_a ? a[1] : a[0]), KA = *as_const_int(op->trans_a ? a[0] : a[1]);
    std::int64_t KB = *as_const_int(op->trans_b ? b[1] : b[0]), N = *as_const_int(op->trans_b ? b[0] : b[1]);
    std::int64_t CM = *as_const_int(c[0]), CN = *as_const_int(c[1]);
    if (KA != KB || CM != M || CN != N)
      TESSEL_USER_ERROR(name, op->where,
                        "tile shapes do not chain: A" << (op->trans_a ? "^T" : "") << " is " << M << "x" << KA
                                                      << ", B" << (op->trans_b ? "^T" : "") << " is " << KB
                                                      << "x" << N << ", C is " << CM << "x" << CN
                                                      << "; need A MxK, B KxN, C MxN");
    if (A->scope == Scope::Fragment && (A.ndim() != 2 || A.const_shape() != std::vector<std::int64_t>{M, KA}))
      TESSEL_USER_ERROR(
          name, op->where,
          "A " << A->name << " is a fragment of shape " << shape_str(A->shape) << "; a gemm takes "
               << "a fragment A whole, as a 2-D [M, K] tile (here [" << M << ", " << KA << "])");
    return s;
  }
};

}  // namespace

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
std::optional<SharedLayout> wgmma_layout(const Buffer& b, bool k_major) {
  auto [rows, cols] = matrix_shape(b);
  const int swizzle = wgmma_swizzle(b, k_major);
  if (swizzle == 0) return std::nullopt;
  return SharedLayout::wgmma_swizzle(rows, cols, dtype_bytes(b->dtype), swizzle);
}

const TileOp& gemm_op() {
  static const GemmOp op;
  return op;
}

}  // namespace tessel::ops
