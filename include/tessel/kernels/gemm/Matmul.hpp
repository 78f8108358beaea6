// The tutorial's tensor-core GEMM, C = A * B (row-major A[M,K], B[K,N], C[M,N]), in Tessel.
#pragma once

#include <string>

#include "tessel/Frontend.hpp"
#include "tessel/Jit.hpp"

namespace tessel::kernels {

struct MatmulConfig {
  int block_M = 128, block_N = 128, block_K = 32;
  int num_stages = 3;
  int threads = 128;
  bool use_swizzle = false;
  int panel_size = 10;
  // use_cluster(cluster_x, cluster_y): on sm_90a, 2-CTA clusters that share the A (x) or B (y)
  // tile through TMA multicast; (1, 1) none.
  int cluster_x = 1, cluster_y = 1;
  DType dtype = DType::f16;
  DType accum_dtype = DType::f32;
  std::string describe() const;  // "128x128x32 s3 t128 swz", " c2x1" with a cluster
};

// The built-in per-shape config (tuned entries take its place: choose_matmul_config). On sm_90a
// it picks tiles the warp-specialized wgmma path takes (block_K 64, 128 or 256 threads); elsewhere
// mma.sync tiles. `sm_count` sizes the tiles so that small problems still fill the GPU.
MatmulConfig default_matmul_config(long long M, long long N, long long K, DType dtype,
                                   const std::string& arch, int sm_count);

// Shared memory the config's pipeline needs: (bM*bK + bK*bN) * elem * stages.
long long matmul_smem_bytes(const MatmulConfig& c);

// The program itself (what `tessel dump` shows); make_matmul jits it.
PrimFunc matmul_program(int M, int N, int K, const MatmulConfig& c);
JitKernel make_matmul(int M, int N, int K, const MatmulConfig& c = {}, const JitOptions& options = {});

// A linear layer: C = act(alpha * A * B + bias), bias a length-N vector added to every row, in
// the inputs' dtype. The tutorial GEMM with an element-wise Parallel epilogue on its accumulator;
// on sm_90a the epilogue is fused into the wgmma kernel (applied in registers before the store),
// elsewhere it runs on the mma.sync accumulator fragment. Parameters: A, B, bias, C.
enum class Activation { none, relu, silu };
const char* activation_name(Activation a);  // "none", "relu", "silu"
PrimFunc matmul_bias_act_program(int M, int N, int K, const MatmulConfig& c, Activation act, float alpha = 1.0f);
JitKernel make_matmul_bias_act(int M, int N, int K, const MatmulConfig& c, Activation act, float alpha = 1.0f,
                               const JitOptions& options = {});

// The config a default entry point compiles, and whether the tuning cache gave it.
struct MatmulChoice {
  MatmulConfig config{};
  bool tuned = false;
};
// The tuning cache's entry for this shape, dtype and GPU when `tessel tune gemm` stored one,
// else default_matmul_config for the GPU (sm_90a and 132 SMs without one). Never throws for want
// of a GPU or a cache.
MatmulChoice choose_matmul_config(int M, int N, int K, DType dtype);
// make_matmul with choose_matmul_config's config: the library's entry point.
JitKernel make_matmul(int M, int N, int K, DType dtype);

}  // namespace tessel::kernels
