// The index arithmetic of the flat-rows layout (infer_layouts' FlatRows: a [rows, cols] tile held
// as the contiguous run of rows * cols elements it is in a row-major tensor, each thread `n`
// consecutive elements of it). Plain integer logic, compiled for the device (reduce.cuh's
// reduce_flat_rows) and, by tests/cpu/runtime/FlatRowsTest.cpp, for the host, where every element
// of many shapes is checked to land in exactly one part of its own row.
#pragma once

#if !defined(TESSEL_HOST_DEVICE)
#if defined(__CUDACC__)
#define TESSEL_HOST_DEVICE __host__ __device__
#else
#define TESSEL_HOST_DEVICE
#endif
#endif

namespace tessel {

// How many elements of piece w (elements w * n .. w * n + n) belong to the row of its first
// element: n or more means all of them; otherwise the rest (n <= cols + 1) start the next row.
TESSEL_HOST_DEVICE constexpr int flat_word_head(int w, int n, int cols) { return cols - (w * n) % cols; }

// The pieces that hold a part of row r: from its first element's piece to its last element's.
TESSEL_HOST_DEVICE constexpr int flat_row_first_word(int r, int n, int cols) { return r * cols / n; }
TESSEL_HOST_DEVICE constexpr int flat_row_last_word(int r, int n, int cols) { return ((r + 1) * cols - 1) / n; }

// Where row r's part of piece w (one of its pieces) is among the pieces' parts, two a piece (the
// piece's head, then the rest): the rest only in the row's first piece when the row starts inside
// it; every later piece of the row starts with the row.
TESSEL_HOST_DEVICE constexpr int flat_row_part(int r, int w, int n, int cols) {
  return 2 * w + (w == r * cols / n && (r * cols) % n != 0 ? 1 : 0);
}

// The lanes that combine one row's parts: a power of two up to a warp, as many as leave every
// row a group of lanes in one pass where the rows are few enough.
TESSEL_HOST_DEVICE constexpr int flat_row_lanes(int rows, int threads) {
  int lanes = 1;
  while (lanes < 32 && rows * lanes * 2 <= threads) lanes *= 2;
  return lanes;
}

}  // namespace tessel
