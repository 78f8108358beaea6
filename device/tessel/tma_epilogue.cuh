// The TMA-store epilogue of generic kernels (the compiler's plan_tma_stores / ops/Copy.cpp): a
// wgmma accumulator tile (WarpgroupGemm's layout: warps stacked along M in 16-row strips, so that
// consumer warpgroup c owns the 64-row blocks c, c + C, c + 2 C, ... of the BM x BN tile, C
// warpgroups) goes to a 16-bit global tensor through a staging tile in shared memory and TMA
// stores, so that the warpgroup goes on (to its next tile, in a persistent kernel) while the
// stores drain.
//
// Staging: WgmmaSwizzle128Layout<BM, BN, 2> -- 64-column panels of BM rows x 128 bytes, logical
// 16-byte chunk j of row r at physical chunk j ^ (r % 8) -- 1024-byte aligned. A 64-row block b
// of panel p is one dense 64 x 128-byte block at p * BM * 128 + b * 64 * 128: exactly what a TMA
// store with a box of {64 columns, 64 rows} and the 128-byte swizzle reads.
//
// Per call, in each consumer warpgroup: its first thread waits until the warpgroup's previous
// stores have read the staging rows (cp.async.bulk.wait_group.read 0); named barrier
// kBarrierBase + c (128 threads) orders the warpgroup after that wait; stmatrix writes the
// accumulators (an m8n8 matrix of 16-bit pairs is exactly a quad-row of the wgmma fragment);
// every thread fences its writes for the async proxy; the named barrier again; then the first
// thread issues one TMA store per panel and 64-row block of its own and commits them as one group. TMA clips
// what lies past the tensor's edges. Before the kernel ends, drain_tma_stores() makes each warpgroup's first
// thread wait for its stores to finish reading shared memory.
#pragma once

#include "accumulator.cuh"
#include "mbarrier.cuh"
#include "smem.cuh"
#include "tma.cuh"
#include "types.cuh"

namespace tessel {

// Named barriers 12..15: one per consumer warpgroup (the generic kernels' block barrier of the
// consumers is 1, ping-pong turns take 2 and 3).
inline constexpr unsigned kTmaEpilogueBarrierBase = 12;

// acc: this thread's registers of the Gemm's BM x BN accumulator (Gemm::kAccPerThread = BN / 2 per
// 64-row block, the layout AccumulatorLayout<BM, BN, 4 C, 1, BM > 64 C>), f32 or a 16-bit tile computed from
// one element by element (an epilogue's output); staging: BM * BN elements of shared memory, 1024-byte
// aligned; map: the output tensor's map of Rank dimensions (a box of 64 along the tile's rows and columns, 1
// along the others; 128-byte swizzle); c0..c4: where the tile starts in the tensor, innermost dimension
// first, ColAxis and RowAxis the tile's columns and rows among them. Every consumer thread calls it.
template <class TOut, class Gemm, class TAcc = float, int Rank = 2, int ColAxis = 0, int RowAxis = 1>
__device__ inline void store_accumulators_tma(const TAcc (&acc)[Gemm::kAccPerThread], TOut* staging,
                                              const TmaDescriptor* map, int c0, int c1, int c2 = 0, int c3 = 0,
                                              int c4 = 0) {
  static_assert(ColAxis >= 0 && ColAxis < Rank && RowAxis >= 0 && RowAxis < Rank && ColAxis != RowAxis,
                "store_accumulators_tma: the tile's column and row axes are two of the map's Rank axes");
  constexpr int BM = Gemm::kBM, BN = Gemm::kBN;
  static_assert(is_mma_16bit<TOut>::value, "store_accumulators_tma: the output must be 16-bit");
  static_assert(
      Gemm::kWarpsN == 1 && Gemm::kWarpsM % 4 == 0 && (Gemm::kMmaM == 1 || Gemm::kInterleaved),
      "store_accumulators_tma: a wgmma accumulator (warpgroups along M, their warps in 16-row strips)");
  static_assert(BN % 64 == 0 && Gemm::kWarpsM / 4 <= 4,
                "store_accumulators_tma: at most 4 warpgroups (named barriers 12..15) and 64-column panels");
  constexpr int kBlocks = Gemm::kMmaM;  // 64-row blocks a warpgroup owns
  const unsigned base = smem_address(staging);
  const int c_wg = threadIdx.x / 128, t = threadIdx.x % 128;
  if (t == 0) tma_store_wait_read<0>();
  named_barrier_sync(kTmaEpilogueBarrierBase + c_wg, 128);
  // Matrix m = lane / 8 of the x4 store is 8-column block 2 g16 + m / 2, row half m % 2; lane L
  // gives the address of row L % 8 of matrix L / 8.
  const int lane = t % 32, m = lane / 8, warp = threadIdx.x / 32;
#pragma unroll
  for (int mi = 0; mi < kBlocks; ++mi) {
    const int r = Gemm::block_row(mi, warp) + 8 * (m % 2) + lane % 8;
#pragma unroll
    for (int g16 = 0; g16 < BN / 16; ++g16) {
      unsigned w[4];
#pragma unroll
      for (int v = 0; v < 4; ++v) {
        const int i = mi * (BN / 2) + 4 * (2 * g16 + v / 2) + 2 * (v % 2);
        w[v] = pack2<TOut>(float(to_float(acc[i])), float(to_float(acc[i + 1])));
      }
      const int g8 = 2 * g16 + m / 2, chunk = g8 % 8, panel = g8 / 8;
      const unsigned addr = base + panel * (BM * 128) + r * 128 + ((chunk ^ (r % 8)) * 16);
      asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(w[0]),
                   "r"(w[1]), "r"(w[2]), "r"(w[3])
                   : "memory");
    }
  }
  fence_proxy_async_shared();
  named_barrier_sync(kTmaEpilogueBarrierBase + c_wg, 128);
  if (t == 0) {
#pragma unroll
    for (int mi = 0; mi < kBlocks; ++mi) {
      const int row0 = Gemm::block_row(mi, 4 * c_wg);  // the warpgroup's mi-th 64-row block
#pragma unroll
      for (int p = 0; p < BN / 64; ++p) {
        int c[5] = {c0, c1, c2, c3, c4};
        c[ColAxis] += 64 * p;
        c[RowAxis] += row0;
        tma_store_nd<Rank>(map, base + p * (BM * 128) + row0 * 128, c);
      }
    }
    tma_store_commit();
  }
}

// Each warpgroup's stores have read the staging tile: shared memory may go away (kernel end).
__device__ inline void drain_tma_stores() {
  if (threadIdx.x % 128 == 0) tma_store_wait<0>();
}

}  // namespace tessel
