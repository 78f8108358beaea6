// select_hopper_gemm
//   Does:     only when JitOptions::gemm_from_passes is off (TESSEL_DISABLE=gemm_from_passes; by
//             default the generic passes compile every GEMM and this pass leaves the IR and
//             ctx.hopper alone):
//             on sm_90a, recognizes the tutorial's GEMM kernel — clear(C_local); a Pipelined
//             loop of {copy A tile, copy B tile, gemm}; copy(C_local -> C) — and, when its tile
//             fits the Hopper instructions, replaces the whole kernel by the warp-specialized
//             persistent GEMM of device/tessel/hopper_gemm.cuh: a TMA producer warpgroup feeding
//             a num_stages-deep ring of 128-byte-swizzled tiles through full/empty mbarriers,
//             and threads/128 consumer warpgroups issuing wgmma (setmaxnreg moves registers to
//             them). The author's block_M/N/K, num_stages, threads and use_swizzle panel carry
//             over. When the tiles fill at most half the GPU and K >= 4096, each tile's K
//             loop is split over the two CTAs of a cluster (SplitK = 2; ctx.hopper.split_k);
//             otherwise 16-bit outputs are stored through a staging tile and TMA (a third
//             tensor map, for C) when it fits beside the ring (ctx.hopper.tma_store).
//             use_cluster(2, 1) / (1, 2) launches 2-CTA clusters of horizontally / vertically
//             adjacent tiles that load the A / B tile they share once and multicast it
//             (ctx.hopper.cluster_n / cluster_m; no split-K then).
//             Parallel(BM, BN) nests between the loop and the store that work element by
//             element (bias, scale, activation, casts) become a per-element lambda the kernel
//             applies to its accumulators before storing (HopperEpilogue.hpp;
//             ctx.hopper.fused_epilogue). Anything else (a reduction or a shifted index in the
//             epilogue, a transposed operand, tiles that do not divide the wgmma/TMA shapes,
//             rows that are not 16-byte aligned) keeps the mma.sync path, and
//             ctx.hopper.why_not says why.
//   Requires: verify_program (extents filled in); runs before infer_layouts, which the
//             replaced kernel no longer needs.
//   Ensures:  when selected: one KernelStmt whose body is a single DeviceCall, ctx.hopper and
//             ctx.tma_params describe the launch; otherwise the IR is unchanged.
#include <algorithm>

#include "passes/HopperEpilogue.hpp"
#include "passes/HopperPolicy.hpp"
#include "passes/Passes.hpp"
#include "tessel/Error.hpp"
#include "tessel/ir/Printer.hpp"

