// What lowering a tile op needs (TileOp::lower), and the helpers copy and fill share.
#pragma once

#include <source_location>
#include <string>
#include <utility>
#include <vector>

#include "passes/FragmentCoordinates.hpp"
#include "passes/GlobalRegions.hpp"
#include "passes/IntBounds.hpp"
#include "passes/PassContext.hpp"
#include "passes/PassUtil.hpp"
#include "tessel/Error.hpp"
#include "tessel/ir/IR.hpp"
#include "tessel/ir/Printer.hpp"

namespace tessel::ops {

// The pass context (layouts, register arrays, TMA maps, the thread index) and the ranges index
// expressions draw from (the thread index, a static grid's block indices, the enclosing loops of
// static extent), which lower_tile_ops keeps as it walks the program.
struct LowerContext {
  passes::PassContext& ctx;
  passes::VarRanges& ranges;
};

using namespace ir;
using namespace passes;
using passes::i64;  // the cast helper, not the DType constant tessel::i64

// The last two extents of a region (the matrix a copy or gemm moves); leading ones are 1.
inline std::pair<std::int64_t, std::int64_t> matrix_extents(const ir::Region& r, std::source_location where,
                                                            const char* op) {
  std::vector<std::int64_t> e;
  for (const Expr& x : r.extents) e.push_back(*as_const_int(x));
  while (e.size() > 2 && e.front() == 1) e.erase(e.begin());
  if (e.size() == 1) e.insert(e.begin(), 1);
  if (e.size() != 2)
    TESSEL_USER_ERROR(op, where,
                      "the region " << to_string(r) << " is not 2-D; this version copies 2-D tiles");
  return {e[0], e[1]};
}

inline std::string dtype_cuda(DType t) {
  return std::string(dtype_cuda_name(t));
}

// Whether a region is the whole of its buffer.
inline bool covers_whole_buffer(const ir::Region& r) {
  for (size_t d = 0; d < r.starts.size(); ++d)
    if (!is_const_int(r.starts[d], 0) || as_const_int(r.extents[d]) != as_const_int(r.buffer->shape[d]))
      return false;
  return true;
}

// A region start that can be negative: its range (block, thread and loop variables in theirs)
// is known and reaches below 0 (bx * 4 - 2, a constant -3, -(row % 8)). A start whose range is
// not known (a rasterized tile index) counts as >= 0, as it always has.
inline bool may_be_negative(const Expr& start, const passes::VarRanges& ranges) {
  auto b = passes::int_bounds(start, ranges);
  return b && b->lo < 0;
}
inline bool starts_nonnegative(const ir::Region& r, const passes::VarRanges& ranges) {
  for (const Expr& e : r.starts)
    if (may_be_negative(e, ranges)) return false;
  return true;
}

// Whether indices `idx` into region r's global buffer lie inside it: below each dimension's
// extent, and >= 0 in the dimensions whose start may be negative (undefined: always; not a
// global buffer, or provably inside).
inline ir::Expr in_bounds(const ir::Region& r, const std::vector<Expr>& idx, const passes::VarRanges& ranges) {
  const Buffer& b = r.buffer;
  if (b->scope != Scope::Global) return Expr();
  Expr cond;
  for (size_t d = 0; d < idx.size(); ++d) {
    Expr c = lt(idx[d], b->shape[d]);
    if (!is_const_int(c, 1)) cond = cond.defined() ? make_binary(BinaryOp::And, cond, c) : c;
    if (d < r.starts.size() && may_be_negative(r.starts[d], ranges)) {
      Expr low = make_binary(BinaryOp::GE, idx[d], make_int(0));
      cond = cond.defined() ? make_binary(BinaryOp::And, cond, low) : low;
    }
  }
  return cond;
}
// dst[...] = value, dropped when a global index is outside the tensor.
inline ir::Stmt guarded_store(const ir::Region& r, const std::vector<ir::Expr>& idx, const ir::Expr& value,
                              const passes::VarRanges& ranges, std::source_location w) {
  Stmt s = make_store(r.buffer, idx, value, w);
  Expr in = in_bounds(r, idx, ranges);
  return in.defined() ? make_if(in, s, Stmt(), w) : s;
}

// Runs body(indices into r's buffer) for every element of region r, split over threads.
template <class F>
ir::Stmt over_region(const LowerContext& lc, const ir::Region& r, std::source_location w, F&& body) {
  std::vector<std::int64_t> ext;
  std::int64_t numel = 1;
  for (const Expr& e : r.extents) {
    ext.push_back(*as_const_int(e));
    numel *= ext.back();
  }
  const int threads = lc.ctx.threads;
  Var t("t");
  Expr f = add(mul(t, make_int(threads)), lc.ctx.thread_index);
  std::vector<Expr> idx(ext.size());
  std::int64_t stride = 1;
  for (int d = static_cast<int>(ext.size()) - 1; d >= 0; --d) {
    Expr c = stride == 1 ? f : make_binary(BinaryOp::Div, f, make_int(stride));
    if (d > 0) c = make_binary(BinaryOp::Mod, c, make_int(ext[d]));
    idx[d] = add(r.starts[d], c);
    stride *= ext[d];
  }
  Stmt inner = body(idx);
  if (numel % threads) inner = make_if(lt(f, make_int(numel)), inner, Stmt(), w);
  return make_for(t, make_int(0), make_int((numel + threads - 1) / threads), ForKind::Serial, 0, inner, w);
}

}  // namespace tessel::ops
