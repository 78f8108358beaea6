// The pipeline on small programs: IR text after passes, generated code, and the author-facing
// errors (message text and the author's line).
#include <gtest/gtest.h>

#include "Lower.hpp"
#include "codegen/CodegenCuda.hpp"
#include "support/LoweringSupport.hpp"
#include "tessel/ir/Printer.hpp"
#include "tessel/kernels/gemm/Matmul.hpp"
#include "tessel/kernels/softmax/Softmax.hpp"
#include "tessel/tessel.hpp"

namespace T = tessel;

namespace {

using tessel::test::sm80;
using tessel::test::sm90;
std::string error_of(const std::function<void()>& fn) {
  return tessel::test::compile_error_of(fn);
}

// Shared layouts and gemm engines are values; the device header's type is named from them (at lowering and in
// codegen's declarations), and the IR dump describes them.
TEST(LayoutValues, AreNamedOnlyWhenLowered) {
  using L = tessel::passes::SharedLayout;
  EXPECT_EQ(L::row_major(1, 8136).device_type(), "tessel::RowMajorLayout<1, 8136>");
  EXPECT_EQ(L::swizzled_for(128, 32, 2).device_type(), "tessel::SwizzledLayout<128, 32, 2>");
  EXPECT_EQ(L::wgmma_swizzle(64, 64, 2, 128).device_type(), "tessel::WgmmaSwizzleLayout<64, 64, 2, 128>");
  EXPECT_EQ(L::wgmma_swizzle(64, 32, 2, 64).describe(), "wgmma 64-byte swizzle 64x32 (2-byte elements)");
  EXPECT_EQ(L::row_major(4, 8).describe(), "row-major 4x8");
  EXPECT_TRUE(L::swizzled_for(8, 64, 2).swizzled() && !L::swizzled_for(8, 64, 2).wgmma());
  EXPECT_TRUE(L::wgmma_swizzle(8, 64, 2, 128).swizzled() && L::wgmma_swizzle(8, 64, 2, 128).wgmma());
  EXPECT_FALSE(L::row_major(8, 64).swizzled());
  EXPECT_EQ(L::wgmma_swizzle(64, 64, 2, 128), L::wgmma_swizzle(64, 64, 2, 128));
  EXPECT_NE(L::wgmma_swizzle(64, 64, 2, 128), L::wgmma_swizzle(64, 64, 2, 64));
  EXPECT_NE(L::swizzled_for(64, 64, 2), L::row_major(64, 64));
  // A gemm tile's register owner, likewise.
  using E = tessel::passes::GemmEngine;
  E acc;
  acc.rows = 64, acc.cols = 32, acc.warps_m = 4, acc.warps_n = 1;
  EXPECT_EQ(acc.device_type(), "tessel::AccumulatorLayout<64, 32, 4, 1>");
  E block = acc;
  block.kind = E::Kind::BlockGemm;
  block.dtype = "tessel::half_t", block.k = 16, block.trans_b = true;
  block.a = L::swizzled_for(64, 16, 2), block.b = L::swizzled_for(32, 16, 2);
  EXPECT_EQ(
      block.device_type(),
      "tessel::BlockGemm<tessel::half_t, 64, 32, 16, 4, 1, false, true, tessel::SwizzledLayout<64, 16, 2>, "
      "tessel::SwizzledLayout<32, 16, 2>>");
  E wg = block;
  wg.kind = E::Kind::WarpgroupGemm, wg.warpgroups = 1, wg.warps_m = wg.warps_n = 0;
  wg.a = L::row_major(64, 16), wg.b = L::wgmma_swizzle(32, 16, 2, 32);
  EXPECT_EQ(
      wg.device_type(),
      "tessel::WarpgroupGemm<tessel::half_t, 64, 32, 16, 1, false, true, tessel::RowMajorLayout<64, 16>, "
      "tessel::WgmmaSwizzleLayout<32, 16, 2, 32>>");
  EXPECT_NE(wg, block);
}

TEST(Frontend, MatmulRecordsTheTutorialProgram) {
  auto f = tessel::kernels::matmul_program(256, 256, 256, {});
  std::string ir = f.script();
  EXPECT_NE(ir.find("func matmul(A: f16[256, 256], B: f16[256, 256], C: f16[256, 256])"), std::string::npos)
      << ir;
  EXPECT_NE(ir.find("kernel grid(2, 2) threads(128) (bx, by)"), std::string::npos) << ir;
  EXPECT_NE(ir.find("pipelined ko in [0, 0 + 8) stages=3"), std::string::npos) << ir;
  EXPECT_NE(ir.find("copy(A[(by * 128), (ko * 32)] -> shared_"), std::string::npos) << ir;
  EXPECT_NE(ir.find("policy=square"), std::string::npos) << ir;
}

TEST(Passes, PipelineMultiBuffersAndHandsTheCopiesToTheGemmMainLoop) {
  auto f = tessel::kernels::matmul_program(256, 256, 256, {});
  auto lowered = tessel::lower(f.ir(), sm80(), true);
  ASSERT_EQ(lowered.stages.size(), tessel::pass_names().size());
  auto stage = [&](const std::string& pass) {
    for (const auto& [name, text] : lowered.stages)
      if (name == pass) return text;
    return std::string("<no pass ") + pass + ">";
  };
  const std::string piped = stage("plan_pipelines");
  EXPECT_NE(piped.find(": f16[3, 128, 32]"), std::string::npos) << piped;
  EXPECT_NE(piped.find("tessel::gemm_mainloop<tessel::BlockGemm<"), std::string::npos) << piped;
  EXPECT_NE(piped.find(", 3>(8, &shared_0, &shared_1, 4096, 4096, &fragment_2, lambda(k_tile, stage) {"),
            std::string::npos)
      << piped;
  EXPECT_NE(piped.find("copy(A[(by * 128):+128, (k_tile * 32):+32] -> shared_0[stage:+1, 0:+128, 0:+32])"),
            std::string::npos)
      << piped;
  EXPECT_EQ(lowered.ctx.smem_bytes, (128 * 32 + 32 * 128) * 2 * 3);
  const std::string layouts = stage("infer_layouts");
  EXPECT_NE(layouts.find("// layout fragment_2: gemm accumulator, warps 2x2, 128 registers per thread"),
            std::string::npos)
      << layouts;
  EXPECT_NE(layouts.find("// layout shared_0: swizzled 128x32 (2-byte elements)"), std::string::npos)
      << layouts;
  EXPECT_NE(lowered.stages.back().second.find("// smem shared_1: offset 24576"), std::string::npos)
      << lowered.stages.back().second;
}

// A loop whose compute is more than one gemm keeps the generic schedule: prologue of S-1 tiles,
// then per tile wait / barrier / next copy / commit / compute.
TEST(Passes, GenericPipelineOrdersWaitBarrierCopyCompute) {
  T::PrimFunc f("gemm_then_scale");
  auto A = f.tensor("A", {256, 256}, T::f16);
  auto B = f.tensor("B", {256, 128}, T::f16);
  auto C = f.tensor("C", {128, 128}, T::f16);
  f.body([&] {
    T::Kernel(1, 1, 128, [&](T::Var, T::Var) {
      auto As = T::alloc_shared({128, 32}, T::f16);
      auto Bs = T::alloc_shared({32, 128}, T::f16);
      auto Cl = T::alloc_fragment({128, 128}, T::f32);
      T::clear(Cl);
      T::Pipelined(8, 3, [&](T::Var ko) {
        T::copy(A(0, ko * 32), As);
        T::copy(B(ko * 32, 0), Bs);
        T::gemm(As, Bs, Cl);
        T::Parallel(128, 128, [&](T::Var i, T::Var j) { Cl(i, j) = Cl(i, j) * 0.5f; });
      });
      T::copy(Cl, C(0, 0));
    });
  });
  // sm_80: on sm_90a the loop is a TMA ring (its 128-row gemm takes wgmma over two m64 blocks).
  auto lowered = tessel::lower(f.ir(), T::test::sm80(), true);
  std::string piped;
  for (const auto& [name, text] : lowered.stages)
    if (name == "plan_pipelines") piped = text;
  EXPECT_NE(piped.find("unrolled s in [0, 0 + 2)"), std::string::npos) << piped;
  auto wait = piped.find("async_wait(1)"), bar = piped.find("barrier()", wait),
       copy = piped.find("copy(", bar), commit = piped.find("async_commit()", copy),
       gemm = piped.find("gemm(", commit);
  EXPECT_TRUE(wait != std::string::npos && bar != std::string::npos && copy != std::string::npos &&
              commit != std::string::npos && gemm != std::string::npos)
      << piped;
  EXPECT_EQ(piped.find("gemm_mainloop"), std::string::npos) << piped;
}

// A copy whose global rows provably start off 16 bytes (B's rows of 50257 f16, A's of 4095)
// becomes a realigned ring: the stages hold raw words (a [S, rows, cols + 8] buffer beside the
// single-stage tile), copied by cp.async in the prologue and ahead of each iteration; each
// iteration shifts its stage's words into the tile and publishes it with a second barrier before
// the gemm. The same loop without the switch keeps the staged tiles and copy_global_to_shared; an
// aligned copy (A's rows of 4096) is staged as before either way.
TEST(Passes, UnalignedRowsGetARealignedRing) {
  auto piped = [](long long K, bool rings, const tessel::passes::Target& target) {
    auto f =
        tessel::kernels::matmul_program(16, 50257, K, tessel::kernels::MatmulConfig{16, 32, 128, 4, 128});
    tessel::passes::PassContext::Switches s;
    s.allow_realigned_rings = rings;
    auto lowered = tessel::lower(f.ir(), target, s, true);
    for (const auto& [name, text] : lowered.stages)
      if (name == "plan_pipelines") return text;
    return std::string("<no plan_pipelines>");
  };
  for (const auto& target : {sm80(), sm90()}) {
    const std::string ring = piped(4096, true, target);
    EXPECT_NE(ring.find("shared shared_1: f16[128, 32]"), std::string::npos) << ring;
    EXPECT_NE(ring.find("shared shared_1_words: f16[4, 128, 40]"), std::string::npos) << ring;
    EXPECT_NE(ring.find("shared shared_0: f16[4, 16, 128]"), std::string::npos) << ring;
    EXPECT_NE(
        ring.find("tessel::copy_words_to_shared<tessel::half_t, 128, 32, 128>(&shared_1_words[(i64((s % 4)) "
                  "* 5120_i64)], &B[((i64((s * 128)) * 50257_i64) + i64((bx * 32)))], 50257_i64"),
        std::string::npos)
        << ring;
    // wait; barrier; next tile's copies; commit; the shift of this tile's stage; barrier; gemm.
    const auto wait = ring.find("async_wait(2)"), bar = ring.find("barrier()", wait),
               next = ring.find("tessel::copy_words_to_shared", bar),
               commit = ring.find("async_commit()", next),
               shift = ring.find(
                   "tessel::realign_words_to_shared<tessel::half_t, 128, 32, "
                   "tessel::SwizzledLayout<128, 32, 2>, 128>(&shared_1, &shared_1_words[(i64((ko "
                   "% 4)) * 5120_i64)], &B[((i64((ko * 128)) * 50257_i64) + i64((bx * 32)))], "
                   "50257_i64)",
                   commit),
               publish = ring.find("barrier()", shift), gemm = ring.find("gemm(", publish);
    EXPECT_TRUE(wait != std::string::npos && bar != std::string::npos && next != std::string::npos &&
                commit != std::string::npos && shift != std::string::npos && publish != std::string::npos &&
                gemm != std::string::npos)
        << ring;
    // A's rows of 4096 are aligned: a staged tile, copied as before.
    EXPECT_NE(ring.find("copy(A["), std::string::npos) << ring;
    // Both operands' rows off 16 bytes: two rings.
    const std::string both = piped(4095, true, target);
    EXPECT_NE(both.find("shared shared_0_words: f16[4, 16, 136]"), std::string::npos) << both;
    EXPECT_NE(both.find("shared shared_1_words: f16[4, 128, 40]"), std::string::npos) << both;
    EXPECT_EQ(both.find("copy(A["), std::string::npos) << both;
    // The switch off: staged tiles, copies left to lower_tile_ops.
    const std::string off = piped(4096, false, target);
    EXPECT_EQ(off.find("_words"), std::string::npos) << off;
    EXPECT_NE(off.find("shared shared_1: f16[4, 128, 32]"), std::string::npos) << off;
    EXPECT_NE(off.find("copy(B["), std::string::npos) << off;
  }
}

// A realigned ring takes more shared memory than the staged tile it replaces (each stage's rows
// 16 bytes wider, plus the tile): where that would pass the target's cap the loop keeps its
// staged tiles and the synchronous chunks, and the kernel still compiles. sm_80 (163 KB): 128x64x64
// tiles over 256 threads (the generic schedule) on 6 stages stage 144 KB; as rings they would take
// 162 KB + 24 KB. On 4 stages the rings fit (132 KB).
TEST(Passes, RealignedRingsOnlyWhereSharedMemoryFits) {
  auto piped = [](int stages) {
    auto f = tessel::kernels::matmul_program(64, 1023, 1025,
                                             tessel::kernels::MatmulConfig{128, 64, 64, stages, 256});
    auto lowered = tessel::lower(f.ir(), sm80(), true);
    EXPECT_LE(lowered.ctx.smem_bytes, 166912);
    for (const auto& [name, text] : lowered.stages)
      if (name == "plan_pipelines") return text;
    return std::string("<no plan_pipelines>");
  };
  const std::string full = piped(6);
  EXPECT_EQ(full.find("_words"), std::string::npos) << full;
  EXPECT_NE(full.find("shared shared_0: f16[6, 128, 64]"), std::string::npos) << full;
  EXPECT_NE(full.find("copy(A["), std::string::npos) << full;
  const std::string room = piped(4);
  EXPECT_NE(room.find("shared shared_0_words: f16[4, 128, 72]"), std::string::npos) << room;
  EXPECT_NE(room.find("shared shared_1_words: f16[4, 64, 72]"), std::string::npos) << room;
}

TEST(Passes, LoweredIrHasNoTileOps) {
  auto f = tessel::kernels::matmul_program(300, 200, 40, {});
  auto lowered = tessel::lower(f.ir(), sm80());
  std::string ir = tessel::ir::to_string(lowered.body);
  EXPECT_EQ(ir.find("copy("), std::string::npos) << ir;
  EXPECT_EQ(ir.find("gemm("), std::string::npos) << ir;
  EXPECT_EQ(ir.find("fragment "), std::string::npos) << ir;
  EXPECT_NE(ir.find("tessel::gemm_mainloop<"), std::string::npos) << ir;
  EXPECT_NE(ir.find("tessel::store_accumulators"), std::string::npos) << ir;
}

TEST(Codegen, EmitsReadableKernel) {
  auto f = tessel::kernels::matmul_program(256, 256, 256, {});
  auto lowered = tessel::lower(f.ir(), sm80());
  std::string src = tessel::codegen::generate_cuda(lowered);
  EXPECT_NE(src.find("extern \"C\" __global__ void __launch_bounds__(128) matmul_kernel("), std::string::npos)
      << src;
  EXPECT_NE(src.find("[&](int k_tile, int stage) {"), std::string::npos) << src;
  EXPECT_NE(src.find("tessel::store_accumulators_via_shared<"), std::string::npos) << src;
  EXPECT_NE(src.find("#include <tessel/tessel.cuh>"), std::string::npos) << src;
}

// The scratch tile of the epilogue goes out in 16-byte chunks only when every output row
// starts 16-byte aligned: N = 182 bf16 (rows 364 bytes apart) stores element by element (the
// fuzzer's case gemm-204844597020097 faulted with a misaligned address on the H200).
TEST(Codegen, EpilogueChunksOnlyOnAlignedRows) {
  auto call = [](std::int64_t n) {
    tessel::kernels::MatmulConfig cfg;
    cfg.block_M = 96, cfg.block_N = 64, cfg.block_K = 16, cfg.threads = 96, cfg.num_stages = 3;
    cfg.dtype = T::bf16;
    auto f = tessel::kernels::matmul_program(269, static_cast<int>(n), 121, cfg);
    std::string src = tessel::codegen::generate_cuda(tessel::lower(f.ir(), sm80()));
    auto at = src.find("tessel::store_accumulators_via_shared<");
    EXPECT_NE(at, std::string::npos) << src;
    return at == std::string::npos ? std::string() : src.substr(at, src.find('(', at) - at);
  };
  std::string odd = call(182), even = call(256);
  EXPECT_NE(odd.find(">, false>"), std::string::npos) << odd;
  EXPECT_NE(even.find(">, true>"), std::string::npos) << even;
}

// A warp tile of one or two m16n8 blocks (skinny GEMMs) spreads each K tile's k steps over
// independent accumulator chains (BlockGemm's last template argument); bigger warp tiles, a K
// tile of one k step and the switch keep one chain (no argument printed).
TEST(Codegen, SmallWarpTilesTakeAccumulatorChains) {
  auto gemm_type = [](int bm, int bn, int bk, int threads, const T::passes::PassContext::Switches& s) {
    tessel::kernels::MatmulConfig cfg;
    cfg.block_M = bm, cfg.block_N = bn, cfg.block_K = bk, cfg.threads = threads, cfg.num_stages = 4;
    auto f = tessel::kernels::matmul_program(16, 4096, 4096, cfg);
    const std::string src = tessel::codegen::generate_cuda(tessel::lower(f.ir(), sm80(), s, false));
    const auto at = src.find("tessel::BlockGemm<");
    EXPECT_NE(at, std::string::npos) << src;
    const auto end = src.find("::run(", at);
    EXPECT_NE(end, std::string::npos) << src;
    return at == std::string::npos || end == std::string::npos ? std::string() : src.substr(at, end - at);
  };
  const T::passes::PassContext::Switches on;
  T::passes::PassContext::Switches off;
  off.allow_gemm_chains = false;
  // 16x32 on 4 warps: one m16n8 block a warp, 8 k steps -> 4 chains.
  EXPECT_EQ(gemm_type(16, 32, 128, 128, on),
            "tessel::BlockGemm<tessel::half_t, 16, 32, 128, 1, 4, false, false, tessel::SwizzledLayout<16, "
            "128, 2>, "
            "tessel::SwizzledLayout<128, 32, 2>, 4>");
  // 16x64 on 4 warps: two blocks a warp -> 2 chains; with 2 k steps, still 2.
  EXPECT_NE(gemm_type(16, 64, 128, 128, on).find(", 2>"), std::string::npos);
  EXPECT_NE(gemm_type(16, 64, 32, 128, on).find(", 2>"), std::string::npos);
  // One k step: nothing to spread. Four blocks a warp (16x128): enough mmas in flight already.
  for (const std::string& t : {gemm_type(16, 32, 16, 128, on), gemm_type(16, 128, 64, 128, on),
                               gemm_type(64, 64, 64, 128, on), gemm_type(16, 32, 128, 128, off)})
    EXPECT_EQ(t.substr(t.size() - 3), "2>>") << t;
}

// Warp-specialized kernels' role tests (plan_kernel_abi). At one consumer warpgroup, by default,
// the role is tested on the warp index broadcast from lane 0 (no TESSEL_UNIFORM_WARPGROUP: the
// warpgroup index is a constant there); at several, only under JitOptions::uniform_roles, which
// also defines TESSEL_UNIFORM_WARPGROUP (WarpgroupGemm's index broadcast the same way);
// disable_uniform_roles gives the plain thread-index test everywhere; sm_80 has no roles.
TEST(Codegen, UniformRolesTestTheWarpIndexFromLaneZero) {
  auto source = [](int block_M, int threads, bool uniform, bool allow, const T::passes::Target& target) {
    tessel::kernels::MatmulConfig cfg;
    cfg.block_M = block_M, cfg.block_N = 128, cfg.block_K = 64, cfg.threads = threads, cfg.num_stages = 3;
    auto f = tessel::kernels::matmul_program(1024, 1024, 1024, cfg);
    T::passes::PassContext::Switches s;
    s.gemm_from_passes = true;
    s.uniform_roles = uniform;
    s.allow_uniform_roles = allow;
    return tessel::codegen::generate_cuda(tessel::lower(f.ir(), target, s, false));
  };
  const std::string uniform_test_8 =
      "if (tessel::warp_uniform(static_cast<int>(threadIdx.x / 32)) >= 8) {  // producer warp";
  const std::string uniform_test_4 =
      "if (tessel::warp_uniform(static_cast<int>(threadIdx.x / 32)) >= 4) {  // producer warp";
  // Two consumer warpgroups: plain by default, broadcast (and the define) when asked for.
  const std::string two = source(128, 256, false, true, sm90());
  EXPECT_NE(two.find("if (threadIdx.x >= 256) {  // producer warp"), std::string::npos) << two;
  EXPECT_EQ(two.find("warp_uniform"), std::string::npos) << two;
  EXPECT_EQ(two.find("TESSEL_UNIFORM_WARPGROUP"), std::string::npos);
  const std::string two_uniform = source(128, 256, true, true, sm90());
  EXPECT_NE(two_uniform.find("#define TESSEL_UNIFORM_WARPGROUP 1"), std::string::npos) << two_uniform;
  EXPECT_NE(two_uniform.find(uniform_test_8), std::string::npos) << two_uniform;
  // One consumer warpgroup: the broadcast role test by default, no define.
  const std::string one = source(64, 128, false, true, sm90());
  EXPECT_NE(one.find(uniform_test_4), std::string::npos) << one;
  EXPECT_EQ(one.find("TESSEL_UNIFORM_WARPGROUP"), std::string::npos);
  // disable_uniform_roles wins over the default and over uniform_roles.
  for (bool uniform : {false, true}) {
    const std::string off = source(64, 128, uniform, false, sm90());
    EXPECT_NE(off.find("if (threadIdx.x >= 128) {  // producer warp"), std::string::npos) << off;
    EXPECT_EQ(off.find("warp_uniform"), std::string::npos) << off;
    EXPECT_EQ(off.find("TESSEL_UNIFORM_WARPGROUP"), std::string::npos);
  }
  const std::string sm80_src = source(128, 256, true, true, sm80());
  EXPECT_EQ(sm80_src.find("warp_uniform"), std::string::npos);
  EXPECT_EQ(sm80_src.find("TESSEL_UNIFORM_WARPGROUP"), std::string::npos);
}

// A tile copy that no block can ever take whole (M below the tile, one block row: the skinny
// GEMMs' A) keeps only the edge path (TileExtent::Edge); a tile some block takes whole keeps
// both, decided at run time.
TEST(Codegen, CopiesProvablyAtTheEdgeKeepOnlyTheEdgePath) {
  auto copies = [](int m) {
    tessel::kernels::MatmulConfig cfg;
    cfg.block_M = 16, cfg.block_N = 32, cfg.block_K = 128, cfg.threads = 128, cfg.num_stages = 8;
    const std::string src = tessel::codegen::generate_cuda(
        tessel::lower(tessel::kernels::matmul_program(m, 4096, 4096, cfg).ir(), sm80()));
    std::vector<std::string> out;
    for (auto at = src.find("tessel::copy_global_to_shared<"); at != std::string::npos;
         at = src.find("tessel::copy_global_to_shared<", at + 1))
      out.push_back(src.substr(at, src.find("(", at) - at));
    return out;
  };
  for (int m : {1, 9, 16}) {
    const std::vector<std::string> c = copies(m);
    ASSERT_EQ(c.size(), 4u);  // A and B, in the prologue and in the loop
    for (const std::string& call : c) {
      const bool a_tile = call.find("<tessel::half_t, 16, 128,") != std::string::npos;
      EXPECT_EQ(call.find("tessel::TileExtent::Edge") != std::string::npos, a_tile && m < 16)
          << m << ": " << call;
    }
  }
}

TEST(Codegen, ParallelEpilogueFollowsTheAccumulatorLayout) {
  T::PrimFunc f("relu_gemm");
  auto A = f.tensor("A", {128, 64}, T::f16);
  auto B = f.tensor("B", {64, 128}, T::f16);
  auto C = f.tensor("C", {128, 128}, T::f16);
  f.body([&] {
    T::Kernel(1, 1, 128, [&](T::Var, T::Var) {
      auto As = T::alloc_shared({128, 64}, T::f16);
      auto Bs = T::alloc_shared({64, 128}, T::f16);
      auto Cl = T::alloc_fragment({128, 128}, T::f32);
      T::clear(Cl);
      T::copy(A(0, 0), As);
      T::copy(B(0, 0), Bs);
      T::gemm(As, Bs, Cl);
      T::Parallel(128, 128, [&](T::Var i, T::Var j) { Cl(i, j) = T::max(Cl(i, j) * 0.5f, 0.0f); });
      T::copy(Cl, C(0, 0));
    });
  });
  auto lowered = tessel::lower(f.ir(), sm90());
  std::string src = tessel::codegen::generate_cuda(lowered);
  EXPECT_NE(src.find("::acc_row(l"), std::string::npos) << src;
  // The two copies into shared memory are fenced once, not twice.
  EXPECT_EQ(src.find("__syncthreads();\n  __syncthreads();"), std::string::npos) << src;
  EXPECT_NE(src.find("max(("), std::string::npos) << src;
}

TEST(Errors, GemmTileNotDividingTheInstructionIsRejected) {
  tessel::kernels::MatmulConfig c;
  c.block_K = 24;
  std::string msg =
      error_of([&] { tessel::lower(tessel::kernels::matmul_program(256, 256, 256, c).ir(), sm90()); });
  EXPECT_NE(msg.find("error in gemm: the K tile is 24, not a multiple of 16 (mma.sync m16n8k16)"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("Matmul.cpp:"), std::string::npos) << msg;
}

TEST(Errors, WarpPartitionImpossible) {
  tessel::kernels::MatmulConfig c;
  c.block_M = 16;
  c.block_N = 8;
  c.threads = 256;
  std::string msg =
      error_of([&] { tessel::lower(tessel::kernels::matmul_program(256, 256, 256, c).ir(), sm90()); });
  EXPECT_NE(msg.find("cannot be split over 8 warps"), std::string::npos) << msg;
}

TEST(Errors, SharedMemoryOverTheCap) {
  tessel::kernels::MatmulConfig c;
  c.block_M = c.block_N = 256;
  c.block_K = 64;
  c.num_stages = 4;
  c.threads = 256;
  std::string msg =
      error_of([&] { tessel::lower(tessel::kernels::matmul_program(512, 512, 512, c).ir(), sm90()); });
  EXPECT_NE(msg.find("the kernel needs 262144 bytes of shared memory"), std::string::npos) << msg;
  EXPECT_NE(msg.find("sm_90a allows 232448 bytes per block"), std::string::npos) << msg;
}

TEST(Errors, ThreadsMustBeAWarpMultiple) {
  std::string msg = error_of([] {
    T::PrimFunc f("bad");
    f.body([&] { T::Kernel(1, 100, [&](T::Var) {}); });
  });
  EXPECT_NE(msg.find("error in Kernel: threads = 100; legal: a multiple of 32 from 32 to 1024"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("LoweringTest.cpp:"), std::string::npos) << msg;
}

TEST(Errors, CopyExtentsMustMatch) {
  T::PrimFunc f("bad_copy");
  auto A = f.tensor("A", {64, 64}, T::f16);
  f.body([&] {
    T::Kernel(1, 128, [&](T::Var) {
      auto s1 = T::alloc_shared({32, 32}, T::f16);
      auto s2 = T::alloc_shared({16, 32}, T::f16);
      T::copy(A(0, 0), s1);
      T::copy(s1, s2);
    });
  });
  std::string msg = error_of([&] { tessel::lower(f.ir(), sm90()); });
  EXPECT_NE(msg.find("error in copy: the regions have different extents"), std::string::npos) << msg;
}

TEST(Errors, BufferUsedOutsideItsKernel) {
  std::string msg = error_of([] {
    T::PrimFunc f("escape");
    auto A = f.tensor("A", {64, 64}, T::f16);
    T::Buffer leaked;
    f.body([&] {
      T::Kernel(1, 128, [&](T::Var) { leaked = T::alloc_shared({64, 64}, T::f16); });
      T::copy(A(0, 0), leaked);
    });
  });
  EXPECT_NE(msg.find("error in copy: called outside a kernel"), std::string::npos) << msg;
}

TEST(Errors, GemmShapesMustChain) {
  T::PrimFunc f("bad_gemm");
  f.body([&] {
    T::Kernel(1, 128, [&](T::Var) {
      auto a = T::alloc_shared({64, 32}, T::f16);
      auto b = T::alloc_shared({64, 64}, T::f16);
      auto c = T::alloc_fragment({64, 64}, T::f32);
      T::gemm(a, b, c);
    });
  });
  std::string msg = error_of([&] { tessel::lower(f.ir(), sm90()); });
  EXPECT_NE(msg.find("tile shapes do not chain: A is 64x32, B is 64x64, C is 64x64"), std::string::npos)
      << msg;
}

TEST(Dump, EnvPrintsIrAfterAPass) {
  setenv("TESSEL_DUMP", "after:lower_tile_ops", 1);
  testing::internal::CaptureStderr();
  tessel::lower(tessel::kernels::matmul_program(128, 128, 128, {}).ir(), sm90());
  std::string err = testing::internal::GetCapturedStderr();
  unsetenv("TESSEL_DUMP");
  EXPECT_NE(err.find("// TESSEL_DUMP after lower_tile_ops"), std::string::npos) << err;
  EXPECT_EQ(err.find("after plan_pipelines"), std::string::npos) << err;
}

}  // namespace

namespace {

TEST(Errors, FragmentStoreOutsideParallelNamesTheAuthorsLine) {
  T::PrimFunc f("loose_store");
  f.body([&] {
    T::Kernel(1, 128, [&](T::Var) {
      auto frag = T::alloc_fragment({64, 64}, T::f32);
      T::clear(frag);
      frag(0, 0) = 1.0f;  // the line the error must name
    });
  });
  std::string msg = error_of([&] { tessel::lower(f.ir(), sm90()); });
  EXPECT_NE(msg.find("is written element-wise outside a Parallel nest"), std::string::npos) << msg;
  EXPECT_NE(msg.find("LoweringTest.cpp:" + std::to_string(__LINE__ - 5)), std::string::npos) << msg;
}

TEST(Errors, ParallelMustIndexFragmentsWithItsVariables) {
  T::PrimFunc f("transposed_access");
  f.body([&] {
    T::Kernel(1, 128, [&](T::Var) {
      auto frag = T::alloc_fragment({32, 32}, T::f32);
      T::clear(frag);
      T::Parallel(32, 32, [&](T::Var i, T::Var j) { frag(i, j) = frag(j, i); });
    });
  });
  std::string msg = error_of([&] { tessel::lower(f.ir(), sm90()); });
  EXPECT_NE(msg.find("fragment fragment_0 is indexed as fragment_0(j, i)"), std::string::npos) << msg;
}

}  // namespace

namespace {

// The tutorial GEMM with Parallel nests of the caller's choosing between its loop and its store.
// D is a second output the epilogue may write.
T::PrimFunc gemm_with_epilogue(
    const std::function<void(const T::Buffer&, const T::Buffer&, T::Var, T::Var)>& epilogue) {
  T::PrimFunc f("gemm_epilogue");
  auto A = f.tensor("A", {256, 512}, T::f16);
  auto B = f.tensor("B", {512, 256}, T::f16);
  auto D = f.tensor("D", {256, 256}, T::f32);
  auto C = f.tensor("C", {256, 256}, T::f16);
  f.body([&] {
    T::Kernel(2, 2, 128, [&](T::Var bx, T::Var by) {
      auto As = T::alloc_shared({128, 64}, T::f16);
      auto Bs = T::alloc_shared({64, 128}, T::f16);
      auto Cl = T::alloc_fragment({128, 128}, T::f32);
      T::clear(Cl);
      T::Pipelined(8, 3, [&](T::Var ko) {
        T::copy(A(by * 128, ko * 64), As);
        T::copy(B(ko * 64, bx * 128), Bs);
        T::gemm(As, Bs, Cl);
      });
      epilogue(Cl, D, bx, by);
      T::copy(Cl, C(by * 128, bx * 128));
    });
  });
  return f;
}

std::string stage_text(const tessel::LoweredFunc& l, const std::string& pass) {
  for (const auto& [name, text] : l.stages)
    if (name == pass) return text;
  return "<no stage " + pass + ">";
}

}  // namespace

// On sm_90a (the template: gemm_from_passes = false) an element-wise epilogue becomes a
// per-element lambda of the Hopper kernel: one scalar per fragment, the nests' bodies in order,
// the stored fragment's value returned.
TEST(Passes, HopperFusesAnElementWiseEpilogue) {
  auto f = tessel::kernels::matmul_bias_act_program(
      300, 264, 512, tessel::kernels::default_matmul_config(300, 264, 512, T::f16, "sm_90a", 132),
      tessel::kernels::Activation::relu, 0.5f);
  auto lowered = tessel::lower(f.ir(), sm90(), T::test::template_gemm(), true);
  ASSERT_TRUE(lowered.ctx.hopper.selected) << lowered.ctx.hopper.why_not;
  EXPECT_TRUE(lowered.ctx.hopper.fused_epilogue);
  std::string ir = stage_text(lowered, "select_hopper_gemm");
  // The kernel's old block indices are the lambda's tile coordinates (bx#1: the persistent
  // kernel has its own bx).
  EXPECT_NE(ir.find("lambda(acc, bx#1, by, i, j) {"), std::string::npos) << ir;
  EXPECT_NE(ir.find("local fragment_2: f32[1]\n      fragment_2[0] = acc\n"), std::string::npos) << ir;
  EXPECT_NE(ir.find("select((((bx#1 * 128) + j) < 264), f32(bias[((bx#1 * 128) + j)]), 0.0_f32)"),
            std::string::npos)
      << ir;
  EXPECT_NE(ir.find("return fragment_2[0]"), std::string::npos) << ir;
  std::string src = tessel::codegen::generate_cuda(lowered);
  EXPECT_NE(src.find("      &tmap_C,\n      [&](float acc, int bx_1, int by, int i, int j) {"),
            std::string::npos)
      << src;
  EXPECT_NE(src.find("return fragment_2[0];"), std::string::npos) << src;
  // The guarded bias read has no branch: both arms evaluated, the index clamped when not taken.
  EXPECT_NE(
      src.find("tessel::pick((((bx_1 * 128) + j) < 264), ((float)(tessel::to_float(bias[(((((bx_1 * 128) + "
               "j) < 264)) ? (long long)(((bx_1 * 128) + j)) : 0LL)]))), 0.0f)"),
      std::string::npos)
      << src;

  // A nest that writes a global tensor is not the template's, which says why.
  auto second_output = gemm_with_epilogue([](const T::Buffer& Cl, const T::Buffer& D, T::Var bx, T::Var by) {
    T::Parallel(128, 128, [&](T::Var i, T::Var j) { D(by * 128 + i, bx * 128 + j) = Cl(i, j); });
  });
  auto s = tessel::lower(second_output.ir(), sm90(), T::test::template_gemm());
  EXPECT_FALSE(s.ctx.hopper.selected);
  EXPECT_NE(
      s.ctx.hopper.why_not.find("the epilogue is not element-wise: it stores to D, a global buffer (line "),
      std::string::npos)
      << s.ctx.hopper.why_not;
}

// A row copy whose vectors are provably whole and aligned for every block and thread (a
// static shape the tile divides) is emitted without its edge path; one that may run past the
// row's end or the last row keeps both.
TEST(Codegen, RowCopiesDropTheEdgePathOnlyWhenItCannotRun) {
  auto source = [](long long M, long long N, const char* config, bool row_staging = true,
                   bool realigned_loads = false) {
    auto f = tessel::kernels::softmax_program(M, N, tessel::DType::f16,
                                              tessel::kernels::parse_softmax_config(config));
    tessel::passes::PassContext::Switches s;
    s.allow_row_staging = row_staging;
    s.allow_realigned_global_loads = realigned_loads;  // on by default for long rows: tested below
    return tessel::codegen::generate_cuda(tessel::lower(f.ir(), sm90(), s));
  };
  const std::string masked = "tessel::load_row_vector<", whole = "tessel::load_row_vector_whole<";
  std::string exact = source(16384, 16384, "rows:t512:r1:bn16384");
  EXPECT_EQ(exact.find(masked), std::string::npos) << exact;
  EXPECT_EQ(exact.find("tessel::store_row_vector<"), std::string::npos) << exact;
  EXPECT_NE(exact.find(whole), std::string::npos) << exact;
  EXPECT_NE(exact.find("), true, -tessel::infinity_f32()"), std::string::npos)
      << exact;  // no per-vector test left
  // The online variant's chunk loop: the loop variable's range proves every chunk whole.
  std::string online = source(64, 65536, "online:t256:bn4096");
  EXPECT_EQ(online.find(masked), std::string::npos) << online;
  // Rows shorter than the tile but a whole number of vectors (1000 in a 1024-wide tile): every
  // vector is whole or wholly past the row's end, so no masked path.
  std::string short_rows = source(64, 1000, "rows:t256:r8:bn1024");
  EXPECT_EQ(short_rows.find(masked), std::string::npos) << short_rows;
  EXPECT_NE(short_rows.find(whole), std::string::npos) << short_rows;
  // So does a ragged last block of rows (7 rows, 8 per block): a row past the end is a count
  // of 0, not loaded.
  std::string few_rows = source(7, 1024, "rows:t256:r8:bn1024");
  EXPECT_EQ(few_rows.find(masked), std::string::npos) << few_rows;
  EXPECT_NE(few_rows.find(whole), std::string::npos) << few_rows;
  // A ragged row (1020: vectors cut by the row's end, rows that start unaligned) in a tile
  // without room for copy_window's shift (1020 + 7 > 1024) moves through a shared span by
  // default; without row staging it keeps the masked path, chosen per warp.
  std::string staged = source(64, 1020, "rows:t256:r8:bn1024");
  EXPECT_NE(staged.find("tessel::copy_span_to_shared<"), std::string::npos) << staged;
  EXPECT_NE(staged.find("tessel::copy_shared_span_to_global<"), std::string::npos) << staged;
  EXPECT_EQ(staged.find("if (tessel::warp_all("), std::string::npos) << staged;
  // Spans up to 48 KB (two rows of 12283 f16 + one vector: 49148 bytes) are staged; past it
  // (two rows of 14331) the copy keeps the masked path.
  EXPECT_NE(source(64, 12283, "rows:t512:r2:bn12288").find("tessel::copy_span_to_shared<"),
            std::string::npos);
  const std::string long_row = source(64, 14331, "rows:t512:r2:bn14336");
  EXPECT_EQ(long_row.find("copy_span_to_shared"), std::string::npos) << long_row;
  EXPECT_NE(long_row.find(masked), std::string::npos) << long_row;
  // Rows with a shared tail and room for their windows (the tile at least 7 columns wider than
  // the row) and w: each row goes through the window from the aligned word before it
  // (copy_window), never the span; without w, rows keep the span even with room.
  EXPECT_NE(source(64, 999, "rows:t256:r8:bn1024").find("tessel::copy_span_to_shared<"), std::string::npos);
  for (const std::string& window : {source(64, 24001, "rows:t512:r1:bn28672:s5:w"), source(64, 50257, "rows:t512:r1:bn53248:s11:w")}) {
    // The rows kept as loaded (f16 registers and slots).
    EXPECT_NE(window.find("tessel::load_row_window<tessel::half_t, 8, tessel::half_t, true>"), std::string::npos)
        << window;
    EXPECT_NE(window.find("tessel::store_row_window<tessel::half_t, 8, tessel::half_t>"), std::string::npos) << window;
    EXPECT_EQ(window.find("span"), std::string::npos) << window;
  }
  // A fragment with a shared tail is not staged on either side (its shared memory is spoken for).
  const std::string tail = source(64, 8191, "rows:t256:r1:bn8192:s2");
  EXPECT_NE(tail.find("SplitRegs"), std::string::npos) << tail;
  EXPECT_EQ(tail.find("copy_span_to_shared"), std::string::npos) << tail;
  EXPECT_EQ(tail.find("copy_shared_span_to_global"), std::string::npos) << tail;
  std::string ragged = source(64, 1020, "rows:t256:r8:bn1024", false);
  EXPECT_NE(ragged.find(masked), std::string::npos) << ragged;
  EXPECT_NE(ragged.find("if (tessel::warp_all("), std::string::npos) << ragged;
  // Rows of 1024 bytes or more (1020 f16: 2040) load by realigned global words by default, the
  // choice per warp; stores still through the span. Short rows (127 f16) stay staged.
  std::string direct = source(64, 1020, "rows:t256:r8:bn1024", true, true);
  EXPECT_NE(direct.find("tessel::load_global_words_realigned<"), std::string::npos) << direct;
  EXPECT_NE(direct.find("if (tessel::warp_all("), std::string::npos) << direct;
  EXPECT_EQ(direct.find("tessel::copy_span_to_shared<"), std::string::npos) << direct;
  EXPECT_NE(direct.find("tessel::copy_shared_span_to_global<"), std::string::npos) << direct;
  // Every load of the thread before any unpack; the unpacks read their shift off the first
  // vector's address (a thread's four vectors lie 256 columns apart in one row), not each
  // vector's.
  const auto first_argument = [](const std::string& src, const std::string& call) {
    std::size_t at = src.find(call);
    if (at == std::string::npos) return std::string();
    at = src.find('(', at) + 1;
    int depth = 0;
    std::size_t end = at;
    for (; end < src.size(); ++end) {
      if (src[end] == '(') ++depth;
      if (src[end] == ')') --depth;
      if (depth == 0 && src[end] == ',') break;
    }
    return src.substr(at, end - at);
  };
  EXPECT_LT(direct.rfind("tessel::load_global_words_realigned<"), direct.find("tessel::unpack_global_words_realigned<"))
      << direct;
  const std::string shift_at = first_argument(direct, "tessel::unpack_global_words_realigned<");
  EXPECT_FALSE(shift_at.empty()) << direct;
  EXPECT_EQ(shift_at.find("g *"), std::string::npos) << shift_at;
  EXPECT_NE(first_argument(direct, "tessel::load_global_words_realigned<").find("g *"), std::string::npos);
  // One row a pass of 32 lanes: a thread's second four vectors are a row (1023 columns, not a
  // multiple of 8) further on, so each vector reads its own shift.
  std::string two_rows = source(64, 1023, "rows:t32:r2:bn1024", true, true);
  EXPECT_NE(first_argument(two_rows, "tessel::unpack_global_words_realigned<").find("g *"), std::string::npos)
      << two_rows;
  // Staged short rows, eight rows a warp at 127 / 129 columns: two neighbouring rows never
  // start both aligned, so the span's per-warp whole-vector form is not compiled (the fifth
  // template argument, WarpMayBeWhole); a warp inside one row (8191 staged, 256 lanes a row)
  // keeps it.
  for (long long n : {127LL, 129LL}) {
    const std::string staged = source(4096, n, n == 127 ? "rows:t256:r64:bn128" : "rows:t256:r64:bn160");
    EXPECT_NE(staged.find("tessel::load_row_vector<tessel::half_t, 8, float, false, false>("), std::string::npos)
        << staged;
    EXPECT_NE(staged.find("tessel::store_row_vector<tessel::half_t, 8, float, true, false>("), std::string::npos)
        << staged;
  }
  const std::string one_row_a_warp = source(64, 8191, "rows:t256:r1:bn8192");
  EXPECT_NE(one_row_a_warp.find("tessel::store_row_vector<tessel::half_t, 8, float, true>("), std::string::npos)
      << one_row_a_warp;
  std::string short_staged = source(4096, 127, "rows:t256:r64:bn128", true, true);
  EXPECT_EQ(short_staged.find("load_global_words_realigned"), std::string::npos) << short_staged;
  EXPECT_NE(short_staged.find("tessel::copy_span_to_shared<"), std::string::npos) << short_staged;
}

// A fragment with a shared tail: its last vectors per thread live in per-thread shared slots
// (tessel::SplitRegs), filled by cp.async and waited for by each thread, and the kernel asks
// ptxas for the two blocks per SM its shared memory allows.
TEST(Codegen, FragmentSharedTail) {
  auto f = tessel::kernels::softmax_program(
      4096, 65536, tessel::DType::f16, tessel::kernels::parse_softmax_config("rows:t512:r1:bn65536:s14"));
  EXPECT_NE(f.script().find("shared_tail(14)"), std::string::npos) << f.script();
  auto lowered = tessel::lower(f.ir(), sm90());
  EXPECT_EQ(lowered.ctx.min_blocks_per_sm, 2);
  std::string src = tessel::codegen::generate_cuda(lowered);
  EXPECT_NE(src.find("__launch_bounds__(512, 2)"), std::string::npos) << src;
  // 16 vectors of 8 per thread: 2 in registers (16 elements), 14 in slots (112 elements).
  EXPECT_NE(src.find("tessel::SplitRegs<tessel::half_t, 16, 112, 8, 512> fragment_0(fragment_0_tail);"),
            std::string::npos)
      << src;
  EXPECT_NE(src.find("tessel::cp_async_wait<0>();"), std::string::npos) << src;
  // 512 threads x 112 elements x 2 bytes of slots.
  EXPECT_GE(lowered.ctx.smem_bytes, 512 * 112 * 2);
}

// JitOptions::programmatic_launch: on sm_90 the kernel waits at entry for the previous grid and
// lets the next start (griddepcontrol), and the ABI tells the JIT to launch it with the
// programmatic-stream-serialization attribute; before sm_90 nothing changes.
TEST(KernelAbi, ProgrammaticLaunchOnHopperOnly) {
  auto f = tessel::kernels::softmax_program(64, 1000, tessel::DType::f16,
                                            tessel::kernels::parse_softmax_config("rows:t256:r8:bn1024"));
  tessel::passes::PassContext::Switches s;
  s.programmatic_launch = true;
  const auto hopper = tessel::lower(f.ir(), sm90(), s);
  EXPECT_TRUE(hopper.ctx.abi.programmatic_launch);
  const std::string src = tessel::codegen::generate_cuda(hopper);
  const auto wait = src.find("tessel::grid_dependency_wait();"), trigger = src.find("tessel::launch_dependents();");
  ASSERT_NE(wait, std::string::npos) << src;
  EXPECT_NE(trigger, std::string::npos) << src;
  // Before any memory access: the first load of X comes after the wait.
  EXPECT_LT(wait, src.find("X + ")) << src;
  const auto ampere = tessel::lower(f.ir(), sm80(), s);
  EXPECT_FALSE(ampere.ctx.abi.programmatic_launch);
  EXPECT_EQ(tessel::codegen::generate_cuda(ampere).find("grid_dependency_wait"), std::string::npos);
  const auto off = tessel::lower(f.ir(), sm90());
  EXPECT_FALSE(off.ctx.abi.programmatic_launch);
  EXPECT_EQ(tessel::codegen::generate_cuda(off).find("grid_dependency_wait"), std::string::npos);
}

// plan_kernel_abi gathers the kernel's outside; codegen's signature and the launch read it.
TEST(KernelAbi, IsWhatThePassesDecided) {
  // A register-bound kernel (fragment tails in shared memory): its blocks per SM, no cluster.
  auto softmax = tessel::lower(
      tessel::kernels::softmax_program(4096, 65536, tessel::DType::f16,
                                       tessel::kernels::parse_softmax_config("rows:t512:r1:bn65536:s14"))
          .ir(),
      sm90());
  const auto& s = softmax.ctx.abi;
  EXPECT_EQ(s.threads, 512);
  EXPECT_EQ(s.min_blocks_per_sm, 2);
  EXPECT_EQ(s.cluster_size, 1);
  EXPECT_TRUE(s.headers.empty());
  EXPECT_EQ(s.dynamic_smem_bytes, softmax.ctx.smem_bytes);
  EXPECT_EQ(s.smem_alignment, 128);
  EXPECT_FALSE(s.persistent || s.smem_realigned);
  ASSERT_EQ(s.grid.size(), 1u);
  EXPECT_EQ(*tessel::ir::as_const_int(s.grid[0]), 4096);
  // The Hopper GEMM's template (gemm_from_passes = false): its own thread count, (threads, 1) for
  // setmaxnreg, a 1024-byte aligned array, its header, a persistent grid.
  tessel::kernels::MatmulConfig c;
  c.block_M = 128, c.block_N = 256, c.block_K = 64, c.num_stages = 3, c.threads = 256, c.use_swizzle = true;
  auto gemm = tessel::lower(tessel::kernels::matmul_program(4096, 4096, 4096, c).ir(), sm90(),
                            T::test::template_gemm());
  ASSERT_TRUE(gemm.ctx.hopper.selected) << gemm.ctx.hopper.why_not;
  const auto& h = gemm.ctx.abi;
  EXPECT_EQ(h.threads, gemm.ctx.hopper.launch_threads);
  EXPECT_EQ(h.min_blocks_per_sm, 1);
  EXPECT_EQ(h.smem_alignment, 1024);
  EXPECT_EQ(h.dynamic_smem_bytes, gemm.ctx.hopper.smem_bytes);
  EXPECT_TRUE(h.persistent);
  ASSERT_FALSE(h.headers.empty());
  EXPECT_EQ(h.headers[0], "tessel/hopper_gemm.cuh");
  const std::string src = tessel::codegen::generate_cuda(gemm);
  EXPECT_NE(src.find("__launch_bounds__(" + std::to_string(h.threads) + ", 1)"), std::string::npos) << src;
  EXPECT_NE(src.find("#include <tessel/hopper_gemm.cuh>"), std::string::npos) << src;
  // The same GEMM on sm_80: mma.sync, plain launch bounds, nothing persistent.
  auto old = tessel::lower(tessel::kernels::matmul_program(4096, 4096, 4096, {}).ir(), sm80());
  EXPECT_EQ(old.ctx.abi.threads, 128);
  EXPECT_EQ(old.ctx.abi.min_blocks_per_sm, 0);
  EXPECT_FALSE(old.ctx.abi.persistent);
  EXPECT_NE(tessel::codegen::generate_cuda(old).find("__launch_bounds__(128) "), std::string::npos);
}

TEST(Errors, SharedTailNeedsARowFragment) {
  T::PrimFunc f("tail");
  auto X = f.tensor("X", {4, 1024}, T::f32);
  f.body([&] {
    T::Kernel(4, 128, [&](T::Var bx) {
      auto x = T::alloc_fragment({1, 1024}, T::f32, T::FragmentStorage{3});  // 2 vectors per thread
      auto m = T::alloc_fragment({1}, T::f32);
      T::copy(X(bx, 0), x);
      T::reduce_max(x, m, 1);
    });
  });
  std::string msg = error_of([&] { tessel::lower(f.ir(), sm90()); });
  EXPECT_NE(
      msg.find("error in alloc_fragment: fragment fragment_0 asks for shared_tail(3) but its layout gives "
               "each thread 2 vectors of 4"),
      std::string::npos)
      << msg;
  EXPECT_NE(msg.find("LoweringTest.cpp:"), std::string::npos) << msg;
}

TEST(Errors, SharedTailMustNotBeNegative) {
  T::PrimFunc f("negative_tail");
  f.tensor("X", {4, 1024}, T::f32);
  std::string msg = error_of([&] {
    f.body([&] {
      T::Kernel(4, 128, [&](T::Var) { T::alloc_fragment({1, 1024}, T::f32, T::FragmentStorage{-1}); });
    });
  });
  EXPECT_NE(
      msg.find(
          "error in alloc_fragment: shared_tail is -1; give the number of vectors (>= 0) per thread kept "
          "in shared memory"),
      std::string::npos)
      << msg;
  EXPECT_NE(msg.find("LoweringTest.cpp:"), std::string::npos) << msg;
}
