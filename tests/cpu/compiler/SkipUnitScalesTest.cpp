// skip_unit_scales: a register loop inside a serial loop that only scales an f32 array by the
// factors of another runs under a test of those factors against exactly 1; other loops are left
// as they were (a loop run once, a scaling that also adds, the switch off).
#include <gtest/gtest.h>

#include "Lower.hpp"
#include "codegen/CodegenCuda.hpp"
#include "support/LoweringSupport.hpp"
#include "tessel/ir/Printer.hpp"
#include "tessel/kernels/attention/FlashAttention.hpp"
#include "tessel/tessel.hpp"

namespace {

namespace T = tessel;

enum class Body { scale, scale_factor_first, scale_and_add };

// acc = A B (a wgmma / mma.sync accumulator, so that a row factor is in the thread's registers),
// then, in a loop of 4 (or once), acc(r, c) = acc(r, c) * fac(r) with fac a row max of acc.
std::string lowered(Body body, bool in_loop, const T::passes::PassContext::Switches& s,
                    const T::passes::Target& target) {
  T::PrimFunc f("rescale");
  auto A = f.tensor("A", {64, 32}, T::f16);
  auto B = f.tensor("B", {32, 64}, T::f16);
  auto C = f.tensor("C", {64, 64}, T::f32);
  f.body([&] {
    T::Kernel(1, 128, [&](T::Var) {
      auto a = T::alloc_shared({64, 32}, T::f16);
      auto b = T::alloc_shared({32, 64}, T::f16);
      auto acc = T::alloc_fragment({64, 64}, T::f32);
      auto fac = T::alloc_fragment({64}, T::f32);
      T::copy(A(0, 0), a);
      T::copy(B(0, 0), b);
      T::clear(acc);
      T::gemm(a, b, acc);
      auto step = [&] {
        T::reduce_max(acc, fac, 1);
        T::Parallel(64, 64, [&](T::Var r, T::Var c) {
          switch (body) {
            case Body::scale:
              acc(r, c) = acc(r, c) * fac(r);
              break;
            case Body::scale_factor_first:
              acc(r, c) = fac(r) * acc(r, c);
              break;
            case Body::scale_and_add:
              acc(r, c) = acc(r, c) * fac(r) + 1.0f;
              break;
          }
        });
      };
      if (in_loop)
        T::Serial(4, [&](T::Var) { step(); });
      else
        step();
      T::copy(acc, C(0, 0));
    });
  });
  return T::codegen::generate_cuda(T::lower(f.ir(), target, s, false));
}

// The test the pass puts before the scaling loop: every factor register the loop reads.
bool guarded(const std::string& src) {
  return src.find("!= 1.0f)") != std::string::npos;
}

TEST(SkipUnitScales, ScalingLoopsInsideSerialLoopsAreGuarded) {
  T::passes::PassContext::Switches on;
  on.unit_scale_skips = true;
  for (const auto& target : {T::test::sm90(), T::test::sm80()}) {
    SCOPED_TRACE(target.arch);
    const std::string src = lowered(Body::scale, true, on, target);
    EXPECT_TRUE(guarded(src)) << src;
    EXPECT_TRUE(guarded(lowered(Body::scale_factor_first, true, on, target)));
    // The test reads each factor register once, joined by ||, and wraps the unrolled loop.
    const auto at = src.find("if (((fragment_");
    ASSERT_NE(at, std::string::npos) << src;
    const std::string line = src.substr(at, src.find('\n', at) - at);
    EXPECT_NE(line.find("[0] != 1.0f) || (fragment_"), std::string::npos) << line;
    const std::string after = src.substr(at, 400);
    EXPECT_NE(after.find("#pragma unroll"), std::string::npos) << after;
  }
}

TEST(SkipUnitScales, OtherLoopsAreLeftAlone) {
  T::passes::PassContext::Switches on;
  on.unit_scale_skips = true;
  const T::passes::PassContext::Switches off;  // the default: opt-in
  const auto target = T::test::sm90();
  EXPECT_FALSE(guarded(lowered(Body::scale, false, on, target)));         // run once: not worth a test
  EXPECT_FALSE(guarded(lowered(Body::scale_and_add, true, on, target)));  // x * 1 + 1 is not x
  EXPECT_FALSE(guarded(lowered(Body::scale, true, off, target)));         // the switch
  // The same code otherwise: the switch only adds the test.
  std::string with = lowered(Body::scale, true, on, target),
              without = lowered(Body::scale, true, off, target);
  EXPECT_GT(with.size(), without.size());
}

// FlashAttention's rescale of O (by exp2(m_prev - m), exactly 1 in a row whose max stayed) is
// guarded inside its key loop, and so is the peeled first block's in a persistent kernel's tile
// loop, when JitOptions::unit_scale_skips asks for it -- or the config is lazy, whose options
// (attention_jit_options, what make_flash_attention compiles with) turn the skips on unless
// JitOptions::disable_unit_scale_skips keeps them off.
TEST(SkipUnitScales, AttentionsRescaleOfOIsGuarded) {
  T::kernels::AttentionShape s;
  s.batch = 2, s.heads = 4, s.kv_heads = 4, s.seqlen_q = 1024, s.seqlen_k = 1024, s.dim = 64;
  auto guards = [&](const T::kernels::AttentionConfig& c, const T::JitOptions& base) {
    const T::JitOptions o = T::kernels::attention_jit_options(s, c, base);
    const std::string src =
        T::codegen::generate_cuda(T::lower(T::kernels::attention_program(s, T::f16, false, 0.0f, c).ir(),
                                           T::test::sm90(), T::jit_switches(o), false));
    size_t n = 0;
    for (size_t at = src.find("!= 1.0f) || ("); at != std::string::npos;
         at = src.find("!= 1.0f) || (", at + 1))
      ++n;
    return n;
  };
  for (bool lazy : {false, true}) {
    SCOPED_TRACE(lazy ? "lazy" : "exact");
    T::kernels::AttentionConfig c;
    c.block_M = 192, c.block_N = 128, c.num_stages = 2, c.threads = 384;
    c.schedule = T::kernels::AttentionConfig::Schedule::ring;
    c.persistent = true;
    c.lazy_rescale = lazy;
    T::JitOptions asked, plain, disabled;
    asked.arch = plain.arch = disabled.arch = "sm_90a";
    asked.unit_scale_skips = true;
    disabled.unit_scale_skips = true;
    disabled.disable_unit_scale_skips = true;
    EXPECT_GE(guards(c, asked), 2u);
    EXPECT_EQ(guards(c, plain), lazy ? guards(c, asked) : 0u);
    EXPECT_EQ(guards(c, disabled), 0u);
  }
}

}  // namespace
