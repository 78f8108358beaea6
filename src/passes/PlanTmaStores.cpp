// plan_tma_stores
//   Does:     on sm_90a, chooses the TMA-store epilogue for copies of a wgmma accumulator to a
//             16-bit global tensor: the tile goes through a staging tile in shared memory
//             (WgmmaSwizzle128Layout<BM, BN, 2>, declared here) and one TMA store per 64-column
//             panel and 64-row block of a consumer warpgroup (device/tessel/tma_epilogue.cuh), so the
//             warpgroup does not wait for its stores -- in a persistent kernel it goes on to the next tile's
//             gemms while they drain. For each such copy: the output tensor gets a tensor map (a
//             kernel parameter, ctx.tma_params: a box of 64 along the rows and the columns, 1 elsewhere,
//             128-byte swizzle), the plan goes in ctx.tma_stores (ops/Copy.cpp lowers the copy by it), and
//             the kernel ends with drain_tma_stores() (each warpgroup waits until its stores have read shared
//             memory). Applies when ctx.ring_epilogues() (persistent_rings, or a gemm_from_passes
//             kernel whose K loop is one gemm's TMA ring), the Hopper switches, async_pipeline and tma_store
//             are on and: the copy's source is a whole fragment in the accumulator layout of a gemm that
//             lowers to WarpgroupGemm with at most 4 warpgroups of one or more 64-row blocks each (the
//             accumulator itself, or an f16 / bf16 / f32 tile an epilogue computed from it;
//             ctx.fragment_layouts), its destination a [BM, BN] region (BN a multiple of 64; the rows along
//             one dimension, the columns along the last, extent 1 elsewhere: a [1, BM, 1, D] tile of
//             attention's [B, S, H, D] output) of a 16-bit tensor of 2 to 5 dimensions whose last dimension
//             is contiguous, whose other strides are 16-byte multiples and whose extents fit a tensor map, no
//             Parallel nest or loop other than a persistent kernel's tile loop encloses the copy, and the
//             kernel's shared memory with the staging tile still fits the target. Otherwise the copy keeps
//             its register stores.
//   Requires: infer_layouts (fragment layouts), plan_pipelines (the rings' final sizes, for the
//             shared-memory check).
//   Ensures:  every ctx.tma_stores entry names a declared staging tile and a map in
//             ctx.tma_params; the IR is unchanged otherwise.
#include <algorithm>

#include "passes/GlobalRegions.hpp"
#include "passes/PassUtil.hpp"
#include "passes/Passes.hpp"
#include "tessel/ir/Mutator.hpp"

namespace tessel::passes {

using namespace ir;

namespace {

class StorePlanner : public IRVisitor {
 public:
  explicit StorePlanner(PassContext& ctx) : ctx_(ctx) {}
  std::vector<const CopyStmt*> candidates;

 protected:
  void visit_node(const ForStmt* op) override {
    if (op->kind == ForKind::Tiles) return IRVisitor::visit_node(op);
    ++loops_;
    IRVisitor::visit_node(op);
    --loops_;
  }
  void visit_node(const CopyStmt* op) override {
    if (loops_ == 0 && fits(op)) candidates.push_back(op);
  }

 private:
  bool fits(const CopyStmt* op) const {
    const Buffer& f = op->src.buffer;
    const Buffer& g = op->dst.buffer;
    if (f->scope != Scope::Fragment || g->scope != Scope::Global) return false;
    auto l = ctx_.fragment_layouts.find(f->id);
    if (l == ctx_.fragment_layouts.end() || l->second.kind != FragmentLayout::Kind::GemmAccumulator ||
        !l->second.wgmma || (f->dtype != DType::f32 && f->dtype != DType::f16 && f->dtype != DType::bf16))
      return false;
    if (f.ndim() != 2) return false;
    const auto shape = f.const_shape();
    const std::int64_t BM = shape[0], BN = shape[1];
    // Warpgroups of 16-row warp strips (one m64 block each, or several interleaved), at most 4.
    const int warps_m = l->second.warps_m;
    if (warps_m % 4 || warps_m / 4 > 4 || BM % (16 * warps_m) ||
        (BM > 16 * warps_m && !l->second.gemm.interleaved) || BN % 64 || BN > 256)
      return false;
    for (size_t d = 0; d < 2; ++d)
      if (!is_const_int(op->src.starts[d], 0) || as_const_int(op->src.extents[d]) != shape[d]) return false;
    if ((g->dtype != DType::f16 && g->dtype != DType::bf16) || g.ndim() < 2 || g.ndim() > 5) return false;
    // A tensor map's strides: the innermost 1, the others multiples of 16 bytes below 2^40; its
    // extents below 2^31 (the stores' coordinates are ints).
    const std::vector<Expr> strides = g.strides();
    if (!is_const_int(strides.back(), 1)) return false;
    for (size_t d = 0; d + 1 < strides.size(); ++d) {
      auto st = as_const_int(strides[d]);
      if (!st || (*st * 2) % 16 != 0 || *st * 2 >= (std::int64_t(1) << 40)) return false;
    }
    for (const Expr& e : g->shape)
      if (auto n = as_const_int(e); !n || *n >= (std::int64_t(1) << 31)) return false;
    // The region: the tile's rows along one dimension, its columns along the last, 1 elsewhere.
    std::optional<GlobalMatrix> m = global_matrix(op->dst);
    if (!m || m->row_dim < 0 || m->col_dim != g.ndim() - 1 || !is_const_int(m->col_stride, 1)) return false;
    return as_const_int(op->dst.extents[static_cast<size_t>(m->row_dim)]) == BM &&
           as_const_int(op->dst.extents[static_cast<size_t>(m->col_dim)]) == BN;
  }

