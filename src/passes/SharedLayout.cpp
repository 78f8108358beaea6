// SharedLayout's device type and description (PassContext.hpp): the one place a shared tile's
// layout value becomes the name of a device header's layout type (device/tessel/layout.cuh,
// wgmma.cuh).
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

}  // namespace tessel::passes
