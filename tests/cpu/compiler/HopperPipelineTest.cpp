// The Hopper pipeline passes on IR text: plan_tma_copies turns a Pipelined loop's loads into TMA
// loads, plan_pipelines builds their mbarrier ring, specialize_warps gives the producer work a
// warpgroup, insert_barriers initializes the mbarriers and names the consumers' barriers. And
// where they must not apply: sm_80, the async_pipeline switch off, a loop nested in another, a
// copy TMA cannot make.
#include <gtest/gtest.h>

#include "Lower.hpp"
#include "codegen/CodegenCuda.hpp"
#include "support/GemmRowMaxProgram.hpp"
#include "support/LoweringSupport.hpp"
#include "support/RaggedGemmProgram.hpp"
#include "support/RegisterGemmPrograms.hpp"
#include "support/TestSupport.hpp"
#include "tessel/ir/Printer.hpp"
#include "tessel/kernels/attention/FlashAttention.hpp"
#include "tessel/kernels/attention/GemmChain.hpp"
#include "tessel/kernels/gemm/Matmul.hpp"

namespace {

namespace T = tessel;
using T::test::sm80;
using T::test::sm90;
using T::test::stage_text;
using T::test::template_gemm;

T::PrimFunc attention(int D, bool causal, std::vector<std::int64_t> q_strides = {}) {
  T::kernels::AttentionShape s;
  s.batch = 2, s.heads = 4, s.kv_heads = 2, s.seqlen_q = 300, s.seqlen_k = 1000, s.dim = D;
  s.q_strides = std::move(q_strides);
  return T::kernels::attention_program(s, T::DType::f16, causal, 0.125f, {128, 128, 256, 2});
}

bool has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

TEST(HopperPipeline, AttentionLoadsBecomeTmaLoadsIntoRings) {
  auto lowered = T::lower(attention(128, true).ir(), sm90(), true);
  const std::string tma = stage_text(lowered, "plan_tma_copies");
  // K and V: [1, 128, 1, 128] regions of [B, S, H_kv, D] tensors, one map each.
  EXPECT_TRUE(has(
      tma, "tma_load(K[bz:+1, (ko * 128):+128, (by / 2):+1, 0:+128] -> shared_1[0:+128, 0:+128], map=K_map)"))
      << tma;
  EXPECT_TRUE(has(tma, "map=V_map)")) << tma;
  // Q is loaded once, outside the loop: it keeps its copy.
  EXPECT_TRUE(has(tma, "copy(Q[")) << tma;
  ASSERT_EQ(lowered.ctx.tma_params.size(), 2u);
  EXPECT_EQ(lowered.ctx.tma_params[0].box, (std::vector<int>{1, 128, 1, 64}));
  EXPECT_EQ(lowered.ctx.tma_params[0].swizzle_bytes, 128);

  const std::string ring = stage_text(lowered, "plan_pipelines");
  // The producer: a prologue of S - 1 stages, then one iteration ahead, waiting for the stage's
  // release first.
  EXPECT_TRUE(has(ring, "producer {")) << ring;
  EXPECT_TRUE(has(ring, "mbarrier.arrive_expect_tx(shared_1_full[s], bytes=32768)")) << ring;
  EXPECT_TRUE(has(ring, "mbarrier.wait(shared_1_empty[((ko + 1) % 2)], parity=((((ko + 1) / 2) + 1) % 2))"))
      << ring;
  // The consumers: wait for K right before the gemm that reads it, release it right after.
  const size_t wait_k = ring.find("mbarrier.wait(shared_1_full[(ko % 2)], parity=((ko / 2) % 2))");
  const size_t gemm_k = ring.find("gemm(shared_0, shared_1[(ko % 2):+1");
  const size_t release_k = ring.find("mbarrier.warp_arrive(shared_1_empty[(ko % 2)])");
  ASSERT_NE(wait_k, std::string::npos) << ring;
  ASSERT_NE(gemm_k, std::string::npos) << ring;
  ASSERT_NE(release_k, std::string::npos) << ring;
  EXPECT_LT(wait_k, gemm_k);
  EXPECT_LT(gemm_k, release_k);
  // V's wait comes after the softmax, right before P V.
  const size_t wait_v = ring.find("mbarrier.wait(shared_2_full[(ko % 2)]");
  EXPECT_GT(wait_v, ring.find("reduce_sum(")) << ring;

  const std::string roles = stage_text(lowered, "specialize_warps");
  EXPECT_TRUE(has(roles, "specialize(consumers=256 threads regs=240, producer=128 threads regs=24) {"))
      << roles;
  EXPECT_FALSE(has(roles, "producer {")) << "producer work left among the consumers:\n" << roles;
  EXPECT_EQ(lowered.ctx.launch_threads, 384);

  const std::string barriers = stage_text(lowered, "insert_barriers");
  EXPECT_TRUE(has(barriers, "mbarrier.init(shared_1_full[b], count=1)")) << barriers;
  EXPECT_TRUE(has(barriers, "mbarrier.init(shared_1_empty[b#1], count=8)")) << barriers;
  EXPECT_TRUE(has(barriers, "barrier(id=1, threads=256)")) << barriers;

  const std::string src = T::codegen::generate_cuda(lowered);
  EXPECT_TRUE(has(src, "#define TESSEL_CONSUMER_THREADS 256")) << src;
  EXPECT_TRUE(has(src, "__launch_bounds__(384, 1)")) << src;
  EXPECT_TRUE(has(src, "tessel::setmaxnreg_dec<24>();")) << src;
  EXPECT_TRUE(has(src, "tessel::setmaxnreg_inc<240>();")) << src;
}

TEST(HopperPipeline, TwoConsumerWarpgroupsTakeTurnsForTheirGemms) {
  auto lowered = T::lower(attention(128, false).ir(), sm90(), true);
  const std::string text = stage_text(lowered, "schedule_warpgroups");
  // Warpgroup 1 waits for its first turn before the loop; in the loop each warpgroup hands the
  // turn over after its first gemm and waits for it before its last; warpgroup 0 hands over the
  // last turn after the loop.
  const size_t pre = text.find("if !(tx < 128) {\n          tessel::named_barrier_sync(3, 256)");
  const size_t qk = text.find("gemm(shared_0, shared_1[(ko % 2):+1");
  const size_t give = text.find("tessel::named_barrier_arrive(select((tx < 128), 3, 2), 256)");
  const size_t take = text.find("tessel::named_barrier_sync(select((tx < 128), 2, 3), 256)");
  const size_t pv = text.find("gemm(fragment_4, shared_2[(ko % 2):+1");
  const size_t post = text.find("tessel::named_barrier_arrive(3, 256)");
  for (size_t at : {pre, qk, give, take, pv, post}) ASSERT_NE(at, std::string::npos) << text;
  EXPECT_LT(pre, qk);
  EXPECT_LT(qk, give);
  EXPECT_LT(give, take);
  EXPECT_LT(take, pv);
  EXPECT_LT(pv, post);
  EXPECT_TRUE(lowered.ctx.pingpong);
  T::passes::PassContext::Switches off;
  off.allow_pingpong = false;
  auto plain = T::lower(attention(128, false).ir(), sm90(), off, true);
  EXPECT_FALSE(has(stage_text(plain, "schedule_warpgroups"), "named_barrier"))
      << stage_text(plain, "schedule_warpgroups");
  EXPECT_FALSE(plain.ctx.pingpong);
}

TEST(HopperPipeline, BhsdStridesGiveTheMapThoseStrides) {
  auto lowered = T::lower(attention(64, false, T::kernels::bhsd_strides(2, 300, 4, 64)).ir(), sm90(), true);
  EXPECT_TRUE(has(stage_text(lowered, "plan_tma_copies"),
                  "Q: f16[2, 300, 4, 64] strides [76800_i64, 64_i64, 19200_i64, 1_i64]"));
  EXPECT_EQ(lowered.ctx.tma_params.size(), 2u);  // K and V (row-major here)
}

TEST(HopperPipeline, NotOnSm80NorWithTheSwitchOff) {
  auto on80 = T::lower(attention(64, false).ir(), sm80(), true);
  EXPECT_TRUE(on80.ctx.tma_params.empty());
  EXPECT_FALSE(has(stage_text(on80, "plan_pipelines"), "mbarrier")) << stage_text(on80, "plan_pipelines");
  T::passes::PassContext::Switches off;
  off.allow_async_pipeline = false;
  auto sync = T::lower(attention(64, false).ir(), sm90(), off, true);
  EXPECT_TRUE(sync.ctx.tma_params.empty());
  EXPECT_EQ(sync.ctx.launch_threads, 0);
  // The cp.async schedule, still with wgmma.
  EXPECT_TRUE(has(stage_text(sync, "plan_pipelines"), "async_wait(0)"));
  EXPECT_TRUE(sync.ctx.uses_wgmma);
}

TEST(HopperPipeline, ALoopInsideALoopKeepsCpAsync) {
  // A ring's parities count iterations from the kernel's start: a Pipelined loop that runs
  // once per outer iteration must not get one.
  T::PrimFunc f("nested");
  auto A = f.tensor("A", {512, 64}, T::f16);
  auto B = f.tensor("B", {512, 64}, T::f16);
  auto C = f.tensor("C", {128, 64}, T::f32);
  f.body([&] {
    T::Kernel(1, 128, [&](T::Var) {
      auto a = T::alloc_shared({64, 64}, T::f16);
      auto b = T::alloc_shared({64, 64}, T::f16);
      auto acc = T::alloc_fragment({64, 64}, T::f32);
      T::clear(acc);
      T::Serial(2, [&](T::Var o) {
        T::Pipelined(4, 2, [&](T::Var k) {
          T::copy(A(o * 256 + k * 64, 0), a);
          T::copy(B(o * 256 + k * 64, 0), b);
          T::gemm(a, b, acc, false, true);
        });
      });
      T::copy(acc, C(0, 0));
    });
  });
  auto lowered = T::lower(f.ir(), sm90(), true);
  EXPECT_TRUE(lowered.ctx.tma_params.empty());
  EXPECT_FALSE(has(stage_text(lowered, "plan_tma_copies"), "tma_load"))
      << stage_text(lowered, "plan_tma_copies");
}

// JitOptions::gemm_from_passes: the tutorial GEMM is not swapped for select_hopper_gemm's
// template; the generic passes give it a TMA ring, a producer warpgroup, consumers issuing
// asynchronous wgmma with one group in flight, and its use_swizzle before the warp roles.
T::kernels::MatmulConfig tutorial_config(int bm, int bn, int bk, int stages, int threads) {
  T::kernels::MatmulConfig c;
  c.block_M = bm, c.block_N = bn, c.block_K = bk, c.num_stages = stages, c.threads = threads;
  c.use_swizzle = true;
  c.panel_size = 8;
  return c;
}

TEST(HopperPipeline, TutorialGemmFromThePasses) {
  T::passes::PassContext::Switches passes;
  passes.gemm_from_passes = true;
  // 1024 x 2048: 8 x 8 = 64 tiles of 128 x 256, one block per tile (persistence off here; see the
  // end of the test for the persistent form of the same grid).
  passes.allow_persistent_tiles = false;
  auto f = T::kernels::matmul_program(1024, 2048, 4096, tutorial_config(128, 256, 64, 3, 256));
  auto lowered = T::lower(f.ir(), sm90(), passes, true);
  EXPECT_FALSE(lowered.ctx.hopper.selected);
  EXPECT_EQ(lowered.ctx.hopper.why_not, "");  // the template is not asked, nor reported declined
  // infer_layouts: the loop's sole gemm takes wgmma (its loads can all be TMA loads).
  EXPECT_TRUE(lowered.ctx.uses_wgmma);
  EXPECT_TRUE(has(stage_text(lowered, "infer_layouts"), "gemm accumulator, warps 8x1 (wgmma)"))
      << stage_text(lowered, "infer_layouts");
  // plan_tma_copies: A and B, one map each, boxes of one 128-byte panel; plan_tma_stores: C's
  // map, boxes of 64 x 64 (one warpgroup's rows of one panel of the staging tile).
  ASSERT_EQ(lowered.ctx.tma_params.size(), 3u);
  EXPECT_EQ(lowered.ctx.tma_params[0].box, (std::vector<int>{128, 64}));
  EXPECT_EQ(lowered.ctx.tma_params[1].box, (std::vector<int>{64, 64}));
  EXPECT_EQ(lowered.ctx.tma_params[2].tensor->name, "C");
  EXPECT_EQ(lowered.ctx.tma_params[2].box, (std::vector<int>{64, 64}));
  EXPECT_EQ(lowered.ctx.tma_params[2].swizzle_bytes, 128);
  // 3 stages of 48 KB and the 64 KB staging tile fit in 227 KB: the TMA-store epilogue.
  ASSERT_EQ(lowered.ctx.tma_stores.size(), 1u);
  const std::string stores = stage_text(lowered, "plan_tma_stores");
  EXPECT_TRUE(has(stores, "shared fragment_2_staging: f16[128, 256]")) << stores;
  EXPECT_TRUE(has(stores, "tessel::drain_tma_stores()")) << stores;
  EXPECT_TRUE(has(stage_text(lowered, "lower_tile_ops"),
                  "tessel::store_accumulators_tma<tessel::half_t, tessel::WarpgroupGemm<"))
      << stage_text(lowered, "lower_tile_ops");
  EXPECT_FALSE(lowered.ctx.tile_loop.applied);
  // specialize_warps: a producer warpgroup, use_swizzle ahead of both roles.
  const std::string roles = stage_text(lowered, "specialize_warps");
  const size_t swizzle = roles.find("use_swizzle(8)"), split = roles.find("specialize(");
  ASSERT_NE(swizzle, std::string::npos) << roles;
  ASSERT_NE(split, std::string::npos) << roles;
  EXPECT_LT(swizzle, split) << roles;
  EXPECT_EQ(lowered.ctx.launch_threads, 384);
  EXPECT_EQ(lowered.ctx.consumer_regs, 240);
  // place_gemm_waits: the gemm is issued asynchronously, one group left in flight per tile.
  const std::string waits = stage_text(lowered, "place_gemm_waits");
  EXPECT_TRUE(has(waits, "gemm_wait(pending=1)")) << waits;
  EXPECT_TRUE(has(waits, "gemm_wait(pending=0, fragment_2)")) << waits;
  EXPECT_EQ(lowered.ctx.async_gemms, 1);
  // The kernel ABI: one block per tile, rasterized by panel 8.
  EXPECT_FALSE(lowered.ctx.abi.persistent);
  EXPECT_EQ(lowered.ctx.abi.raster_panel, 8);
  EXPECT_EQ(lowered.ctx.abi.threads, 384);
  const std::string cuda = T::codegen::generate_cuda(lowered);
  EXPECT_TRUE(has(cuda, "tessel::rasterize(8, bx, by, gridDim.x, gridDim.y, rx, ry);")) << cuda;
  EXPECT_FALSE(has(cuda, "HopperGemm")) << cuda;
  // The three tensor maps' descriptors prefetched at entry by the first thread (plan_kernel_abi);
  // the template prefetches its own, so its ABI does not ask for it.
  EXPECT_TRUE(lowered.ctx.abi.prefetch_tensor_maps);
  for (const char* map : {"A_map", "B_map", "C_store_map"})
    EXPECT_TRUE(has(cuda, std::string("tessel::tma_prefetch_descriptor(&") + map + ");")) << cuda;
  EXPECT_FALSE(T::lower(f.ir(), sm90(), template_gemm()).ctx.abi.prefetch_tensor_maps);

  // Without the switch (gemm_from_passes = false): the template, as before.
  auto templ = T::lower(f.ir(), sm90(), template_gemm(), true);
  EXPECT_TRUE(templ.ctx.hopper.selected);
  EXPECT_EQ(templ.ctx.abi.raster_panel, 0);  // the template rasterizes its own tiles
  // Persistence on: one wave is persistent too, 64 blocks of one tile each (the same code as a
  // grid of many waves: no producer prologue, no run-time remap of blockIdx).
  passes.allow_persistent_tiles = true;
  auto persistent = T::lower(f.ir(), sm90(), passes, true);
  EXPECT_TRUE(persistent.ctx.tile_loop.applied) << persistent.ctx.tile_loop.why_not;
  EXPECT_EQ(persistent.ctx.tile_loop.tiles, 64);
  EXPECT_EQ(persistent.ctx.tile_loop.blocks, 64);
  EXPECT_TRUE(persistent.ctx.abi.persistent);
}

TEST(HopperPipeline, TheTmaStoreEpilogueOnlyWhereItsStagingTileFits) {
  T::passes::PassContext::Switches passes;
  passes.gemm_from_passes = true;
  // 4 stages of 48 KB leave no room for a 64 KB staging tile: register stores, 16 bytes at a time
  // after a quad transpose (rows of 4096 and the tile's column start are multiples of 8).
  auto four =
      T::lower(T::kernels::matmul_program(4096, 4096, 4096, tutorial_config(128, 256, 64, 4, 256)).ir(),
               sm90(), passes, true);
  EXPECT_TRUE(four.ctx.tma_stores.empty());
  EXPECT_TRUE(has(stage_text(four, "lower_tile_ops"), "tessel::store_accumulators_wide<tessel::half_t"))
      << stage_text(four, "lower_tile_ops");
  // A fused epilogue (bias, relu) computes a 16-bit tile in the accumulator's layout: that tile
  // goes out through the staging tile.
  auto epi =
      T::lower(T::kernels::matmul_bias_act_program(2000, 4096, 1000, tutorial_config(128, 256, 64, 3, 256),
                                                   T::kernels::Activation::relu, 0.5f)
                   .ir(),
               sm90(), passes, true);
  ASSERT_EQ(epi.ctx.tma_stores.size(), 1u);
  EXPECT_TRUE(has(stage_text(epi, "lower_tile_ops"), "tessel::store_accumulators_tma<tessel::half_t"))
      << stage_text(epi, "lower_tile_ops");
  // The switch off (JitOptions::disable_tma_store): register stores.
  passes.allow_tma_store = false;
  EXPECT_TRUE(
      T::lower(T::kernels::matmul_program(4096, 4096, 4096, tutorial_config(128, 256, 64, 3, 256)).ir(),
               sm90(), passes)
          .ctx.tma_stores.empty());
}

// Several m64 blocks a warpgroup (gemm_from_passes): the tutorial's 128-row tile on 128 threads
// -- one consumer warpgroup, as the template's 128x128 configs have -- takes wgmma with two m64
// instructions a k16 step instead of falling back to mma.sync, its accumulator in interleaved
// 16-row strips, the fused epilogue's tiles and the TMA-store epilogue in the same layout.
TEST(HopperPipeline, OneWarpgroupComputesSeveralM64Blocks) {
  T::passes::PassContext::Switches passes;
  passes.gemm_from_passes = true;
  auto plain =
      T::lower(T::kernels::matmul_program(1000, 1000, 1000, tutorial_config(128, 128, 64, 5, 128)).ir(),
               sm90(), passes, true);
  EXPECT_TRUE(plain.ctx.uses_wgmma);
  EXPECT_TRUE(has(stage_text(plain, "infer_layouts"),
                  "gemm accumulator, warps 4x1 (wgmma), 16-row strips every 64 rows"))
      << stage_text(plain, "infer_layouts");
  const std::string ops = stage_text(plain, "lower_tile_ops");
  EXPECT_TRUE(has(ops, "tessel::WarpgroupGemm<tessel::half_t, 128, 128, 64, 1, false, false,")) << ops;
  // 5 stages of 32 KB and the 32 KB staging tile fit: the TMA store of both 64-row blocks.
  ASSERT_EQ(plain.ctx.tma_stores.size(), 1u);
  EXPECT_TRUE(has(ops, "tessel::store_accumulators_tma<tessel::half_t, tessel::WarpgroupGemm<")) << ops;
  EXPECT_EQ(plain.ctx.launch_threads, 160);  // a producer warp beside the one consumer warpgroup
  // The fused epilogue (bias, silu) reads the accumulator through its interleaved layout.
  auto epi =
      T::lower(T::kernels::matmul_bias_act_program(1000, 1000, 1000, tutorial_config(128, 128, 64, 4, 128),
                                                   T::kernels::Activation::silu, 0.5f)
                   .ir(),
               sm90(), passes, true);
  const std::string epi_ops = stage_text(epi, "lower_tile_ops");
  EXPECT_TRUE(has(epi_ops,
                  "tessel::WarpgroupGemm<tessel::half_t, 128, 128, 64, 1, false, false, "
                  "tessel::WgmmaSwizzleLayout<128, 64, 2, 128>, tessel::WgmmaSwizzleLayout<64, 128, 2, "
                  "128>>::acc_row("))
      << epi_ops;
  EXPECT_TRUE(plain.ctx.wgmma_declined.empty());
  // 7 stages of 32 KB leave no room for the staging tile: 16-byte register stores of both blocks.
  auto seven =
      T::lower(T::kernels::matmul_program(1000, 1000, 1000, tutorial_config(128, 128, 64, 7, 128)).ir(),
               sm90(), passes, true);
  EXPECT_TRUE(seven.ctx.tma_stores.empty());
  EXPECT_TRUE(has(stage_text(seven, "lower_tile_ops"),
                  "tessel::store_accumulators_wide<tessel::half_t, tessel::WarpgroupGemm<tessel::half_t, "
                  "128, 128, 64, 1,"))
      << stage_text(seven, "lower_tile_ops");
  // Past 128 accumulator registers a thread (2 x 256 / 2): mma.sync, as before, and the kernel
  // says why (KernelInfo::declined, `tessel dump --resources`).
  auto wide =
      T::lower(T::kernels::matmul_program(1000, 1000, 1000, tutorial_config(128, 256, 64, 3, 128)).ir(),
               sm90(), passes);
  EXPECT_FALSE(wide.ctx.uses_wgmma);
  ASSERT_EQ(wide.ctx.wgmma_declined.size(), 1u);
  EXPECT_TRUE(has(wide.ctx.wgmma_declined[0], "gemm at Matmul.cpp:")) << wide.ctx.wgmma_declined[0];
  EXPECT_TRUE(
      has(wide.ctx.wgmma_declined[0],
          "(fragment_2): a 128-row tile on 4 warps and 256 columns: 256 accumulator registers a thread, "
          "past 128"))
      << wide.ctx.wgmma_declined[0];
  // Rows TMA cannot load (K = 1001): the loop stays a cp.async main loop on mma.sync, with or
  // without gemm_from_passes, and says so.
  for (bool from_passes : {true, false}) {
    passes.gemm_from_passes = from_passes;
    auto odd =
        T::lower(T::kernels::matmul_program(1000, 1000, 1001, tutorial_config(128, 256, 64, 3, 256)).ir(),
                 sm90(), passes);
    ASSERT_EQ(odd.ctx.wgmma_declined.size(), 1u);
    EXPECT_TRUE(has(odd.ctx.wgmma_declined[0],
                    "the sole gemm of a cp.async Pipelined loop keeps BlockGemm's mma.sync main loop"))
        << odd.ctx.wgmma_declined[0];
  }
  // Nothing to say on sm_80.
  EXPECT_TRUE(
      T::lower(T::kernels::matmul_program(1000, 1000, 1001, tutorial_config(128, 256, 64, 3, 256)).ir(),
               sm80(), passes)
          .ctx.wgmma_declined.empty());
}

// A user's kernel (not the tutorial GEMM: its rows' maxima go out too) with a 128-row tile on 128
// threads: with gemm_from_passes, wgmma over two m64 blocks, the row reduction and the Parallel
// nest reading the accumulator through the interleaved layout; without it (until the H200 has
// run it), mma.sync as before.
// split_k_clusters: few output tiles over a long K loop split each tile's K loop over the CTAs
// of a cluster -- 24 tiles of 128x128 at 384x1024x8192 on 132 SMs: four CTAs a cluster -- whose
// partial sums meet in rank 0 through the drained rings; only rank 0 runs the epilogue.
TEST(HopperPipeline, FewTilesSplitTheirKLoopOverAClusterUnderGemmFromPasses) {
  T::passes::PassContext::Switches passes;
  passes.gemm_from_passes = true;
  auto split =
      T::lower(T::kernels::matmul_program(384, 1024, 8192, tutorial_config(128, 128, 64, 5, 128)).ir(),
               sm90(), passes, true);
  ASSERT_TRUE(split.ctx.cluster_split.applied) << split.ctx.cluster_split.why_not;
  EXPECT_EQ(split.ctx.cluster_split.ranks, 4);
  EXPECT_EQ(split.ctx.abi.cluster_size, 4);
  EXPECT_FALSE(split.ctx.tile_loop.applied);
  EXPECT_TRUE(has(split.ctx.tile_loop.why_not, "split_k_clusters")) << split.ctx.tile_loop.why_not;
  const std::string ir = stage_text(split, "split_k_clusters");
  for (const char* needle :
       {"kernel grid(32, 3) threads(128) (cta, by)", "shared split_k_bars: i64[4]",
        "pipelined ko in [0, 0 + 32) stages=5",
        "tma_load(A[(by * 128):+128, ((ko + ((cta % 4) * 32)) * 64):+64]",
        "cluster_reduce(fragment_2 += the other 3 CTAs' of the cluster, into rank 0, rank=(cta % 4), "
        "scratch=shared_0, bars=split_k_bars)",
        "if ((cta % 4) == 0) {\n      copy(fragment_2[0:+128, 0:+128] -> C[(by * 128):+128, ((cta / 4) * "
        "128):+128])"})
    EXPECT_TRUE(has(ir, needle)) << needle << "\n" << ir;
  // The reduction takes the whole drained ring (5 stages) as its scratch, after the last gemm's wait.
  const std::string ops = stage_text(split, "lower_tile_ops");
  const size_t wait = ops.find("gemm_wait(pending=0, fragment_2)");
  ASSERT_NE(wait, std::string::npos) << ops;
  EXPECT_LT(wait, ops.find("tessel::cluster_reduce_to_rank0<128, 128, 4>(")) << ops;
  EXPECT_TRUE(has(
      ops,
      "tessel::cluster_reduce_to_rank0<128, 128, 4>(&fragment_2, &shared_0, &split_k_bars, (cta % 4), tx)"))
      << ops;
  const std::string barriers = stage_text(split, "insert_barriers");
  EXPECT_TRUE(
      has(barriers, "unrolled b#2 in [0, 0 + 4) {\n        mbarrier.init(split_k_bars[b#2], count=128)"))
      << barriers;
  // A cluster barrier after the initialization and another before the kernel ends.
  const size_t first_sync = barriers.find("tessel::cluster_sync()");
  ASSERT_NE(first_sync, std::string::npos) << barriers;
  EXPECT_LT(first_sync, barriers.find("specialize(")) << barriers;
  EXPECT_GT(barriers.rfind("tessel::cluster_sync()"), barriers.find("tessel::drain_tma_stores()"))
      << barriers;
  const std::string cuda = T::codegen::generate_cuda(split);
  EXPECT_TRUE(has(cuda, "__cluster_dims__(4, 1, 1)")) << cuda;
  EXPECT_TRUE(has(cuda, "#include <tessel/cluster_reduce.cuh>")) << cuda;

  // The cluster's size follows the tiles: 56 tiles (1024x896) take two CTAs each, 8 tiles
  // (128x1024) eight -- each CTA keeping a K loop of at least 2048, every cluster running at once
  // on any die (29 of 4, 10 of 8: hopper_resident_clusters).
  auto ranks = [&](int M, int N, int K) {
    auto r = T::lower(T::kernels::matmul_program(M, N, K, tutorial_config(128, 128, 64, 5, 128)).ir(), sm90(),
                      passes);
    EXPECT_EQ(r.ctx.abi.cluster_size, r.ctx.cluster_split.ranks);
    return r.ctx.cluster_split.ranks;
  };
  EXPECT_EQ(ranks(1024, 896, 8192), 2);
  EXPECT_EQ(ranks(128, 1024, 16384), 8);
  EXPECT_EQ(ranks(128, 1024, 8192), 4);  // eight would leave each CTA 1024 of K
  EXPECT_EQ(ranks(512, 1152, 8192), 2);  // 36 tiles: four a cluster would take 144 SMs
  EXPECT_EQ(ranks(512, 1024, 8192), 2);  // 32 clusters of 4 may not all run at once (H100: 0.74x)
  EXPECT_EQ(ranks(384, 1024, 8192), 4);  // 24 do
  EXPECT_EQ(ranks(128, 1280, 16384), 8);  // 10 clusters of 8
  EXPECT_EQ(ranks(128, 1408, 16384), 4);  // 11 may not

  // An odd share (129 K tiles over 4: 32 each, the last rank 33, its last tile partial).
  auto odd = T::lower(T::kernels::matmul_program(380, 1000, 8200, tutorial_config(128, 128, 64, 5, 128)).ir(),
                      sm90(), passes, true);
  ASSERT_TRUE(odd.ctx.cluster_split.applied) << odd.ctx.cluster_split.why_not;
  const std::string odd_ir = stage_text(odd, "split_k_clusters");
  EXPECT_TRUE(has(odd_ir, "pipelined ko in [0, 0 + (32 + (((cta % 4) + 1) / 4))) stages=5")) << odd_ir;
  EXPECT_TRUE(has(odd_ir, "((ko + (((cta % 4) * 32) + max((((cta % 4) + 1) - 4), 0))) * 64)")) << odd_ir;
  // A fused epilogue runs in rank 0 only, after the reduction.
  auto epi =
      T::lower(T::kernels::matmul_bias_act_program(384, 1024, 8192, tutorial_config(128, 128, 64, 4, 256),
                                                   T::kernels::Activation::relu, 1.0f)
                   .ir(),
               sm90(), passes, true);
  ASSERT_TRUE(epi.ctx.cluster_split.applied) << epi.ctx.cluster_split.why_not;
  const std::string epi_ir = stage_text(epi, "split_k_clusters");
  EXPECT_LT(epi_ir.find("cluster_reduce("), epi_ir.find("if ((cta % 4) == 0) {")) << epi_ir;
  EXPECT_TRUE(has(stage_text(epi, "lower_tile_ops"), "tessel::cluster_reduce_to_rank0<64, 256, 4>("));

  // Declined, each with its reason: enough tiles for the SMs, a short K loop, a ring too small to
  // hold the accumulator (128x256 f32 = 128 KB against 3 stages of 48 and 96 KB), and without the
  // switch (the template's own split takes the shape).
  auto reason = [&](int M, int N, int K, T::kernels::MatmulConfig c) {
    auto r = T::lower(T::kernels::matmul_program(M, N, K, c).ir(), sm90(), passes);
    EXPECT_FALSE(r.ctx.cluster_split.applied);
    EXPECT_EQ(r.ctx.abi.cluster_size, 1);
    return r.ctx.cluster_split.why_not;
  };
  EXPECT_EQ(
      reason(4096, 4096, 8192, tutorial_config(128, 128, 64, 5, 128)),
      "1024 tiles over a K loop of 8192 on 132 SMs: a split pays for its hand-off at most 66 tiles and a K "
      "loop of at least 4096");
  EXPECT_TRUE(has(reason(512, 1024, 2048, tutorial_config(128, 128, 64, 5, 128)), "a K loop of 2048 on"));
  EXPECT_EQ(reason(256, 2048, 8192, tutorial_config(128, 256, 64, 3, 256)),
            "no ring tile holds the accumulator's 131072 bytes for the hand-off");
  auto off = T::lower(T::kernels::matmul_program(512, 1024, 8192, tutorial_config(128, 128, 64, 5, 128)).ir(),
                      sm90(), template_gemm());
  EXPECT_TRUE(off.ctx.hopper.selected);
  EXPECT_EQ(off.ctx.hopper.split_k, 2);
  EXPECT_FALSE(off.ctx.cluster_split.applied);
}

// multicast_cluster_loads: use_cluster(2, 1) under gemm_from_passes -- two blocks adjacent along
// x share A's tile: each loads half its rows into both CTAs (the map's box is the half), the
// ring's `empty` barriers count both CTAs' consumer warps and their releases arrive in both, the
// grid's odd x extent (9 tiles) grows to 10 with the extra block skipping the epilogue, the
// swizzle panel becomes even, and the persistent grid an even number of blocks.
TEST(HopperPipeline, UseClusterMulticastsTheSharedTileUnderGemmFromPasses) {
  T::passes::PassContext::Switches passes;
  passes.gemm_from_passes = true;
  T::kernels::MatmulConfig cfg = tutorial_config(128, 128, 64, 5, 256);
  cfg.panel_size = 5;
  cfg.cluster_x = 2;
  auto x = T::lower(T::kernels::matmul_program(300, 1064, 1032, cfg).ir(), sm90(), passes, true);
  ASSERT_TRUE(x.ctx.cluster_multicast.applied) << x.ctx.cluster_multicast.why_not;
  EXPECT_FALSE(x.ctx.hopper.selected);
  EXPECT_EQ(x.ctx.abi.cluster_size, 2);
  EXPECT_TRUE(x.ctx.tile_loop.applied) << x.ctx.tile_loop.why_not;
  EXPECT_EQ(x.ctx.tile_loop.blocks, 30);
  const std::string ir = stage_text(x, "multicast_cluster_loads");
  for (const char* needle :
       {"kernel grid(10, 3) threads(256) (bx, by)", "use_swizzle(6)",
        "tma_load(A[(by * 128):+128, (ko * 64):+64] -> shared_0[0:+128, 0:+64], map=A_map, multicast=2)",
        "tma_load(B[(ko * 64):+64, (bx * 128):+128] -> shared_1[0:+64, 0:+128], map=B_map)\n",
        "if (bx < 9) {"})
    EXPECT_TRUE(has(ir, needle)) << needle << "\n" << ir;
  EXPECT_FALSE(has(ir, "use_cluster")) << ir;
  // A's map loads one CTA's 64 rows; B's stays whole.
  for (const T::passes::TmaParam& t : x.ctx.tma_params) {
    if (t.tensor->name == "A") {
      EXPECT_EQ(t.box, (std::vector<int>{64, 64}));
      EXPECT_EQ(t.share_dim, 0);
    } else if (t.tensor->name == "B") {
      EXPECT_EQ(t.box, (std::vector<int>{64, 64}));
      EXPECT_EQ(t.share_dim, -1);
    }
  }
  ASSERT_EQ(x.ctx.mbarriers.size(), 2u);
  EXPECT_EQ(x.ctx.mbarriers[1].count, 16);  // 8 consumer warps in each of the 2 CTAs
  const std::string ring = stage_text(x, "plan_pipelines");
  EXPECT_TRUE(has(ring, "mbarrier.warp_arrive(shared_0_empty[")) << ring;
  EXPECT_TRUE(has(ring, "], cluster_ctas=2)")) << ring;
  const std::string cuda = T::codegen::generate_cuda(x);
  for (const char* needle :
       {"__cluster_dims__(2, 1, 1)",
        "tessel::tma_load_tile_multicast<2, 1, 64, 16384, 2, 1, 64, 8192>(shared_0 + ",
        "tessel::tma_load_tile<2, 2, 64, 8192>(shared_1 + ",
        "tessel::mbarrier_warp_arrive_cluster<2>(shared_0_empty + ", "tessel::cluster_sync();"})
    EXPECT_TRUE(has(cuda, needle)) << needle << "\n" << cuda;
  const size_t first_sync = cuda.find("tessel::cluster_sync();");
  EXPECT_LT(first_sync, cuda.find("producer warpgroup")) << cuda;
  EXPECT_GT(cuda.rfind("tessel::cluster_sync();"), cuda.find("tessel::drain_tma_stores();")) << cuda;

  // Not persistent: the launch grid of whole clusters, the even panel remapping blockIdx at run
  // time (tessel::rasterize keeps each pair of blocks on a pair of tiles).
  passes.allow_persistent_tiles = false;
  auto launch = T::lower(T::kernels::matmul_program(300, 1064, 1032, cfg).ir(), sm90(), passes);
  passes.allow_persistent_tiles = true;
  ASSERT_TRUE(launch.ctx.cluster_multicast.applied) << launch.ctx.cluster_multicast.why_not;
  EXPECT_FALSE(launch.ctx.tile_loop.applied);
  ASSERT_EQ(launch.ctx.abi.grid.size(), 2u);
  EXPECT_TRUE(T::ir::is_const_int(launch.ctx.abi.grid[0], 10));
  const std::string launch_cuda = T::codegen::generate_cuda(launch);
  for (const char* needle :
       {"__cluster_dims__(2, 1, 1)", "tessel::rasterize(6, bx, by, gridDim.x, gridDim.y, rx, ry);",
        "if ((bx < 9)) {", "tessel::tma_load_tile_multicast<2, 1, 64, 16384, 2, 1, 64, 8192>("})
    EXPECT_TRUE(has(launch_cuda, needle)) << needle << "\n" << launch_cuda;

  // use_cluster(1, 2): B shared by two blocks adjacent along y, regridded so that the pair is
  // adjacent along x (rank = blockIdx.x % 2); 9 tile rows (odd), the panel doubled.
  cfg = tutorial_config(128, 128, 64, 5, 128);
  cfg.panel_size = 3;
  cfg.cluster_y = 2;
  auto y = T::lower(T::kernels::matmul_program(1100, 1000, 1032, cfg).ir(), sm90(), passes, true);
  ASSERT_TRUE(y.ctx.cluster_multicast.applied) << y.ctx.cluster_multicast.why_not;
  EXPECT_EQ(y.ctx.cluster_multicast.axis, 1);
  const std::string yir = stage_text(y, "multicast_cluster_loads");
  for (const char* needle : {"kernel grid(16, 5) threads(128) (bx_pair, by_pair)", "use_swizzle(6)",
                             "tma_load(B[(ko * 64):+64, ((bx_pair / 2) * 128):+128] -> shared_1[0:+64, "
                             "0:+128], map=B_map, multicast=2)",
                             "if (((by_pair * 2) + (bx_pair % 2)) < 9) {"})
    EXPECT_TRUE(has(yir, needle)) << needle << "\n" << yir;
  EXPECT_TRUE(
      has(T::codegen::generate_cuda(y), "tessel::tma_load_tile_multicast<2, 2, 64, 8192, 2, 1, 32, 4096>("));

  // An odd cap on the persistent blocks is rounded down to whole clusters.
  passes.max_persistent_ctas = 3;
  auto capped = T::lower(T::kernels::matmul_program(1100, 1000, 1032, cfg).ir(), sm90(), passes);
  EXPECT_EQ(capped.ctx.tile_loop.blocks, 2);
  passes.max_persistent_ctas = 0;

  // Declined, the hint dropped, each with its reason: multicast switched off, sm_80; without the
  // switch the template takes the cluster.
  passes.allow_multicast = false;
  auto off = T::lower(T::kernels::matmul_program(1100, 1000, 1032, cfg).ir(), sm90(), passes, true);
  EXPECT_FALSE(off.ctx.cluster_multicast.applied);
  EXPECT_EQ(off.ctx.abi.cluster_size, 1);
  EXPECT_TRUE(has(off.ctx.cluster_multicast.why_not, "needs multicast")) << off.ctx.cluster_multicast.why_not;
  EXPECT_FALSE(has(stage_text(off, "multicast_cluster_loads"), "use_cluster"));
  passes.allow_multicast = true;
  auto old = T::lower(T::kernels::matmul_program(1100, 1000, 1032, cfg).ir(), sm80(), passes);
  EXPECT_EQ(old.ctx.cluster_multicast.why_not, "TMA multicast needs sm_90a with the Hopper switches on");
  auto tmpl = T::lower(T::kernels::matmul_program(1100, 1000, 1032, cfg).ir(), sm90(), template_gemm());
  EXPECT_TRUE(tmpl.ctx.hopper.selected);
  EXPECT_EQ(tmpl.ctx.hopper.cluster_m, 2);
  EXPECT_FALSE(tmpl.ctx.cluster_multicast.applied);
}

TEST(HopperPipeline, AUsersKernelTakesSeveralM64BlocksUnderGemmFromPasses) {
  T::passes::PassContext::Switches passes;
  passes.gemm_from_passes = true;
  auto on = T::lower(T::test::gemm_row_max_program(300, 64, 200).ir(), sm90(), passes, true);
  EXPECT_TRUE(on.ctx.uses_wgmma);
  const std::string layouts = stage_text(on, "infer_layouts");
  EXPECT_TRUE(has(layouts, "rows of a gemm tile, warps 4x1, 16-row strips every 64 rows")) << layouts;
  const std::string ops = stage_text(on, "lower_tile_ops");
  EXPECT_TRUE(has(ops, "tessel::AccumulatorLayout<128, 64, 4, 1, true>::template reduce_rows<")) << ops;
  EXPECT_TRUE(has(ops, "tessel::AccumulatorLayout<128, 64, 4, 1, true>::row_of_register(")) << ops;
  const std::string source = T::codegen::generate_cuda(on);
  EXPECT_TRUE(has(source, "tessel::WarpgroupGemm<tessel::half_t, 128, 64, 64, 1, false, false,")) << source;
  passes.gemm_from_passes = false;
  auto off = T::lower(T::test::gemm_row_max_program(300, 64, 200).ir(), sm90(), passes, true);
  EXPECT_FALSE(off.ctx.uses_wgmma);
  EXPECT_FALSE(has(stage_text(off, "infer_layouts"), "16-row strips")) << stage_text(off, "infer_layouts");
  ASSERT_EQ(off.ctx.wgmma_declined.size(), 1u);
  EXPECT_TRUE(has(off.ctx.wgmma_declined[0], "gemm at GemmRowMaxProgram.hpp:")) << off.ctx.wgmma_declined[0];
  EXPECT_TRUE(has(off.ctx.wgmma_declined[0],
                  "the sole gemm of a cp.async Pipelined loop keeps BlockGemm's mma.sync main loop"))
      << off.ctx.wgmma_declined[0];
  // One gemm of one K tile, no loop: without gemm_from_passes the 128-row tile says what it
  // waits for.
  T::PrimFunc one("one_tile");
  auto A = one.tensor("A", {128, 64}, T::f16);
  auto B = one.tensor("B", {64, 64}, T::f16);
  auto C = one.tensor("C", {128, 64}, T::f32);
  one.body([&] {
    T::Kernel(1, 128, [&](T::Var) {
      auto a = T::alloc_shared({128, 64}, T::f16);
      auto b = T::alloc_shared({64, 64}, T::f16);
      auto c = T::alloc_fragment({128, 64}, T::f32);
      T::clear(c);
      T::copy(A(0, 0), a);
      T::copy(B(0, 0), b);
      T::gemm(a, b, c);
      T::copy(c, C(0, 0));
    });
  });
  auto single = T::lower(one.ir(), sm90(), passes);
  ASSERT_EQ(single.ctx.wgmma_declined.size(), 1u);
  EXPECT_TRUE(has(single.ctx.wgmma_declined[0],
                  "a 128-row tile on 4 warps is 2 m64 blocks a warpgroup, taken only under "
                  "JitOptions::gemm_from_passes, which is off"))
      << single.ctx.wgmma_declined[0];
  passes.gemm_from_passes = true;
  EXPECT_TRUE(T::lower(one.ir(), sm90(), passes).ctx.uses_wgmma);
}

// Two gemm tiles of one shape met in one Parallel nest: one with A in shared memory, one with A
// in registers (mma.sync). The first must not take interleaved m64 blocks the second cannot
// share: under gemm_from_passes the kernel compiles, both tiles in one layout, as without it.
T::PrimFunc two_gemms_one_nest() {
  T::PrimFunc f("two_gemms_one_nest");
  auto A = f.tensor("A", {128, 64}, T::f16);
  auto B = f.tensor("B", {64, 64}, T::f16);
  auto C = f.tensor("C", {128, 64}, T::f32);
  f.body([&] {
    T::Kernel(1, 128, [&](T::Var) {
      auto a = T::alloc_shared({128, 64}, T::f16);
      auto b = T::alloc_shared({64, 64}, T::f16);
      auto s = T::alloc_fragment({128, 64}, T::f32);
      auto p = T::alloc_fragment({128, 64}, T::f16);
      auto c1 = T::alloc_fragment({128, 64}, T::f32);
      auto c2 = T::alloc_fragment({128, 64}, T::f32);
      T::copy(A(0, 0), a);
      T::copy(B(0, 0), b);
      T::clear(s);
      T::gemm(a, b, s);  // s becomes p, a register A operand
      T::Parallel(128, 64, [&](T::Var i, T::Var j) { p(i, j) = s(i, j); });
      T::clear(c1);
      T::clear(c2);
      T::gemm(a, b, c1);  // A in shared memory
      T::gemm(p, b, c2);  // A in registers
      T::Parallel(128, 64, [&](T::Var i, T::Var j) { c1(i, j) = c1(i, j) + c2(i, j); });
      T::copy(c1, C(0, 0));
    });
  });
  return f;
}

TEST(HopperPipeline, LinkedGemmTilesShareOneLayout) {
  T::passes::PassContext::Switches passes;
  for (bool from_passes : {false, true}) {
    passes.gemm_from_passes = from_passes;
    SCOPED_TRACE(from_passes ? "gemm_from_passes" : "default");
    T::LoweredFunc l;
    ASSERT_NO_THROW(l = T::lower(two_gemms_one_nest().ir(), sm90(), passes, true));
    EXPECT_FALSE(has(stage_text(l, "infer_layouts"), "16-row strips")) << stage_text(l, "infer_layouts");
    bool said = false;
    for (const std::string& d : l.ctx.wgmma_declined)
      said =
          said || has(d,
                      "(fragment_4): a 128-row tile on 4 warps whose accumulator becomes a gemm's register "
                      "operand or meets another gemm's tile element by element");
    EXPECT_EQ(said, from_passes);
  }
}

// The library's other wgmma kernels keep their register stores (and their measured figures): the
// chain's output is f32, attention's a [B, S, H, D] tensor (the staging tile's TMA store is 2-D).
TEST(HopperPipeline, ChainAndAttentionKeepTheirStores) {
  for (int D : {64, 128}) {
    auto chain = T::lower(T::kernels::gemm_chain_program(4096, 4096, D, T::DType::f16, 0.125f).ir(), sm90());
    EXPECT_TRUE(chain.ctx.uses_wgmma);
    EXPECT_TRUE(chain.ctx.tma_stores.empty()) << "chain, D = " << D;
    for (bool causal : {false, true}) {
      auto att = T::lower(attention(D, causal).ir(), sm90());
      EXPECT_TRUE(att.ctx.tma_stores.empty()) << "attention, D = " << D;
    }
  }
}

// plan_tma_stores' estimate of the shared memory is plan_shared_memory's own: the staging tile is
// taken exactly when the kernel with it still fits the target, at every ring size around the cap.
TEST(HopperPipeline, TheStagingTileIsTakenExactlyWhenItFits) {
  T::passes::PassContext::Switches passes;
  passes.gemm_from_passes = true;
  int taken = 0, left = 0;
  for (auto [bm, bn, bk] : {std::tuple{128, 256, 64}, std::tuple{128, 128, 64}, std::tuple{64, 256, 64},
                            std::tuple{128, 256, 32}, std::tuple{64, 128, 64}})
    for (int stages = 2; stages <= 8; ++stages) {
      const int threads = bm == 64 ? 128 : 256;
      SCOPED_TRACE(std::to_string(bm) + "x" + std::to_string(bn) + "x" + std::to_string(bk) + " s" +
                   std::to_string(stages));
      auto f = T::kernels::matmul_program(4096, 4096, 4096, tutorial_config(bm, bn, bk, stages, threads));
      T::LoweredFunc l;
      try {
        l = T::lower(f.ir(), sm90(), passes);
      } catch (const T::CompileError&) {
        continue;  // the ring alone does not fit
      }
      EXPECT_LE(l.ctx.smem_bytes, sm90().smem_cap);
      const std::int64_t staging = std::int64_t(bm) * bn * 2;
      if (l.ctx.tma_stores.empty()) {
        ++left;
        EXPECT_GT(l.ctx.smem_bytes + staging, sm90().smem_cap);
      } else {
        ++taken;
      }
    }
  EXPECT_GT(taken, 5);
  EXPECT_GT(left, 3);
}

// kernels::Matmul's split-K partial GEMM (a 3-D grid, each block z a share of the K tiles) under
// gemm_from_passes: its ring runs over the block's share.
TEST(HopperPipeline, SplitKPartialGemmFromThePasses) {
  T::passes::PassContext::Switches passes;
  passes.gemm_from_passes = true;
  for (long long M : {1, 16, 64}) {
    SCOPED_TRACE("M " + std::to_string(M));
    auto f = T::kernels::matmul_split_k_program(static_cast<int>(M), 4096, 4096, 5,
                                                T::kernels::split_k_config(M, T::DType::f16));
    auto l = T::lower(f.ir(), sm90(), passes, true);
    // 64 rows: one warpgroup's wgmma, a TMA ring over the block's share of K (A and B behind one
    // barrier pair), a producer warp; 16 rows and fewer stay on mma.sync (wgmma takes 64 rows per
    // warpgroup). 16 x 5 = 80 blocks: one wave, not persistent. The f32 workspace keeps its
    // register stores. 16 x 5 = 80 blocks, one wave: persistent in form (one tile a block, the
    // kernel the same code as a longer grid's), the share's length varying with bz, so the
    // ring's position is carried in ring_base.
    EXPECT_EQ(l.ctx.uses_wgmma, M == 64);
    EXPECT_EQ(l.ctx.tma_params.size(), M == 64 ? 2u : 0u);
    EXPECT_EQ(l.ctx.tile_loop.applied, M == 64) << l.ctx.tile_loop.why_not;
    EXPECT_TRUE(l.ctx.tma_stores.empty());
    if (M == 64) {
      EXPECT_EQ(l.ctx.tile_loop.blocks, 80);
      const std::string waits = stage_text(l, "place_gemm_waits");
      EXPECT_TRUE(has(waits, "mbarrier.arrive_expect_tx(shared_0_full[((ring_base[0] + ko) % 4)], bytes=40960)"))
          << waits;
      EXPECT_TRUE(has(waits, "serial ko in [0, 0 + ((((bz + 1) * 64) / 5) - ((bz * 64) / 5)))")) << waits;
      EXPECT_TRUE(has(waits, "ring_base[0] = (ring_base[0] + max(((((bz + 1) * 64) / 5) - ((bz * 64) / 5)), 0))"))
          << waits;
      EXPECT_TRUE(has(waits, "gemm_wait(pending=1)")) << waits;
      EXPECT_EQ(l.ctx.launch_threads, 160);
    }
  }
}

// persist_tiles: more tiles than SMs -> min(tiles, SMs) blocks loop over them; the ring's stages
// and phases run on over a block's tiles, the producer has no prologue, and specialize_warps
// gives each role its own copy of the tile loop.
TEST(HopperPipeline, ManyTilesMakeTheRingKernelPersistent) {
  T::passes::PassContext::Switches passes;
  passes.gemm_from_passes = true;
  // 4096 x 4096: 32 x 16 = 512 tiles over 132 SMs.
  auto f = T::kernels::matmul_program(4096, 4096, 4096, tutorial_config(128, 256, 64, 3, 256));
  auto lowered = T::lower(f.ir(), sm90(), passes, true);
  ASSERT_TRUE(lowered.ctx.tile_loop.applied) << lowered.ctx.tile_loop.why_not;
  EXPECT_EQ(lowered.ctx.tile_loop.tiles, 512);
  EXPECT_EQ(lowered.ctx.tile_loop.blocks, 132);
  const std::string tiles = stage_text(lowered, "persist_tiles");
  EXPECT_TRUE(has(tiles, "kernel grid(132) threads(256) (pid)")) << tiles;
  EXPECT_TRUE(has(tiles, "tiles tile_i in [0, 0 + (((512 - pid) + 131) / 132))")) << tiles;
  EXPECT_TRUE(has(tiles, "let tile = (pid + (tile_i * 132))")) << tiles;
  // use_swizzle(8) became the tiles' panel order, in IR arithmetic (tessel::rasterize's).
  EXPECT_TRUE(has(tiles, "let panel_x = ((tile / 256) * 8)")) << tiles;
  EXPECT_TRUE(has(tiles, "let panel_width = min((16 - panel_x), 8)")) << tiles;
  EXPECT_TRUE(has(tiles, "let by = (in_panel / panel_width)")) << tiles;
  EXPECT_TRUE(has(tiles, "let bx = (panel_x + (in_panel % panel_width))")) << tiles;
  EXPECT_FALSE(has(tiles, "use_swizzle")) << tiles;
  const std::string ring = stage_text(lowered, "plan_pipelines");
  // No prologue: every iteration waits for its stage's release, counted over the block's tiles.
  EXPECT_FALSE(has(ring, "unrolled s in")) << ring;
  EXPECT_TRUE(has(ring,
                  "mbarrier.wait(shared_0_empty[(((tile_i * 64) + ko) % 3)], "
                  "parity=(((((tile_i * 64) + ko) / 3) + 1) % 2))"))
      << ring;
  EXPECT_TRUE(has(ring,
                  "mbarrier.wait(shared_0_full[(((tile_i * 64) + ko) % 3)], "
                  "parity=((((tile_i * 64) + ko) / 3) % 2))"))
      << ring;
  // A and B, both read by the gemm alone, share one barrier pair: one expect_tx for both tiles.
  EXPECT_TRUE(has(ring, "mbarrier.arrive_expect_tx(shared_0_full[(((tile_i * 64) + ko) % 3)], bytes=49152)"))
      << ring;
  EXPECT_FALSE(has(ring, "shared_1_full")) << ring;
  ASSERT_EQ(lowered.ctx.mbarriers.size(), 2u);
  EXPECT_EQ(lowered.ctx.mbarriers[1].releases.size(), 2u);
  // Both roles loop over the tiles.
  const std::string roles = stage_text(lowered, "specialize_warps");
  const size_t producer = roles.find("producer:"), consumers = roles.find("consumers:");
  ASSERT_NE(producer, std::string::npos) << roles;
  ASSERT_NE(consumers, std::string::npos) << roles;
  EXPECT_NE(roles.find("tiles tile_i", producer), std::string::npos) << roles;
  EXPECT_NE(roles.find("tiles tile_i", consumers), std::string::npos) << roles;
  EXPECT_LT(roles.find("tiles tile_i", producer), consumers) << roles;
  EXPECT_TRUE(lowered.ctx.abi.persistent);
  EXPECT_FALSE(lowered.ctx.abi.grid_capped_at_launch);
  EXPECT_EQ(lowered.ctx.abi.raster_panel, 0);
  ASSERT_EQ(lowered.ctx.abi.grid.size(), 1u);
  EXPECT_TRUE(T::ir::is_const_int(lowered.ctx.abi.grid[0], 132));

  // The SM count of the target, and JitOptions::max_persistent_ctas, set the blocks.
  auto h100 = sm90();
  h100.sm_count = 114;
  EXPECT_EQ(T::lower(f.ir(), h100, passes).ctx.tile_loop.blocks, 114);
  passes.max_persistent_ctas = 3;
  auto few = T::lower(f.ir(), sm90(), passes, true);
  EXPECT_EQ(few.ctx.tile_loop.blocks, 3);
  EXPECT_TRUE(has(stage_text(few, "persist_tiles"), "tiles tile_i in [0, 0 + (((512 - pid) + 2) / 3))"))
      << stage_text(few, "persist_tiles");
  // The switch off: one block per tile.
  passes.max_persistent_ctas = 0;
  passes.allow_persistent_tiles = false;
  auto off = T::lower(f.ir(), sm90(), passes);
  EXPECT_FALSE(off.ctx.tile_loop.applied);
  EXPECT_FALSE(off.ctx.abi.persistent);
  EXPECT_EQ(T::ir::as_const_int(off.ctx.abi.grid[0]), 16);
}

// Attention under persistent_rings (its loop holds more than one gemm, so gemm_from_passes alone
// leaves it one block a tile): non-causal, its Q tile (one copy from global memory per tile,
// behind order_shared_writes' barrier) may sit beside the ring, so its blocks loop over the
// (query block, head, batch) tiles and its warpgroups take turns inside each tile; causal, the
// ring's trip count depends on the tile, so its position is carried from tile to tile.
TEST(HopperPipeline, AttentionIsPersistentWithItsTurnsInsideEachTile) {
  T::passes::PassContext::Switches passes;
  passes.persistent_rings = true;
  T::kernels::AttentionShape s;
  s.batch = 2, s.heads = 16, s.kv_heads = 16, s.seqlen_q = 4096, s.seqlen_k = 4096,
  s.dim = 128;  // 1024 tiles
  auto lowered =
      T::lower(T::kernels::attention_program(s, T::DType::bf16, false, 0.125f, {128, 128, 256, 2}).ir(),
               sm90(), passes, true);
  ASSERT_TRUE(lowered.ctx.tile_loop.applied) << lowered.ctx.tile_loop.why_not;
  const std::string tiles = stage_text(lowered, "persist_tiles");
  EXPECT_TRUE(has(tiles, "let bx = ((tile % 512) % 32)")) << tiles;
  EXPECT_TRUE(has(tiles, "let by = ((tile % 512) / 32)")) << tiles;
  EXPECT_TRUE(has(tiles, "let bz = (tile / 512)")) << tiles;
  // Q's copy, inside the tile loop, behind a barrier that follows the previous tile's reads.
  const std::string ordered = stage_text(lowered, "order_shared_writes");
  const size_t loop = ordered.find("tiles tile_i"), barrier = ordered.find("barrier()", loop),
               copy_q = ordered.find("copy(Q[", loop);
  ASSERT_NE(copy_q, std::string::npos) << ordered;
  EXPECT_LT(barrier, copy_q) << ordered;
  EXPECT_TRUE(lowered.ctx.pingpong);
  // O, a [1, 128, 1, 128] tile of [B, S, H, D], through the staging tile and 4-D TMA stores.
  ASSERT_EQ(lowered.ctx.tma_stores.size(), 1u);
  auto map_of = [&](const T::passes::PassContext& ctx, const std::string& name) {
    for (const T::passes::TmaParam& p : ctx.tma_params)
      if (p.var.name() == name) return p.box;
    return std::vector<int>{};
  };
  EXPECT_EQ(map_of(lowered.ctx, "O_store_map"), (std::vector<int>{1, 64, 1, 64}));
  // Then plan_tile_loads: Q comes by TMA from the producer into two slots (tile_i % 2), a
  // [1, 128, 1, 64] box per 64-column panel; the consumers wait for it before the ring loop and
  // release it after; no cp.async and no block barriers are left for it.
  EXPECT_EQ(map_of(lowered.ctx, "Q_map"), (std::vector<int>{1, 128, 1, 64}));
  const std::string tile_loads = stage_text(lowered, "plan_tile_loads");
  EXPECT_TRUE(has(tile_loads, "shared shared_0: bf16[2, 128, 128]")) << tile_loads;
  const size_t issue = tile_loads.find(
                   "mbarrier.wait(shared_0_empty[(tile_i % 2)], parity=(((tile_i / 2) + 1) % 2))"),
               load = tile_loads.find(
                   "tma_load(Q[bz:+1, (bx * 128):+128, by:+1, 0:+128] -> shared_0[(tile_i % 2):+1, "
                   "0:+128, 0:+128], map=Q_map, complete_tx=shared_0_full[(tile_i % 2)])"),
               wait =
                   tile_loads.find("mbarrier.wait(shared_0_full[(tile_i % 2)], parity=((tile_i / 2) % 2))"),
               ring = tile_loads.find("serial ko"),
               q_release = tile_loads.find("mbarrier.warp_arrive(shared_0_empty[(tile_i % 2)])");
  ASSERT_NE(issue, std::string::npos) << tile_loads;
  EXPECT_LT(issue, load);
  EXPECT_LT(load, wait);
  EXPECT_LT(wait, ring);
  EXPECT_LT(ring, q_release);
  EXPECT_FALSE(has(tile_loads, "copy(Q[")) << tile_loads;
  EXPECT_FALSE(has(tile_loads.substr(tile_loads.find("tiles tile_i")), "barrier()")) << tile_loads;
  // The warpgroups' turns start and end within each tile, so they meet at the tile's top (a
  // consumers' barrier) before warpgroup 1 waits for its first turn.
  {
    const std::string turns = stage_text(lowered, "schedule_warpgroups");
    const size_t consumers = turns.find("tiles tile_i", turns.find("consumers:"));
    const size_t meet = turns.find("barrier()", consumers),
                 first_turn = turns.find("named_barrier_sync(3, 256)", consumers);
    ASSERT_NE(meet, std::string::npos) << turns;
    EXPECT_LT(meet, first_turn) << turns;
  }
  // JitOptions::disable_tile_loads: Q stays the consumers' copy, behind its barriers.
  T::passes::PassContext::Switches no_tile_loads = passes;
  no_tile_loads.allow_tile_loads = false;
  const std::string kept = stage_text(
      T::lower(T::kernels::attention_program(s, T::DType::bf16, false, 0.125f, {128, 128, 256, 2}).ir(),
               sm90(), no_tile_loads, true),
      "plan_tile_loads");
  EXPECT_TRUE(has(kept, "copy(Q[bz:+1, (bx * 128):+128, by:+1, 0:+128] -> shared_0[0:+128, 0:+128])"))
      << kept;
  EXPECT_FALSE(has(kept, "shared_0_full")) << kept;
  // A ring loop of 64 key blocks or more a tile keeps the consumers' load too (measured slower).
  T::kernels::AttentionShape long_rows = s;
  long_rows.seqlen_q = long_rows.seqlen_k = 8192;  // 64 key blocks of 128
  const std::string long_kept = stage_text(
      T::lower(
          T::kernels::attention_program(long_rows, T::DType::bf16, false, 0.125f, {128, 128, 256, 2}).ir(),
          sm90(), passes, true),
      "plan_tile_loads");
  EXPECT_TRUE(has(long_kept, "copy(Q[")) << long_kept;
  EXPECT_FALSE(has(long_kept, "shared_0_full")) << long_kept;
  EXPECT_TRUE(has(stage_text(lowered, "lower_tile_ops"),
                  "float, 4, 0, 2>(&fragment_5, &fragment_5_staging, address_of(O_store_map), 0, by, (bx * 128), bz)"))
      << stage_text(lowered, "lower_tile_ops");
  const std::string turns = stage_text(lowered, "schedule_warpgroups");
  EXPECT_LT(turns.find("tiles tile_i", turns.find("consumers:")), turns.find("named_barrier_sync(3, 256)"))
      << turns;

  // Causal: the ring's trip count depends on the tile; its position is carried across the tiles
  // in ring_base, which both roles declare, start at 0 and bump after each tile's last use of the
  // ring (the V release after the loop reads it first).
  auto causal =
      T::lower(T::kernels::attention_program(s, T::DType::bf16, true, 0.125f, {128, 128, 256, 2}).ir(),
               sm90(), passes, true);
  ASSERT_TRUE(causal.ctx.tile_loop.applied) << causal.ctx.tile_loop.why_not;
  ASSERT_TRUE(causal.ctx.tile_loop.base.defined());
  // Tiles of unequal work are dealt in serpentine rounds (1024 tiles over 132 blocks: 7 whole
  // rounds, the last partial one odd, right to left: its 100 tiles go to blocks 32 to 131).
  EXPECT_TRUE(has(stage_text(causal, "persist_tiles"),
                  "tiles tile_i in [0, 0 + (7 + select((pid >= 32), 1, 0)))"))
      << stage_text(causal, "persist_tiles");
  EXPECT_TRUE(has(stage_text(causal, "persist_tiles"),
                  "let tile = ((tile_i * 132) + select(((tile_i % 2) == 0), pid, (131 - pid)))"));
  const std::string roles = stage_text(causal, "place_gemm_waits");
  const size_t producer = roles.find("producer:"), consumers = roles.find("consumers:");
  ASSERT_NE(consumers, std::string::npos) << roles;
  for (size_t from : {producer, consumers}) {
    const size_t decl = roles.find("local ring_base: i32[1]", from), init = roles.find("ring_base[0] = 0", from),
                 loop = roles.find("tiles tile_i", from), bump = roles.find("ring_base[0] = (ring_base[0] + max(", from);
    EXPECT_LT(decl, init) << roles;
    EXPECT_LT(init, loop) << roles;
    EXPECT_LT(loop, bump) << roles;
  }
  EXPECT_TRUE(has(roles, "mbarrier.wait(shared_1_empty[((ring_base[0] + ko) % 2)], parity=((((ring_base[0] + ko) / 2) + 1) % 2))"))
      << roles;
  EXPECT_TRUE(has(roles, "mbarrier.wait(shared_1_full[((ring_base[0] + ko) % 2)], parity=(((ring_base[0] + ko) / 2) % 2))"))
      << roles;
  // The last V stage's release after the loop, then the bump.
  const size_t release = roles.find("mbarrier.warp_arrive(shared_2_empty[((ring_base[0] + (max(", consumers);
  ASSERT_NE(release, std::string::npos) << roles;
  EXPECT_LT(release, roles.find("ring_base[0] = (ring_base[0] + max(", consumers)) << roles;
  // A trip count read from a tensor the kernel does not write (a length in memory): each role
  // reads it for itself, and the position is carried the same way (verify_pipelines checks the
  // protocol for several values of steps[by]).
  auto ragged = T::lower(T::test::ragged_k_gemm_program(4096, 4096, 4096).ir(), sm90(), passes, true);
  ASSERT_TRUE(ragged.ctx.tile_loop.applied) << ragged.ctx.tile_loop.why_not;
  EXPECT_GT(ragged.ctx.launch_threads, 256);  // a producer of its own
  const std::string ragged_roles = stage_text(ragged, "place_gemm_waits");
  EXPECT_TRUE(has(ragged_roles, "ring_base[0] = (ring_base[0] + max(min(steps[by], 64), 0))")) << ragged_roles;
  // Without persistent_rings attention stays one block a tile (its loop holds more than one gemm:
  // not a gemm ring), and says why; the tutorial GEMM, a gemm ring, is persistent by default
  // (gemm_from_passes) and not without it (the template then).
  const auto unpersistent = T::lower(
      T::kernels::attention_program(s, T::DType::bf16, false, 0.125f, {128, 128, 256, 2}).ir(), sm90());
  EXPECT_FALSE(unpersistent.ctx.tile_loop.applied);
  EXPECT_FALSE(unpersistent.ctx.gemm_ring);
  EXPECT_TRUE(
      has(unpersistent.ctx.tile_loop.why_not, "no loop of this kernel is one gemm alone on TMA loads"))
      << unpersistent.ctx.tile_loop.why_not;
  auto f = T::kernels::matmul_program(4096, 4096, 4096, tutorial_config(128, 256, 64, 3, 256));
  const auto gemm_default = T::lower(f.ir(), sm90());
  EXPECT_TRUE(gemm_default.ctx.gemm_ring);
  EXPECT_TRUE(gemm_default.ctx.tile_loop.applied) << gemm_default.ctx.tile_loop.why_not;
  EXPECT_FALSE(T::lower(f.ir(), sm90(), template_gemm()).ctx.tile_loop.applied);
  // persistent_rings: attention persistent with TMA-stored O (the same IR as above), and with
  // gemm_from_passes off the tutorial GEMM keeps select_hopper_gemm's template.
  T::passes::PassContext::Switches rings = template_gemm();
  rings.persistent_rings = true;
  auto attention_rings =
      T::lower(T::kernels::attention_program(s, T::DType::bf16, true, 0.125f, {128, 128, 256, 2}).ir(), sm90(), rings);
  EXPECT_TRUE(attention_rings.ctx.tile_loop.applied) << attention_rings.ctx.tile_loop.why_not;
  EXPECT_EQ(attention_rings.ctx.tma_stores.size(), 1u);
  EXPECT_EQ(T::ir::to_string(attention_rings.body), T::ir::to_string(causal.body));
  auto gemm_rings = T::lower(f.ir(), sm90(), rings);
  EXPECT_TRUE(gemm_rings.ctx.hopper.selected) << gemm_rings.ctx.hopper.why_not;
}

TEST(HopperPipeline, TutorialGemmFromThePassesKeepsMmaSyncWhereTmaCannot) {
  T::passes::PassContext::Switches passes;
  passes.gemm_from_passes = true;
  // N = 4095: B's rows are not 16-byte aligned, no TMA load; BlockGemm's gemm_mainloop stays.
  auto odd =
      T::lower(T::kernels::matmul_program(4096, 4095, 4096, tutorial_config(128, 256, 64, 3, 256)).ir(),
               sm90(), passes, true);
  EXPECT_FALSE(odd.ctx.uses_wgmma);
  EXPECT_TRUE(odd.ctx.tma_params.empty());
  EXPECT_TRUE(has(stage_text(odd, "plan_pipelines"), "tessel::gemm_mainloop"))
      << stage_text(odd, "plan_pipelines");
  // On sm_80 the switch changes nothing.
  auto f = T::kernels::matmul_program(1000, 1000, 1000, tutorial_config(128, 128, 32, 3, 128));
  EXPECT_EQ(T::codegen::generate_cuda(T::lower(f.ir(), sm80(), passes)),
            T::codegen::generate_cuda(T::lower(f.ir(), sm80())));
  // With async_pipeline off there is no ring to keep a group in flight: mma.sync's main loop.
  passes.allow_async_pipeline = false;
  auto sync = T::lower(f.ir(), sm90(), passes, true);
  EXPECT_FALSE(sync.ctx.uses_wgmma);
  EXPECT_FALSE(sync.ctx.hopper.selected);
}

}  // namespace

