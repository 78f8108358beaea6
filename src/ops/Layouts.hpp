// What a tile op's layout inference needs (TileOp::infer_layouts), and the layout helpers
// infer_layouts and the ops share.
#pragma once

#include <cstdint>
#include <set>
#include <utility>

#include "passes/PassContext.hpp"
#include "tessel/ir/IR.hpp"

namespace tessel::ops {

using passes::FragmentLayout;
using passes::GemmEngine;
using passes::PassContext;
using passes::SharedLayout;

// mma.sync's instruction shape (m16n8k16): gemm tiles divide into it.
inline constexpr int kMmaM = 16, kMmaN = 8, kMmaK = 16;

// The pass context, and what infer_layouts' scans found about the program as a whole.
struct LayoutContext {
  PassContext& ctx;
  // Accumulators whose warps must split M alone (their rows become a register A operand or are
  // reduced), by buffer id (infer_layouts' RowOperandScan).
  const std::set<int>& row_operand_tiles;
  // Gemms that are the sole compute of a Pipelined loop filling both their operands: they stay
  // on BlockGemm's mma.sync main loop (infer_layouts' MainLoopGemmScan).
  const std::set<const ir::GemmStmt*>& main_loop_gemms;
};

// The 2-D matrix a shared buffer holds: [prod(leading dims), last dim].
inline std::pair<std::int64_t, std::int64_t> matrix_shape(const ir::Buffer& b) {
  auto s = b.const_shape();
  std::int64_t rows = 1;
  for (size_t i = 0; i + 1 < s.size(); ++i) rows *= s[i];
  return {rows, s.back()};
}

// `b`'s layout: swizzled for ldmatrix and cp.async, or row-major.
inline void set_shared_layout(PassContext& ctx, const ir::Buffer& b, bool swizzled) {
  auto [rows, cols] = matrix_shape(b);
  ctx.shared_layouts[b->id] = swizzled ? SharedLayout::swizzled_for(rows, cols, dtype_bytes(b->dtype))
                                       : SharedLayout::row_major(rows, cols);
}

}  // namespace tessel::ops
