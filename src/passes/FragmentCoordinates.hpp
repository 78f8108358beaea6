// Where register l of the calling thread sits in its fragment: the one definition of every
// fragment layout's element mapping (see FragmentLayout), shared by every pass that walks a
// fragment's registers.
#pragma once

#include <vector>

#include "passes/PassContext.hpp"

namespace tessel::passes {

// The coordinates (one per dimension) of register `l` of thread `tx`.
std::vector<ir::Expr> fragment_coordinates(const FragmentLayout& layout, const ir::Expr& l,
                                           const ir::Expr& tx, int threads);

// A condition that is false for registers past the fragment's end (strided layouts whose size
// is not a multiple of the thread count); undefined when every register holds an element.
ir::Expr fragment_register_valid(const FragmentLayout& layout, const ir::Expr& l, const ir::Expr& tx,
                                 int threads);

// Whether two fragments put every element in the same register of the same thread. Gemm tiles
// compare by shape and warp split: every AccumulatorLayout of one (shape, warps) is one layout,
// whichever gemm (or none) it belongs to.
bool same_fragment_layout(const FragmentLayout& a, const FragmentLayout& b);

}  // namespace tessel::passes
