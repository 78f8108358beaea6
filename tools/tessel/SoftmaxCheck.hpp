// Checking a softmax output on the device against float64 without bringing the whole tensor back:
// rows spread over it (the first, the last and evenly between), PyTorch's semantics.
#pragma once

#include "tessel/runtime/Tensor.hpp"

namespace tessel::cli {

// The tolerance on the relative error: 1e-3 for f32 outputs, 1e-2 for 16-bit ones.
double softmax_tolerance(DType dtype);

// ||y - softmax(x)||_F / ||softmax(x)||_F over `rows` sampled rows of the M x N tensors, the
// reference in float64; NaN when a sampled output holds a NaN (a poisoned, unwritten output).
double sampled_softmax_error(const Tensor& x, const Tensor& y, long long M, long long N, int rows = 64);

}  // namespace tessel::cli
