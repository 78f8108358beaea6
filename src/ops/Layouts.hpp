// What a tile op's layout inference needs (TileOp::infer_layouts), and the layout helpers
// infer_layouts and the ops share.
#pragma once

#include <cstdint>
#include <optional>
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

// When infer_layouts asks an op for its layouts (TileOp::infer_layouts). Strict: before anything
// is propagated -- gemm fixes its tiles' layouts and its instruction, a copy between a fragment
// and global memory narrows the vector width row-blocked tiles use. Common: once the layouts
// that follow gemms are propagated and 2-D tiles are row-blocked -- a reduction's result follows
// the rows of its source.
enum class LayoutLevel { Strict, Common };

// The pass context, what infer_layouts' scans found about the program as a whole, and what the
// ops gather on the way.
struct LayoutContext {
  PassContext& ctx;
  // Accumulators whose warps must split M alone (their rows become a register A operand or are
  // reduced), by buffer id (infer_layouts' RowOperandScan).
  const std::set<int>& row_operand_tiles;
  // Tiles that keep one warp layout with other gemms' operands or tiles: those of them that
  // become a later gemm's register A operand (not only reduced), and gemm accumulators linked
  // element by element with another gemm's (infer_layouts' RowOperandScan::shared_layout_tiles).
  const std::set<int>& shared_layout_tiles;
  // Gemms that are the sole compute of a Pipelined loop filling both their operands: they stay
  // on BlockGemm's mma.sync main loop (infer_layouts' MainLoopGemmScan).
  const std::set<const ir::GemmStmt*>& main_loop_gemms;
  // The elements of a 16-byte vector of the narrowest global dtype a fragment exchanges with
  // (copies, at Strict); past 16 when none does (infer_layouts then takes 4, f32 vectors).
  int vec = 1 << 20;
};

// `b` spread flat over `threads`: element f in thread f % threads, register f / threads.
FragmentLayout strided_layout(const ir::Buffer& b, int threads);
// The layout a row vector beside a tile of layout `l` takes (nullopt: none): a reduction's
// result, or a 1-D fragment used beside the tile.
std::optional<FragmentLayout> row_layout_of(const FragmentLayout& l);

// The 2-D matrix a shared buffer holds: [prod(leading dims), last dim].
inline std::pair<std::int64_t, std::int64_t> matrix_shape(const ir::Buffer& b) {
  auto s = b.const_shape();
  std::int64_t rows = 1;
  for (size_t i = 0; i + 1 < s.size(); ++i) rows *= s[i];
  return {rows, s.back()};
}

// The WgmmaSwizzleLayout a wgmma descriptor reads shared tile `b` through (K-major tiles
// swizzle by their row size, 128, 64 or 32 bytes; M/N-major ones need 128-byte panels), or
// nullopt when there is none (ops/Gemm.cpp).
std::optional<SharedLayout> wgmma_layout(const ir::Buffer& b, bool k_major);

// `b`'s layout: swizzled for ldmatrix and cp.async, or row-major.
inline void set_shared_layout(PassContext& ctx, const ir::Buffer& b, bool swizzled) {
  auto [rows, cols] = matrix_shape(b);
  ctx.shared_layouts[b->id] = swizzled ? SharedLayout::swizzled_for(rows, cols, dtype_bytes(b->dtype))
                                       : SharedLayout::row_major(rows, cols);
}

}  // namespace tessel::ops
