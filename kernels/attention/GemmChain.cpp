#include "tessel/kernels/attention/GemmChain.hpp"

namespace tessel::kernels {

namespace T = tessel;

std::string GemmChainConfig::describe() const {
  return std::to_string(block_M) + "x" + std::to_string(block_N) + " s" + std::to_string(num_stages) + " t" +
         std::to_string(threads);
}

PrimFunc gemm_chain_program(int M, int N, int D, DType dtype, float scale, const GemmChainConfig& c,
                            bool p_via_copy) {
  T::PrimFunc f("gemm_chain");
  auto Q = f.tensor("Q", {M, D}, dtype);
  auto K = f.tensor("K", {N, D}, dtype);
  auto V = f.tensor("V", {N, D}, dtype);
  auto O = f.tensor("O", {M, D}, T::f32);
  f.body([&] {
    T::Kernel(T::ceildiv(M, c.block_M), c.threads, [&](T::Var bx) {
      auto Q_shared = T::alloc_shared({c.block_M, D}, dtype);
      auto K_shared = T::alloc_shared({c.block_N, D}, dtype);
      auto V_shared = T::alloc_shared({c.block_N, D}, dtype);
      auto S = T::alloc_fragment({c.block_M, c.block_N}, T::f32);
      auto P = T::alloc_fragment({c.block_M, c.block_N}, dtype);
      auto O_local = T::alloc_fragment({c.block_M, D}, T::f32);
      T::copy(Q(bx * c.block_M, 0), Q_shared);
      T::clear(O_local);
      T::Pipelined(T::ceildiv(N, c.block_N), c.num_stages, [&](T::Var j) {
        T::copy(K(j * c.block_N, 0), K_shared);
        T::copy(V(j * c.block_N, 0), V_shared);
        T::clear(S);
        T::gemm(Q_shared, K_shared, S, /*transpose_A=*/false, /*transpose_B=*/true);
        if (p_via_copy) {
          T::Parallel(c.block_M, c.block_N, [&](T::Var r, T::Var q) { S(r, q) = S(r, q) * scale; });
          T::copy(S, P);
        } else {
          T::Parallel(c.block_M, c.block_N,
                      [&](T::Var r, T::Var q) { P(r, q) = T::cast(dtype, S(r, q) * scale); });
        }
        T::gemm(P, V_shared, O_local);
      });
      T::copy(O_local, O(bx * c.block_M, 0));
    });
  });
  return f;
}

JitKernel make_gemm_chain(int M, int N, int D, DType dtype, float scale, const GemmChainConfig& c,
                          const JitOptions& options) {
  JitOptions o = options;
  if (o.out_idx.empty()) o.out_idx = {-1};
  return jit(gemm_chain_program(M, N, D, dtype, scale, c), o);
}

PrimFunc attention_program(int M, int N, int D, DType dtype, float scale, const GemmChainConfig& c) {
  T::PrimFunc f("attention");
  auto Q = f.tensor("Q", {M, D}, dtype);
  auto K = f.tensor("K", {N, D}, dtype);
  auto V = f.tensor("V", {N, D}, dtype);
  auto O = f.tensor("O", {M, D}, T::f32);
  f.body([&] {
    T::Kernel(T::ceildiv(M, c.block_M), c.threads, [&](T::Var bx) {
      auto Q_shared = T::alloc_shared({c.block_M, D}, dtype);
      auto K_shared = T::alloc_shared({c.block_N, D}, dtype);
      auto V_shared = T::alloc_shared({c.block_N, D}, dtype);
      auto S = T::alloc_fragment({c.block_M, c.block_N}, T::f32);
      auto P = T::alloc_fragment({c.block_M, c.block_N}, dtype);
      auto O_local = T::alloc_fragment({c.block_M, D}, T::f32);
      auto m = T::alloc_fragment({c.block_M}, T::f32);       // running row max
      auto m_prev = T::alloc_fragment({c.block_M}, T::f32);  // its value before this block of keys
      auto l = T::alloc_fragment({c.block_M}, T::f32);       // running row sum of exp(S - m)
      auto row_sum = T::alloc_fragment({c.block_M}, T::f32);
      auto rescale = T::alloc_fragment({c.block_M}, T::f32);
      T::copy(Q(bx * c.block_M, 0), Q_shared);
      T::clear(O_local);
      T::fill(m, -T::infinity(T::f32));
      T::clear(l);
      T::Pipelined(T::ceildiv(N, c.block_N), c.num_stages, [&](T::Var j) {
        T::copy(K(j * c.block_N, 0), K_shared);
        T::copy(V(j * c.block_N, 0), V_shared);
        T::clear(S);
        T::gemm(Q_shared, K_shared, S, /*transpose_A=*/false, /*transpose_B=*/true);
        // Keys past N (the copies padded them with zeros) must not count.
        T::Parallel(c.block_M, c.block_N, [&](T::Var r, T::Var q) {
          S(r, q) = T::if_then_else(j * c.block_N + q < N, S(r, q) * scale, -T::infinity(T::f32));
        });
        T::copy(m, m_prev);
        T::reduce_max(S, m, 1, /*clear=*/false);
        T::Parallel(c.block_M, [&](T::Var r) { rescale(r) = T::exp(m_prev(r) - m(r)); });
        T::Parallel(c.block_M, c.block_N, [&](T::Var r, T::Var q) { S(r, q) = T::exp(S(r, q) - m(r)); });
        T::reduce_sum(S, row_sum, 1);
        T::Parallel(c.block_M, [&](T::Var r) { l(r) = l(r) * rescale(r) + row_sum(r); });
        T::Parallel(c.block_M, D, [&](T::Var r, T::Var d) { O_local(r, d) = O_local(r, d) * rescale(r); });
        T::copy(S, P);
        T::gemm(P, V_shared, O_local);
      });
      T::Parallel(c.block_M, D, [&](T::Var r, T::Var d) { O_local(r, d) = O_local(r, d) / l(r); });
      T::copy(O_local, O(bx * c.block_M, 0));
    });
  });
  return f;
}

JitKernel make_attention(int M, int N, int D, DType dtype, float scale, const GemmChainConfig& c,
                         const JitOptions& options) {
  JitOptions o = options;
  if (o.out_idx.empty()) o.out_idx = {-1};
  return jit(attention_program(M, N, D, dtype, scale, c), o);
}

}  // namespace tessel::kernels
