// rotate_async_gemms and place_gemm_waits on IR text: a branch-free two-gemm loop rotated (the
// first block peeled, then O += P V of block ko - 1 issued behind S = Q K^T of block ko, the
// last block's gemm after the loop), S waited with one group pending and P V before P is
// rewritten, K's stage released after the first wait and V's after the second; attention's loop
// split where its mask turns on (each part branch-free) and each part rotated; a loop left unrotated carries P V across the back edge (its
// release re-indexed to the previous iteration, the last one after the loop); and where nothing
// applies: the switch off, sm_80, the cp.async schedule, warpgroups taking turns.
#include <gtest/gtest.h>

#include "Lower.hpp"
#include "codegen/CodegenCuda.hpp"
#include "support/LoweringSupport.hpp"
#include "tessel/kernels/attention/FlashAttention.hpp"
#include "tessel/kernels/attention/GemmChain.hpp"

namespace {

namespace T = tessel;
using T::test::sm80;
using T::test::sm90;
using T::test::stage_text;
using Schedule = T::kernels::AttentionConfig::Schedule;

// The ring schedule: no warpgroup turns (with turns the loop is not rotated).
T::passes::PassContext::Switches no_turns() {
  T::passes::PassContext::Switches s;
  s.allow_pingpong = false;
  s.allow_loop_rotation = true;
  return s;
}
// Rotation switched on (it is opt-in), turns left as they are.
T::passes::PassContext::Switches rotating() {
  T::passes::PassContext::Switches s;
  s.allow_loop_rotation = true;
  return s;
}

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

// The FlashAttention-shaped chain O = f16(scale * Q K^T) V (one consumer warpgroup, no turns;
// S scaled in place, then copied to P): nothing branches between its gemms.
T::PrimFunc chain() {
  return T::kernels::gemm_chain_program(200, 1000, 64, T::DType::f16, 0.5f, {64, 64, 128, 2}, /*p_via_copy=*/true);
}

// The text of the loop whose `serial` line starts at `at`, up to its closing brace.
std::string loop_body(const std::string& text, size_t at) {
  const size_t line = text.rfind('\n', at) + 1;
  const std::string close = "\n" + std::string(at - line, ' ') + "}";
  return text.substr(at, text.find(close, at) - at);
}

TEST(AsyncGemmPasses, ABranchFreeLoopIsRotated) {
  auto l = T::lower(chain().ir(), sm90(), rotating(), true);
  EXPECT_EQ(l.ctx.rotated_gemm_loops, 1);
  const std::string r = stage_text(l, "rotate_async_gemms");
  // Block 0 alone: S, then its scaling and copy to P, no P V.
  const size_t first = at(r, "gemm(shared_0, shared_1[0:+1");
  const size_t loop = at(r, "serial ko in [1, 1 + 15) {", first);
  EXPECT_EQ(r.substr(first, loop - first).find("gemm(fragment_4"), std::string::npos);
  const size_t qk = at(r, "gemm(shared_0, shared_1[(ko % 2):+1", loop);
  const size_t wait_v = at(r, "mbarrier.wait(shared_2_full[((ko - 1) % 2)]", qk);
  const size_t pv = at(r, "gemm(fragment_4, shared_2[((ko - 1) % 2):+1", wait_v);
  const size_t release = at(r, "mbarrier.warp_arrive(shared_2_empty[((ko - 1) % 2)])", pv);
  const size_t scale = at(r, "fragment_3[i, j] = (fragment_3[i, j] * 0.5_f32)", release);
  // After the loop: the last block (ceil(1000 / 64) = 16 blocks: ko = 15, stage 1).
  const size_t last = at(r, "gemm(fragment_4, shared_2[1:+1", scale);
  at(r, "mbarrier.warp_arrive(shared_2_empty[1])", last);
}

TEST(AsyncGemmPasses, WaitsGoWhereTheRegistersAreTouched) {
  auto l = T::lower(chain().ir(), sm90(), rotating(), true);
  EXPECT_EQ(l.ctx.async_gemms, 4);  // S of block 0; S and P V in the loop; P V after it
  const std::string w = stage_text(l, "place_gemm_waits");
  const size_t loop = at(w, "serial ko in [1, 1 + 15) {");
  const size_t qk = at(w, "gemm_issue(shared_0, shared_1[(ko % 2):+1", loop);
  const size_t pv = at(w, "gemm_issue(fragment_4, shared_2[((ko - 1) % 2):+1", qk);
  // S retired (P V of block ko - 1 may still run) before S is scaled; K's stage released then.
  const size_t wait_s = at(w, "gemm_wait(pending=1, fragment_3)", pv);
  const size_t release_k = at(w, "mbarrier.warp_arrive(shared_1_empty[(ko % 2)])", wait_s);
  const size_t scale = at(w, "fragment_3[i, j] = (fragment_3[i, j] * 0.5_f32)", release_k);
  // P V retired before P is overwritten; the scaled S is pinned before that wait; V's stage of
  // block ko - 1 released after it.
  const size_t wait_p = at(w, "gemm_wait(pending=0, fragment_5; after fragment_3)", scale);
  const size_t release_v = at(w, "mbarrier.warp_arrive(shared_2_empty[((ko - 1) % 2)])", wait_p);
  at(w, "copy(fragment_3[0:+64, 0:+64] -> fragment_4[0:+64, 0:+64])", release_v);
  // The source: asynchronous issue and the placed waits.
  const std::string src = T::codegen::generate_cuda(l);
  at(src, "::run_async(shared_0");
  at(src, "::run_rs_async(fragment_4");
  at(src, "tessel::wgmma_wait<1>();\n      tessel::wgmma_fence_operand(fragment_3);");
  at(src, "tessel::wgmma_fence_operand(fragment_3);\n      tessel::wgmma_wait<0>();");
}

TEST(AsyncGemmPasses, AttentionIsSplitAtItsMaskThenRotated) {
  // Sk = 1000: blocks 0-6 are whole, block 7 is masked (the tail); causal (Sq = 300, block 0 of
  // queries) masks from block 5 on. Each part has no branch left, and each is rotated.
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "not causal");
    auto l = T::lower(attention(128, {128, 128, 256, 2, Schedule::ring}, causal).ir(), sm90(), no_turns(), true);
    EXPECT_EQ(l.ctx.split_gemm_loops, 1);
    EXPECT_EQ(l.ctx.rotated_gemm_loops, 2);
    const std::string r = stage_text(l, "rotate_async_gemms");
    // Neither part's loop branches (the guards `if (n > 0)` of the peeled blocks are outside);
    // both issue P V of the previous block behind S.
    const size_t first_loop = at(r, "serial ko in [1, ");
    const size_t second_loop = at(r, "serial ko in [", first_loop + 1);
    for (size_t loop : {first_loop, second_loop}) {
      const std::string body = loop_body(r, loop);
      EXPECT_EQ(body.find("if "), std::string::npos) << body;
      at(body, "gemm(fragment_4, shared_2[((ko - 1) % 2):+1");
    }
    // The masking select survives only outside the first part's loop.
    EXPECT_EQ(loop_body(r, first_loop).find(", -inf_f32)"), std::string::npos);
    at(r, ", -inf_f32)");
    EXPECT_EQ(r.find("if (((ko + 1) * 128) > 1000)"), std::string::npos) << r;
  }
}

