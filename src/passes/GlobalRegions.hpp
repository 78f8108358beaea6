// Regions of global tensors as the copies move them: a region's element offset, and the 2-D
// matrix (rows, columns, their strides and how much of each lies inside the tensor) that a
// region of an N-D tensor with at most two extents > 1 describes.
#pragma once

#include <optional>

#include "tessel/ir/IR.hpp"

namespace tessel::passes {

// Element offset of a region's start inside its buffer (row-major, or the global tensor's
// strides), in i64.
ir::Expr linear_offset(const ir::Region& r);

// The matrix a region of a global tensor moves: its last dimension is the columns, the last
// other dimension of extent > 1 the rows (none: one row), every other extent 1 -- so a
// [1, BM, 1, D] region of a [B, S, H, D] tensor is a BM x D matrix of rows S and columns D.
struct GlobalMatrix {
  int row_dim = -1, col_dim = -1;
  ir::Expr row_start, col_start;    // where the matrix starts in those dims
  ir::Expr rows_valid, cols_valid;  // rows / columns inside the tensor from there (may be <= 0)
  ir::Expr ld;                      // elements from one row to the next
  ir::Expr col_stride;              // elements from one column to the next (1: contiguous rows)
  ir::Expr offset;                  // element offset of the region's start
};
// nullopt when the region has more than two dimensions of extent > 1.
std::optional<GlobalMatrix> global_matrix(const ir::Region& r);

}  // namespace tessel::passes
