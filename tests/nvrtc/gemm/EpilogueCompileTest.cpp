// A gemm whose epilogue computes a 16-bit tile from the accumulator (a Parallel cast) and copies
// that tile to global memory: the copy stores the 16-bit registers in the accumulator's layout
// (tessel::store_accumulators), which used to take float registers only, so the generated CUDA
// did not compile (found by tessel_fuzz; tests/fuzz/regressions/gemm-16bit-epilogue-store*.case).
#include <gtest/gtest.h>

#include "support/TestSupport.hpp"
#include "tessel/tessel.hpp"

namespace {

namespace T = tessel;

T::PrimFunc cast_epilogue(T::DType dtype, int M, int N, int K) {
  const int BM = 64, BN = 64, BK = 32;
  T::PrimFunc f("cast_epilogue");
  auto A = f.tensor("A", {M, K}, dtype);
  auto B = f.tensor("B", {K, N}, dtype);
  auto C = f.tensor("C", {M, N}, dtype);
  f.body([&] {
    T::Kernel(T::ceildiv(N, BN), T::ceildiv(M, BM), 128, [&](T::Var bx, T::Var by) {
      auto A_s = T::alloc_shared({BM, BK}, dtype);
      auto B_s = T::alloc_shared({BK, BN}, dtype);
      auto acc = T::alloc_fragment({BM, BN}, T::f32);
      auto out = T::alloc_fragment({BM, BN}, dtype);
      T::clear(acc);
      T::Pipelined(T::ceildiv(K, BK), 2, [&](T::Var ko) {
        T::copy(A(by * BM, ko * BK), A_s);
        T::copy(B(ko * BK, bx * BN), B_s);
        T::gemm(A_s, B_s, acc);
      });
      T::Parallel(BM, BN,
                  [&](T::Var i, T::Var j) { out(i, j) = T::cast(dtype, T::max(acc(i, j) * 0.5, 0.0)); });
      T::copy(out, C(by * BM, bx * BN));
    });
  });
  return f;
}

TEST(EpilogueCompile, SixteenBitTileInTheAccumulatorLayoutStores) {
  for (T::DType dtype : {T::f16, T::bf16})
    for (const char* arch : {"sm_80", "sm_90a"})
      for (int M : {128, 70}) {  // whole tiles (the staged store) and a ragged edge
        SCOPED_TRACE(std::string(T::dtype_name(dtype)) + " " + arch + " M=" + std::to_string(M));
        T::JitOptions o;
        o.out_idx = {-1};
        o.arch = arch;
        T::JitKernel k = T::jit(cast_epilogue(dtype, M, 128, 96), o);
        // sm_90a: the Hopper GEMM takes the kernel and fuses the epilogue (HopperEpilogue.cpp).
        if (std::string(arch) == "sm_80") EXPECT_CONTAINS(k.source(), "tessel::store_accumulators");
        EXPECT_EQ(k.resources().spill_store_bytes, 0) << k.compile_log();
      }
}

}  // namespace
