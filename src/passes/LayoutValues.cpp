// The layout values' device types (PassContext.hpp): the one place a shared tile's layout
// (SharedLayout) or a gemm tile's register owner (GemmEngine) becomes the name of a device
// header's type (device/tessel/layout.cuh, accumulator.cuh, gemm.cuh, warpgroup_gemm.cuh).
#include "passes/PassContext.hpp"

namespace tessel::passes {

std::string SharedLayout::device_type() const {
  const std::string r = std::to_string(rows), c = std::to_string(cols);
  switch (kind) {
    case Kind::RowMajor:
      return "tessel::RowMajorLayout<" + r + ", " + c + ">";
    case Kind::Swizzled:
      return "tessel::SwizzledLayout<" + r + ", " + c + ", " + std::to_string(elem_bytes) + ">";
    case Kind::WgmmaSwizzle:
      return "tessel::WgmmaSwizzleLayout<" + r + ", " + c + ", " + std::to_string(elem_bytes) + ", " +
             std::to_string(swizzle_bytes) + ">";
  }
  return "";
}

std::string SharedLayout::describe() const {
  const std::string shape = std::to_string(rows) + "x" + std::to_string(cols);
  switch (kind) {
    case Kind::RowMajor:
      return "row-major " + shape;
    case Kind::Swizzled:
      return "swizzled " + shape + " (" + std::to_string(elem_bytes) + "-byte elements)";
    case Kind::WgmmaSwizzle:
      return "wgmma " + std::to_string(swizzle_bytes) + "-byte swizzle " + shape + " (" +
             std::to_string(elem_bytes) + "-byte elements)";
  }
  return "";
}

std::string FragmentLayout::describe() const {
  auto n = [](std::int64_t v) { return std::to_string(v); };
  switch (kind) {
    case Kind::GemmAccumulator:
      return "gemm accumulator, warps " + n(warps_m) + "x" + n(warps_n) + (wgmma ? " (wgmma)" : "") +
             (gemm.interleaved ? ", 16-row strips every " + n(16 * warps_m) + " rows" : "");
    case Kind::AccumulatorRows:
      return "rows of a gemm tile, warps " + n(warps_m) + "x1" +
             (gemm.interleaved ? ", 16-row strips every " + n(16 * warps_m) + " rows" : "");
    case Kind::RowBlocked:
      return "rows over " + n(lanes) + " lanes, " + n(chunks) + "x" + n(vec) + " elements a lane, " +
             n(rows_per_pass) + " rows a pass";
    case Kind::RowOf:
      return "row vector over " + n(lanes) + " lanes";
    case Kind::FlatRows:
      return "flat rows, a run of " + n(chunks) + " words of " + n(vec) + " a thread";
    case Kind::FlatRowOf:
      return "row vector beside flat rows, the 2 rows of a thread's run";
    case Kind::Strided:
      return "strided over threads";
  }
  return "?";
}

std::string GemmEngine::device_type() const {
  auto n = [](std::int64_t v) { return std::to_string(v); };
  if (kind == Kind::AccumulatorLayout)
    return "tessel::AccumulatorLayout<" + n(rows) + ", " + n(cols) + ", " + n(warps_m) + ", " + n(warps_n) +
           (interleaved ? ", true>" : ">");
  const std::string dims = dtype + ", " + n(rows) + ", " + n(cols) + ", " + n(k) + ", ";
  const std::string operands = std::string(trans_a ? "true" : "false") + ", " + (trans_b ? "true" : "false") +
                               ", " + a.device_type() + ", " + b.device_type() + ">";
  if (kind == Kind::WarpgroupGemm) return "tessel::WarpgroupGemm<" + dims + n(warpgroups) + ", " + operands;
  std::string block = "tessel::BlockGemm<" + dims + n(warps_m) + ", " + n(warps_n) + ", " + operands;
  if (k_chains > 1) block.insert(block.size() - 1, ", " + n(k_chains));
  return block;
}

}  // namespace tessel::passes
