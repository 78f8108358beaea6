// Split-K's part of plan_matmul (kernels/gemm/MatmulSplitK.cpp), for MatmulStaging.cpp, and the
// realigned rings' model (MatmulStaging.cpp), for the split.
#pragma once

#include <string>

#include "tessel/kernels/gemm/Matmul.hpp"

namespace tessel::kernels {

// Decides split_k for a plan whose staging is decided (kernel_N, kernel_K set) and appends the
// reason to p.why (the model: plan_matmul's comment; a split_k the caller gives is "forced", or
// "tuned" when p.split_tuned says the tuning cache gave it). Throws std::invalid_argument for a
// split_k outside 0, 1, 2 .. the K tiles.
void plan_split_k(MatmulPlan& p, DType dtype, const std::string& arch, int split_k, int sm_count);

// Whether a GEMM kernel of config c keeps plan_pipelines' generic cp.async schedule, where rows
// off 16 bytes load through realigned rings: fewer than passes::kGemmMainloopMinAccumulators
// (64) accumulators a thread (more become gemm_mainloop, on the synchronous realigned chunks).
bool keeps_generic_schedule(const MatmulConfig& c);

// The realigned rings' model (MatmulStaging.cpp says its constants and what they were fitted to):
// microseconds, launch included, for a kernel of config c on M x N x K whose K loop is split in
// `shares` (1: the whole GEMM, which also writes C; more: each share's partial, without the
// reduction or the f32 partials' bytes).
double realigned_ring_us(long long M, long long N, long long K, DType dtype, const MatmulConfig& c,
                         long long shares, int sm_count);

}  // namespace tessel::kernels
