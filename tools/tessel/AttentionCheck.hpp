// Float64 checks of the attention kernels (kernels/attention), shared by `tessel bench chain`,
// `tessel bench attention` and the tutorial's section 5.
#pragma once

#include <vector>

#include "tessel/DType.hpp"

namespace tessel::cli {

// `samples` row indices spread over [0, M): the first, the last and evenly between (all rows
// when samples >= M).
std::vector<long long> spread_rows(long long M, long long samples);

// The relative Frobenius error, over the given rows, of o ([M, D] row-major, as computed) against
// float64: O = softmax(scale Q K^T) V when `softmax`, else the chain's O = P V with P = scale Q K^T
// rounded to the 16-bit type `t` as the kernel does. q is [M, D], k and v [N, D]. NaN when a
// checked element of o is not finite.
double attention_error(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                       const std::vector<double>& o, const std::vector<long long>& rows, long long N, long long D,
                       float scale, DType t, bool softmax);

}  // namespace tessel::cli
