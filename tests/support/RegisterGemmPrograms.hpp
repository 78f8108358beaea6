// Programs whose gemm takes its A operand from registers (a fragment), for every test tier:
// the form FlashAttention's second GEMM (P * V) takes. Header-only.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "tessel/kernels/attention/GemmChain.hpp"
#include "tessel/tessel.hpp"

namespace tessel::test {

namespace T = tessel;

struct RegisterGemmShape {
  int M, N, K;          // C[M, N] = A[M, K] * B[K, N]
  int BM, BN, BK;       // the tiles
  int threads;          // per block
  int stages = 2;       // of the Pipelined K loop
};

// C = A * B with A copied from global memory into a fragment (registers) and B into shared
// memory: gemm(fragment, shared, fragment). C is f32.
inline PrimFunc register_a_gemm_program(const RegisterGemmShape& s, DType dt) {
  T::PrimFunc f("register_a_gemm");
  auto A = f.tensor("A", {s.M, s.K}, dt);
  auto B = f.tensor("B", {s.K, s.N}, dt);
  auto C = f.tensor("C", {s.M, s.N}, T::f32);
  f.body([&] {
    T::Kernel(T::ceildiv(s.N, s.BN), T::ceildiv(s.M, s.BM), s.threads, [&](T::Var bx, T::Var by) {
      auto A_regs = T::alloc_fragment({s.BM, s.BK}, dt);
      auto B_shared = T::alloc_shared({s.BK, s.BN}, dt);
      auto C_local = T::alloc_fragment({s.BM, s.BN}, T::f32);
      T::clear(C_local);
      T::Pipelined(T::ceildiv(s.K, s.BK), s.stages, [&](T::Var k) {
        T::copy(A(by * s.BM, k * s.BK), A_regs);
        T::copy(B(k * s.BK, bx * s.BN), B_shared);
        T::gemm(A_regs, B_shared, C_local);
      });
      T::copy(C_local, C(by * s.BM, bx * s.BN));
    });
  });
  return f;
}

struct ChainShape {
  int M, N, D;      // Q[M, D], K[N, D], V[N, D] -> O[M, D]
  int BM, BN;       // rows of Q per block, rows of K/V per step
  int threads;
};

// The FlashAttention-shaped chain of kernels/attention/GemmChain (O = f16(scale * Q K^T) V,
// P the register A operand of the second gemm) at a test's shape.
inline PrimFunc gemm_chain_program(const ChainShape& s, DType dt, float scale, bool via_copy = false) {
  return kernels::gemm_chain_program(s.M, s.N, s.D, dt, scale, {s.BM, s.BN, s.threads, 2}, via_copy);
}

// The chain's float64 reference, rounding P to the 16-bit type as the kernel does (`round16`
// maps a double to the nearest value of that type). Rows of K / V past N are zeros (the
// copies pad them), and contribute nothing.
template <class Round16>
std::vector<double> reference_gemm_chain(const std::vector<double>& q, const std::vector<double>& k,
                                         const std::vector<double>& v, int M, int N, int D, double scale,
                                         Round16&& round16) {
  std::vector<double> o(static_cast<size_t>(M) * D, 0.0), p(N);
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < N; ++j) {
      double acc = 0;
      for (int d = 0; d < D; ++d) acc += q[size_t(i) * D + d] * k[size_t(j) * D + d];
      p[j] = round16(static_cast<double>(static_cast<float>(acc) * static_cast<float>(scale)));
    }
    for (int j = 0; j < N; ++j)
      for (int d = 0; d < D; ++d) o[size_t(i) * D + d] += p[j] * v[size_t(j) * D + d];
  }
  return o;
}

// softmax(scale * Q K^T) V in float64, row by row.
inline std::vector<double> reference_attention(const std::vector<double>& q, const std::vector<double>& k,
                                               const std::vector<double>& v, int M, int N, int D, double scale) {
  std::vector<double> o(static_cast<size_t>(M) * D, 0.0), p(N);
  for (int i = 0; i < M; ++i) {
    double mx = -INFINITY, sum = 0;
    for (int j = 0; j < N; ++j) {
      double acc = 0;
      for (int d = 0; d < D; ++d) acc += q[size_t(i) * D + d] * k[size_t(j) * D + d];
      p[j] = acc * scale;
      mx = std::max(mx, p[j]);
    }
    for (int j = 0; j < N; ++j) sum += (p[j] = std::exp(p[j] - mx));
    for (int j = 0; j < N; ++j)
      for (int d = 0; d < D; ++d) o[size_t(i) * D + d] += p[j] / sum * v[size_t(j) * D + d];
  }
  return o;
}

}  // namespace tessel::test
