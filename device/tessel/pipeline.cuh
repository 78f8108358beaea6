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

// tma_load_box into the same shared address of each CTA of the cluster in `mask` (bit r: rank
// r), completing on the mbarrier at `bar` in each.
template <int Rank>
__device__ inline void tma_load_box_multicast(unsigned dst, const TmaDescriptor* desc, unsigned bar,
                                              const int (&c)[5], unsigned short mask) {
  static_assert(Rank >= 2 && Rank <= 5, "tma_load_box_multicast<Rank>: a tile of rows, 2 to 5 dimensions");
  const unsigned long long d = tma_desc_address(desc);
  if constexpr (Rank == 2) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%0], [%1, {%3, %4}], [%2], %5;" ::"r"(dst),
        "l"(d), "r"(bar), "r"(c[0]), "r"(c[1]), "h"(mask)
        : "memory");
  } else if constexpr (Rank == 3) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%0], [%1, {%3, %4, %5}], [%2], %6;" ::"r"(dst),
        "l"(d), "r"(bar), "r"(c[0]), "r"(c[1]), "r"(c[2]), "h"(mask)
        : "memory");
  } else if constexpr (Rank == 4) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%0], [%1, {%3, %4, %5, %6}], [%2], %7;" ::"r"(dst),
        "l"(d), "r"(bar), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "h"(mask)
        : "memory");
  } else {
    asm volatile(
        "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%0], [%1, {%3, %4, %5, %6, %7}], [%2], %8;" ::"r"(dst),
        "l"(d), "r"(bar), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4]), "h"(mask)
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

// The same release of a stage that the producers of all Ctas CTAs of the cluster fill
// (tma_load_tile_multicast): one arrival per warp on the stage's barrier in each of them.
template <int Ctas>
__device__ inline void mbarrier_warp_arrive_cluster(long long* bar) {
  __syncwarp();
  if ((threadIdx.x & 31) == 0) {
    const unsigned b = smem_address(bar);
#pragma unroll
    for (int r = 0; r < Ctas; ++r) mbarrier_arrive_cluster(b, static_cast<unsigned>(r));
  }
}

// tma_load_tile for a tile that is the same in all Ctas CTAs of the cluster: this CTA loads its
// share -- ShareRows of the tile's rows, from row rank * ShareRows, the map's box being that
// share -- of every panel into the same place of every CTA's tile (rows are SwizzleBytes apart
// in a panel, so a share starts rank * ShareBytes into it), completing on the mbarrier at the
// same address in each. RowCoord is the index, innermost first, of the coordinate that counts
// the rows. Every CTA's `bar` expects the whole tile's bytes.
template <int Rank, int Panels, int PanelCols, int PanelBytes, int Ctas, int RowCoord, int ShareRows,
          int ShareBytes, class T>
__device__ inline void tma_load_tile_multicast(T* dst, const TmaDescriptor* desc, long long* bar, int c0,
                                               int c1 = 0, int c2 = 0, int c3 = 0, int c4 = 0) {
  static_assert(Panels >= 1 && Ctas >= 2 && Ctas <= 16, "tma_load_tile_multicast: 2 to 16 CTAs");
  static_assert(RowCoord >= 1 && RowCoord < Rank, "tma_load_tile_multicast: the rows' coordinate");
  const unsigned rank = cluster_ctarank();
  const unsigned d = smem_address(dst) + rank * ShareBytes, b = smem_address(bar);
  constexpr unsigned short kMask = static_cast<unsigned short>((1u << Ctas) - 1);
#pragma unroll
  for (int p = 0; p < Panels; ++p) {
    int c[5] = {c0 + p * PanelCols, c1, c2, c3, c4};
    c[RowCoord] += static_cast<int>(rank) * ShareRows;
    tma_load_box_multicast<Rank>(d + p * PanelBytes, desc, b, c, kMask);
  }
}

}  // namespace tessel