TEST(AsyncGemmPasses, AnUnrotatedLoopCarriesItsLastGemmAcrossTheBackEdge) {
  // 128x256 tiles at D = 64: S (128) + O (32) + P packed (64) registers leave the softmax too
  // little of 240, so the loop is not rotated; P V of block ko is retired in iteration ko + 1
  // (when S = Q K^T of block ko + 1 is waited for) and V's stage of block ko released then.
  auto l = T::lower(attention(64, {128, 256, 256, 3, Schedule::ring}).ir(), sm90(), no_turns(), true);
  EXPECT_EQ(l.ctx.rotated_gemm_loops, 0);
  const std::string w = stage_text(l, "place_gemm_waits");
  const size_t qk = at(w, "gemm_issue(shared_0, shared_1[(ko % 3):+1");
  // One wait retires the previous block's P V and this block's S (they retire in order).
  const size_t wait_s = at(w, "gemm_wait(pending=0, fragment_5, fragment_3", qk);
  // Stage (ko - 1) % 3 written as the predecessor of this iteration's stage (no second division).
  const size_t carried = at(
      w, "if (ko > 0) {\n            mbarrier.warp_arrive(shared_2_empty[select(((ko % 3) == 0), 2, ((ko % 3) - 1))])",
      wait_s);
  const size_t pv = at(w, "gemm_issue(fragment_4, shared_2[(ko % 3):+1", carried);
  EXPECT_LT(wait_s, pv);
  // After the loop: everything retired, the last block's V stage (ceil(1000 / 256) = 4 blocks:
  // block 3, stage 0) released.
  const size_t drain = at(w, "gemm_wait(pending=0, fragment_5", pv);
  at(w, "mbarrier.warp_arrive(shared_2_empty[0])", drain);
  EXPECT_NE(drain, std::string::npos);
}

