// The reference interpreter: runs a tile program, as the frontend recorded it (before any GPU
// lowering), on the CPU with the meaning the language defines, and checks every access.
//
// Meaning:
//  - Each Kernel runs its blocks one after another, block indices row-major (bz, then by, then
//    bx innermost). Shared, fragment and local buffers are plain arrays, fresh for each block
//    (filled with NaN for float dtypes unless options say otherwise, so a read of an element never
//    written shows up). use_swizzle changes only the order of blocks on the GPU: a no-op here.
//  - Statements run in order with whole-tile meaning. copy: element by element between regions
//    of equal extents (a side written buf(i, j) takes its extents from the other side; dims of
//    extent 1 may be dropped on either side); reads past a global tensor's edge give the pad
//    value (0 unless given), writes past it are dropped. gemm: C += op(A) op(B) from A and B as
//    stored (already rounded to their dtype); an f32 accumulator adds the products (exact in
//    f32 for f16/bf16 inputs) in float in k order, as one chain of mma instructions does (the
//    tensor core's order within one k16 step may differ by an ulp); an f16/bf16 accumulator
//    rounds after each k16 step; integer accumulators wrap. fill; reduce_{max,min,sum} along
//    a dim (accumulated in f32 for 16-bit and f32 buffers, in k order, rounded once), combined
//    with the old values unless clear. Loops of every kind (Serial, Unrolled, Parallel,
//    Pipelined) are plain loops.
//  - Expressions compute in their dtype: f32 in float, f16/bf16 in float rounded to the dtype
//    after each operation, f64 in double, integers wrapping like the GPU (i32 in 32 bits),
//    integer / and % truncating like C++. Every store rounds to the buffer's dtype (nearest
//    even). && and || short-circuit and select evaluates only the chosen side, as the generated
//    C++ does. min/max on floats are fminf/fmaxf (a NaN operand loses).
//
// Checks: a load or store outside a buffer's shape (global tensors included: only tile ops are
// masked), a copy/fill region overrunning a shared, fragment or local buffer, copy regions of
// different extents, gemm operands that do not chain, integer division by zero. Each is a
// tessel::RuntimeError naming the op ("load", "store", "copy", "fill", "gemm", "reduce_sum", ...),
// the author's source line, the block (bx, by, bz) and the offending indices and shape.
#pragma once

#include <vector>

#include "tessel/Frontend.hpp"
#include "tessel/interp/HostTensor.hpp"
#include "tessel/ir/IR.hpp"

namespace tessel::interp {

struct InterpOptions {
  // Fill shared/fragment/local float buffers with NaN when declared (integers with 0x5A5A...).
  bool poison_scratch = true;
  // Report a read of a shared-memory element that nothing wrote since the buffer's declaration
  // (a copy from it, a gemm operand, an element load) as an error naming the buffer, the element
  // and the line, instead of computing with the poison.
  bool report_unwritten_shared_reads = true;
};

// Runs f on args, one per parameter in order (outputs too; they are written in place). Checks
// the count, each dtype and shape first (symbolic dimensions are bound from the arguments).
void interpret(const ir::PrimFuncNode& f, const std::vector<HostTensor*>& args,
               const InterpOptions& options = {});

// The CPU twin of JitKernel::call: `inputs` are the parameters not named in out_idx (negative
// counts from the end), in order; the outputs are allocated (filled with NaN, so an element the
// program never writes shows up) and returned in out_idx's order.
std::vector<HostTensor> run_on_cpu(const PrimFunc& f, const std::vector<HostTensor>& inputs,
                                   const std::vector<int>& out_idx, const InterpOptions& options = {});

}  // namespace tessel::interp
