// copy_global_to_shared's path for tile rows that start off 16 bytes (copy.cuh): 16-byte chunks
// read as the aligned words that cover them and shifted into place in registers.
#pragma once

#include "cp_async.cuh"
#include "realign.cuh"
#include "types.cuh"

namespace tessel {

namespace copy_detail {

__host__ __device__ constexpr int realigned_ceil_div(int a, int b) {
  return (a + b - 1) / b;
}

// Realigned chunks, for rows that start off 16 bytes (an odd ld of 16-bit elements): each
// 16-byte chunk of a tile row is read as the two aligned 16-byte words that cover it, shifted
// into place in registers and stored to shared memory whole -- two 16-byte loads a chunk where
// the element path makes eight 2-byte ones, and 32 bytes in flight a thread where it has 16 (its
// batches of 8 elements). The shift by realign_words_branched: threads of a warp on rows of
// different shifts take their branches in turn, and it holds fewer registers than the select
// network. A chunk goes this way when it and the chunk after it lie inside its row's valid
// columns, so that the second word never reaches past data the tile may read; the others (the
// last chunk or two of the tensor's last column tile, rows past rows_valid) go element by
// element, zeros outside the valid region. Synchronous for the calling thread, like the element
// path. kRealignedBatch chunks a thread in flight at once, each holding 8 registers of words
// while the GEMM's accumulators are live: two spilled 48-68 bytes in a hand-written 128x128x32 s3
// kernel on four warps (tests/nvrtc/device/block_gemm_test.cpp, 255 registers).
constexpr int kRealignedBatch = 1;

template <class T, int Rows, int Cols, class Layout, int Threads>
__device__ inline void copy_chunks_realigned(T* smem, const T* gmem, long long ld, int rows_valid,
                                             int cols_valid) {
  static_assert((Cols * sizeof(T)) % 16 == 0 && sizeof(T) <= 4 && 16 % sizeof(T) == 0,
                "copy_chunks_realigned: a tile row must be whole 16-byte chunks of 2- or 4-byte elements");
  constexpr int kVec = 16 / sizeof(T);
  constexpr int kChunksPerRow = Cols / kVec;
  constexpr int kChunks = Rows * kChunksPerRow;
  constexpr int kIters = realigned_ceil_div(kChunks, Threads);
  constexpr int kBatch = kRealignedBatch < kIters ? kRealignedBatch : kIters;
  const int tid = threadIdx.x;
#pragma unroll 1
  for (int k0 = 0; k0 < kIters; k0 += kBatch) {
    unsigned words[kBatch][8];
    bool whole[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int i = tid + (k0 + j) * Threads;
      const int r = i / kChunksPerRow, c = (i % kChunksPerRow) * kVec;
      whole[j] = (k0 + j) < kIters && i < kChunks && r < rows_valid && c + 2 * kVec <= cols_valid;
      if (whole[j]) {
        const uint4* at =
            reinterpret_cast<const uint4*>(reinterpret_cast<unsigned long long>(gmem + r * ld + c) & ~15ull);
        const uint4 lo = __ldg(at), hi = __ldg(at + 1);
        words[j][0] = lo.x, words[j][1] = lo.y, words[j][2] = lo.z, words[j][3] = lo.w;
        words[j][4] = hi.x, words[j][5] = hi.y, words[j][6] = hi.z, words[j][7] = hi.w;
      }
    }
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int i = tid + (k0 + j) * Threads;
      if ((k0 + j) >= kIters || i >= kChunks) continue;
      const int r = i / kChunksPerRow, c = (i % kChunksPerRow) * kVec;
      T* dst = smem + Layout::offset(r, c);
      if (whole[j]) {
        unsigned out[4];
        realign_words_branched(
            words[j], static_cast<unsigned>(reinterpret_cast<unsigned long long>(gmem + r * ld + c) & 15u),
            out);
        *reinterpret_cast<uint4*>(dst) = make_uint4(out[0], out[1], out[2], out[3]);
      } else {
#pragma unroll
        for (int e = 0; e < kVec; ++e)
          dst[e] = r < rows_valid && c + e < cols_valid ? gmem[r * ld + c + e] : T{};
      }
    }
  }
}

}  // namespace copy_detail

