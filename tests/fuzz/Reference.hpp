// The float64 evaluation of a fuzz case: what the program computes, written directly from the
// case (not from the IR, not through the interpreter), in double, with no rounding anywhere but
// the inputs' own. The interpreter and the GPU are both compared against it.
#pragma once

#include <vector>

#include "fuzz/FuzzCase.hpp"
#include "tessel/interp/HostTensor.hpp"

namespace tessel::fuzz {

// What a program should compute: each output's values, and beside each value the magnitude
// its rounding errors scale with — the same computation on absolute values (|a| + |b| for
// a + b or a - b, a dot product of |A| and |B|, the largest of a max's operands, ...), so that
// an output that cancels to nearly zero (x - mean(x) over equal x) is compared against the size
// of what cancelled, not against itself.
struct Expected {
  std::vector<std::vector<double>> values, magnitudes;
};

// The outputs, in parameter order, each row-major; `args` as make_arguments gives them (the
// outputs among them are ignored).
Expected evaluate_float64(const FuzzCase& c, const std::vector<interp::HostTensor>& args);

// The largest relative error an output may show against the float64 evaluation, relative to the
// magnitudes: rounding to the output's and intermediates' dtypes, f32 accumulation over the
// reduction length, and a little for the expressions' f32 (or 16-bit) arithmetic.
double tolerance(const FuzzCase& c);

// An expression's value and magnitude, given those of its leaves.
struct Value {
  double v = 0, m = 0;
};
Value evaluate_expr(const ExprTree& e, Value x, Value r);

}  // namespace tessel::fuzz
