// split_k_clusters
//   Does:     on sm_90a, splits each output tile's K loop over the R CTAs of a cluster (R = 2, 4
//             or 8) when the tiles alone would leave more than half the SMs idle and the loop is
//             long: the kernel
//               kernel grid(gx, ...) (bx, ...) {
//                 <shared tiles>; fill(acc, 0)
//                 pipelined ko in [0, n) { <TMA loads>; gemm(..., acc) ... }
//                 <epilogue>
//               }
//             becomes (the cluster is R blocks along x: rank = cta % R, the author's bx = cta / R)
//               kernel grid(R gx, ...) (cta, ...) {
//                 <shared tiles>; shared split_k_bars: i64[2 log2(R)]; fill(acc, 0)
//                 pipelined ko in [0, trips(rank)) { <the same, at ko + first(rank)> }
//                 cluster_reduce(acc += the other ranks', into rank 0, scratch = a ring tile)
//                 if (rank == 0) { <epilogue> }
//               }
//             where rank r takes q = n / R consecutive K tiles from r * q, and the last n % R
//             ranks one more each; so R times the CTAs stream the operands (disjoint shares of
//             K), and the partial sums meet in rank 0 along a binary tree through distributed
//             shared memory, each round into the ring its receiver has drained
//             (ops/ClusterReduce.cpp, device/tessel/cluster_reduce.cuh: no shared memory beyond
//             the ring's). R is the largest of 2, 4, 8 whose CTAs fit in one wave with a K loop of
//             at least 2048 each (HopperPolicy.hpp's split_k_cluster_ranks; for 2 the template's
//             rule, measured on the H200 -- at most half the SMs' tiles and K >= 4096). A
//             use_swizzle panel is dropped: every tile runs at once, in one wave, so no order among
//             them changes what shares the L2. persist_tiles then leaves the kernel alone (one tile
//             per CTA). Applies when all of these hold, else the IR is unchanged
//             (ctx.cluster_split.why_not):
//               - ctx.ring_epilogues() (a gemm_from_passes kernel whose K loop is one gemm's
//                 TMA ring, or persistent_rings), the Hopper switches, async_pipeline, warp_specialization
//                 and split_k on, and the kernel's threads whole warpgroups;
//               - the grid is constant and R >= 2 as above;
//               - the kernel's top level is shared and fragment declarations, use_swizzle, fills,
//                 one Pipelined loop from 0 of constant trip count n >= 2 whose statements are TMA
//                 loads (plan_tma_copies made it a ring) and gemms that all accumulate into one f32
//                 fragment, filled with 0 before the loop, and then the epilogue (anything); no
//                 use_cluster;
//               - a TMA destination of the loop holds the accumulator's bytes over its stages.
//             The loop's depth is n times the gemms' K extents per iteration.
//   Requires: plan_tma_copies (the ring's loads are TmaLoadStmts), infer_layouts (the
//             accumulator's registers per thread), verify_program (ctx.grid, ctx.block_vars).
//   Ensures:  when applied: ctx.grid and ctx.block_vars are the widened grid's, ctx.cluster_split
//             names the barriers and R (insert_barriers initializes the barriers and syncs the
//             cluster; plan_kernel_abi sets the cluster size), no SwizzleStmt is left.
#include <algorithm>

#include "passes/HopperPolicy.hpp"
#include "passes/PassUtil.hpp"
#include "passes/Passes.hpp"
#include "tessel/ir/Mutator.hpp"