namespace {

// ptxas compiles each wgmma instruction within the launch's register cap, whatever setmaxnreg
// raises the consumers to: 192-row attention tiles with 256 keys a block (m64n256, a 128-register
// f32 accumulator a thread) under 512 threads (a cap of 128) were a fatal ptxas error; the
// producer then stays in the consumers' threads, and the reason is recorded. 192 keys fit.
TEST(HopperPipeline, AGemmTooWideForTheProducersLaunchStaysUnspecialized) {
  T::kernels::AttentionShape s;
  s.batch = 2, s.heads = 8, s.kv_heads = 2, s.seqlen_q = 1000, s.seqlen_k = 4097, s.dim = 64;
  using Schedule = T::kernels::AttentionConfig::Schedule;
  auto wide = T::lower(T::kernels::attention_program(s, T::DType::bf16, true, 0.125f, {192, 256, 384, 3, Schedule::ring}).ir(),
                       sm90());
  EXPECT_FALSE(wide.ctx.mbarriers.empty()) << "still a ring";
  EXPECT_EQ(wide.ctx.launch_threads, 0);
  EXPECT_EQ(wide.ctx.specialize_why_not,
            "a wgmma accumulator of 128 registers per thread (+26 for the instruction) is past the 128 a thread gets "
            "at launch with a producer beside 384 consumer threads");
  auto fits = T::lower(T::kernels::attention_program(s, T::DType::bf16, true, 0.125f, {192, 192, 384, 2, Schedule::ring}).ir(),
                       sm90());
  EXPECT_EQ(fits.ctx.launch_threads, 512);
  EXPECT_TRUE(fits.ctx.specialize_why_not.empty());
  // Two consumer warpgroups launch 384 threads (a cap of 168): 256 keys fit.
  auto two = T::lower(T::kernels::attention_program(s, T::DType::bf16, true, 0.125f, {128, 256, 256, 2, Schedule::ring}).ir(),
                      sm90());
  EXPECT_EQ(two.ctx.launch_threads, 384);
}

}  // namespace

