// The float64 evaluation of a fuzz case: what the program computes, written directly from the
// case (not from the IR, not through the interpreter), in double, with no rounding anywhere but
// the inputs' own. The interpreter and the GPU are both compared against it.
#pragma once

#include <vector>

#include "fuzz/FuzzCase.hpp"
#include "tessel/interp/HostTensor.hpp"

namespace tessel::fuzz {

// The outputs, in parameter order, each row-major; `args` as make_arguments gives them (the
// outputs among them are ignored).
std::vector<std::vector<double>> evaluate_float64(const FuzzCase& c, const std::vector<interp::HostTensor>& args);

// The largest relative (Frobenius) error an output may show against the float64 evaluation:
// rounding to the output's and intermediates' dtypes, f32 accumulation over the reduction
// length, and a little for the expressions' f32 (or 16-bit) arithmetic.
double tolerance(const FuzzCase& c);

double evaluate_expr(const ExprTree& e, double x, double r);

}  // namespace tessel::fuzz
