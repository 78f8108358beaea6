// Block-cooperative tile copies between global memory and a shared tile.
//
// Every thread of the block calls these with the same arguments. Global tiles are
// row-major with leading dimension `ld` (elements); `gmem` points at the tile's (0, 0).
// Element (r, c) exists iff r < rows_valid && c < cols_valid; either bound may be <= 0 or
// larger than the tile. Missing elements read as zero, so a GEMM over a ragged edge needs no
// masking in its math.
//
// Thread-to-data mapping: consecutive threads take consecutive 16-byte chunks (or elements)
// of a row, so each warp reads whole 128-byte lines of global memory and writes one
// conflict-free shared wavefront per 8 threads (see SwizzledLayout).
#pragma once

#include "cp_async.cuh"
#include "layout.cuh"

namespace tessel {

namespace copy_detail {

__host__ __device__ constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Scalar path: elements are loaded in batches into registers and then stored, so that the
// loads of a batch are in flight together (the compiler cannot reorder a global load past a
// shared store it cannot prove disjoint). A batch of 8 keeps register use small because a
// GEMM's accumulators are live across the copy.
constexpr int kScalarBatch = 8;

}  // namespace copy_detail

// Global -> shared.
// Vectorized: 16-byte cp.async per chunk, asynchronous: the caller commits and waits
//   (cp_async_commit / cp_async_wait) and then barriers. Requires ld * sizeof(T) % 16 == 0,
//   a 16-byte aligned gmem and smem, and cols_valid a multiple of 16 / sizeof(T) or >= Cols
//   (a chunk is wholly in or wholly out). gmem must be a valid address even when the whole
//   tile is out of bounds: it is the dummy source of zero-filled chunks.
// !Vectorized: element loads and shared stores, synchronous for the calling thread (a
//   barrier is still needed before other threads read). No alignment requirement.
template <class T, int Rows, int Cols, class Layout, int Threads, bool Vectorized>
__device__ inline void copy_global_to_shared(T* smem, const T* gmem, long long ld,
                                             int rows_valid, int cols_valid) {
  static_assert(Layout::kRows == Rows && Layout::kCols == Cols,
                "copy_global_to_shared: Layout's kRows/kCols must equal Rows/Cols");
  static_assert(Threads > 0 && Threads % 32 == 0,
                "copy_global_to_shared: Threads must be a positive multiple of 32");
  const int tid = threadIdx.x;

  if constexpr (Vectorized) {
    static_assert(16 % sizeof(T) == 0 && (Cols * sizeof(T)) % 16 == 0,
                  "copy_global_to_shared<Vectorized>: a tile row must be a whole number of "
                  "16-byte chunks");
    constexpr int kElemsPerChunk = 16 / sizeof(T);
    constexpr int kChunksPerRow = Cols / kElemsPerChunk;
    if constexpr (Threads % kChunksPerRow == 0) {
      // Each thread keeps one chunk column and walks down the rows, so the column test and
      // (when the row step is a multiple of the swizzle period) the shared offset are
      // computed once.
      constexpr int kRowStep = Threads / kChunksPerRow;
      constexpr int kIters = copy_detail::ceil_div(Rows, kRowStep);
      const int c = (tid % kChunksPerRow) * kElemsPerChunk;
      const int r0 = tid / kChunksPerRow;
      const T* src0 = gmem + r0 * ld + c;
      auto smem_offset = [&](int k) {
        if constexpr (kRowStep % Layout::kRowPeriod == 0) {
          return Layout::offset(r0, c) + k * kRowStep * Cols;
        } else {
          return Layout::offset(r0 + k * kRowStep, c);
        }
      };
      if (rows_valid >= Rows && cols_valid >= Cols) {
        // Interior tile (uniform across the block): no per-chunk predicate or pointer
        // select, which is most of the copy's instructions in a GEMM main loop.
#pragma unroll
        for (int k = 0; k < kIters; ++k) {
          if constexpr (Rows % kRowStep != 0) {
            if (r0 + k * kRowStep >= Rows) break;
          }
          cp_async_16(smem + smem_offset(k), src0 + k * kRowStep * ld, true);
        }
      } else {
        const bool col_in = c < cols_valid;
#pragma unroll
        for (int k = 0; k < kIters; ++k) {
          const int r = r0 + k * kRowStep;
          if constexpr (Rows % kRowStep != 0) {
            if (r >= Rows) break;
          }
          const bool in = col_in && r < rows_valid;
          cp_async_16(smem + smem_offset(k), in ? src0 + k * kRowStep * ld : gmem, in);
        }
      }
    } else {
      constexpr int kChunks = Rows * kChunksPerRow;
#pragma unroll
      for (int k = 0; k < copy_detail::ceil_div(kChunks, Threads); ++k) {
        const int i = tid + k * Threads;
        if constexpr (kChunks % Threads != 0) {
          if (i >= kChunks) break;
        }
        const int r = i / kChunksPerRow;
        const int c = (i % kChunksPerRow) * kElemsPerChunk;
        const bool in = r < rows_valid && c < cols_valid;
        cp_async_16(smem + Layout::offset(r, c), in ? gmem + r * ld + c : gmem, in);
      }
    }
  } else {
    constexpr int kElems = Rows * Cols;
    constexpr int kIters = copy_detail::ceil_div(kElems, Threads);
    constexpr int kBatch = copy_detail::kScalarBatch;
    // Not unrolled across batches: a fully unrolled fallback costs registers that the
    // caller's accumulators need (it spilled in 128x128 GEMMs).
#pragma unroll 1
    for (int k0 = 0; k0 < kIters; k0 += kBatch) {
      T v[kBatch];
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        const int i = tid + (k0 + j) * Threads;
        const int r = i / Cols;
        const int c = i % Cols;
        const bool in = (k0 + j) < kIters && i < kElems && r < rows_valid && c < cols_valid;
        v[j] = in ? gmem[r * ld + c] : T{};
      }
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        const int i = tid + (k0 + j) * Threads;
        if ((k0 + j) < kIters && i < kElems) smem[Layout::offset(i / Cols, i % Cols)] = v[j];
      }
    }
  }
}

