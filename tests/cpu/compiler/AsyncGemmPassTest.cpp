// rotate_async_gemms and place_gemm_waits on IR text: attention's loop rotated (the first block
// peeled, then O += P V of block ko - 1 issued behind S = Q K^T of block ko, the last block's
// gemm after the loop), S waited with one group pending before the softmax and P V
// before O is rescaled, K's stage released after the first wait and V's after the second; a
// loop the register headroom keeps unrotated carries P V across the back edge (its release
// re-indexed to the previous iteration, the last one after the loop); and where nothing
// applies: the switch off, sm_80, the cp.async schedule.
#include <gtest/gtest.h>

#include "Lower.hpp"
#include "codegen/CodegenCuda.hpp"
#include "support/LoweringSupport.hpp"
#include "tessel/kernels/attention/FlashAttention.hpp"

namespace {

namespace T = tessel;
using T::test::sm80;
using T::test::sm90;
using T::test::stage_text;
using Schedule = T::kernels::AttentionConfig::Schedule;

T::PrimFunc attention(int D, T::kernels::AttentionConfig c, bool causal = false) {
  T::kernels::AttentionShape s;
  s.batch = 2, s.heads = 4, s.kv_heads = 2, s.seqlen_q = 300, s.seqlen_k = 1000, s.dim = D;
  return T::kernels::attention_program(s, T::DType::f16, causal, 0.125f, c);
}

size_t at(const std::string& text, const std::string& needle, size_t from = 0) {
  const size_t p = text.find(needle, from);
  EXPECT_NE(p, std::string::npos) << "missing: " << needle << "\n" << text;
  return p;
}

TEST(AsyncGemmPasses, AttentionLoopIsRotated) {
  for (Schedule sc : {Schedule::ring_pingpong, Schedule::ring}) {
    auto l = T::lower(attention(128, {128, 128, 256, 2, sc}).ir(), sm90(), true);
    EXPECT_EQ(l.ctx.rotated_gemm_loops, 1);
    const std::string r = stage_text(l, "rotate_async_gemms");
    // Block 0 alone: S, then its softmax, no P V.
    const size_t first = at(r, "gemm(shared_0, shared_1[0:+1");
    const size_t first_softmax = at(r, "reduce_max(", first);
    const size_t loop = at(r, "serial ko in [1, 1 + 7) {", first_softmax);
    EXPECT_EQ(r.substr(first, loop - first).find("gemm(fragment_4"), std::string::npos);
    const size_t qk = at(r, "gemm(shared_0, shared_1[(ko % 2):+1", loop);
    const size_t wait_v = at(r, "mbarrier.wait(shared_2_full[((ko - 1) % 2)]", qk);
    const size_t pv = at(r, "gemm(fragment_4, shared_2[((ko - 1) % 2):+1", wait_v);
    const size_t release = at(r, "mbarrier.warp_arrive(shared_2_empty[((ko - 1) % 2)])", pv);
    const size_t softmax = at(r, "reduce_max(", release);
    // After the loop: the last block (ceil(1000 / 128) = 8 blocks: ko = 7).
    const size_t last = at(r, "gemm(fragment_4, shared_2[1:+1", softmax);
    at(r, "mbarrier.warp_arrive(shared_2_empty[1])", last);
  }
}

TEST(AsyncGemmPasses, WaitsGoWhereTheRegistersAreTouched) {
  auto l = T::lower(attention(128, {128, 128, 256, 2, Schedule::ring_pingpong}).ir(), sm90(), true);
  EXPECT_EQ(l.ctx.async_gemms, 4);  // S of block 0; S and P V in the loop; P V after it
  EXPECT_EQ(l.ctx.gemm_waits, 4);
  const std::string w = stage_text(l, "place_gemm_waits");
  const size_t qk = at(w, "gemm_issue(shared_0, shared_1[(ko % 2):+1");
  const size_t pv = at(w, "gemm_issue(fragment_4, shared_2[((ko - 1) % 2):+1", qk);
  // S retired (P V may still run) before the mask reads S; K's stage released right after.
  const size_t wait_s = at(w, "gemm_wait(pending=1, fragment_3)", pv);
  const size_t release_k = at(w, "mbarrier.warp_arrive(shared_1_empty[(ko % 2)])", wait_s);
  const size_t mask = at(w, "if (((ko + 1) * 128) > 1000)", release_k);
  EXPECT_LT(wait_s, mask);
  // P V retired before O is rescaled; V's stage (of block ko - 1) released after it.
  const size_t wait_o = at(w, "gemm_wait(pending=0, fragment_5)", mask);
  const size_t release_v = at(w, "mbarrier.warp_arrive(shared_2_empty[((ko - 1) % 2)])", wait_o);
  const size_t rescale = at(w, "fragment_5[i", release_v);
  EXPECT_LT(release_v, rescale);
  // The kernel's end: the last block's P V retired before the epilogue divides O.
  const size_t last = at(w, "gemm_issue(fragment_4, shared_2[1:+1", rescale);
  at(w, "gemm_wait(pending=0, fragment_5)", last);
  // The source: asynchronous issue and the placed waits.
  const std::string src = T::codegen::generate_cuda(l);
  at(src, "::run_async(shared_0");
  at(src, "::run_rs_async(fragment_4");
  at(src, "tessel::wgmma_wait<1>();\n      tessel::wgmma_fence_operand(fragment_3);");
}

TEST(AsyncGemmPasses, AnUnrotatedLoopCarriesItsLastGemmAcrossTheBackEdge) {
  // 128x192 tiles at D = 64: S (96) + O (32) + P packed (48) registers leave the softmax too
  // little of 240, so the loop is not rotated; P V of block ko is retired in iteration ko + 1
  // (when S = Q K^T of block ko + 1 is waited for) and V's stage of block ko released then.
  auto l = T::lower(attention(64, {128, 192, 256, 3, Schedule::ring}).ir(), sm90(), true);
  EXPECT_EQ(l.ctx.rotated_gemm_loops, 0);
  const std::string w = stage_text(l, "place_gemm_waits");
  const size_t qk = at(w, "gemm_issue(shared_0, shared_1[(ko % 3):+1");
  // One wait retires the previous block's P V and this block's S (they retire in order).
  const size_t wait_s = at(w, "gemm_wait(pending=0, fragment_5, fragment_3)", qk);
  const size_t carried = at(w, "if (ko > 0) {\n            mbarrier.warp_arrive(shared_2_empty[((ko - 1) % 3)])", wait_s);
  const size_t pv = at(w, "gemm_issue(fragment_4, shared_2[(ko % 3):+1", carried);
  EXPECT_LT(wait_s, pv);
  // After the loop: everything retired, the last block's V stage (ceil(1000 / 192) = 6 blocks:
  // block 5, stage 2) released.
  const size_t drain = at(w, "gemm_wait(pending=0, fragment_5)\n        mbarrier.warp_arrive(shared_2_empty[2])", pv);
  EXPECT_NE(drain, std::string::npos);
}

TEST(AsyncGemmPasses, NotAppliedWhereTheyDoNotBelong) {
  T::passes::PassContext::Switches off;
  off.allow_async_gemm = false;
  auto sync = T::lower(attention(128, {128, 128, 256, 2, Schedule::ring_pingpong}).ir(), sm90(), off, true);
  EXPECT_EQ(sync.ctx.rotated_gemm_loops, 0);
  EXPECT_EQ(sync.ctx.async_gemms, 0);
  EXPECT_EQ(stage_text(sync, "place_gemm_waits").find("gemm_wait"), std::string::npos);
  const std::string src = T::codegen::generate_cuda(sync);
  EXPECT_EQ(src.find("::run_async("), std::string::npos);
  EXPECT_EQ(src.find("::run_rs_async("), std::string::npos);
  EXPECT_NE(src.find("::run_rs("), std::string::npos);

  auto ampere = T::lower(attention(128, {128, 128, 256, 2, Schedule::ring_pingpong}).ir(), sm80(), true);
  EXPECT_EQ(ampere.ctx.async_gemms, 0);
  EXPECT_EQ(ampere.ctx.rotated_gemm_loops, 0);

  // The cp.async schedule: block barriers hand the stages over, so the gemms are asynchronous
  // only within an iteration (each retired before the next barrier) and nothing is rotated.
  T::passes::PassContext::Switches cp_async;
  cp_async.allow_async_pipeline = false;
  auto cp = T::lower(attention(64, {128, 128, 256, 2, Schedule::cp_async}).ir(), sm90(), cp_async, true);
  EXPECT_GT(cp.ctx.async_gemms, 0);
  EXPECT_EQ(cp.ctx.rotated_gemm_loops, 0);
  const std::string w = stage_text(cp, "place_gemm_waits");
  EXPECT_EQ(w.find("(ko - 1)"), std::string::npos) << w;
}

}  // namespace
