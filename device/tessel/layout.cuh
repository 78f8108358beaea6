// Shared-memory tile layouts: (row, col) -> element offset inside a Rows x Cols tile.
//
// A layout type is what the compiler's layout inference picks for an alloc_shared buffer;
// copy.cuh writes through it and gemm.cuh reads through it. Every layout here provides
//   kRows, kCols, kSize (elements, no padding), kRowPeriod, kRowPitch and offset(r, c),
// and satisfies two properties the copy and GEMM code rely on to hoist address math:
//   * 16-byte chunks stay contiguous and 16-byte aligned (cp.async and ldmatrix move them);
//   * offset(r + kRowPeriod * j, c) == offset(r, c) + kRowPeriod * j * kRowPitch
//     (kRowPitch is kCols for the layouts here; hopper_layout.cuh's column panels make it the
//     panel's width).
// The second one also means a multi-stage buffer [S][R][C] may use the layout of [S*R][C]:
// stage s is then exactly the layout of [R][C] at element offset s * R * C (R % 8 == 0),
// which is the single-stage type BlockGemm and the copies must be given.
#pragma once

namespace tessel {

namespace layout_detail {
// log2 of a power of two, at compile time.
__host__ __device__ constexpr int log2_exact(int x) {
  return x <= 1 ? 0 : 1 + log2_exact(x / 2);
}
__host__ __device__ constexpr bool is_pow2(int x) {
  return x > 0 && (x & (x - 1)) == 0;
}
}  // namespace layout_detail

// Plain row-major. For scalar fallbacks, non-16-bit element types and tiles whose row size
// does not admit the swizzle. Bank conflicts are the caller's problem.
template <int Rows, int Cols>
struct RowMajorLayout {
  static_assert(Rows > 0 && Cols > 0, "RowMajorLayout: Rows and Cols must be positive");
  static constexpr int kRows = Rows;
  static constexpr int kCols = Cols;
  static constexpr int kSize = Rows * Cols;
  static constexpr int kRowPeriod = 1;
  static constexpr int kRowPitch = Cols;

  __host__ __device__ static constexpr int offset(int r, int c) { return r * Cols + c; }
};

// Row-major with 16-byte chunks XOR-swizzled so that the two access patterns of the mma.sync
// path hit 8 different 16-byte bank groups (a 128-byte shared-memory wavefront) each:
//   (a) 8 threads writing 8 consecutive chunks of the tile (one cp.async wavefront), and
//   (b) one ldmatrix 8x8 matrix: 8 consecutive rows (first row a multiple of 8), same
//       logical chunk. .trans reads the same bytes, so it is covered too.
//
// Think of the tile as 128-byte lines of 8 chunks. Pattern (a) stays conflict-free for any
// permutation of chunks within a row, so only (b) constrains the swizzle:
//   * rows >= 128 bytes (ChunksPerRow >= 8): a row owns whole lines; XOR the chunk index's
//     low 3 bits with (r % 8) -> the 8 rows of a matrix land in 8 distinct slots.
//   * 64-byte rows (4 chunks): two rows share a line. Row parity already picks the line half;
//     XOR the chunk index with (r / 2) % 4 to spread the 4 row pairs over the 4 slots.
//   * 32-byte rows (2 chunks): four rows per line, XOR with (r / 4) % 2.
//   * 16-byte rows: eight rows per line already fill it; no swizzle.
// The XOR only touches chunk bits below ChunksPerRow, so every element stays in its row.
template <int Rows, int Cols, int ElemBytes>
struct SwizzledLayout {
  static_assert(Rows > 0 && Cols > 0, "SwizzledLayout: Rows and Cols must be positive");
  static_assert(ElemBytes == 1 || ElemBytes == 2 || ElemBytes == 4 || ElemBytes == 8,
                "SwizzledLayout: ElemBytes must be 1, 2, 4 or 8");
  static_assert((Cols * ElemBytes) % 16 == 0,
                "SwizzledLayout: a row must be a whole number of 16-byte chunks; use "
                "RowMajorLayout for this tile");

  static constexpr int kRows = Rows;
  static constexpr int kCols = Cols;
  static constexpr int kSize = Rows * Cols;
  static constexpr int kElemsPerChunk = 16 / ElemBytes;
  static constexpr int kChunksPerRow = Cols / kElemsPerChunk;

  static_assert(layout_detail::is_pow2(kChunksPerRow) || kChunksPerRow % 8 == 0,
                "SwizzledLayout: row size must be 16, 32, 64 or a multiple of 128 bytes; use "
                "RowMajorLayout for this tile");

  static constexpr int kRowPeriod = 8;
  static constexpr int kRowPitch = Cols;

 private:
  static constexpr int kChunkShift = layout_detail::log2_exact(kElemsPerChunk);
  // Rows sharing one 128-byte line (1 when a row spans whole lines).
  static constexpr int kRowsPerLine = kChunksPerRow >= 8 ? 1 : 8 / kChunksPerRow;
  static constexpr int kLineShift = layout_detail::log2_exact(kRowsPerLine);
  static constexpr int kXorMask = kChunksPerRow >= 8 ? 7 : kChunksPerRow - 1;

 public:
  // The chunk-index XOR applied to row r.
  __host__ __device__ static constexpr int swizzle(int r) { return (r >> kLineShift) & kXorMask; }

  __host__ __device__ static constexpr int offset(int r, int c) {
    return r * Cols + (c ^ (swizzle(r) << kChunkShift));
  }
};

// True when SwizzledLayout<?, Cols, ElemBytes> exists (the row size admits the swizzle).
__host__ __device__ constexpr bool swizzle_supported(int cols, int elem_bytes) {
  return (elem_bytes == 1 || elem_bytes == 2 || elem_bytes == 4 || elem_bytes == 8) && cols > 0 &&
         (cols * elem_bytes) % 16 == 0 &&
         (layout_detail::is_pow2(cols * elem_bytes / 16) || (cols * elem_bytes / 16) % 8 == 0);
}

namespace layout_detail {
template <bool Swizzle, int Rows, int Cols, int ElemBytes>
struct PreferredSharedLayout {
  using type = SwizzledLayout<Rows, Cols, ElemBytes>;
};
template <int Rows, int Cols, int ElemBytes>
struct PreferredSharedLayout<false, Rows, Cols, ElemBytes> {
  using type = RowMajorLayout<Rows, Cols>;
};
}  // namespace layout_detail

// The swizzled layout where the row size admits it, else row-major. For scratch tiles whose
// shape is fixed by a template (the epilogue's staging buffer) rather than by the compiler.
template <int Rows, int Cols, int ElemBytes>
using PreferredSharedLayout =
    typename layout_detail::PreferredSharedLayout<swizzle_supported(Cols, ElemBytes), Rows, Cols,
                                                  ElemBytes>::type;

}  // namespace tessel