  PassContext& ctx_;
  int loops_ = 0;
};

}  // namespace

// The shared memory the kernel takes with `leading` bytes of staging tiles (1024-byte multiples)
// declared ahead of its buffers, placed as plan_shared_memory places them (in declaration order,
// 1024-byte alignment for wgmma-layout tiles, 128 otherwise), plus the 1024 bytes of slack that
// realign the array at run time.
std::int64_t kernel_shared_bytes(const Stmt& body, const PassContext& ctx, std::int64_t leading) {
  struct Decls : IRVisitor {
    std::vector<Buffer> shared;
    void visit_node(const DeclBuffer* op) override {
      if (op->buffer->scope == Scope::Shared) shared.push_back(op->buffer);
    }
  } decls;
  decls.visit(body);
  std::int64_t offset = leading;
  for (const Buffer& b : decls.shared) {
    auto l = ctx.shared_layouts.find(b->id);
    const std::int64_t align = l != ctx.shared_layouts.end() && l->second.wgmma() ? 1024 : 128;
    offset = (offset + align - 1) / align * align + b.const_numel() * dtype_bytes(b->dtype);
  }
  return offset + 1024;
}

Stmt plan_tma_stores(const Stmt& body, PassContext& ctx) {
  // GEMM-shaped kernels (gemm_from_passes) or any ring under persistent_rings: other kernels keep
  // the stores they were measured with.
  if (ctx.target.sm != 90 || !ctx.allow_tma || !ctx.allow_wgmma || !ctx.allow_warp_specialization ||
      !ctx.allow_async_pipeline || !ctx.allow_tma_store || ctx.hopper.selected || !ctx.uses_wgmma ||
      !ctx.ring_epilogues())
    return body;
  const auto* k = body.as<KernelStmt>();
  if (!k) return body;
  StorePlanner planner(ctx);
  planner.visit(k->body);
  if (planner.candidates.empty()) return body;
  std::int64_t staged = 0;  // the staging tiles chosen so far, declared first
  std::vector<Stmt> decls;
  for (const CopyStmt* c : planner.candidates) {
    const auto shape = c->src.buffer.const_shape();
    const std::int64_t tile = shape[0] * shape[1] * 2;  // a multiple of 8 KB (64 x 64 x 2 bytes)
    if (kernel_shared_bytes(body, ctx, staged + tile) > ctx.target.smem_cap) continue;
    staged += tile;
    const Buffer& g = c->dst.buffer;
    Buffer staging = Buffer::make(c->src.buffer->name + "_staging", {make_int(shape[0]), make_int(shape[1])},
                                  g->dtype, Scope::Shared, c->where);
    ctx.shared_layouts[staging->id] = SharedLayout::wgmma_swizzle(shape[0], shape[1], 2, 128);
    TmaParam map;
    map.tensor = g;
    map.box.assign(static_cast<size_t>(g.ndim()), 1);
    const std::optional<GlobalMatrix> m = global_matrix(c->dst);
    map.box[static_cast<size_t>(m->row_dim)] = 64;
    map.box[static_cast<size_t>(m->col_dim)] = 64;
    map.swizzle_bytes = 128;
    Var var;
    for (const TmaParam& t : ctx.tma_params)
      if (t.tensor.same_as(g) && t.box == map.box && t.swizzle_bytes == map.swizzle_bytes) var = t.var;
    if (!var.defined()) {
      map.var = Var(g->name + "_store_map");
      ctx.tma_params.push_back(map);
      var = map.var;
    }
    ctx.tma_stores.push_back({c->src.buffer->id, g->id, staging, var});
    decls.push_back(make_decl(staging, c->where));
  }
  if (decls.empty()) return body;
  std::vector<Stmt> out = decls;
  out.push_back(k->body);
  out.push_back(make_device_call("tessel::drain_tma_stores", {}, {}, k->where));
  return make_kernel(k->grid, k->threads, k->block_vars, make_seq(out, k->where), k->where);
}

}  // namespace tessel::passes