namespace {

// Caches of compiled kernels (kernels::flash_attention's) key on every switch: two JitOptions
// that build different kernels give different texts, the environment's TESSEL_ENABLE included.
TEST(HopperPipeline, SwitchesTextTellsKernelsApart) {
  T::JitOptions plain, rotated, sync, rings;
  rotated.rotate_gemm_loops = true;
  sync.disable_async_gemm = true;
  rings.persistent_rings = true;
  const std::string base = T::switches_text(T::jit_switches(plain));
  EXPECT_NE(base, T::switches_text(T::jit_switches(rotated)));
  EXPECT_NE(base, T::switches_text(T::jit_switches(sync)));
  EXPECT_NE(base, T::switches_text(T::jit_switches(rings)));
  EXPECT_EQ(base, T::switches_text(T::jit_switches(T::JitOptions{})));
  T::test::ScopedEnv env("TESSEL_ENABLE", "persistent_rings");
  EXPECT_EQ(T::switches_text(T::jit_switches(plain)), T::switches_text(T::jit_switches(rings)));
}

// Which kernels get the ring epilogues (persistent tiles, the TMA-store epilogue, split-K and
// multicast clusters) by default: those whose K loop is one gemm fed by TMA loads (infer_layouts'
// ctx.gemm_ring) -- the tutorial GEMM, a user's GEMM with a row reduction after its loop -- and
// no other ring kernel unless persistent_rings asks: not a loop with element-wise work beside its
// gemm, not a chain of two gemms, not attention. Each refusal says why.
TEST(HopperPipeline, RingEpiloguesGoToGemmRingsUnlessAskedFor) {
  auto f = T::kernels::matmul_program(4096, 4096, 4096, tutorial_config(128, 256, 64, 3, 256));
  const auto gemm = T::lower(f.ir(), sm90());
  EXPECT_TRUE(gemm.ctx.gemm_ring);
  EXPECT_TRUE(gemm.ctx.ring_epilogues());
  EXPECT_TRUE(gemm.ctx.tile_loop.applied) << gemm.ctx.tile_loop.why_not;
  const auto row_max = T::lower(T::test::gemm_row_max_program(1000, 64, 1024).ir(), sm90());
  EXPECT_TRUE(row_max.ctx.gemm_ring);
  EXPECT_TRUE(row_max.ctx.tile_loop.applied) << row_max.ctx.tile_loop.why_not;

  // A K loop with element-wise work beside its gemm: a ring, not a gemm ring.
  T::PrimFunc scaled("gemm_then_scale");
  auto A = scaled.tensor("A", {256, 1024}, T::f16);
  auto B = scaled.tensor("B", {1024, 256}, T::f16);
  auto C = scaled.tensor("C", {256, 256}, T::f16);
  scaled.body([&] {
    T::Kernel(2, 2, 256, [&](T::Var bx, T::Var by) {
      auto As = T::alloc_shared({128, 64}, T::f16);
      auto Bs = T::alloc_shared({64, 128}, T::f16);
      auto Cl = T::alloc_fragment({128, 128}, T::f32);
      T::clear(Cl);
      T::Pipelined(16, 3, [&](T::Var ko) {
        T::copy(A(by * 128, ko * 64), As);
        T::copy(B(ko * 64, bx * 128), Bs);
        T::gemm(As, Bs, Cl);
        T::Parallel(128, 128, [&](T::Var i, T::Var j) { Cl(i, j) = Cl(i, j) * 0.5f; });
      });
      T::copy(Cl, C(by * 128, bx * 128));
    });
  });
  const auto other = T::lower(scaled.ir(), sm90());
  EXPECT_TRUE(other.ctx.uses_wgmma);
  EXPECT_FALSE(other.ctx.gemm_ring);
  EXPECT_FALSE(other.ctx.tile_loop.applied);
  EXPECT_EQ(other.ctx.tile_loop.why_not,
            "for a kernel whose K loop is one gemm fed by TMA loads (gemm_from_passes) or under "
            "JitOptions::persistent_rings (TESSEL_ENABLE=persistent_rings); no loop of this kernel is one "
            "gemm alone on TMA loads");
  EXPECT_TRUE(other.ctx.tma_stores.empty());
  T::passes::PassContext::Switches rings;
  rings.persistent_rings = true;
  const auto asked = T::lower(scaled.ir(), sm90(), rings);
  EXPECT_TRUE(asked.ctx.tile_loop.applied) << asked.ctx.tile_loop.why_not;

  // A chain of two gemms (S = Q K^T, O += P V without the softmax) and attention: not gemm rings.
  const auto chain = T::lower(
      T::kernels::gemm_chain_program(200, 1000, 64, T::DType::f16, 0.5f, {64, 64, 128, 2}, true).ir(),
      sm90());
  EXPECT_FALSE(chain.ctx.gemm_ring);
  EXPECT_FALSE(chain.ctx.tile_loop.applied);
  T::kernels::AttentionShape s;
  s.batch = 2, s.heads = 4, s.kv_heads = 4, s.seqlen_q = 1000, s.seqlen_k = 1000, s.dim = 128;
  const auto attention = T::lower(
      T::kernels::attention_program(s, T::DType::bf16, false, 0.125f, {128, 128, 256, 2}).ir(), sm90());
  EXPECT_FALSE(attention.ctx.gemm_ring);
  EXPECT_FALSE(attention.ctx.tile_loop.applied);

  // The template asked for (gemm_from_passes = false): a kernel it declines gets no ring epilogue
  // either, and says that the switch is off.
  const auto off = T::lower(scaled.ir(), sm90(), template_gemm());
  EXPECT_FALSE(off.ctx.hopper.selected);
  EXPECT_EQ(
      off.ctx.tile_loop.why_not,
      "JitOptions::gemm_from_passes is off (TESSEL_DISABLE=gemm_from_passes) and persistent_rings not on");
}

}  // namespace
