// A user's GEMM kernel that is not the tutorial's (its rows' maxima go out too): 128-row tiles on
// 128 threads, C = A B - rowmax(A B) in f16 and R = rowmax(A B) in f32, for every test tier. With
// JitOptions::gemm_from_passes its one consumer warpgroup computes two m64 blocks, the row
// reduction and the Parallel nest reading the interleaved accumulator layout. Header-only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "tessel/tessel.hpp"

namespace tessel::test {

// N <= 64: one column tile.
inline PrimFunc gemm_row_max_program(int M, int N, int K, DType dt = DType::f16) {
  namespace T = tessel;
  T::PrimFunc f("gemm_row_max");
  auto A = f.tensor("A", {M, K}, dt);
  auto B = f.tensor("B", {K, N}, dt);
  auto C = f.tensor("C", {M, N}, dt);
  auto R = f.tensor("R", {M}, T::f32);
  f.body([&] {
    T::Kernel(1, T::ceildiv(M, 128), 128, [&](T::Var, T::Var by) {
      auto A_shared = T::alloc_shared({128, 64}, dt);
      auto B_shared = T::alloc_shared({64, 64}, dt);
      auto C_local = T::alloc_fragment({128, 64}, T::f32);
      auto C_out = T::alloc_fragment({128, 64}, dt);
      auto row_max = T::alloc_fragment({128}, T::f32);
      T::clear(C_local);
      T::Pipelined(T::ceildiv(K, 64), 3, [&](T::Var ko) {
        T::copy(A(by * 128, ko * 64), A_shared);
        T::copy(B(ko * 64, 0), B_shared);
        T::gemm(A_shared, B_shared, C_local);
      });
      T::reduce_max(C_local, row_max, 1);
      T::Parallel(128, 64, [&](T::Var i, T::Var j) { C_out(i, j) = C_local(i, j) - row_max(i); });
      T::copy(row_max, R(by * 128));
      T::copy(C_out, C(by * 128, 0));
    });
  });
  return f;
}

// Row i of A B in float64 (row-major A [M, K], B [K, N]).
inline std::vector<double> gemm_row_reference(const std::vector<double>& a, const std::vector<double>& b,
                                              int N, int K, int i) {
  std::vector<double> row(static_cast<size_t>(N), 0.0);
  for (int k = 0; k < K; ++k) {
    const double x = a[static_cast<size_t>(std::int64_t(i) * K + k)];
    for (int j = 0; j < N; ++j)
      row[static_cast<size_t>(j)] += x * b[static_cast<size_t>(std::int64_t(k) * N + j)];
  }
  return row;
}

}  // namespace tessel::test
