// A GEMM whose K loop's trip count is read from a tensor: row block `by` of C sums the first
// min(steps[by], ceil(K / 64)) tiles of 64 along K (0 tiles: C's rows are 0). A ring loop whose
// length only the data knows, for every test tier. Header-only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tessel/tessel.hpp"

namespace tessel::test {

inline PrimFunc ragged_k_gemm_program(int M, int N, int K, DType dt = DType::f16) {
  namespace T = tessel;
  T::PrimFunc f("ragged_k_gemm");
  auto A = f.tensor("A", {M, K}, dt);
  auto B = f.tensor("B", {K, N}, dt);
  auto C = f.tensor("C", {M, N}, T::f32);
  auto steps = f.tensor("steps", {(M + 127) / 128}, DType::i32);
  f.body([&] {
    T::Kernel(T::ceildiv(N, 256), T::ceildiv(M, 128), 256, [&](T::Var bx, T::Var by) {
      auto A_shared = T::alloc_shared({128, 64}, dt);
      auto B_shared = T::alloc_shared({64, 256}, dt);
      auto C_local = T::alloc_fragment({128, 256}, T::f32);
      T::clear(C_local);
      T::Pipelined(T::max(T::min(steps(by), T::ceildiv(K, 64)), 0), 3, [&](T::Var ko) {
        T::copy(A(by * 128, ko * 64), A_shared);
        T::copy(B(ko * 64, bx * 256), B_shared);
        T::gemm(A_shared, B_shared, C_local);
      });
      T::copy(C_local, C(by * 128, bx * 256));
    });
  });
  return f;
}

// C[i, j] in float64 for ragged_k_gemm_program's data (row-major A [M, K], B [K, N]).
inline double ragged_k_gemm_reference(const std::vector<double>& a, const std::vector<double>& b,
                                      const std::vector<std::int32_t>& steps, int N, int K, int i, int j) {
  const std::int64_t tiles = std::clamp<std::int64_t>(steps[static_cast<size_t>(i / 128)], 0, (K + 63) / 64);
  const std::int64_t kmax = std::min<std::int64_t>(tiles * 64, K);
  double s = 0;
  for (std::int64_t k = 0; k < kmax; ++k)
    s += a[static_cast<size_t>(std::int64_t(i) * K + k)] * b[static_cast<size_t>(k * N + j)];
  return s;
}

}  // namespace tessel::test
