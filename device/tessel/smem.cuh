// Shared-memory addresses for PTX instructions that take a .shared operand.
//
// cp.async and ldmatrix want a 32-bit shared-window address. Converting once with
// cvta.to.shared and passing a 32-bit register lets ptxas fold constant tile offsets into
// the instruction's immediate, which a generic 64-bit pointer would not.
#pragma once

namespace tessel {

__device__ inline unsigned int smem_address(const void* p) {
  return static_cast<unsigned int>(__cvta_generic_to_shared(p));
}

}  // namespace tessel
