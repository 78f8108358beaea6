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
  DType dtype = DType::f16;
  DType accum_dtype = DType::f32;
  std::string describe() const;  // "128x128x32 s3 t128 swz"
};

// Shared memory the config's pipeline needs: (bM*bK + bK*bN) * elem * stages.
long long matmul_smem_bytes(const MatmulConfig& c);

// The program itself (what `tessel dump` shows); make_matmul jits it.
PrimFunc matmul_program(int M, int N, int K, const MatmulConfig& c);
JitKernel make_matmul(int M, int N, int K, const MatmulConfig& c = {}, const JitOptions& options = {});

}  // namespace tessel::kernels
