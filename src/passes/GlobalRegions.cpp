#include "passes/GlobalRegions.hpp"

#include "passes/PassUtil.hpp"

namespace tessel::passes {

using namespace ir;

// Element offset of a region's start inside its buffer (row-major, or the global tensor's
// strides).
Expr linear_offset(const Region& r) {
  if (r.buffer.row_major()) {
    Expr off = make_int(0, DType::i64);
    for (size_t d = 0; d < r.starts.size(); ++d)
      off = add(mul(off, i64(r.buffer->shape[d])), i64(r.starts[d]));
    return off;
  }
  const std::vector<Expr> strides = r.buffer.strides();
  Expr off = make_int(0, DType::i64);
  for (size_t d = 0; d < r.starts.size(); ++d) off = add(off, mul(i64(r.starts[d]), strides[d]));
  return off;
}

std::optional<GlobalMatrix> global_matrix(const Region& r) {
  const Buffer& g = r.buffer;
  const int nd = g.ndim();
  GlobalMatrix m;
  m.col_dim = nd - 1;
  for (int d = nd - 2; d >= 0; --d)
    if (!is_const_int(r.extents[d], 1)) {
      if (m.row_dim >= 0) return std::nullopt;  // a third dimension of extent > 1
      m.row_dim = d;
    }
  const std::vector<Expr> strides = g.strides();
  m.col_start = r.starts[m.col_dim];
  m.cols_valid = sub(g->shape[m.col_dim], m.col_start);
  m.col_stride = strides[m.col_dim];
  // Dimensions of extent 1 other than the columns: the matrix exists only where their index
  // is inside the tensor.
  Expr inside;
  for (int d = 0; d + 1 < nd; ++d) {
    if (d == m.row_dim) continue;
    Expr c = lt(r.starts[d], g->shape[d]);
    if (is_const_int(c, 1)) continue;
    inside = inside.defined() ? make_binary(BinaryOp::And, inside, c) : c;
  }
  if (m.row_dim >= 0) {
    m.row_start = r.starts[m.row_dim];
    m.rows_valid = sub(g->shape[m.row_dim], m.row_start);
    m.ld = strides[m.row_dim];
  } else {
    m.row_start = make_int(0);
    m.rows_valid = make_int(1);
    m.ld = make_int(0, DType::i64);
  }
  if (inside.defined()) m.rows_valid = make_select(inside, m.rows_valid, make_int(0));
  m.offset = linear_offset(r);
  return m;
}

}  // namespace tessel::passes
