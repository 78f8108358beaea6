// A cost model for ranking GEMM candidates before anything is compiled, so that the default
// search (successive halving) compiles and times only the likely winners of a large space.
//
// It is a ranking, not a prediction: estimated cycles for the whole GEMM from the tile counts
// (waves over the SMs), and per K step the slowest of tensor-core time (the wgmma path on sm_90
// when the tile allows it, mma.sync otherwise), load latency spread over the pipeline's stages,
// L2 bandwidth into the SM, and HBM bandwidth for the operands' unique bytes; plus a fixed
// prologue and the epilogue's stores. Its constants were fitted to the exhaustive H200 tunes at
// 1024^3 and 128x8192x8192 (bench/results/2026-12-02-tune-*-h200.json): the measured best ranks
// 9th and 37th of 392 there. Configs it cannot tell apart (the rasterization panel) tie.
//
// A split-K candidate (split_k = n >= 2: kernels::Matmul's partial GEMM and reduction) is
// estimated by kernels::plan_matmul's bandwidth model instead, fitted to the H200's skinny GEMMs:
// its split-to-unsplit ratio for n shares times these cycles for default_matmul_config's one
// kernel (the two models meet at that kernel; a split the shape cannot take ranks last).
#pragma once

#include <functional>
#include <string>

#include "tessel/autotune/Autotune.hpp"

namespace tessel::autotune {

// Estimated cycles of an M x N x K GEMM with the gemm_space config `c` on `sm_count` SMs of `arch`.
double gemm_estimated_cycles(long long M, long long N, long long K, const Config& c, const std::string& arch,
                             int sm_count);

// The same, bound to one problem, for Options::cost_model.
std::function<double(const Config&)> gemm_cost_model(long long M, long long N, long long K, std::string arch,
                                                     int sm_count);

}  // namespace tessel::autotune
