// Checks and descriptions the tile ops' verify() share (src/ops/).
#pragma once

#include <optional>
#include <source_location>
#include <string>
#include <vector>

#include "tessel/ir/IR.hpp"

namespace tessel::ops {

// "[64, 32]"
std::string shape_str(const std::vector<ir::Expr>& v);
// "A_s (shared f16[64, 32])"
std::string buffer_desc(const ir::Buffer& b);
// Extents without leading 1s: [1, 128, 32] and [128, 32] describe the same tile.
std::vector<ir::Expr> squeeze(const std::vector<ir::Expr>& e);
// Whether two regions' extents agree once every extent of 1 is dropped.
bool same_extents(const std::vector<ir::Expr>& a, const std::vector<ir::Expr>& b);
// Fits `extents` (taken from the other side of a copy) to a region of `ndim` dimensions.
std::optional<std::vector<ir::Expr>> fit_extents(std::vector<ir::Expr> extents, size_t ndim);
// A region of a tile must stay inside it (CompileError naming `op` at `where`); a region of a
// global tensor may run past the edge (copies mask it).
void check_inside(const ir::Region& r, const char* op, std::source_location where);

}  // namespace tessel::ops
