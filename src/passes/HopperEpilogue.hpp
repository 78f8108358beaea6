// Part of select_hopper_gemm: the Parallel nests an author writes between the GEMM's main loop
// and its store (bias, scaling, activations, casts) become one per-element function that the
// sm_90a kernel applies to its accumulators in registers, in their wgmma layout, before any of
// its store paths (direct, TMA store, after the split-K sum).
#pragma once

#include <string>
#include <vector>

#include "tessel/ir/IR.hpp"

namespace tessel::passes {

struct HopperEpilogue {
  // The lambda the kernel calls per output element: params (acc: f32, bx, by, i, j: i32), a
  // body over one Local scalar per fragment, and its result (the stored fragment's value).
  ir::DeviceCallArg lambda;
  bool empty = true;  // no nests: the accumulator is stored as it is
};

// Fuses `nests` (the statements between the main loop and the store, in order) over the
// accumulator `acc` (a BM x BN fragment); `stored` is the fragment the final copy writes to C;
// `block_vars` are the kernel's (bx, by). Returns "" and fills `out`, or why it cannot (then
// the kernel keeps the mma.sync path): a statement that is not a Parallel nest over the whole
// tile, an index other than the nest's own (i, j) into a fragment, a shared or local buffer, a
// store to a global tensor, a fragment read before the epilogue wrote it.
std::string fuse_hopper_epilogue(const std::vector<ir::Stmt>& nests, const ir::Buffer& acc,
                                 const ir::Buffer& stored, const std::vector<ir::Var>& block_vars,
                                 HopperEpilogue& out);

}  // namespace tessel::passes