// Shared -> global, synchronous, bounds-masked: only elements with r < rows_valid and
// c < cols_valid are written. The caller barriers before the call if other threads wrote
// the tile. Vectorized: 16-byte stores for whole in-bounds chunks (needs ld * sizeof(T) % 16
// == 0 and a 16-byte aligned gmem); chunks cut by cols_valid fall back to element stores.
template <class T, int Rows, int Cols, class Layout, int Threads, bool Vectorized = false>
__device__ inline void copy_shared_to_global(T* gmem, const T* smem, long long ld,
                                             int rows_valid, int cols_valid) {
  static_assert(Layout::kRows == Rows && Layout::kCols == Cols,
                "copy_shared_to_global: Layout's kRows/kCols must equal Rows/Cols");
  static_assert(Threads > 0 && Threads % 32 == 0,
                "copy_shared_to_global: Threads must be a positive multiple of 32");
  const int tid = threadIdx.x;

  if constexpr (Vectorized) {
    static_assert(16 % sizeof(T) == 0 && (Cols * sizeof(T)) % 16 == 0,
                  "copy_shared_to_global<Vectorized>: a tile row must be a whole number of "
                  "16-byte chunks");
    constexpr int kElemsPerChunk = 16 / sizeof(T);
    constexpr int kChunksPerRow = Cols / kElemsPerChunk;
    constexpr int kChunks = Rows * kChunksPerRow;
#pragma unroll
    for (int k = 0; k < copy_detail::ceil_div(kChunks, Threads); ++k) {
      const int i = tid + k * Threads;
      if constexpr (kChunks % Threads != 0) {
        if (i >= kChunks) break;
      }
      const int r = i / kChunksPerRow;
      const int c = (i % kChunksPerRow) * kElemsPerChunk;
      if (r >= rows_valid || c >= cols_valid) continue;
      const T* src = smem + Layout::offset(r, c);
      T* dst = gmem + r * ld + c;
      if (c + kElemsPerChunk <= cols_valid) {
        *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
      } else {
        for (int e = 0; e < cols_valid - c; ++e) dst[e] = src[e];
      }
    }
  } else {
    constexpr int kElems = Rows * Cols;
#pragma unroll 4
    for (int i = tid; i < kElems; i += Threads) {
      const int r = i / Cols;
      const int c = i % Cols;
      if (r < rows_valid && c < cols_valid) gmem[r * ld + c] = smem[Layout::offset(r, c)];
    }
  }
}

}  // namespace tessel
