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

// The barrier block-wide device code (reductions across warps, staged epilogues) synchronizes
// with: __syncthreads, or -- in a warp-specialized kernel, whose generated code defines
// TESSEL_CONSUMER_THREADS -- named barrier 1 over the consumer warpgroups, which run all such
// code while the producer warpgroup issues loads and never reaches it.
__device__ inline void block_sync() {
#ifdef TESSEL_CONSUMER_THREADS
  asm volatile("bar.sync 1, %0;" ::"n"(TESSEL_CONSUMER_THREADS) : "memory");
#else
  __syncthreads();
#endif
}

}  // namespace tessel
