// A fuzz case as a Tessel program (the C++ DSL, as a kernel author writes it), its parameters,
// and their contents; and the same program as C++ source text, for a reproducer.
#pragma once

#include <string>
#include <vector>

#include "fuzz/FuzzCase.hpp"
#include "tessel/Frontend.hpp"
#include "tessel/interp/HostTensor.hpp"

namespace tessel::fuzz {

struct Param {
  std::string name;
  DType dtype;
  std::vector<std::int64_t> shape;
  bool output = false;  // outputs come last, and are poisoned (NaN) before every run
};

std::vector<Param> parameters(const FuzzCase& c);
// out_idx for jit / run_on_cpu: the outputs' positions.
std::vector<int> output_indices(const FuzzCase& c);

// The program; frontend misuse throws CompileError like any author's program would.
PrimFunc build_program(const FuzzCase& c);

// One tensor per parameter: inputs uniform in [-1, 1) from the case's seed, rounded to their
// dtype; outputs full of NaN.
std::vector<interp::HostTensor> make_arguments(const FuzzCase& c);

// The power of two the gemm epilogue scales the accumulator by before its expression, so that
// the expression sees values of order one whatever K is.
double epilogue_scale(const FuzzCase& c);
// What the tile family's post-reduction expression reads as `r`: the row's reduction times this
// (1 / BN for a sum: the row's mean, of the order of its elements; 1 otherwise).
double reduction_scale(const FuzzCase& c);

// A self-contained C++ program (main included) that builds the same Tessel program with the
// public API, runs it on the interpreter and compiles it for sm_80 and sm_90a: what a bug report
// carries. Links against tessel::tessel.
std::string cpp_reproducer(const FuzzCase& c);

}  // namespace tessel::fuzz
