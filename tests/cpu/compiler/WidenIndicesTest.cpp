// widen_indices: index arithmetic that can leave the 32-bit range, by the IR's bounds, is done
// in 64 bits; the same program over a small tensor keeps 32-bit arithmetic.
#include <gtest/gtest.h>

#include "Lower.hpp"
#include "codegen/CodegenCuda.hpp"
#include "tessel/kernels/softmax/Softmax.hpp"
#include "support/LoweringSupport.hpp"
#include "tessel/tessel.hpp"

namespace {

namespace T = tessel;

std::string doubling_kernel(long long N) {
  T::PrimFunc f("double_it");
  auto X = f.tensor("X", {N}, T::f16);
  auto Y = f.tensor("Y", {N}, T::f16);
  f.body([&] {
    T::Kernel(T::ceildiv(N, 1024), 128, [&](T::Var bx) {
      auto x = T::alloc_fragment({1024}, T::f16);
      T::copy(X(bx * 1024), x);
      T::Parallel(1024, [&](T::Var i) { x(i) = x(i) * 2.0f; });
      T::copy(x, Y(bx * 1024));
    });
  });
  return T::codegen::generate_cuda(T::lower(f.ir(), T::test::sm90()));
}

TEST(WidenIndices, ElementIndicesPast2To31AreComputedIn64Bits) {
  const std::string big = doubling_kernel((1LL << 31) + 2048);
  // bx * 1024 reaches 2^31: the product, the sum and the bounds test are 64-bit.
  EXPECT_NE(big.find("((((long long)(bx)) * 1024LL) + ((long long)(((l * 128) + tx)))) < 2147485696LL)"),
            std::string::npos)
      << big;
  EXPECT_EQ(big.find("(bx * 1024)"), std::string::npos) << big;
  const std::string small = doubling_kernel(1 << 20);
  EXPECT_NE(small.find("((bx * 1024) + ((l * 128) + tx))"), std::string::npos) << small;
  EXPECT_EQ(small.find("(long long)(bx)"), std::string::npos) << small;
}

TEST(WidenIndices, SoftmaxRowsPast2To31) {
  const long long M = (1LL << 31) + 1024;
  T::JitOptions o;
  o.arch = "sm_90a";
  auto k = T::kernels::make_softmax(M, 8, T::DType::f16,
                                    T::kernels::default_softmax_config(M, 8, T::DType::f16), o);
  EXPECT_NE(k.source().find("(((long long)(bx)) * 1024LL) * 8LL)"), std::string::npos) << k.source();
  EXPECT_EQ(k.source().find("(long long)((bx * 1024))"), std::string::npos) << k.source();
}

}  // namespace
