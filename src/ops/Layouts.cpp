// The layout helpers infer_layouts and the ops share (Layouts.hpp).
#include "ops/Layouts.hpp"

namespace tessel::ops {

FragmentLayout strided_layout(const ir::Buffer& b, int threads) {
  FragmentLayout f;
  f.kind = FragmentLayout::Kind::Strided;
  f.shape = b.const_shape();
  f.per_thread = static_cast<int>((b.const_numel() + threads - 1) / threads);
  return f;
}

std::optional<FragmentLayout> row_layout_of(const FragmentLayout& l) {
  FragmentLayout r = l;
  switch (l.kind) {
    case FragmentLayout::Kind::RowOf:
    case FragmentLayout::Kind::AccumulatorRows:
    case FragmentLayout::Kind::FlatRowOf:
      return l;
    case FragmentLayout::Kind::FlatRows:
      r.kind = FragmentLayout::Kind::FlatRowOf;
      r.shape = {l.shape[0]};
      r.per_thread = 2;
      return r;
    case FragmentLayout::Kind::RowBlocked:
      r.kind = FragmentLayout::Kind::RowOf;
      r.shape = {l.shape[0]};
      r.per_thread = static_cast<int>(l.shape[0] / l.rows_per_pass);
      return r;
    case FragmentLayout::Kind::GemmAccumulator:
      if (l.warps_n != 1) return std::nullopt;
      r.kind = FragmentLayout::Kind::AccumulatorRows;
      r.shape = {l.shape[0]};
      r.per_thread = static_cast<int>(l.shape[0] / l.warps_m / kMmaM * 2);
      r.wgmma = false;
      r.gemm = l.accumulator_layout(l.shape[0], l.shape[1]);
      return r;
    case FragmentLayout::Kind::Strided:
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace tessel::ops
