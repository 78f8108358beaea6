// multicast_cluster_loads
//   Does:     on sm_90a, acts on use_cluster(x, y): the 2 blocks of a cluster -- adjacent along x
//             (x = 2) or along y (y = 2) -- load each operand tile that is the same for both
//             (a TMA load of the K loop whose global region does not depend on the block index
//             that differs between them: A's in the tutorial GEMM along x, B's along y) once,
//             each CTA its half of the tile's rows, multicast into both CTAs' stage:
//               kernel grid(gx, gy) (bx, by) {
//                 use_cluster(2, 1); ...
//                 pipelined ko in [0, n) { tma_load(A[by, ko] -> As); tma_load(B[ko, bx] -> Bs); gemm }
//                 <epilogue>
//               }
//             becomes
//               kernel grid(2 ceil(gx / 2), gy) (bx, by) {
//                 ...
//                 pipelined ko in [0, n) { tma_load(A[by, ko] -> As, multicast=2); tma_load(B...); gemm }
//                 if (bx < gx) { <epilogue> }       (only when gx is odd: the grid's extra block)
//               }
//             with cluster rank = blockIdx.x % 2 always: for y = 2 the grid is regridded so that
//             the two blocks of a pair are adjacent along x -- grid(2 gx, ceil(gy / 2)) (c, p),
//             the author's bx = c / 2 and by = 2 p + c % 2. A use_swizzle panel is made even
//             (along x) or doubled (along y), so that tessel::rasterize's order -- and
//             persist_tiles', which deals the tiles to an even number of blocks -- keeps the
//             two blocks of a cluster on the two tiles of a pair at the same time. The multicast
//             map's box becomes one CTA's share (TmaParam::share_dim); plan_pipelines then counts
//             the consumers of both CTAs on each stage's `empty` barrier, whose release arrives in
//             both (the producers write into both CTAs' stages), insert_barriers syncs the cluster
//             after the barriers' initialization and before exit, and plan_kernel_abi launches
//             2-CTA clusters. Applies when all of these hold, else the IR is unchanged but for
//             the hint's removal (ctx.cluster_multicast.why_not):
//               - ctx.ring_epilogues() (a gemm_from_passes kernel whose K loop is one gemm's
//                 TMA ring, or persistent_rings), the Hopper switches, multicast, async_pipeline and
//                 warp_specialization on, and the kernel's threads whole warpgroups;
//               - the grid is constant (2-D at least for y = 2);
//               - the kernel's top level is shared and fragment declarations, use_swizzle,
//                 use_cluster, fills, one Pipelined loop from 0 of constant trip count whose TMA
//                 loads plan_tma_copies made (so both CTAs run the same iterations of the
//                 ring), and then the epilogue (anything without TMA loads);
//               - at least one of the loop's loads does not depend on the varying block index,
//                 each such tile's rows (at most 256) are a multiple of 16 (each share whole
//                 8-row swizzle atoms), and its map serves no other load.
//   Requires: plan_tma_copies (the ring's loads are TmaLoadStmts and their maps in
//             ctx.tma_params); verify_program (ctx.grid, ctx.block_vars); split_k_clusters, which
//             declines kernels with use_cluster.
//   Ensures:  no ClusterStmt is left. When applied: ctx.grid and ctx.block_vars are the
//             regridded kernel's, ctx.cluster_multicast names the shared tiles, the shared loads
//             have multicast = 2 and their maps' boxes the shares.
#include <algorithm>

#include "passes/GlobalRegions.hpp"
#include "passes/PassUtil.hpp"
#include "passes/Passes.hpp"
#include "tessel/ir/Mutator.hpp"