namespace tessel::passes {

using namespace ir;

namespace {

struct GemmKernel {
  const KernelStmt* kernel = nullptr;
  const FillStmt* clear = nullptr;
  const ForStmt* loop = nullptr;
  const CopyStmt *copy_a = nullptr, *copy_b = nullptr, *store = nullptr;
  const GemmStmt* gemm = nullptr;
  std::vector<Stmt> epilogue;  // the statements between the loop and the store
  int panel = 0;
  const ClusterStmt* cluster = nullptr;  // use_cluster(x, y), if any
};

std::vector<Stmt> flatten(const Stmt& s) {
  if (const auto* seq = s.as<SeqStmt>()) return seq->stmts;
  return {s};
}

bool whole(const Region& r) {
  for (size_t d = 0; d < r.starts.size(); ++d)
    if (!is_const_int(r.starts[d], 0) || as_const_int(r.extents[d]) != as_const_int(r.buffer->shape[d]))
      return false;
  return true;
}

bool same_text(const Expr& a, const Expr& b) {
  return to_string(a) == to_string(b);
}

// Matches the kernel's statements against the tutorial GEMM; a message when it does not match.
std::string match(const Stmt& body, GemmKernel& g) {
  std::vector<Stmt> top = flatten(body);
  const KernelStmt* k = top.size() == 1 ? top[0].as<KernelStmt>() : nullptr;
  if (!k) return "the program is not a single kernel";
  g.kernel = k;
  if (k->grid.size() != 2) return "the kernel grid is not 2-D";
  std::vector<Stmt> steps;
  for (const Stmt& s : flatten(k->body)) {
    if (s.as<DeclBuffer>()) continue;
    if (const auto* sw = s.as<SwizzleStmt>()) {
      g.panel = sw->panel_size;
      continue;
    }
    if (const auto* cl = s.as<ClusterStmt>()) {
      g.cluster = cl;
      continue;
    }
    steps.push_back(s);
  }
  const char* shape = "the kernel body is not clear; pipelined loop; element-wise epilogue; store";
  if (steps.size() < 3) return shape;
  g.clear = steps[0].as<FillStmt>();
  g.loop = steps[1].as<ForStmt>();
  g.store = steps.back().as<CopyStmt>();
  if (!g.clear || !g.loop || !g.store || g.loop->kind != ForKind::Pipelined) return shape;
  g.epilogue.assign(steps.begin() + 2, steps.end() - 1);
  std::vector<Stmt> inner = flatten(g.loop->body);
  if (inner.size() != 3) return "the pipelined loop is not {copy A, copy B, gemm}";
  g.gemm = inner[2].as<GemmStmt>();
  const auto* c0 = inner[0].as<CopyStmt>();
  const auto* c1 = inner[1].as<CopyStmt>();
  if (!g.gemm || !c0 || !c1) return "the pipelined loop is not {copy A, copy B, gemm}";
  g.copy_a = c0->dst.buffer.same_as(g.gemm->A.buffer) ? c0 : c1;
  g.copy_b = c0->dst.buffer.same_as(g.gemm->A.buffer) ? c1 : c0;
  if (!g.copy_a->dst.buffer.same_as(g.gemm->A.buffer) || !g.copy_b->dst.buffer.same_as(g.gemm->B.buffer))
    return "the loop's copies do not fill the gemm's operands";
  if (g.gemm->trans_a || g.gemm->trans_b) return "a transposed gemm operand";
  if (!whole(g.gemm->A) || !whole(g.gemm->B) || !whole(g.gemm->C) || !whole(g.copy_a->dst) ||
      !whole(g.copy_b->dst) || !whole(g.store->src))
    return "the tiles are not used whole";
  if (!g.clear->dst.buffer.same_as(g.gemm->C.buffer) || !whole(g.clear->dst) ||
      !(is_const_int(g.clear->value, 0) ||
        (g.clear->value.as<FloatImm>() && g.clear->value.as<FloatImm>()->value == 0)))
    return "the accumulator is not cleared to zero before the loop";
  if (g.store->src.buffer->scope != Scope::Fragment || g.store->dst.buffer->scope != Scope::Global)
    return "the kernel does not end by storing a fragment to a global tensor";
  if (g.copy_a->src.buffer->scope != Scope::Global || g.copy_b->src.buffer->scope != Scope::Global ||
      g.copy_a->pad.defined() || g.copy_b->pad.defined())
    return "the operands are not plain copies from global tensors";
  return "";
}

}  // namespace

Stmt select_hopper_gemm(const Stmt& body, PassContext& ctx) {
  HopperPlan& plan = ctx.hopper;
  // The default: the generic passes compile every kernel, and the template is not asked (nor
  // reported as declined).
  if (ctx.gemm_from_passes) return body;
  if (ctx.target.sm != 90) {
    plan.why_not = "the target is " + ctx.target.arch + ", not sm_90a";
    return body;
  }
  if (!ctx.allow_tma || !ctx.allow_wgmma || !ctx.allow_warp_specialization) {
    plan.why_not = "turned off by JitOptions (disable_tma / disable_wgmma / disable_warp_specialization)";
    return body;
  }
  GemmKernel g;
  std::string why = match(body, g);
  auto reject = [&](const std::string& reason) {
    plan.why_not = reason;
    return body;
  };
  if (!why.empty()) return reject(why);
  const Buffer &A = g.copy_a->src.buffer, &B = g.copy_b->src.buffer, &C = g.store->dst.buffer;
  if (A.ndim() != 2 || B.ndim() != 2 || C.ndim() != 2) return reject("the tensors are not 2-D");
  if (!A.row_major() || !B.row_major() || !C.row_major())
    return reject("a tensor is not row-major (strided)");
  auto a = A.const_shape(), b = B.const_shape(), c = C.const_shape();
  std::int64_t M = a[0], K = a[1], N = b[1];
  if (b[0] != K || c[0] != M || c[1] != N) return reject("A, B and C are not M x K, K x N and M x N");
  auto cs = g.gemm->C.buffer.const_shape(), as = g.gemm->A.buffer.const_shape();
  std::int64_t BM = cs[0], BN = cs[1], BK = as[1];
  const Var &bx = g.kernel->block_vars[0], &by = g.kernel->block_vars[1], &ko = g.loop->var;
  auto mul = [](const Expr& x, std::int64_t v) { return make_binary(BinaryOp::Mul, x, make_int(v)); };
  if (!same_text(g.copy_a->src.starts[0], mul(by, BM)) || !same_text(g.copy_a->src.starts[1], mul(ko, BK)) ||
      !same_text(g.copy_b->src.starts[0], mul(ko, BK)) || !same_text(g.copy_b->src.starts[1], mul(bx, BN)) ||
      !same_text(g.store->dst.starts[0], mul(by, BM)) || !same_text(g.store->dst.starts[1], mul(bx, BN)))
    return reject("the tiles are not addressed as A(by*BM, ko*BK), B(ko*BK, bx*BN), C(by*BM, bx*BN)");
  if (as_const_int(g.kernel->grid[0]) != (N + BN - 1) / BN ||
      as_const_int(g.kernel->grid[1]) != (M + BM - 1) / BM ||
      as_const_int(g.loop->extent) != (K + BK - 1) / BK || !is_const_int(g.loop->min, 0))
    return reject("the grid or the K loop does not cover the problem tile by tile");
  // Parallel nests between the loop and the store run per element on the accumulators.
  HopperEpilogue epilogue;
  why =
      fuse_hopper_epilogue(g.epilogue, g.gemm->C.buffer, g.store->src.buffer, g.kernel->block_vars, epilogue);
  if (!why.empty()) return reject(why);
  DType t = A->dtype;
  if ((t != DType::f16 && t != DType::bf16) || B->dtype != t)
    return reject("A and B are not both f16 or both bf16");
  if (C->dtype != t && C->dtype != DType::f32) return reject("C is neither the input dtype nor f32");
  const int consumers = ctx.threads / 128;
  const int stages = g.loop->num_stages;
  if (ctx.threads % 128 || consumers < 1 || consumers > 2)
    return reject("threads = " + std::to_string(ctx.threads) +
                  " is not 128 or 256 (one or two consumer warpgroups)");
  if (BM % (64 * consumers) || BM > 256)
    return reject("block_M is not a multiple of 64 per consumer warpgroup, <= 256");
  if (BN % 64 || BN > 256) return reject("block_N is not a multiple of 64 up to 256");
  if (BK != 32 && (BK % 64 || BK > 256))
    return reject("block_K is not 32 (64-byte swizzle) or a multiple of 64 (128-byte swizzle) up to 256");
  if (stages < 2) return reject("num_stages < 2");
  if ((BM / consumers / 64) * (BN / 2) > 192) return reject("more than 192 accumulators per consumer thread");
  if (K % 8 || N % 8) return reject("K or N is not a multiple of 8: TMA needs 16-byte row strides");
  const std::int64_t smem = hopper_ring_smem(BM, BN, BK, stages);
  if (smem > ctx.target.smem_cap)
    return reject("the ring needs " + std::to_string(smem) + " bytes of shared memory");

  // use_cluster(x, y): x horizontally adjacent tiles share A, y vertically adjacent ones share B,
  // each operand tile loaded once and multicast (TESSEL_DISABLE=multicast ignores the hint).
  const int cluster_n = g.cluster && ctx.allow_multicast ? g.cluster->cluster_x : 1;
  const int cluster_m = g.cluster && ctx.allow_multicast ? g.cluster->cluster_y : 1;
  if (cluster_m > 1 && (BN / 64) % cluster_m)
    TESSEL_USER_ERROR("use_cluster", g.cluster->where,
                      "cluster (1, " << cluster_m << ") shares B tiles between " << cluster_m
                                     << " blocks, each loading an equal share of its 64-column panels, but "
                                     << "block_N = " << BN << " has " << BN / 64
                                     << "; legal: block_N a multiple of " << 64 * cluster_m
                                     << ", or use_cluster(2, 1) (sharing A)");

  // Split-K over a 2-CTA cluster for few tiles and a long K (HopperPolicy.hpp says when); not
  // with a multicast cluster, which takes the cluster for itself.
  const std::int64_t tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
  const std::int64_t tiles =
      ((tiles_m + cluster_m - 1) / cluster_m) * ((tiles_n + cluster_n - 1) / cluster_n);
  const std::int64_t k_tiles = (K + BK - 1) / BK;
  const int sms = ctx.target.sms();
  const std::int64_t split_smem = smem + hopper_split_k_smem(BM, BN);
  const int split = ctx.allow_split_k && cluster_m * cluster_n == 1 &&
                            hopper_split_k(tiles, K, smem, BM, BN, sms, ctx.target.smem_cap)
                        ? 2
                        : 1;
  const int cluster_size = split * cluster_m * cluster_n;

  // The TMA-store epilogue for 16-bit outputs when its staging tile (BM x BN) fits too.
  const std::int64_t staged_smem = smem + hopper_staging_smem(BM, BN);
  const bool tma_store =
      split == 1 && ctx.allow_tma_store && C->dtype != DType::f32 && staged_smem <= ctx.target.smem_cap;

  plan.selected = true;
  plan.split_k = split;
  plan.cluster_m = cluster_m;
  plan.cluster_n = cluster_n;
  plan.cluster_size = cluster_size;
  plan.stages = stages;
  plan.consumers = consumers;
  plan.k_tiles = k_tiles;
  plan.tma_store = tma_store;
  // HopperGemm<TIn, BM, BN, BK, Stages, ConsumerWGs, ProducerRegs, ConsumerRegs, ClusterM, PingPong,
  // WideStores, SplitK, TmaStore, ClusterN>, the trailing defaults left out.
  std::vector<std::int64_t> targs{BM,        BN, BK, stages, consumers,         40,       232,
                                  cluster_m, 0,  1,  split,  tma_store ? 1 : 0, cluster_n};
  const std::vector<std::int64_t> defaults{40, 232, 1, 0, 1, 1, 0, 1};  // from ProducerRegs on
  while (targs.size() > 5 && targs.back() == defaults[targs.size() - 6]) targs.pop_back();
  plan.gemm_type = "tessel::HopperGemm<" + std::string(dtype_cuda_name(t));
  for (std::int64_t v : targs) plan.gemm_type += ", " + std::to_string(v);
  plan.gemm_type += ">";
  plan.launch_threads = 128 * (consumers + 1);
  plan.smem_bytes = static_cast<int>(split > 1 ? split_smem : tma_store ? staged_smem : smem);
  plan.tiles = tiles;
  Var ta("tmap_" + A->name, DType::i64), tb("tmap_" + B->name, DType::i64);
  // A's box is one swizzle row of K (64 elements, or 32 with the 64-byte swizzle) by BM rows;
  // B's is 64 columns of N by BK rows (hopper_gemm.cuh).
  // With A multicast (cluster_n), each CTA loads BM / cluster_n rows of it.
  ctx.tma_params = {
      {ta, A, static_cast<int>(std::min<std::int64_t>(BK, 64)), static_cast<int>(BM / cluster_n)},
      {tb, B, 64, static_cast<int>(BK)}};
  // C's box: 64 columns (128 bytes, swizzled) by one consumer warpgroup's rows.
  Var tc("tmap_" + C->name, DType::i64);
  if (tma_store) ctx.tma_params.push_back({tc, C, 64, static_cast<int>(BM / consumers)});
  auto w = g.kernel->where;
  std::vector<DeviceCallArg> args{{make_call("address_of", {ta}, DType::i64), Buffer(), Expr()},
                                  {make_call("address_of", {tb}, DType::i64), Buffer(), Expr()},
                                  {Expr(), C, Expr()},
                                  {make_int(M), Buffer(), Expr()},
                                  {make_int(N), Buffer(), Expr()},
                                  {make_int(K), Buffer(), Expr()},
                                  {make_int(g.panel), Buffer(), Expr()},
                                  {make_call("dynamic_smem", {}, DType::i64), Buffer(), Expr()}};
  if (tma_store) args.push_back({make_call("address_of", {tc}, DType::i64), Buffer(), Expr()});
  if (!epilogue.empty) {
    if (!tma_store) args.push_back({make_int(0), Buffer(), Expr()});  // no C tensor map
    args.push_back(epilogue.lambda);
  }
  plan.fused_epilogue = !epilogue.empty;
  Stmt call = make_device_call(plan.gemm_type + "::template run", {std::string(dtype_cuda_name(C->dtype))},
                               args, g.gemm->where);
  Var block("bx");
  ctx.grid = {make_int(plan.tiles * cluster_size)};
  ctx.block_vars = {block};
  ctx.threads = plan.launch_threads;
  return make_kernel({make_int(plan.tiles * cluster_size)}, plan.launch_threads, {block}, call, w);
}

}  // namespace tessel::passes
