// Block-cooperative tile copies between global memory and a shared tile.
//
// Every thread of the block calls these with the same arguments. Global tiles are
// row-major with leading dimension `ld` (elements); `gmem` points at the tile's (0, 0).
// Element (r, c) exists iff r < rows_valid && c < cols_valid; either bound may be <= 0 or
// larger than the tile. Missing elements read as zero, so a GEMM over a ragged edge needs no
// masking in its math.
//
// Thread-to-data mapping: consecutive threads take consecutive chunks (or elements) of a
// row, so each warp reads whole 128-byte lines of global memory and writes one
// conflict-free shared wavefront per 8 threads (see SwizzledLayout).
#pragma once

#include "copy_realigned.cuh"
#include "cp_async.cuh"
#include "layout.cuh"
#include "smem.cuh"

namespace tessel {

// What the compiler proved about a tile copy's bounds (copy_global_to_shared's Extent):
// nothing (the interior and the edge path, picked at each call), or that no call's tile lies
// wholly inside the tensor (an M smaller than the tile: every block's A tile is cut short) --
// then the edge path is the only code and is unrolled.
enum class TileExtent { Runtime = 0, Edge = 1 };

namespace copy_detail {

__host__ __device__ constexpr int ceil_div(int a, int b) {
  return (a + b - 1) / b;
}

// Element path: elements are loaded in batches into registers and then stored, so that the
// loads of a batch are in flight together (the compiler cannot reorder a global load past a
// shared store it cannot prove disjoint). A batch of 8 keeps register use small because a
// GEMM's accumulators are live across the copy.
constexpr int kScalarBatch = 8;

// True when a tile row of Cols elements of T is a whole number of Bytes-byte chunks.
template <class T, int Cols, int Bytes>
__host__ __device__ constexpr bool chunkable() {
  return Bytes % sizeof(T) == 0 && (Cols * sizeof(T)) % Bytes == 0;
}

// cp.async of Bytes-byte chunks (4, 8 or 16). Needs ld * sizeof(T) % Bytes == 0 and
// Bytes-aligned gmem and smem. A chunk cut by cols_valid copies its valid part and
// zero-fills the rest (src-size), so any cols_valid works.
template <class T, int Rows, int Cols, class Layout, int Threads, int Bytes,
          TileExtent Extent = TileExtent::Runtime>
__device__ inline void copy_chunks(T* smem, const T* gmem, long long ld, int rows_valid, int cols_valid) {
  static_assert(chunkable<T, Cols, Bytes>(), "copy_chunks: a row must be whole chunks");
  constexpr int kElemsPerChunk = Bytes / sizeof(T);
  constexpr int kChunksPerRow = Cols / kElemsPerChunk;
  const int tid = threadIdx.x;
  // Bytes of the chunk at column c that exist (0 when none).
  auto src_bytes = [&](int c) {
    const int n = (cols_valid - c) * static_cast<int>(sizeof(T));
    return n >= Bytes ? Bytes : (n > 0 ? n : 0);
  };
  if constexpr (Threads % kChunksPerRow == 0) {
    // Each thread keeps one chunk column and walks down the rows, so the column test and
    // (when the row step is a multiple of the swizzle period) the shared offset are
    // computed once.
    constexpr int kRowStep = Threads / kChunksPerRow;
    constexpr int kIters = ceil_div(Rows, kRowStep);
    const int c = (tid % kChunksPerRow) * kElemsPerChunk;
    const int r0 = tid / kChunksPerRow;
    const T* src0 = gmem + r0 * ld + c;
    auto smem_offset = [&](int k) {
      if constexpr (kRowStep % Layout::kRowPeriod == 0) {
        return Layout::offset(r0, c) + k * kRowStep * Layout::kRowPitch;
      } else {
        return Layout::offset(r0 + k * kRowStep, c);
      }
    };
    if constexpr (Extent == TileExtent::Edge) {
      // Every call is an edge tile: no branch for ptxas to if-convert, so the loop unrolls. (Its
      // body is the run-time edge loop's below, written twice: sharing it through lambdas changed
      // ptxas's allocation and spilled 24 B in sm_80 D = 64 causal attention.)
      const int col_bytes = src_bytes(c);
#pragma unroll
      for (int k = 0; k < kIters; ++k) {
        const int r = r0 + k * kRowStep;
        if constexpr (Rows % kRowStep != 0) {
          if (r >= Rows) break;
        }
        const bool in = col_bytes > 0 && r < rows_valid;
        cp_async_n<Bytes>(smem + smem_offset(k), in ? src0 + k * kRowStep * ld : gmem, in ? col_bytes : 0);
      }
    } else if (rows_valid >= Rows && cols_valid >= Cols) {
      // Interior tile (uniform across the block): no per-chunk predicate or pointer
      // select, which is most of the copy's instructions in a GEMM main loop.
#pragma unroll
      for (int k = 0; k < kIters; ++k) {
        if constexpr (Rows % kRowStep != 0) {
          if (r0 + k * kRowStep >= Rows) break;
        }
        cp_async_n<Bytes>(smem + smem_offset(k), src0 + k * kRowStep * ld, Bytes);
      }
    } else {
      // Edge tile: a loop that stays a loop (unrolled by half at most). Fully unrolled,
      // ptxas if-converts the interior/edge branch inside a GEMM main loop and every tile
      // then issues both paths' instructions (measured: 20M instead of 12M instructions for
      // 128x128x32 at 2048^3).
      constexpr int kEdgeUnroll = kIters >= 4 ? kIters / 2 : 1;
      const int col_bytes = src_bytes(c);
#pragma unroll kEdgeUnroll
      for (int k = 0; k < kIters; ++k) {
        const int r = r0 + k * kRowStep;
        if constexpr (Rows % kRowStep != 0) {
          if (r >= Rows) break;
        }
        const bool in = col_bytes > 0 && r < rows_valid;
        cp_async_n<Bytes>(smem + smem_offset(k), in ? src0 + k * kRowStep * ld : gmem, in ? col_bytes : 0);
      }
    }
  } else {
    constexpr int kChunks = Rows * kChunksPerRow;
    auto one = [&](int k) {
      const int i = tid + k * Threads;
      const int r = i / kChunksPerRow;
      const int c = (i % kChunksPerRow) * kElemsPerChunk;
      const int n = r < rows_valid ? src_bytes(c) : 0;
      if (kChunks % Threads == 0 || i < kChunks)
        cp_async_n<Bytes>(smem + Layout::offset(r, c), n > 0 ? gmem + r * ld + c : gmem, n);
    };
    // A proven edge has one path, unrolled; at run time the edge path stays a loop.
    if (Extent == TileExtent::Edge || (rows_valid >= Rows && cols_valid >= Cols)) {
#pragma unroll
      for (int k = 0; k < ceil_div(kChunks, Threads); ++k) one(k);
    } else {
#pragma unroll 1
      for (int k = 0; k < ceil_div(kChunks, Threads); ++k) one(k);
    }
  }
}

// Whether the Bytes-chunk path applies to this call (uniform across the block).
template <class T, int Cols, int Bytes>
__device__ inline bool chunks_fit(const T* smem, const T* gmem, long long ld) {
  if constexpr (!chunkable<T, Cols, Bytes>()) {
    return false;
  } else {
    return (ld * static_cast<long long>(sizeof(T))) % Bytes == 0 &&
           reinterpret_cast<unsigned long long>(gmem) % Bytes == 0 && smem_address(smem) % Bytes == 0;
  }
}

}  // namespace copy_detail

// Global -> shared. Asynchronous on both paths: the caller commits and waits
// (cp_async_commit / cp_async_wait) and then barriers before reading the tile.
// Vectorized: 16-byte cp.async per chunk. Requires ld * sizeof(T) % 16 == 0 and a 16-byte
//   aligned gmem and smem. gmem must be a valid address even when the whole tile is out of
//   bounds: it is the dummy source of zero-filled chunks. (A chunk cut by cols_valid is
//   copied in part and zero-filled, so cols_valid need not be a multiple of 16 bytes.)
// !Vectorized: no alignment requirement. Picks at run time (uniformly across the block) the
//   cp.async chunk, 16 or 4 bytes, that ld, gmem and smem allow; when neither does (an odd
//   ld of 16-bit elements, say), realigned 16-byte chunks (copy_chunks_realigned: aligned
//   16-byte loads shifted in registers, 16-byte shared stores) where a tile row is whole
//   16-byte chunks, else element loads and shared stores; both synchronous for the calling
//   thread. (An 8-byte path was 10-20% faster for ld % 8 == 4 but made the
//   pipelined 128x128x32 kernel spill under NVRTC.)
// Extent: what the compiler proved about every call's bounds (TileExtent above); Runtime
// tests them at each call.
template <class T, int Rows, int Cols, class Layout, int Threads, bool Vectorized,
          TileExtent Extent = TileExtent::Runtime>
__device__ inline void copy_global_to_shared(T* smem, const T* gmem, long long ld, int rows_valid,
                                             int cols_valid) {
  static_assert(Layout::kRows == Rows && Layout::kCols == Cols,
                "copy_global_to_shared: Layout's kRows/kCols must equal Rows/Cols");
  static_assert(Threads > 0 && Threads % 32 == 0,
                "copy_global_to_shared: Threads must be a positive multiple of 32");

  if constexpr (Vectorized) {
    static_assert(copy_detail::chunkable<T, Cols, 16>(),
                  "copy_global_to_shared<Vectorized>: a tile row must be a whole number of "
                  "16-byte chunks");
    copy_detail::copy_chunks<T, Rows, Cols, Layout, Threads, 16, Extent>(smem, gmem, ld, rows_valid,
                                                                         cols_valid);
  } else {
    if (copy_detail::chunks_fit<T, Cols, 16>(smem, gmem, ld)) {
      if constexpr (copy_detail::chunkable<T, Cols, 16>())
        copy_detail::copy_chunks<T, Rows, Cols, Layout, Threads, 16, Extent>(smem, gmem, ld, rows_valid,
                                                                             cols_valid);
      return;
    }
    if (copy_detail::chunks_fit<T, Cols, 4>(smem, gmem, ld)) {
      if constexpr (copy_detail::chunkable<T, Cols, 4>())
        copy_detail::copy_chunks<T, Rows, Cols, Layout, Threads, 4, Extent>(smem, gmem, ld, rows_valid,
                                                                            cols_valid);
      return;
    }
    if constexpr (copy_detail::chunkable<T, Cols, 16>() && sizeof(T) <= 4) {
      // Rows off 16 bytes, the shared tile 16-byte aligned: realigned in registers.
      if (smem_address(smem) % 16 == 0) {
        copy_detail::copy_chunks_realigned<T, Rows, Cols, Layout, Threads>(smem, gmem, ld, rows_valid,
                                                                           cols_valid);
        return;
      }
    }
    const int tid = threadIdx.x;
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
__device__ inline void copy_shared_to_global(T* gmem, const T* smem, long long ld, int rows_valid,
                                             int cols_valid) {
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

// A block's rows that are one contiguous run of `count` elements of global memory, moved to or
// from shared memory in 16-byte chunks: the elements before the first 16-byte boundary and after
// the last go one by one, the rest as uint4. `smem` must sit at the same address modulo 16 as
// `gmem` (the caller offsets its scratch tile by the span's misalignment), so that the chunks are
// aligned on both sides. Every thread of the block (Threads of them) takes part; the block
// barriers before and after order the scratch tile against its other readers and writers.
namespace copy_detail {
// The elements before `g`'s first 16-byte boundary, at most `count` (fewer than 16 / sizeof(T)).
template <class T>
__device__ inline int span_head(const T* g, int count) {
  const unsigned mis = static_cast<unsigned>(reinterpret_cast<unsigned long long>(g) % 16);
  const int head = mis ? static_cast<int>((16 - mis) / sizeof(T)) : 0;
  return head < count ? head : count;
}

// dst[i] = src[i] for i in [0, n), n shorter than one 16-byte chunk (16 / sizeof(T) elements):
// one pass of the block's threads when there are at least that many.
template <class T, int Threads, class D, class S>
__device__ inline void copy_short_run(D* dst, const S* src, int n) {
  constexpr int kVec = 16 / sizeof(T);
  const int tid = threadIdx.x;
  if constexpr (Threads >= kVec) {
    if (tid < n) dst[tid] = src[tid];
  } else {
    for (int i = tid; i < n; i += Threads) dst[i] = src[i];
  }
}
}  // namespace copy_detail

// The span is a shared scratch tile's (at most 48 KB: Copy.cpp's kMaxSpanBytes), so its counts and
// indices are 32-bit; the head and the tail, each shorter than one 16-byte chunk, take one pass
// of the block's threads.
// Async (the compiler's default; JitOptions::disable_async_span_copy turns it off; sm_80 and
// later): the chunks go by cp.async, every one in flight before a single wait, the head and tail
// elements loaded meanwhile.
template <class T, int Threads, bool Async = false>
__device__ inline void copy_span_to_shared(T* smem, const T* gmem, long long span_count) {
  static_assert(16 % sizeof(T) == 0, "copy_span_to_shared: the element size must divide 16 bytes");
  constexpr int kVec = 16 / sizeof(T);
  block_sync();
  const int count = static_cast<int>(span_count);
  const int head = copy_detail::span_head(gmem, count);
  const int chunks = (count - head) / kVec, tail = head + chunks * kVec;
  const int tid = threadIdx.x;
  const uint4* src = reinterpret_cast<const uint4*>(gmem + head);
  uint4* dst = reinterpret_cast<uint4*>(smem + head);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (Async) {
    for (int i = tid; i < chunks; i += Threads) cp_async_16(dst + i, src + i, true);
    cp_async_commit();
    copy_detail::copy_short_run<T, Threads>(smem, gmem, head);
    copy_detail::copy_short_run<T, Threads>(smem + tail, gmem + tail, count - tail);
    cp_async_wait_all();
    block_sync();
    return;
  }
#endif
  // The load-then-store loop (JitOptions::disable_async_span_copy) as it was before the span's
  // counts went 32-bit: with them ptxas spills it (8 bytes, 129 f32 columns on 256 threads).
  {
    const long long head64 = head, chunks64 = chunks, tail64 = tail;
    for (long long i = tid; i < head64; i += Threads) smem[i] = gmem[i];
#pragma unroll 4
    for (long long i = tid; i < chunks64; i += Threads) dst[i] = __ldg(src + i);
    for (long long i = tail64 + tid; i < span_count; i += Threads) smem[i] = gmem[i];
  }
  block_sync();
}

template <class T, int Threads>
__device__ inline void copy_shared_span_to_global(T* gmem, const T* smem, long long span_count) {
  static_assert(16 % sizeof(T) == 0, "copy_shared_span_to_global: the element size must divide 16 bytes");
  constexpr int kVec = 16 / sizeof(T);
  block_sync();
  const int count = static_cast<int>(span_count);
  const int head = copy_detail::span_head(gmem, count);
  const int chunks = (count - head) / kVec, tail = head + chunks * kVec;
  const int tid = threadIdx.x;
  copy_detail::copy_short_run<T, Threads>(gmem, smem, head);
  const uint4* src = reinterpret_cast<const uint4*>(smem + head);
  uint4* dst = reinterpret_cast<uint4*>(gmem + head);
#pragma unroll 4
  for (int i = tid; i < chunks; i += Threads) dst[i] = src[i];
  copy_detail::copy_short_run<T, Threads>(gmem + tail, smem + tail, count - tail);
  block_sync();
}

}  // namespace tessel
