// The shared-memory tile layout of the Hopper path: 128-byte swizzle, the layout that a TMA
// load with CU_TENSOR_MAP_SWIZZLE_128B writes and that a wgmma descriptor with swizzle mode
// 128B reads (wgmma.cuh), so a tile loaded by TMA feeds wgmma with no reshuffle.
//
// WgmmaSwizzle128Layout<Rows, Cols, ElemBytes>: a Rows x Cols tile whose Cols dimension is
// the contiguous one in global memory (K for a K-major operand, N for the tutorial's B):
//   * Cols is cut into panels of 128 bytes (64 16-bit elements); panel p is a dense block of
//     Rows x 128 bytes at byte p * Rows * 128. This is what one TMA box of
//     {128 / ElemBytes, Rows} elements writes, so a tile wider than 128 bytes is loaded with
//     one TMA per panel (the 128B swizzle limits a box's inner extent to 128 bytes).
//   * inside a panel, row r starts at byte r * 128 and its eight 16-byte chunks are XOR-
//     permuted: logical chunk j sits in physical chunk j ^ (r % 8). The hardware applies the
//     XOR to address bits [4,7) from bits [7,10), so the tile must start 1024-byte aligned.
// Hence any 8 consecutive rows x one logical chunk hit 8 distinct bank groups (ldmatrix,
// element-wise code and 16-byte cp.async writes are conflict-free too).
//
// WgmmaSwizzleLayout<Rows, Cols, ElemBytes, S> generalizes this to the S = 64 and 32-byte
// swizzles (CU_TENSOR_MAP_SWIZZLE_64B / _32B, wgmma swizzle mode 64B / 32B): panels S bytes
// wide (a TMA box of {S / ElemBytes, Rows}), row r of a panel at byte r * S, and logical
// 16-byte chunk j at physical chunk j ^ ((r / (128 / S)) % (S / 16)) -- the same XOR of
// address bits [4,7) by bits [7,10), clipped to the chunks a row has. The Hopper GEMM uses
// S = 64 for an A tile with BK = 32 (64-byte rows).
//
// wgmma descriptors for this layout (16-bit elements):
//   K-major operand (Cols = K = 64): wgmma_desc_kmajor_sw128(base + row0 * 128), k16 step
//     kk adds kk * 32 bytes; row0 a multiple of 8. For S = 64: wgmma_desc_kmajor(base + row0 *
//     64, 64), k16 step kk adds kk * 32 bytes (two steps per 64-byte row).
//   MN-major operand (Rows = K, Cols = M or N): wgmma_desc_mnmajor_sw128(base + k0 * 128 +
//     panel0 * kPanelBytes, kPanelBytes), k16 step adds 2048 bytes.
#pragma once

namespace tessel {

template <int Rows, int Cols, int ElemBytes, int SwizzleBytes = 128>
struct WgmmaSwizzleLayout {
  static_assert(ElemBytes == 1 || ElemBytes == 2 || ElemBytes == 4,
                "WgmmaSwizzleLayout: ElemBytes must be 1, 2 or 4");
  static_assert(SwizzleBytes == 32 || SwizzleBytes == 64 || SwizzleBytes == 128,
                "WgmmaSwizzleLayout: SwizzleBytes must be 32, 64 or 128");
  static_assert(Rows > 0 && Rows % 8 == 0,
                "WgmmaSwizzleLayout: Rows must be a positive multiple of 8 (one swizzle "
                "atom is 8 rows)");
  static_assert(Cols > 0 && (Cols * ElemBytes) % SwizzleBytes == 0,
                "WgmmaSwizzleLayout: a row must be a whole number of SwizzleBytes-wide panels");

  static constexpr int kRows = Rows;
  static constexpr int kCols = Cols;
  static constexpr int kSize = Rows * Cols;  // elements
  static constexpr int kBytes = Rows * Cols * ElemBytes;
  static constexpr int kSwizzleBytes = SwizzleBytes;
  static constexpr int kPanelCols = SwizzleBytes / ElemBytes;  // elements per panel row
  static constexpr int kPanels = Cols / kPanelCols;
  static constexpr int kPanelBytes = Rows * SwizzleBytes;
  static constexpr int kAlignment = 1024;                 // bytes, of the tile's base (>= 8 * SwizzleBytes)
  static constexpr int kRowPeriod = 8;                    // the swizzle repeats every 8 rows
  static constexpr int kRowPitch = kPanelCols;            // rows r and r + 8j are 8j panel rows apart
  static constexpr int kRowsPerXor = 128 / SwizzleBytes;  // rows sharing one XOR value

  // Byte offset of element (r, c) from the tile base.
  __host__ __device__ static constexpr int byte_offset(int r, int c) {
    const int panel = c / kPanelCols;
    const int cb = (c % kPanelCols) * ElemBytes;  // byte within the panel row
    const int chunk = (cb / 16) ^ ((r / kRowsPerXor) % (SwizzleBytes / 16));
    return panel * kPanelBytes + r * SwizzleBytes + chunk * 16 + cb % 16;
  }
  // Element offset (what copy.cuh-style element-wise code indexes with).
  __host__ __device__ static constexpr int offset(int r, int c) { return byte_offset(r, c) / ElemBytes; }
};

template <int Rows, int Cols, int ElemBytes>
using WgmmaSwizzle128Layout = WgmmaSwizzleLayout<Rows, Cols, ElemBytes, 128>;

}  // namespace tessel
