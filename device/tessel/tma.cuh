// TMA (the tensor memory accelerator, sm_90): bulk tensor copies between global and shared
// memory described by a CUtensorMap that the host encodes.
//
// The tensor map is 128 opaque bytes, 64-byte aligned. Kernels take it BY VALUE as a
// `const __grid_constant__ TmaDescriptor` parameter (so it lives in the kernel parameter
// space and its generic address is valid for the TMA unit) -- never through a pointer to
// global memory written at run time, which would need a proxy fence first.
//
// Host side (driver API cuTensorMapEncodeTiled, loaded with dlopen by the runtime) for a
// row-major 2-D tensor X[rows][cols] of 16-bit elements, tile box {box_cols, box_rows}:
//   tensorDataType   CU_TENSOR_MAP_DATA_TYPE_FLOAT16 (f16) or _BFLOAT16 (bf16)
//   tensorRank       2
//   globalAddress    X (16-byte aligned)
//   globalDim        {cols, rows}                      (innermost first)
//   globalStrides    {cols * 2}  (rank-1 entries: the byte stride of dim 1; % 16 == 0)
//   boxDim           {box_cols, box_rows}; with SWIZZLE_128B box_cols * 2 <= 128, so 64
//   elementStrides   {1, 1}
//   interleave       CU_TENSOR_MAP_INTERLEAVE_NONE
//   swizzle          CU_TENSOR_MAP_SWIZZLE_128B (matches WgmmaSwizzle128Layout)
//   l2Promotion      CU_TENSOR_MAP_L2_PROMOTION_L2_256B
//   oobFill          CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE (out-of-bounds elements read as 0)
// Coordinates passed to the copies below are element indices {col, row}, innermost first;
// they may be out of range (the box is clipped: zero fill on loads, dropped on stores), and
// a load still counts the FULL box bytes toward the mbarrier's transaction count.
#pragma once

#include "smem.cuh"

namespace tessel {

struct alignas(64) TmaDescriptor {
  unsigned long long opaque[16];
};
static_assert(sizeof(TmaDescriptor) == 128, "TmaDescriptor must have the size of CUtensorMap (128 bytes)");

__device__ inline unsigned long long tma_desc_address(const TmaDescriptor* desc) {
  return reinterpret_cast<unsigned long long>(desc);
}

// Fetches the descriptor into the TMA unit's cache ahead of the first copy.
__device__ inline void tma_prefetch_descriptor(const TmaDescriptor* desc) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(tma_desc_address(desc)) : "memory");
}

// Global -> shared, 2-D box at element coordinates (c0 = innermost, c1); completion is
// signalled on the mbarrier `bar` (complete_tx of the box's byte count). One thread issues.
// dst: shared-window address, 128-byte aligned (1024 for the 128B swizzle).
__device__ inline void tma_load_2d(unsigned dst, const TmaDescriptor* desc, unsigned bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];" ::"r"(dst),
      "l"(tma_desc_address(desc)), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
}

// The same box written to the same shared offset of every CTA in `cta_mask` (bit i = cluster
// rank i), each completing on ITS mbarrier at offset `bar`: operands shared by the CTAs of
// a cluster are read from L2 once.
__device__ inline void tma_load_2d_multicast(unsigned dst, const TmaDescriptor* desc, unsigned bar, int c0,
                                             int c1, unsigned short cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%3, %4}], [%2], %5;" ::"r"(dst),
      "l"(tma_desc_address(desc)), "r"(bar), "r"(c0), "r"(c1), "h"(cta_mask)
      : "memory");
}

// Shared -> global, 2-D box; out-of-range parts of the box are not written, so a tile on
// the matrix edge needs no masking. The writing threads must have executed
// fence_proxy_async_shared() and synchronized before one thread issues this.
__device__ inline void tma_store_2d(const TmaDescriptor* desc, unsigned src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
                   tma_desc_address(desc)),
               "r"(src), "r"(c0), "r"(c1)
               : "memory");
}

// The same for a box of an N-D tensor (Rank 2 to 5): coordinates c[0..Rank), innermost first.
template <int Rank>
__device__ inline void tma_store_nd(const TmaDescriptor* desc, unsigned src, const int (&c)[5]) {
  static_assert(Rank >= 2 && Rank <= 5, "tma_store_nd<Rank>: a tensor map has 2 to 5 dimensions here");
  const unsigned long long d = tma_desc_address(desc);
  if constexpr (Rank == 2) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(d), "r"(src),
                 "r"(c[0]), "r"(c[1])
                 : "memory");
  } else if constexpr (Rank == 3) {
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];" ::"l"(d),
                 "r"(src), "r"(c[0]), "r"(c[1]), "r"(c[2])
                 : "memory");
  } else if constexpr (Rank == 4) {
    asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];" ::"l"(d),
                 "r"(src), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3])
                 : "memory");
  } else {
    asm volatile("cp.async.bulk.tensor.5d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5, %6}], [%1];" ::"l"(d),
                 "r"(src), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4])
                 : "memory");
  }
}

// Store bookkeeping (per issuing thread): commit the stores issued so far into a group;
// wait until at most N groups are still READING shared memory (the source may then be
// overwritten), or, for the full variant, until they are complete.
__device__ inline void tma_store_commit() {
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
template <int N>
__device__ inline void tma_store_wait_read() {
  static_assert(N >= 0 && N <= 7, "tma_store_wait_read<N>: N must be in 0..7");
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}
template <int N>
__device__ inline void tma_store_wait() {
  static_assert(N >= 0 && N <= 7, "tma_store_wait<N>: N must be in 0..7");
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
}

}  // namespace tessel
