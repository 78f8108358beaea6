// fold_proven_branches on IR text: an `if` that the ranges of block indices, loops and lets
// decide is replaced by the branch that runs (then, else or nothing); one they do not decide
// stays; attention's "past SK" test goes where the key blocks divide SK and stays where they do
// not. And the row layout over a block of warps that is not a power of two (one row a pass over
// all 352 threads), with its block reductions over 11 warps.
#include <gtest/gtest.h>

#include "Lower.hpp"
#include "codegen/CodegenCuda.hpp"
#include "support/LoweringSupport.hpp"
#include "tessel/kernels/attention/FlashAttention.hpp"
#include "tessel/kernels/softmax/Softmax.hpp"

namespace {

namespace T = tessel;
using T::test::sm90;
using T::test::stage_text;

T::PrimFunc branches() {
  T::PrimFunc f("branches");
  auto A = f.tensor("A", {256}, T::f32);
  f.body([&] {
    T::Kernel(4, 64, [&](T::Var bx) {
      auto x = T::alloc_fragment({64}, T::f32);
      T::clear(x);
      T::Serial(8, [&](T::Var k) {
        // k in [0, 7], bx in [0, 3]: always true, always false, undecided.
        T::If(k * 4 + bx < 40, [&] { T::Parallel(64, [&](T::Var i) { x(i) = x(i) + 1.0f; }); });
        T::If(bx > 3, [&] { T::Parallel(64, [&](T::Var i) { x(i) = x(i) + 2.0f; }); });
        T::If(bx <= 3, [&] { T::Parallel(64, [&](T::Var i) { x(i) = x(i) + 3.0f; }); });
        T::If(k * 4 + bx < 20, [&] { T::Parallel(64, [&](T::Var i) { x(i) = x(i) + 5.0f; }); });
      });
      T::copy(x, A(bx * 64));
    });
  });
  return f;
}

TEST(FoldProvenBranches, DecidedIfsGiveWayToTheirBranch) {
  auto l = T::lower(branches().ir(), sm90(), {}, true);
  const std::string before = stage_text(l, "verify_program");
  const std::string after = stage_text(l, "fold_proven_branches");
  for (const char* cond : {"if (((k * 4) + bx) < 40)", "if (bx > 3)", "if (bx <= 3)", "if (((k * 4) + bx) < 20)"})
    EXPECT_NE(before.find(cond), std::string::npos) << cond << " missing before the pass:\n" << before;
  EXPECT_EQ(after.find("< 40)"), std::string::npos) << after;
  EXPECT_EQ(after.find("bx > 3"), std::string::npos) << after;
  EXPECT_EQ(after.find("bx <= 3"), std::string::npos) << after;
  EXPECT_NE(after.find("if (((k * 4) + bx) < 20)"), std::string::npos) << after;
  // The taken branches' work stays, the dead one's is gone.
  EXPECT_NE(after.find("+ 1.0_f32"), std::string::npos) << after;
  EXPECT_NE(after.find("+ 3.0_f32"), std::string::npos) << after;
  EXPECT_EQ(after.find("+ 2.0_f32"), std::string::npos) << after;
  EXPECT_NE(after.find("+ 5.0_f32"), std::string::npos) << after;
}

TEST(FoldProvenBranches, AttentionsPastTheEndTestGoesWhereTheBlocksDivideSk) {
  for (std::int64_t sk : {4096, 4000}) {
    SCOPED_TRACE("Sk " + std::to_string(sk));
    T::kernels::AttentionShape s;
    s.batch = 1, s.heads = 2, s.kv_heads = 2, s.seqlen_q = 256, s.seqlen_k = sk, s.dim = 64;
    T::kernels::AttentionConfig c{128, 128, 256, 2, T::kernels::AttentionConfig::Schedule::ring, false};
    auto f = T::kernels::attention_program(s, T::DType::f16, false, 0.0f, c);
    auto l = T::lower(f.ir(), sm90(), {}, true);
    const std::string after = stage_text(l, "fold_proven_branches");
    const bool test_left = after.find("> " + std::to_string(sk) + ")") != std::string::npos;
    EXPECT_EQ(test_left, sk % 128 != 0) << after;
  }
}

TEST(RowLayout, OneRowOverABlockOfElevenWarps) {
  // 8193 f16: 1025 vectors on 352 lanes x 3 (powers of two: 256 x 5), through windows (the
  // windowed row, 8200 columns, needs the same 1025).
  T::kernels::SoftmaxConfig c = T::kernels::parse_softmax_config("rows:t352:r1:bn8448");
  EXPECT_EQ(T::kernels::default_softmax_config(32768, 8193, T::DType::f16).describe(),
            "rows:t352:r1:bn8448:w");
  auto f = T::kernels::softmax_program(32768, 8193, T::DType::f16, c);
  auto l = T::lower(f.ir(), sm90(), {}, false);
  const std::string src = T::codegen::generate_cuda(l);
  EXPECT_NE(src.find("__launch_bounds__(352)"), std::string::npos) << src;
  EXPECT_NE(src.find("reduce_warps_inplace<tessel::ReduceMaxOp, 11>"), std::string::npos) << src;
  EXPECT_NE(src.find("(tx % 352)"), std::string::npos) << src;
  // Aligned widths keep their powers of two.
  EXPECT_EQ(T::kernels::default_softmax_config(65536, 8192, T::DType::f16).describe(), "rows:t256:r1:bn8192");
  EXPECT_EQ(T::kernels::default_softmax_config(65536, 5000, T::DType::f16).describe(), "rows:t128:r1:bn5120");
}

}  // namespace
