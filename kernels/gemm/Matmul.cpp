#include "kernels/gemm/Matmul.hpp"

namespace tessel::kernels {

namespace T = tessel;

std::string MatmulConfig::describe() const {
  return std::to_string(block_M) + "x" + std::to_string(block_N) + "x" + std::to_string(block_K) + " s" +
         std::to_string(num_stages) + " t" + std::to_string(threads) + (use_swizzle ? " swz" : "");
}

long long matmul_smem_bytes(const MatmulConfig& c) {
  return (1LL * c.block_M * c.block_K + 1LL * c.block_K * c.block_N) * dtype_bytes(c.dtype) * c.num_stages;
}

PrimFunc matmul_program(int M, int N, int K, const MatmulConfig& c) {
  T::PrimFunc f("matmul");
  auto A = f.tensor("A", {M, K}, c.dtype);
  auto B = f.tensor("B", {K, N}, c.dtype);
  auto C = f.tensor("C", {M, N}, c.dtype);
  f.body([&] {
    T::Kernel(T::ceildiv(N, c.block_N), T::ceildiv(M, c.block_M), c.threads, [&](T::Var bx, T::Var by) {
      auto A_shared = T::alloc_shared({c.block_M, c.block_K}, c.dtype);
      auto B_shared = T::alloc_shared({c.block_K, c.block_N}, c.dtype);
      auto C_local = T::alloc_fragment({c.block_M, c.block_N}, c.accum_dtype);
      if (c.use_swizzle) T::use_swizzle(c.panel_size);
      T::clear(C_local);
      T::Pipelined(T::ceildiv(K, c.block_K), c.num_stages, [&](T::Var ko) {
        T::copy(A(by * c.block_M, ko * c.block_K), A_shared);
        T::copy(B(ko * c.block_K, bx * c.block_N), B_shared);
        T::gemm(A_shared, B_shared, C_local);
      });
      T::copy(C_local, C(by * c.block_M, bx * c.block_N));
    });
  });
  return f;
}

JitKernel make_matmul(int M, int N, int K, const MatmulConfig& c, const JitOptions& options) {
  JitOptions o = options;
  if (o.out_idx.empty()) o.out_idx = {-1};
  return jit(matmul_program(M, N, K, c), o);
}

}  // namespace tessel::kernels