TEST(AsyncGemmPasses, TurnTakingWarpgroupsAreNotRotated) {
  // Two consumer warpgroups taking turns: the gemms are asynchronous, the loop keeps its order.
  auto l = T::lower(attention(128, {128, 128, 256, 2, Schedule::ring_pingpong}).ir(), sm90(), rotating(), true);
  EXPECT_TRUE(l.ctx.pingpong);
  EXPECT_EQ(l.ctx.rotated_gemm_loops, 0);
  EXPECT_GT(l.ctx.async_gemms, 0);
  const std::string w = stage_text(l, "place_gemm_waits");
  EXPECT_EQ(w.find("gemm_issue(fragment_4, shared_2[((ko - 1)"), std::string::npos) << w;
  EXPECT_NE(w.find("gemm_issue(fragment_4, shared_2[(ko % 2)"), std::string::npos) << w;
}

TEST(AsyncGemmPasses, RotationIsOptIn) {
  auto l = T::lower(chain().ir(), sm90(), true);
  EXPECT_EQ(l.ctx.rotated_gemm_loops, 0);
  EXPECT_GT(l.ctx.async_gemms, 0);
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

namespace {

// A ring without warp roles -- its loop inside a condition, where specialize_warps leaves the
// producer's work to one consumer thread at the top of each iteration, waiting for the stage the
// previous iteration used: a gemm carried into the next iteration would hold that stage's release
// behind the producer's wait (a deadlock verify_pipelines reports). No carry, no rotation there.
T::PrimFunc chain_in_a_condition() {
  T::PrimFunc f("chain_in_if");
  auto Q = f.tensor("Q", {128, 64}, T::f16);
  auto K = f.tensor("K", {1000, 64}, T::f16);
  auto V = f.tensor("V", {1000, 64}, T::f16);
  auto O = f.tensor("O", {128, 64}, T::f32);
  f.body([&] {
    T::Kernel(2, 128, [&](T::Var bx) {
      auto Q_shared = T::alloc_shared({64, 64}, T::f16);
      auto K_shared = T::alloc_shared({64, 64}, T::f16);
      auto V_shared = T::alloc_shared({64, 64}, T::f16);
      auto S = T::alloc_fragment({64, 64}, T::f32);
      auto P = T::alloc_fragment({64, 64}, T::f16);
      auto O_local = T::alloc_fragment({64, 64}, T::f32);
      T::copy(Q(bx * 64, 0), Q_shared);
      T::clear(O_local);
      T::If(bx < 1, [&] {  // not decided by bx's range [0, 1] (fold_proven_branches keeps it)
        T::Pipelined(16, 2, [&](T::Var j) {
          T::copy(K(j * 64, 0), K_shared);
          T::copy(V(j * 64, 0), V_shared);
          T::clear(S);
          T::gemm(Q_shared, K_shared, S, false, true);
          T::Parallel(64, 64, [&](T::Var r, T::Var q) { S(r, q) = S(r, q) * 0.5f; });
          T::copy(S, P);
          T::gemm(P, V_shared, O_local);
        });
      });
      T::copy(O_local, O(bx * 64, 0));
    });
  });
  return f;
}

TEST(AsyncGemmPasses, RingsWithoutRolesDoNotCarryOrRotate) {
  for (bool rotate : {false, true}) {
    T::passes::PassContext::Switches s;
    s.allow_loop_rotation = rotate;
    auto l = T::lower(chain_in_a_condition().ir(), sm90(), s, true);
    ASSERT_FALSE(l.ctx.mbarriers.empty());
    EXPECT_EQ(l.ctx.launch_threads, 0) << "expected no warp roles";
    EXPECT_EQ(l.ctx.rotated_gemm_loops, 0);
    EXPECT_GT(l.ctx.async_gemms, 0);
    const std::string w = stage_text(l, "place_gemm_waits");
    EXPECT_EQ(w.find("(ko - 1)"), std::string::npos) << w;
  }
}

}  // namespace
