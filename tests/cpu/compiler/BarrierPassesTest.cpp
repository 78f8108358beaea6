// order_shared_writes and insert_proxy_fences on IR text: shared-memory writes outside scheduled
// loops bracketed by block barriers (a run of writes once, global->shared copies drained), the
// scheduled loop left to plan_pipelines, a one-stage Pipelined loop walked like any loop; the
// async-proxy fence before every block barrier of a wgmma kernel and nowhere in other kernels.
#include <gtest/gtest.h>

#include "Lower.hpp"
#include "support/LoweringSupport.hpp"
#include "tessel/kernels/attention/FlashAttention.hpp"
#include "tessel/kernels/attention/GemmChain.hpp"

namespace {

namespace T = tessel;
using T::test::sm80;
using T::test::sm90;
using T::test::stage_text;

int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

// A tile through shared memory twice (a fill and a copy in one run, then a copy out of it), and
// a Pipelined loop of `stages` stages that copies into shared memory and reads it back.
T::PrimFunc staged_tile(int stages) {
  T::PrimFunc f("staged");
  auto X = f.tensor("X", {256, 64}, T::f16);
  auto Y = f.tensor("Y", {64, 64}, T::f16);
  f.body([&] {
    T::Kernel(1, 128, [&](T::Var) {
      auto s = T::alloc_shared({64, 64}, T::f16), ring = T::alloc_shared({64, 64}, T::f16);
      auto r = T::alloc_fragment({64, 64}, T::f32);
      T::fill(s, 0.0f);
      T::copy(X(0, 0), s);
      T::copy(s, r);
      T::Pipelined(4, stages, [&](T::Var k) {
        T::copy(X(k * 64, 0), ring);
        T::copy(ring, r);
      });
      T::copy(r, Y(0, 0));
    });
  });
  return f;
}

TEST(OrderSharedWrites, BracketsRunsOfWritesOutsideScheduledLoops) {
  auto f = staged_tile(2);
  auto l = T::lower(f.ir(), sm80(), true);
  const std::string before = stage_text(l, "plan_tma_copies"), after = stage_text(l, "order_shared_writes");
  EXPECT_EQ(count(before, "barrier()"), 0) << before;
  // One bracket around the fill + copy run: barrier, fill, copy, commit, wait(0), barrier.
  const size_t b1 = after.find("barrier()"), fill = after.find("fill(", b1), copy = after.find("copy(X", fill),
               commit = after.find("async_commit()", copy), wait = after.find("async_wait(0)", commit),
               b2 = after.find("barrier()", wait);
  EXPECT_TRUE(b1 != std::string::npos && fill != std::string::npos && copy != std::string::npos &&
              commit != std::string::npos && wait != std::string::npos && b2 != std::string::npos)
      << after;
  // The two-stage loop is plan_pipelines' schedule: nothing inside it yet.
  EXPECT_EQ(count(after, "barrier()"), 2) << after;
  const std::string piped = stage_text(l, "plan_pipelines");
  EXPECT_GT(count(piped, "barrier()"), 2) << piped;
}

TEST(OrderSharedWrites, OneStageLoopIsWalkedLikeAnyLoop) {
  auto f = staged_tile(1);
  auto l = T::lower(f.ir(), sm80(), true);
  const std::string after = stage_text(l, "order_shared_writes");
  // The fill + copy run and the loop's copy: two brackets.
  EXPECT_EQ(count(after, "barrier()"), 4) << after;
  const std::string piped = stage_text(l, "plan_pipelines");
  EXPECT_EQ(piped.find("pipelined"), std::string::npos) << piped;
}

TEST(InsertProxyFences, EveryBlockBarrierOfAWgmmaKernelAndNoOther) {
  // Attention's cp.async schedule on sm_90a: its gemms run on wgmma, its loop's barriers hand
  // the K and V tiles over.
  T::kernels::AttentionShape shape;
  shape.seqlen_q = 300, shape.seqlen_k = 1000, shape.dim = 64;
  T::kernels::AttentionConfig c;
  c.block_N = 64;
  c.schedule = T::kernels::AttentionConfig::Schedule::cp_async;
  auto chain = T::kernels::attention_program(shape, T::DType::f16, false, 0.125f, c);
  auto l = T::lower(chain.ir(), sm90(), true);
  ASSERT_TRUE(l.ctx.uses_wgmma);
  const std::string before = stage_text(l, "plan_pipelines"), after = stage_text(l, "insert_proxy_fences");
  EXPECT_EQ(count(before, "fence_proxy_async_shared"), 0) << before;
  const int barriers = count(after, "barrier()");
  EXPECT_GT(barriers, 0) << after;
  EXPECT_EQ(count(after, "tessel::fence_proxy_async_shared()"), barriers) << after;
  for (size_t p = after.find("barrier()"); p != std::string::npos; p = after.find("barrier()", p + 1)) {
    const size_t fence = after.rfind("tessel::fence_proxy_async_shared()", p);
    ASSERT_NE(fence, std::string::npos) << after;
    EXPECT_EQ(count(after.substr(fence, p - fence), "\n"), 1)
        << "the fence is the statement right before the barrier:\n"
        << after.substr(fence, p - fence + 9);
  }
  // On sm_80 the same program has no wgmma and no fence.
  auto l80 = T::lower(chain.ir(), sm80(), true);
  EXPECT_FALSE(l80.ctx.uses_wgmma);
  EXPECT_EQ(count(stage_text(l80, "insert_proxy_fences"), "fence_proxy_async_shared"), 0);
}

}  // namespace
