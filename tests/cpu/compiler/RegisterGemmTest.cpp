// gemm with its A operand in registers (a fragment): layout inference hands a gemm accumulator
// on as the A operand of the next gemm (FlashAttention's P * V), the lowering calls run_rs on
// BlockGemm (sm_80) or WarpgroupGemm (sm_90a), the interpreter gives the float64 answer, and
// misuse is reported at the author's line.
#include <gtest/gtest.h>

#include <random>

#include "Lower.hpp"
#include "codegen/CodegenCuda.hpp"
#include "support/LoweringSupport.hpp"
#include "support/RegisterGemmPrograms.hpp"
#include "support/TestSupport.hpp"
#include "tessel/interp/HostTensor.hpp"
#include "tessel/kernels/gemm/Matmul.hpp"
#include "tessel/tessel.hpp"

namespace T = tessel;

namespace {

using tessel::test::compile_error_of;
using tessel::test::sm80;
using tessel::test::sm90;
using tessel::test::stage_text;

// Lowers for sm_80 a kernel of 128 threads over A [rows, 64] f16 that loads a fragment Ar
// [rows, 64] (fragment_0) and a shared Bs [64, 64] from A, clears Cl [rows, 64] and calls
// `gemm(Ar, Bs, Cl)`; the error.
std::string register_gemm_error(
    int rows,
    const std::function<void(const T::Buffer& Ar, const T::Buffer& Bs, const T::Buffer& Cl)>& gemm) {
  return compile_error_of([&] {
    T::PrimFunc f("bad");
    auto A = f.tensor("A", {rows, 64}, T::f16);
    f.body([&] {
      T::Kernel(1, 128, [&](T::Var) {
        auto Ar = T::alloc_fragment({rows, 64}, T::f16);
        auto Bs = T::alloc_shared({64, 64}, T::f16);
        auto Cl = T::alloc_fragment({rows, 64}, T::f32);
        T::copy(A(0, 0), Ar);
        T::copy(A(0, 0), Bs);
        T::clear(Cl);
        gemm(Ar, Bs, Cl);
      });
    });
    tessel::lower(f.ir(), sm80());
  });
}

const tessel::test::ChainShape kChain{200, 300, 64, 64, 64, 128};

TEST(RegisterGemm, ChainOnSm80FeedsTheAccumulatorLayoutToTheMmaSyncAOperand) {
  auto f = tessel::test::gemm_chain_program(kChain, T::f16, 0.125f);
  auto lowered = tessel::lower(f.ir(), sm80(), true);
  const std::string layouts = stage_text(lowered, "infer_layouts");
  // S (the first gemm's accumulator), P (computed from it) and O: warps stacked along M, 4x1.
  EXPECT_NE(layouts.find("// layout fragment_3: gemm accumulator, warps 4x1, 32 registers per thread"),
            std::string::npos)
      << layouts;
  EXPECT_NE(layouts.find("// layout fragment_4: gemm accumulator, warps 4x1, 32 registers per thread"),
            std::string::npos)
      << layouts;
  std::string src = tessel::codegen::generate_cuda(lowered);
  EXPECT_NE(src.find("::run_rs(fragment_4, shared_2 + "), std::string::npos) << src;
  EXPECT_NE(
      src.find("tessel::BlockGemm<tessel::half_t, 64, 64, 64, 4, 1, false, false, tessel::RowMajorLayout<64, "
               "64>, tessel::SwizzledLayout<64, 64, 2>>::run_rs("),
      std::string::npos)
      << src;
  EXPECT_EQ(src.find("WarpgroupGemm"), std::string::npos) << src;
  EXPECT_EQ(src.find("fence_proxy_async_shared"), std::string::npos) << src;
}

TEST(RegisterGemm, ChainOnSm90LowersBothGemmsToWgmma) {
  auto f = tessel::test::gemm_chain_program(kChain, T::bf16, 0.125f);
  auto lowered = tessel::lower(f.ir(), sm90(), true);
  // The layouts after infer_layouts say which accumulators a wgmma writes; P's is the same layout.
  const std::string layouts = stage_text(lowered, "infer_layouts");
  EXPECT_NE(
      layouts.find("// layout fragment_3: gemm accumulator, warps 4x1 (wgmma), 32 registers per thread"),
      std::string::npos)
      << layouts;
  EXPECT_NE(layouts.find("// layout fragment_4: gemm accumulator, warps 4x1, 32 registers per thread"),
            std::string::npos)
      << layouts;
  EXPECT_NE(layouts.find("// layout shared_2: wgmma 128-byte swizzle 64x64 (2-byte elements)"),
            std::string::npos)
      << layouts;
  std::string src = tessel::codegen::generate_cuda(lowered);
  // S = Q K^T: A and B K-major, 128-byte swizzle; O += P V: A from registers, V N-major. Both
  // issued asynchronously (place_gemm_waits).
  EXPECT_NE(src.find("tessel::WarpgroupGemm<tessel::bfloat16_t, 64, 64, 64, 1, false, true, "
                     "tessel::WgmmaSwizzleLayout<64, 64, 2, 128>, tessel::WgmmaSwizzleLayout<64, 64, 2, "
                     "128>>::run_async("),
            std::string::npos)
      << src;
  EXPECT_NE(
      src.find("tessel::WarpgroupGemm<tessel::bfloat16_t, 64, 64, 64, 1, false, false, "
               "tessel::RowMajorLayout<64, 64>, tessel::WgmmaSwizzleLayout<64, 64, 2, 128>>::run_rs_async("),
      std::string::npos)
      << src;
  EXPECT_NE(src.find("#include <tessel/warpgroup_gemm.cuh>"), std::string::npos) << src;
  EXPECT_NE(src.find("tessel::align_shared_1024(tessel_smem_raw)"), std::string::npos) << src;
  // K and V come by TMA into mbarrier rings, issued by a producer warp (its role tested on the
  // warp index broadcast from lane 0, the default at one consumer warpgroup); the consumer
  // warpgroup synchronizes its own shared writes (the Q copy) with named barriers, each
  // preceded by the generic -> async proxy fence (wgmma reads Q through the async proxy).
  EXPECT_NE(src.find("tessel::tma_load_tile<2, 1, 64, 8192>"), std::string::npos) << src;
  EXPECT_NE(
      src.find("if (tessel::warp_uniform(static_cast<int>(threadIdx.x / 32)) >= 4) {  // producer warp\n"),
      std::string::npos)
      << src;
  size_t barriers = 0, fenced = 0;
  for (size_t p = src.find("tessel::named_barrier_sync(1, 128);"); p != std::string::npos;
       p = src.find("tessel::named_barrier_sync(1, 128);", p + 1)) {
    ++barriers;
    const size_t line_start = src.rfind('\n', src.rfind('\n', p) - 1);
    if (src.substr(line_start, p - line_start).find("tessel::fence_proxy_async_shared();") !=
        std::string::npos)
      ++fenced;
  }
  EXPECT_GT(barriers, 0u);
  EXPECT_EQ(fenced, barriers) << src;
  // One block barrier: after the mbarriers' initialization, before the roles split.
  EXPECT_EQ(src.find("__syncthreads();"), src.rfind("__syncthreads();")) << src;
  EXPECT_LT(src.find("__syncthreads();"), src.find("// producer warp")) << src;
  // The operand tiles sit on 1024-byte boundaries, and the slack is counted.
  EXPECT_EQ(lowered.ctx.smem_bytes % 1024, 0);
  for (const auto& [id, off] : lowered.ctx.smem_offsets) {
    bool wgmma_tile = false;
    for (const auto& [bid, l] : lowered.ctx.shared_layouts)
      wgmma_tile = wgmma_tile || (bid == id && l.wgmma());
    if (wgmma_tile) {
      EXPECT_EQ(off % 1024, 0) << "buffer " << id;
    }
  }
}

TEST(RegisterGemm, ChainThroughACopyAndAWideHeadOnSm90) {
  // D = 128: V is two 64-column panels; K_shared K-major with 256-byte rows (two panels).
  tessel::test::ChainShape s{256, 256, 128, 128, 64, 256};
  auto f = tessel::test::gemm_chain_program(s, T::f16, 0.5f, /*via_copy=*/true);
  auto lowered = tessel::lower(f.ir(), sm90());
  std::string src = tessel::codegen::generate_cuda(lowered);
  EXPECT_NE(src.find("tessel::WarpgroupGemm<tessel::half_t, 128, 64, 128, 2, false, true, "
                     "tessel::WgmmaSwizzleLayout<128, 128, 2, 128>, tessel::WgmmaSwizzleLayout<64, 128, 2, "
                     "128>>::run_async("),
            std::string::npos)
      << src;
  EXPECT_NE(
      src.find(
          "tessel::WarpgroupGemm<tessel::half_t, 128, 128, 64, 2, false, false, "
          "tessel::RowMajorLayout<128, 64>, tessel::WgmmaSwizzleLayout<64, 128, 2, 128>>::run_rs_async("),
      std::string::npos)
      << src;
}

TEST(RegisterGemm, DisableWgmmaKeepsMmaSyncOnSm90) {
  auto f = tessel::test::gemm_chain_program(kChain, T::f16, 0.125f);
  tessel::passes::PassContext::Switches off;
  off.allow_wgmma = false;
  auto lowered = tessel::lower(f.ir(), sm90(), off);
  std::string src = tessel::codegen::generate_cuda(lowered);
  EXPECT_EQ(src.find("WarpgroupGemm"), std::string::npos) << src;
  EXPECT_NE(src.find("tessel::BlockGemm<tessel::half_t, 64, 64, 64, 4, 1, false, false"), std::string::npos)
      << src;
}

TEST(RegisterGemm, TheSoleGemmOfAPipelinedLoopKeepsTheMmaSyncMainLoop) {
  // N = 4095: TMA cannot take it, so the tutorial GEMM stays a generic kernel on sm_90a. Its loop
  // becomes BlockGemm's gemm_mainloop, not a WarpgroupGemm (measured 0.67x of it on the H200),
  // although the tile (128 rows over 8 warps, N = 256) would take wgmma.
  tessel::kernels::MatmulConfig c;
  c.block_M = 128, c.block_N = 256, c.block_K = 32, c.num_stages = 3, c.threads = 256;
  auto lowered = tessel::lower(tessel::kernels::matmul_program(4096, 4095, 4096, c).ir(), sm90());
  std::string src = tessel::codegen::generate_cuda(lowered);
  EXPECT_NE(src.find("tessel::gemm_mainloop<tessel::BlockGemm<tessel::half_t, 128, 256, 32, 2, 4"),
            std::string::npos)
      << src;
  EXPECT_EQ(src.find("WarpgroupGemm"), std::string::npos) << src;
}

TEST(RegisterGemm, SquarePolicyBecomesFullRowOnlyWhereTheOperandNeedsIt) {
  // 8 warps over a 128x64 tile: Square alone would give 4x2; the chain forces 8x1 on sm_80.
  tessel::test::ChainShape s{128, 128, 64, 128, 64, 256};
  auto lowered = tessel::lower(tessel::test::gemm_chain_program(s, T::f16, 1.0f).ir(), sm80(), true);
  const std::string layouts = stage_text(lowered, "infer_layouts");
  EXPECT_NE(layouts.find("// layout fragment_3: gemm accumulator, warps 8x1"), std::string::npos) << layouts;
  EXPECT_NE(layouts.find("// layout fragment_5: gemm accumulator, warps 8x1"), std::string::npos) << layouts;
}

TEST(RegisterGemm, InterpreterAndLoweringAgreeWithFloat64) {
  for (T::DType t : {T::DType::f16, T::DType::bf16}) {
    tessel::test::RegisterGemmShape s{100, 72, 40, 64, 64, 16, 128};
    tessel::JitOptions o;
    o.arch = "sm_80";
    o.out_idx = {-1};
    auto k = T::jit(tessel::test::register_a_gemm_program(s, t), o);
    EXPECT_NE(k.source().find("::run_rs("), std::string::npos) << k.source();
    std::mt19937_64 seeds(std::random_device{}());
    auto a = tessel::interp::HostTensor::random(t, {s.M, s.K}, seeds());
    auto b = tessel::interp::HostTensor::random(t, {s.K, s.N}, seeds());
    auto out = k.run_on_cpu({a, b});
    ASSERT_EQ(out.size(), 1u);
    auto ref = tessel::test::reference_gemm(a.to_values(), b.to_values(), s.M, s.N, s.K);
    EXPECT_LE(tessel::test::rel_error(out[0].to_values(), ref), 1e-5) << tessel::dtype_name(t);
  }
}

// FlashAttention's forward pass in the language: the row statistics are reductions of the gemm
// accumulator in registers (no shared memory), 1-D nests over them follow its rows.
TEST(Attention, RowStatisticsStayInRegistersOnBothPaths) {
  for (const auto& target : {sm80(), sm90()}) {
    auto f = tessel::kernels::attention_program(200, 300, 64, T::f16, 0.125f, {64, 64, 128, 2});
    auto lowered = tessel::lower(f.ir(), target, true);
    const std::string layouts = stage_text(lowered, "infer_layouts");
    EXPECT_NE(layouts.find("// layout fragment_6: rows of a gemm tile, warps 4x1, 2 registers per thread"),
              std::string::npos)
        << layouts;
    std::string src = tessel::codegen::generate_cuda(lowered);
    EXPECT_NE(src.find("tessel::AccumulatorLayout<64, 64, 4, 1>::template "
                       "reduce_rows<tessel::ReduceMaxOp>(fragment_3, "),
              std::string::npos)
        << src;
    EXPECT_NE(src.find("template reduce_rows<tessel::ReduceSumOp>"), std::string::npos) << src;
    // exp(S - m(i)): the row register of accumulator register l.
    EXPECT_NE(src.find("fragment_6[((((l_7 / 4) / 8) * 2) + ((l_7 % 4) / 2))]"), std::string::npos) << src;
    EXPECT_EQ(src.find("reduce_warps_inplace"), std::string::npos) << src;
    EXPECT_NE(src.find(target.sm == 90 ? "WarpgroupGemm" : "BlockGemm"), std::string::npos) << src;
  }
}

TEST(Attention, InterpreterMatchesFloat64Softmax) {
  const int M = 40, N = 70, D = 64;
  tessel::JitOptions o;
  o.arch = "sm_80";
  auto k = tessel::kernels::make_attention(M, N, D, T::f16, 0.125f, {64, 64, 128, 2}, o);
  std::mt19937_64 seeds(std::random_device{}());
  auto q = tessel::interp::HostTensor::random(T::f16, {M, D}, seeds());
  auto kk = tessel::interp::HostTensor::random(T::f16, {N, D}, seeds());
  auto v = tessel::interp::HostTensor::random(T::f16, {N, D}, seeds());
  auto out = k.run_on_cpu({q, kk, v});
  ASSERT_EQ(out.size(), 1u);
  auto ref = tessel::test::reference_attention(q.to_values(), kk.to_values(), v.to_values(), M, N, D, 0.125);
  EXPECT_LE(tessel::test::rel_error(out[0].to_values(), ref), 5e-3);
}

// A reduced gemm tile needs its warps along M: FullCol is refused at the gemm, a reduction over
// dim 0 at the reduction.
std::string reduced_gemm_error(T::GemmWarpPolicy policy, int dim) {
  return compile_error_of([&] {
    T::PrimFunc f("bad");
    auto A = f.tensor("A", {64, 64}, T::f16);
    f.body([&] {
      T::Kernel(1, 128, [&](T::Var) {
        auto As = T::alloc_shared({64, 64}, T::f16);
        auto Cl = T::alloc_fragment({64, 64}, T::f32);
        auto mx = T::alloc_fragment({64}, T::f32);
        T::copy(A(0, 0), As);
        T::clear(Cl);
        T::gemm(As, As, Cl, false, false, policy);
        T::reduce_max(Cl, mx, dim);
      });
    });
    tessel::lower(f.ir(), sm80());
  });
}

TEST(Attention, AReducedGemmTileMustSplitItsWarpsAlongM) {
  std::string msg = reduced_gemm_error(T::GemmWarpPolicy::FullCol, 1);
  EXPECT_NE(
      msg.find(
          "error in gemm: the accumulator fragment_1 is reduced along its rows or becomes the register A "
          "operand of a later gemm, so the warps must split M alone (policy FullRow)"),
      std::string::npos)
      << msg;
  msg = reduced_gemm_error(T::GemmWarpPolicy::Square, 0);
  EXPECT_NE(
      msg.find(
          "error in reduce_max: reduces the gemm tile fragment_1 [64, 64] over dim 0 with its warps split "
          "2x2 (M x N); a gemm tile reduces along dim 1, with its warps splitting M only"),
      std::string::npos)
      << msg;
}

TEST(RegisterGemm, ErrorsNameTheOperandAndWhatIsLegal) {
  std::string msg = register_gemm_error(64, [](auto& Ar, auto& Bs, auto& Cl) { T::gemm(Ar, Bs, Cl, true); });
  EXPECT_NE(
      msg.find("error in gemm: A fragment_0 is a fragment, held in registers as [M, K]; transpose_A applies "
               "to shared-memory tiles only"),
      std::string::npos)
      << msg;
  EXPECT_NE(msg.find("RegisterGemmTest.cpp:"), std::string::npos) << msg;

  // B in registers (Ar as B, the shared tile as A).
  msg = register_gemm_error(64, [](auto& Ar, auto& Bs, auto& Cl) { T::gemm(Bs, Ar, Cl); });
  EXPECT_NE(msg.find("A must be a shared-memory tile or a fragment (registers) and B a shared-memory tile"),
            std::string::npos)
      << msg;

  msg = register_gemm_error(64, [](auto& Ar, auto& Bs, auto& Cl) {
    T::gemm(Ar, Bs, Cl, false, false, T::GemmWarpPolicy::FullCol);
  });
  EXPECT_NE(
      msg.find("A fragment_0 is a fragment (registers), so the warps must split M alone (policy FullRow); "
               "policy FullCol asks for the opposite"),
      std::string::npos)
      << msg;

  // More warps than 16-row slabs of A.
  msg = register_gemm_error(32, [](auto& Ar, auto& Bs, auto& Cl) { T::gemm(Ar, Bs, Cl); });
  EXPECT_NE(msg.find("the 32x64 C tile cannot be split over 4 warps with policy full_row"), std::string::npos)
      << msg;
}

}  // namespace
