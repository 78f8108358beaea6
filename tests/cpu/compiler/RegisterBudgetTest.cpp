// check_register_budget: a fragment, or a kernel's fragments together, past 510 values per
// thread is a CompileError naming the buffer, its size and the limit, at the author's line;
// JitOptions::allow_register_spills lets it through; no library kernel or tuning point trips it.
#include <gtest/gtest.h>

#include "support/LoweringSupport.hpp"
#include "tessel/autotune/Autotune.hpp"
#include "tessel/kernels/gemm/Matmul.hpp"
#include "tessel/tessel.hpp"

namespace T = tessel;

namespace {

using tessel::test::compile_error_of;
using tessel::test::sm80;
using tessel::test::sm90;

int kernel_line = 0, alloc_line = 0;  // the lines errors must name

// `columns` f32 values per thread in each of `fragments` fragments of 128 rows, over 128 threads.
T::PrimFunc wide_rows(int columns, int fragments = 1) {
  T::PrimFunc f("wide_rows");
  auto C = f.tensor("C", {128, columns}, T::f32);
  f.body([&] {
    kernel_line = __LINE__ + 1;
    T::Kernel(1, 128, [&](T::Var) {
      std::vector<T::Buffer> frags;
      for (int i = 0; i < fragments; ++i) {
        alloc_line = __LINE__ + 1;
        frags.push_back(T::alloc_fragment({128, columns}, T::f32));
        T::clear(frags.back());
      }
      for (const T::Buffer& frag : frags) T::copy(frag, C(0, 0));
    });
  });
  return f;
}

TEST(RegisterBudget, AFragmentPastTheBudgetIsAnErrorNamingItsSizeAndTheLimit) {
  const std::string msg = compile_error_of([] { tessel::lower(wide_rows(8192).ir(), sm90()); });
  EXPECT_NE(
      msg.find("RegisterBudgetTest.cpp:" + std::to_string(alloc_line) +
               ": error in alloc_fragment: fragment_0 (fragment f32[128, 8192]) holds 8192 values per thread "
               "with 128 threads; the limit is 510 (twice the 255 registers a thread can have; past it "
               "ptxas spills most of it to local memory); use smaller tiles or more threads"),
      std::string::npos)
      << msg;
  EXPECT_NE(msg.find("or set JitOptions::allow_register_spills"), std::string::npos) << msg;
  // 511 is past the budget, 510 is not.
  EXPECT_NE(compile_error_of([] {
              tessel::lower(wide_rows(511).ir(), sm80());
            }).find("holds 511 values per thread"),
            std::string::npos);
  EXPECT_EQ(compile_error_of([] { tessel::lower(wide_rows(510).ir(), sm80()); }), "<no error>");
}

TEST(RegisterBudget, TheKernelsTotalCountsToo) {
  const std::string msg = compile_error_of([] { tessel::lower(wide_rows(300, 2).ir(), sm80()); });
  EXPECT_NE(
      msg.find("error in Kernel: wide_rows's fragments and local arrays hold 600 values per thread in all "
               "(fragment_0 300, fragment_1 300) with 128 threads; the limit is 510"),
      std::string::npos)
      << msg;
  EXPECT_NE(msg.find("RegisterBudgetTest.cpp:" + std::to_string(kernel_line) + ": "), std::string::npos)
      << msg;
}

TEST(RegisterBudget, AllowRegisterSpillsLetsItThrough) {
  tessel::passes::PassContext::Switches allow;
  allow.allow_register_spills = true;
  EXPECT_EQ(compile_error_of([&] { tessel::lower(wide_rows(8192).ir(), sm90(), allow); }), "<no error>");
  // Without it, jit() reports the same (the check sits before NVRTC, which is not reached).
  T::JitOptions o;
  o.arch = "sm_80";
  EXPECT_NE(compile_error_of([&] { T::jit(wide_rows(1024), o); }).find("holds 1024 values per thread"),
            std::string::npos);
}

TEST(RegisterBudget, NoPointOfTheGemmSpacesTripsIt) {
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const auto space = tessel::autotune::gemm_space(arch, T::f16);
    const auto target = std::string(arch) == "sm_80" ? sm80() : sm90();
    int checked = 0;
    for (const auto& c : space.enumerate().kept) {
      const auto config = tessel::autotune::gemm_config(c, T::f16);
      const std::string msg = compile_error_of(
          [&] { tessel::lower(tessel::kernels::matmul_program(4096, 4096, 4096, config).ir(), target); });
      EXPECT_EQ(msg.find("values per thread"), std::string::npos)
          << tessel::autotune::describe(c) << ": " << msg;
      ++checked;
    }
    EXPECT_GT(checked, 100) << arch;
  }
}

}  // namespace
