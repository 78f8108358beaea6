// split_k_clusters
//   Does:     on sm_90a, splits each output tile's K loop over the two CTAs of a cluster when the
//             tiles alone would leave more than half the SMs idle and the loop is long: the kernel
//               kernel grid(gx, ...) (bx, ...) {
//                 <shared tiles>; fill(acc, 0)
//                 pipelined ko in [0, n) { <TMA loads>; gemm(..., acc) ... }
//                 <epilogue>
//               }
//             becomes (the cluster is 2 blocks along x: rank = cta % 2, the author's bx = cta / 2)
//               kernel grid(2 gx, ...) (cta, ...) {
//                 <shared tiles>; shared split_k_bars: i64[2]; fill(acc, 0)
//                 pipelined ko in [0, n / 2 (+ rank when n is odd)) { <the same, at ko + rank * (n / 2)> }
//                 cluster_reduce(acc += the peer's, into rank 0, scratch = a ring tile)
//                 if (rank == 0) { <epilogue> }
//               }
//             so twice the CTAs stream the operands (the cluster's two CTAs read disjoint halves of
//             K), and the rank-1 CTA's partial sums reach the rank-0 CTA through distributed
//             shared memory, into the ring it has drained (ops/ClusterReduce.cpp,
//             device/tessel/cluster_reduce.cuh: no shared memory beyond the ring's). A use_swizzle
//             panel is dropped: every tile runs at once, in one wave, so no order among them
//             changes what shares the L2. persist_tiles then leaves the kernel alone (one tile per
//             CTA). Applies when all of these hold, else the IR is unchanged (ctx.cluster_split.why_not):
//               - JitOptions::gemm_from_passes or persistent_rings (opt-in until measured on the
//                 H200), the Hopper switches, async_pipeline, warp_specialization and split_k on,
//                 and the kernel's threads whole warpgroups;
//               - the grid is constant and its tiles fill at most half the SMs, with a K loop of at
//                 least 4096 (HopperPolicy.hpp's hopper_split_k_pays: the template's rule, measured
//                 on the H200);
//               - the kernel's top level is shared and fragment declarations, use_swizzle, fills,
//                 one Pipelined loop from 0 of constant trip count n >= 2 whose statements are TMA
//                 loads (plan_tma_copies made it a ring) and gemms that all accumulate into one f32
//                 fragment, filled with 0 before the loop, and then the epilogue (anything); no
//                 use_cluster;
//               - a TMA destination of the loop holds the accumulator's bytes over its stages.
//             The loop's depth is n times the gemms' K extents per iteration.
//   Requires: plan_tma_copies (the ring's loads are TmaLoadStmts), infer_layouts (the
//             accumulator's registers per thread), verify_program (ctx.grid, ctx.block_vars).
//   Ensures:  when applied: ctx.grid and ctx.block_vars are the doubled grid's, ctx.cluster_split
//             names the barriers (insert_barriers initializes them and syncs the cluster;
//             plan_kernel_abi sets the cluster size), no SwizzleStmt is left.
#include <algorithm>

#include "passes/HopperPolicy.hpp"
#include "passes/PassUtil.hpp"
#include "passes/Passes.hpp"
#include "tessel/ir/Mutator.hpp"

namespace tessel::passes {

using namespace ir;

namespace {

constexpr int kDefaultSms = 132;  // the H200's, when the target does not say

bool holds_tma_load(const Stmt& s) {
  struct Finder : IRVisitor {
    bool found = false;
    void visit_node(const TmaLoadStmt*) override { found = true; }
  } f;
  f.visit(s);
  return f.found;
}

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
  if (*as_const_int(k.grid[0]) > 0x3fffffff) return "the grid's x extent cannot double";
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
  if (!hopper_split_k_pays(tiles, depth, static_cast<int>(sms)))
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
    out.why_not = "opt-in until measured (JitOptions::gemm_from_passes or persistent_rings)";
    return body;
  }
  if (!ctx.allow_split_k || !ctx.allow_async_pipeline || !ctx.allow_warp_specialization) {
    out.why_not =
        "needs split_k, the asynchronous pipeline and warp specialization, one of which is turned off";
    return body;
  }
  const auto* k = body.as<KernelStmt>();
  if (!k) return body;
  const std::int64_t sms = ctx.target.sm_count > 0 ? ctx.target.sm_count : kDefaultSms;
  Plan plan;
  if (std::string why = why_not(*k, ctx, sms, plan); !why.empty()) {
    out.why_not = why;
    return body;
  }
  const auto w = k->where;
  Var cta("cta");
  const Expr rank = make_binary(BinaryOp::Mod, cta, make_int(2));
  const std::vector<std::pair<Var, Expr>> block_x{
      {k->block_vars[0], make_binary(BinaryOp::Div, cta, make_int(2))}};
  Buffer bars = Buffer::make("split_k_bars", {make_int(2)}, DType::i64, Scope::Shared, w);
  ctx.shared_layouts[bars->id] = SharedLayout::row_major(1, 2);

  const ForStmt& loop = *plan.loop;
  const std::int64_t n = *as_const_int(loop.extent), half = n / 2;
  // Rank 0 takes K tiles [0, n / 2), rank 1 the rest (one more when n is odd).
  const Expr first = mul(rank, make_int(half));
  const Expr trips = n % 2 == 0 ? make_int(half) : add(make_int(half), rank);
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
      top.push_back(make_cluster_reduce(plan.acc, plan.scratch, bars, rank, loop.where));
      after = true;
      continue;
    }
    top.push_back(s);
  }
  if (!epilogue.empty())
    top.push_back(make_if(make_binary(BinaryOp::EQ, rank, make_int(0)), make_seq(epilogue, w), Stmt(), w));

  std::vector<Expr> grid = k->grid;
  grid[0] = make_int(2 * *as_const_int(grid[0]));
  std::vector<Var> vars = k->block_vars;
  vars[0] = cta;
  Stmt new_body = substitute(make_seq(top, w), block_x);
  ctx.grid = grid;
  ctx.block_vars = vars;
  out = {true, bars, k->threads, plan.tiles, ""};
  return make_kernel(grid, k->threads, vars, new_body, w);
}

}  // namespace tessel::passes
