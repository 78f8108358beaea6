// Attention's two GEMMs without the softmax, O = f16(scale * Q K^T) V, in Tessel: the dataflow
// FlashAttention is built on, and the kernel that exercises a gemm taking its A operand from
// registers. Per block of block_M query rows, for each block_N keys: S = Q K^T (a gemm
// accumulator), P = S * scale converted to the inputs' 16-bit type element by element (a
// Parallel nest; layout inference gives P the accumulator's layout, which is the mma / wgmma A
// operand layout), O += P V with P straight from registers. On sm_90a both gemms are wgmma
// (tessel::WarpgroupGemm) when block_M is 16 rows per warp; mma.sync elsewhere.
// Q [M, D], K [N, D], V [N, D] in f16 or bf16; O [M, D] in f32. Rows past N add nothing.
#pragma once

#include <string>

#include "tessel/Frontend.hpp"
#include "tessel/Jit.hpp"

namespace tessel::kernels {

struct GemmChainConfig {
  int block_M = 64, block_N = 64;
  int threads = 128;
  int num_stages = 2;  // of the K/V ring
  std::string describe() const;  // "64x64 s2 t128"
};

// p_via_copy: scale S in place and make P with T::copy (a fragment-to-fragment cast) instead of
// one Parallel nest; the same values.
PrimFunc gemm_chain_program(int M, int N, int D, DType dtype, float scale, const GemmChainConfig& c = {},
                            bool p_via_copy = false);
JitKernel make_gemm_chain(int M, int N, int D, DType dtype, float scale, const GemmChainConfig& c = {},
                          const JitOptions& options = {});

// FlashAttention's forward pass (non-causal, one head): O = softmax(scale * Q K^T) V with the
// online softmax, in Tessel. The chain above plus the row statistics: per block_N keys, S = Q K^T
// (masked to -inf past N), m = max(m, rowmax(S)), S = exp(S - m), l = l * exp(m_old - m) +
// rowsum(S), O = O * exp(m_old - m) + f16(S) V; at the end O / l. The row reductions run on the
// gemm accumulator in registers (its warps split M only), P goes to the second gemm from
// registers. Same tensors and configs as the chain; O in f32.
PrimFunc attention_program(int M, int N, int D, DType dtype, float scale, const GemmChainConfig& c = {});
JitKernel make_attention(int M, int N, int D, DType dtype, float scale, const GemmChainConfig& c = {},
                         const JitOptions& options = {});

}  // namespace tessel::kernels
