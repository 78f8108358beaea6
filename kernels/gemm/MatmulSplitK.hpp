// Split-K's part of plan_matmul (kernels/gemm/MatmulSplitK.cpp), for MatmulStaging.cpp.
#pragma once

#include <string>

#include "tessel/kernels/gemm/Matmul.hpp"

namespace tessel::kernels {

// Decides split_k for a plan whose staging is decided (kernel_N, kernel_K set) and appends the
// reason to p.why (the model: plan_matmul's comment; a split_k the caller gives is "forced", or
// "tuned" when p.split_tuned says the tuning cache gave it). Throws std::invalid_argument for a
// split_k outside 0, 1, 2 .. the K tiles.
void plan_split_k(MatmulPlan& p, DType dtype, const std::string& arch, int split_k, int sm_count);

}  // namespace tessel::kernels