// A realigned ring (plan_pipelines), for tile rows that start off 16 bytes in a loop of two or
// more stages: the asynchronous half. Each tile row's valid columns go into a row of `raw`
// (Rows x RawCols(Cols) elements, row-major) as the Cols / kVec + 1 aligned 16-byte words that
// cover them, by cp.async -- in flight across iterations like any ring stage, where the
// synchronous realigned chunks above wait for each load. A word's bytes past the row's valid
// columns, and every word of a row past rows_valid, are zero-filled (the src-size operand: they
// are not read), so the words after the shift hold zeros wherever the tile has no element. The
// bytes before the row's start in its first word are read (they lie inside the tensor: its
// base is 16-byte aligned, checked at launch) and shifted out by realign_words_to_shared.
template <class T>
__host__ __device__ constexpr int raw_words_cols(int cols) {
  return cols + static_cast<int>(16 / sizeof(T));
}

template <class T, int Rows, int Cols, int Threads>
__device__ inline void copy_words_to_shared(T* raw, const T* gmem, long long ld, int rows_valid,
                                            int cols_valid) {
  static_assert((Cols * sizeof(T)) % 16 == 0 && sizeof(T) <= 4 && 16 % sizeof(T) == 0,
                "copy_words_to_shared: a tile row must be whole 16-byte chunks of 2- or 4-byte elements");
  constexpr int kVec = 16 / sizeof(T);
  constexpr int kWordsPerRow = Cols / kVec + 1;
  constexpr int kWords = Rows * kWordsPerRow;
  constexpr int kRawCols = raw_words_cols<T>(Cols);
  const char* dummy = reinterpret_cast<const char*>(reinterpret_cast<unsigned long long>(gmem) & ~15ull);
#pragma unroll
  for (int k = 0; k < copy_detail::realigned_ceil_div(kWords, Threads); ++k) {
    const int i = static_cast<int>(threadIdx.x) + k * Threads;
    if (kWords % Threads != 0 && i >= kWords) break;
    const int r = i / kWordsPerRow, w = i % kWordsPerRow;
    const char* start = reinterpret_cast<const char*>(gmem + r * ld);
    const char* word =
        reinterpret_cast<const char*>(reinterpret_cast<unsigned long long>(start) & ~15ull) + 16 * w;
    // The bytes of this word up to the row's last valid column.
    long long n = r < rows_valid && cols_valid > 0
                      ? static_cast<long long>(start - word) + static_cast<long long>(cols_valid) * sizeof(T)
                      : 0;
    n = n < 0 ? 0 : (n > 16 ? 16 : n);
    cp_async_n<16>(raw + r * kRawCols + w * kVec, n > 0 ? word : dummy, static_cast<int>(n));
  }
}

// The synchronous half, after the stage's cp.async group landed and a block barrier: each
// 16-byte chunk of the tile is the two raw words that cover it, shifted by the byte offset of
// its row's start in global memory (recomputed from the same gmem and ld), stored whole to the
// shared tile in its Layout. The caller barriers before the tile's readers.
template <class T, int Rows, int Cols, class Layout, int Threads>
__device__ inline void realign_words_to_shared(T* smem, const T* raw, const T* gmem, long long ld) {
  static_assert(Layout::kRows == Rows && Layout::kCols == Cols,
                "realign_words_to_shared: Layout's kRows/kCols must equal Rows/Cols");
  constexpr int kVec = 16 / sizeof(T);
  constexpr int kChunksPerRow = Cols / kVec;
  constexpr int kChunks = Rows * kChunksPerRow;
  constexpr int kRawCols = raw_words_cols<T>(Cols);
#pragma unroll
  for (int k = 0; k < copy_detail::realigned_ceil_div(kChunks, Threads); ++k) {
    const int i = static_cast<int>(threadIdx.x) + k * Threads;
    if (kChunks % Threads != 0 && i >= kChunks) break;
    const int r = i / kChunksPerRow, c = (i % kChunksPerRow) * kVec;
    const uint4* at = reinterpret_cast<const uint4*>(raw + r * kRawCols + c);
    const uint4 lo = at[0], hi = at[1];
    const unsigned words[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    unsigned out[4];
    realign_words_branched(
        words, static_cast<unsigned>(reinterpret_cast<unsigned long long>(gmem + r * ld) & 15u), out);
    *reinterpret_cast<uint4*>(smem + Layout::offset(r, c)) = make_uint4(out[0], out[1], out[2], out[3]);
  }
}

}  // namespace tessel
