// The pieces the compiler's Hopper pipelines are printed with (sm_90a): TMA loads of a tile
// out of an N-D tensor into a ring stage, completing on the stage's mbarrier. The protocol
// itself (which thread waits, arrives and issues, with which parity) is the generated code's:
// passes decide it (plan_pipelines, specialize_warps, insert_barriers) and print it as calls
// into mbarrier.cuh.
//
// A tile is Rows x Cols elements of a tensor whose last dimension holds the columns; in
// shared memory it has the WgmmaSwizzleLayout of its swizzle (hopper_layout.cuh): panels of
// PanelCols columns (the swizzle's width), each a dense Rows x SwizzleBytes block. A TMA box
// with that swizzle writes exactly one panel, so the tile takes one box per panel, the boxes'
// innermost coordinate stepping by PanelCols.
#pragma once

#include "mbarrier.cuh"
#include "smem.cuh"
#include "tma.cuh"

namespace tessel {

// Global -> shared box of a Rank-dimensional tensor map at coordinates c (innermost first;
// past the tensor's edges it reads zeros), completing on the mbarrier at `bar`.
template <int Rank>
__device__ inline void tma_load_box(unsigned dst, const TmaDescriptor* desc, unsigned bar,
                                    const int (&c)[5]) {
  static_assert(Rank >= 1 && Rank <= 5, "tma_load_box<Rank>: tensor maps have 1 to 5 dimensions");
  const unsigned long long d = tma_desc_address(desc);
  if constexpr (Rank == 1) {
    asm volatile(
        "cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3}], "
        "[%2];" ::"r"(dst),
        "l"(d), "r"(bar), "r"(c[0])
        : "memory");
  } else if constexpr (Rank == 2) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, "
        "%4}], "
        "[%2];" ::"r"(dst),
        "l"(d), "r"(bar), "r"(c[0]), "r"(c[1])
        : "memory");
  } else if constexpr (Rank == 3) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, "
        "%4, %5}], "
        "[%2];" ::"r"(dst),
        "l"(d), "r"(bar), "r"(c[0]), "r"(c[1]), "r"(c[2])
        : "memory");
  } else if constexpr (Rank == 4) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, "
        "%4, %5, "
        "%6}], [%2];" ::"r"(dst),
        "l"(d), "r"(bar), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3])
        : "memory");
  } else {
    asm volatile(
        "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, "
        "%4, %5, "
        "%6, %7}], [%2];" ::"r"(dst),
        "l"(d), "r"(bar), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4])
        : "memory");
  }
}

// A tile of Panels panels: box p at innermost coordinate c0 + p * PanelCols into byte
// p * PanelBytes of the tile. Coordinates innermost first (c0 the column); unused ones are 0.
template <int Rank, int Panels, int PanelCols, int PanelBytes, class T>
__device__ inline void tma_load_tile(T* dst, const TmaDescriptor* desc, long long* bar, int c0, int c1 = 0,
                                     int c2 = 0, int c3 = 0, int c4 = 0) {
  static_assert(Panels >= 1, "tma_load_tile: a tile has at least one panel");
  const unsigned d = smem_address(dst), b = smem_address(bar);
#pragma unroll
  for (int p = 0; p < Panels; ++p) {
    const int c[5] = {c0 + p * PanelCols, c1, c2, c3, c4};
    tma_load_box<Rank>(d + p * PanelBytes, desc, b, c);
  }
}

// The consumers' release of a ring stage: one arrival per warp, once all its threads are done.
__device__ inline void mbarrier_warp_arrive(long long* bar) {
  __syncwarp();
  if ((threadIdx.x & 31) == 0) mbarrier_arrive(smem_address(bar));
}

}  // namespace tessel