namespace tessel::passes {

using namespace ir;

namespace {

constexpr int kCtas = 2;

struct Plan {
  const ClusterStmt* cluster = nullptr;
  const ForStmt* loop = nullptr;
  int axis = 0;                              // the grid axis the cluster's blocks differ along
  std::vector<const TmaLoadStmt*> shared;    // loads the same for both CTAs
  std::vector<std::pair<size_t, int>> maps;  // (ctx.tma_params index, share_dim) of theirs
};

// Why the kernel's use_cluster cannot multicast; empty when it can (and `plan` says how).
std::string why_not(const KernelStmt& k, const PassContext& ctx, Plan& plan) {
  if (k.threads % 128 != 0) return "the kernel's threads are not whole warpgroups";
  for (const Expr& g : k.grid)
    if (!as_const_int(g)) return "the grid is not constant";
  plan.axis = plan.cluster->cluster_x == kCtas ? 0 : 1;
  if (plan.axis >= static_cast<int>(k.grid.size()))
    return "use_cluster(1, 2) in a kernel whose grid has no y axis";
  if (*as_const_int(k.grid[0]) > 0x3fffffff) return "the grid's x extent cannot double";
  for (const Stmt& s : flatten_seq(k.body)) {
    if (plan.loop) {
      if (holds_tma_load(s)) return "a second loop of TMA loads after the K loop";
      continue;  // the epilogue
    }
    if (s.as<DeclBuffer>() || s.as<SwizzleStmt>() || s.as<ClusterStmt>() || s.as<FillStmt>()) continue;
    const auto* loop = s.as<ForStmt>();
    if (!loop || loop->kind != ForKind::Pipelined || !holds_tma_load(loop->body))
      return "a statement before the K loop other than declarations, fills and hints";
    plan.loop = loop;
  }
  if (!plan.loop) return "no Pipelined loop of TMA loads at the kernel's top level";
  if (!is_const_int(plan.loop->min, 0) || !as_const_int(plan.loop->extent))
    return "the K loop's trip count is not a constant from 0 (both CTAs must run the same iterations)";
  const Var& varying = k.block_vars[static_cast<size_t>(plan.axis)];
  std::vector<const TmaLoadStmt*> own;
  for (const Stmt& s : flatten_seq(plan.loop->body)) {
    const auto* t = s.as<TmaLoadStmt>();
    if (!t) continue;
    const bool depends = std::any_of(t->src.starts.begin(), t->src.starts.end(),
                                     [&](const Expr& e) { return uses_var(e, varying); });
    (depends ? own : plan.shared).push_back(t);
  }
  if (plan.shared.empty())
    return "every load of the K loop depends on " + varying.name() +
           ", which differs between the cluster's blocks";
  for (const TmaLoadStmt* t : plan.shared) {
    if (std::any_of(own.begin(), own.end(), [&](const TmaLoadStmt* o) { return o->map.same_as(t->map); }))
      return "the map " + t->map.name() + " serves loads of both kinds";
    std::optional<GlobalMatrix> m = global_matrix(t->src);
    auto rows = m && m->row_dim >= 0 ? as_const_int(t->src.extents[static_cast<size_t>(m->row_dim)])
                                     : std::optional<std::int64_t>();
    if (!rows || *rows % (8 * kCtas) != 0)
      return "the tile " + t->dst.buffer->name + "'s rows are not a multiple of " +
             std::to_string(8 * kCtas) + " (each CTA's share is whole 8-row swizzle atoms)";
    size_t p = 0;
    while (p < ctx.tma_params.size() && !ctx.tma_params[p].var.same_as(t->map)) ++p;
    TESSEL_INTERNAL_CHECK(p < ctx.tma_params.size(), "a TMA load whose map is not a kernel parameter");
    if (std::none_of(plan.maps.begin(), plan.maps.end(), [&](const auto& x) { return x.first == p; }))
      plan.maps.emplace_back(p, m->row_dim);
  }
  return "";
}

}  // namespace

Stmt multicast_cluster_loads(const Stmt& body, PassContext& ctx) {
  const auto* k = body.as<KernelStmt>();
  if (!k) return body;
  Plan plan;
  for (const Stmt& s : flatten_seq(k->body))
    if (const auto* c = s.as<ClusterStmt>()) plan.cluster = c;
  if (!plan.cluster || ctx.hopper.selected) return body;
  PassContext::ClusterMulticast& out = ctx.cluster_multicast;
  // The hint is spent here either way: what is left of the kernel runs with or without clusters
  // as this pass decides.
  auto without_hint = [&] {
    std::vector<Stmt> top;
    for (const Stmt& s : flatten_seq(k->body))
      if (!s.as<ClusterStmt>()) top.push_back(s);
    return make_kernel(k->grid, k->threads, k->block_vars, make_seq(top, k->where), k->where);
  };
  if (ctx.target.sm != 90 || !ctx.allow_tma || !ctx.allow_wgmma) {
    out.why_not = "TMA multicast needs sm_90a with the Hopper switches on";
    return without_hint();
  }
  if (!ctx.ring_epilogues()) {
    out.why_not = ctx.ring_epilogues_why_not();
    return without_hint();
  }
  if (!ctx.allow_multicast || !ctx.allow_async_pipeline || !ctx.allow_warp_specialization) {
    out.why_not =
        "needs multicast, the asynchronous pipeline and warp specialization, one of which is turned off";
    return without_hint();
  }
  if (std::string why = why_not(*k, ctx, plan); !why.empty()) {
    out.why_not = why;
    return without_hint();
  }

  const auto w = k->where;
  const std::int64_t gx = *as_const_int(k->grid[0]);
  std::vector<Expr> grid = k->grid;
  std::vector<Var> vars = k->block_vars;
  std::vector<std::pair<Var, Expr>> remap;
  Expr guard;  // the grid's extra block (an odd extent along the cluster's axis) skips the epilogue
  if (plan.axis == 0) {
    grid[0] = make_int((gx + 1) / 2 * 2);
    if (gx % 2) guard = lt(vars[0], make_int(gx));
  } else {
    const std::int64_t gy = *as_const_int(k->grid[1]);
    grid[0] = make_int(2 * gx);
    grid[1] = make_int((gy + 1) / 2);
    Var c(vars[0].name() + "_pair"), p(vars[1].name() + "_pair");
    const Expr by = add(mul(p, make_int(2)), make_binary(BinaryOp::Mod, c, make_int(2)));
    remap = {{vars[0], make_binary(BinaryOp::Div, c, make_int(2))}, {vars[1], by}};
    if (gy % 2) guard = lt(by, make_int(gy));
    vars[0] = c;
    vars[1] = p;
  }

  std::vector<Stmt> top, epilogue;
  bool after = false;
  for (const Stmt& s : flatten_seq(k->body)) {
    if (s.as<ClusterStmt>()) continue;
    if (after) {
      epilogue.push_back(s);
      continue;
    }
    if (const auto* sw = s.as<SwizzleStmt>()) {
      // Keep each pair of tiles in one panel: even panels along x; along y, twice the columns
      // (each of the author's columns is two of the regridded kernel's).
      const int panel = plan.axis == 0 ? sw->panel_size + sw->panel_size % 2 : 2 * sw->panel_size;
      top.push_back(make_swizzle(panel, sw->where));
      continue;
    }
    if (s.get() != plan.loop) {
      top.push_back(s);
      continue;
    }
    class Share : public IRMutator {
     public:
      explicit Share(const std::vector<const TmaLoadStmt*>& shared) : shared_(shared) {}

     protected:
      Stmt mutate_node(const TmaLoadStmt* op, const Stmt& self) override {
        if (std::find(shared_.begin(), shared_.end(), op) == shared_.end()) return self;
        return make_tma_load(op->src, op->dst, op->map, op->bars, op->index, op->where, kCtas);
      }

     private:
      const std::vector<const TmaLoadStmt*>& shared_;
    };
    top.push_back(Share(plan.shared).mutate(s));
    after = true;
  }
  if (!epilogue.empty()) {
    Stmt e = make_seq(epilogue, w);
    top.push_back(guard.defined() ? make_if(guard, e, Stmt(), w) : e);
  }
  for (const auto& [p, dim] : plan.maps) {
    TmaParam& t = ctx.tma_params[p];
    t.box[static_cast<size_t>(dim)] /= kCtas;
    t.share_dim = dim;
  }
  out.applied = true;
  out.ctas = kCtas;
  out.axis = plan.axis;
  for (const TmaLoadStmt* t : plan.shared) {
    if (!contains_buffer(out.tiles, t->dst.buffer)) out.tiles.push_back(t->dst.buffer);
    const std::string& name = t->src.buffer->name;
    if (std::find(out.tensors.begin(), out.tensors.end(), name) == out.tensors.end())
      out.tensors.push_back(name);
  }
  out.why_not.clear();
  ctx.grid = grid;
  ctx.block_vars = vars;
  Stmt new_body = make_seq(top, w);
  if (!remap.empty()) new_body = substitute(new_body, remap);
  return make_kernel(grid, k->threads, vars, new_body, w);
}

}  // namespace tessel::passes