namespace tessel::passes {

using namespace ir;

namespace {

// The gemm's K extent: A's columns (rows when transposed).
std::int64_t gemm_depth(const GemmStmt& g) {
  std::vector<std::int64_t> e;
  for (const Expr& x : g.A.extents)
    if (auto v = as_const_int(x)) e.push_back(*v);
  while (e.size() > 2 && e.front() == 1) e.erase(e.begin());
  if (e.size() != 2) return 0;
  return g.trans_a ? e[0] : e[1];
}

struct Plan {
  const ForStmt* loop = nullptr;
  Buffer acc, scratch;
  std::int64_t tiles = 0;
  int ranks = 1;  // the cluster's CTAs
};

// Why the kernel's K loop is not split; empty when it is (and `plan` says how).
std::string why_not(const KernelStmt& k, const PassContext& ctx, std::int64_t sms, Plan& plan) {
  if (k.threads % 128 != 0) return "the kernel's threads are not whole warpgroups";
  std::int64_t tiles = 1;
  for (const Expr& g : k.grid) {
    auto v = as_const_int(g);
    if (!v) return "the grid is not constant";
    tiles *= *v;
  }
  plan.tiles = tiles;
  if (*as_const_int(k.grid[0]) > 0x0fffffff) return "the grid's x extent cannot grow eightfold";
  std::vector<Buffer> zeroed;
  for (const Stmt& s : flatten_seq(k.body)) {
    if (s.as<ClusterStmt>()) return "use_cluster takes the cluster";
    if (plan.loop) continue;  // the epilogue: anything
    if (s.as<DeclBuffer>() || s.as<SwizzleStmt>()) continue;
    if (const auto* f = s.as<FillStmt>()) {
      if (f->dst.buffer->scope == Scope::Fragment && is_const_int(f->value, 0))
        zeroed.push_back(f->dst.buffer);
      if (f->dst.buffer->scope == Scope::Fragment) continue;
      return "a fill of " + f->dst.buffer->name + " before the K loop";
    }
    const auto* loop = s.as<ForStmt>();
    if (!loop || loop->kind != ForKind::Pipelined || !holds_tma_load(loop->body))
      return "a statement before the K loop other than declarations and fills";
    plan.loop = loop;
  }
  if (!plan.loop) return "no Pipelined loop of TMA loads at the kernel's top level";
  const ForStmt& loop = *plan.loop;
  auto n = as_const_int(loop.extent);
  if (!is_const_int(loop.min, 0) || !n || *n < 2)
    return "the K loop's trip count is not a constant from 0, at least 2";
  std::int64_t depth = 0;
  std::vector<Buffer> tma_tiles;
  for (const Stmt& s : flatten_seq(loop.body)) {
    if (const auto* t = s.as<TmaLoadStmt>()) {
      tma_tiles.push_back(t->dst.buffer);
    } else if (const auto* g = s.as<GemmStmt>()) {
      if (plan.acc.defined() && !plan.acc.same_as(g->C.buffer))
        return "the K loop's gemms accumulate into two fragments";
      plan.acc = g->C.buffer;
      depth += gemm_depth(*g);
    } else {
      return "the K loop holds more than TMA loads and gemms";
    }
  }
  if (!plan.acc.defined()) return "the K loop has no gemm";
  if (plan.acc->dtype != DType::f32) return "the accumulator is not f32";
  if (!contains_buffer(zeroed, plan.acc)) return "the accumulator is not filled with 0 before the K loop";
  auto layout = ctx.fragment_layouts.find(plan.acc->id);
  if (layout == ctx.fragment_layouts.end() || layout->second.per_thread % 4 != 0)
    return "the accumulator's registers are not whole 16-byte vectors";
  depth *= *n;
  plan.ranks = split_k_cluster_ranks(tiles, depth, static_cast<int>(sms));
  if (plan.ranks < 2)
    return std::to_string(tiles) + " tiles over a K loop of " + std::to_string(depth) + " on " +
           std::to_string(sms) + " SMs: a split pays for its hand-off at most " + std::to_string(sms / 2) +
           " tiles and a K loop of at least 4096";
  const std::int64_t need = std::int64_t{layout->second.per_thread} * k.threads * 4;
  const std::int64_t stages = std::max(1, loop.num_stages);
  for (const Buffer& b : tma_tiles)
    if (b.const_numel() * dtype_bytes(b->dtype) * stages >= need && !plan.scratch.defined()) plan.scratch = b;
  if (!plan.scratch.defined())
    return "no ring tile holds the accumulator's " + std::to_string(need) + " bytes for the hand-off";
  return "";
}

}  // namespace

Stmt split_k_clusters(const Stmt& body, PassContext& ctx) {
  if (ctx.target.sm != 90 || !ctx.allow_tma || !ctx.allow_wgmma || ctx.hopper.selected) return body;
  PassContext::ClusterSplit& out = ctx.cluster_split;
  if (!ctx.ring_epilogues()) {
    out.why_not = ctx.ring_epilogues_why_not();
    return body;
  }
  if (!ctx.allow_split_k || !ctx.allow_async_pipeline || !ctx.allow_warp_specialization) {
    out.why_not =
        "needs split_k, the asynchronous pipeline and warp specialization, one of which is turned off";
    return body;
  }
  const auto* k = body.as<KernelStmt>();
  if (!k) return body;
  const std::int64_t sms = ctx.target.sms();
  Plan plan;
  if (std::string why = why_not(*k, ctx, sms, plan); !why.empty()) {
    out.why_not = why;
    return body;
  }
  const auto w = k->where;
  Var cta("cta");
  const int R = plan.ranks;
  const Expr rank = make_binary(BinaryOp::Mod, cta, make_int(R));
  const std::vector<std::pair<Var, Expr>> block_x{
      {k->block_vars[0], make_binary(BinaryOp::Div, cta, make_int(R))}};
  // Two hand-off barriers per round of the reduction tree (log2(R) rounds).
  const int bar_count = 2 * (R == 2 ? 1 : R == 4 ? 2 : 3);
  Buffer bars = Buffer::make("split_k_bars", {make_int(bar_count)}, DType::i64, Scope::Shared, w);
  ctx.shared_layouts[bars->id] = SharedLayout::row_major(1, bar_count);

  const ForStmt& loop = *plan.loop;
  const std::int64_t n = *as_const_int(loop.extent), q = n / R, m = n % R;
  // Rank r takes q = n / R consecutive K tiles from r * q, the last m = n % R ranks one more:
  // trips q + (r + m) / R, first r * q + max(r + m - R, 0).
  const Expr first =
      m == 0 ? mul(rank, make_int(q))
             : add(mul(rank, make_int(q)),
                   make_binary(BinaryOp::Max, sub(add(rank, make_int(m)), make_int(R)), make_int(0)));
  const Expr trips = m == 0
                         ? make_int(q)
                         : add(make_int(q), make_binary(BinaryOp::Div, add(rank, make_int(m)), make_int(R)));
  Stmt split_body = substitute(loop.body, {{loop.var, add(loop.var, first)}});
  Stmt split_loop =
      make_for(loop.var, make_int(0), trips, ForKind::Pipelined, loop.num_stages, split_body, loop.where);

  std::vector<Stmt> top{make_decl(bars, w)}, epilogue;
  bool after = false;
  for (const Stmt& s : flatten_seq(k->body)) {
    if (s.as<SwizzleStmt>()) continue;
    if (after) {
      epilogue.push_back(s);
      continue;
    }
    if (s.get() == plan.loop) {
      top.push_back(split_loop);
      top.push_back(make_cluster_reduce(plan.acc, plan.scratch, bars, rank, R, loop.where));
      after = true;
      continue;
    }
    top.push_back(s);
  }
  if (!epilogue.empty())
    top.push_back(make_if(make_binary(BinaryOp::EQ, rank, make_int(0)), make_seq(epilogue, w), Stmt(), w));

  std::vector<Expr> grid = k->grid;
  grid[0] = make_int(R * *as_const_int(grid[0]));
  std::vector<Var> vars = k->block_vars;
  vars[0] = cta;
  Stmt new_body = substitute(make_seq(top, w), block_x);
  ctx.grid = grid;
  ctx.block_vars = vars;
  out = {true, bars, k->threads, R, plan.tiles, ""};
  return make_kernel(grid, k->threads, vars, new_body, w);
}

}  // namespace tessel::passes
