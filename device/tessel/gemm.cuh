// Block GEMM on the sm_80 path: acc += A_tile * B_tile from shared memory with ldmatrix and
// mma.sync.m16n8k16 (16-bit inputs, f32 accumulators held in registers).
//
// Shared tiles (row-major in the Layout's sense):
//   A: [BM][BK], or [BK][BM] when TransA (the global A is K-major)
//   B: [BK][BN], or [BN][BK] when TransB (the global B is K-major)
// A mma operand wants A "row" (K contiguous per thread pair) and B "col" (K contiguous);
// ldmatrix.trans produces those from the tiles where K is the row index (TransA, !TransB).
//
// Warps: warp w owns the kWarpM x kWarpN sub-tile at (warp_m, warp_n) with
//   warp_m = w % WarpsM, warp_n = w / WarpsM
// (an arbitrary choice as far as speed goes; it is fixed because the accumulator layout
// below depends on it).
//
// Accumulator layout (the epilogue and the compiler's fragment layouts depend on it): the
// warp's sub-tile is a grid of (kWarpM/16) x (kWarpN/8) m16n8 C fragments. For
//   i = (mi * (kWarpN/8) + ni) * 4 + e,   mi < kWarpM/16, ni < kWarpN/8, e < 4,
//   acc_row(i) = warp_m * kWarpM + mi * 16 + lane / 4 + (e / 2) * 8
//   acc_col(i) = warp_n * kWarpN + ni * 8 + (lane % 4) * 2 + e % 2
// so acc[i], acc[i + 1] (e even) are two horizontally adjacent elements.
#pragma once

#include "mma.cuh"
#include "smem.cuh"
#include "types.cuh"

namespace tessel {

// A tile coordinate: (row, col) in the shared tile's own indexing.
struct TileCoord {
  int row;
  int col;
};

template <class TIn, int BM, int BN, int BK, int WarpsM, int WarpsN, bool TransA, bool TransB,
          class LayoutA, class LayoutB>
struct BlockGemm {
  static_assert(is_mma_16bit<TIn>::value, "BlockGemm: TIn must be half_t or bfloat16_t");
  static_assert(WarpsM > 0 && WarpsN > 0, "BlockGemm: WarpsM and WarpsN must be positive");
  static_assert(BM % (WarpsM * 16) == 0,
                "BlockGemm: BM must be a multiple of 16 * WarpsM (each warp owns whole m16 "
                "mma tiles)");
  static_assert(BN % (WarpsN * 8) == 0,
                "BlockGemm: BN must be a multiple of 8 * WarpsN (each warp owns whole n8 mma "
                "tiles)");
  static_assert(BK % 16 == 0, "BlockGemm: BK must be a multiple of 16 (the mma k step)");
  static_assert(LayoutA::kRows == (TransA ? BK : BM) && LayoutA::kCols == (TransA ? BM : BK),
                "BlockGemm: LayoutA must describe the A tile, [BM][BK] or [BK][BM] if TransA");
  static_assert(LayoutB::kRows == (TransB ? BN : BK) && LayoutB::kCols == (TransB ? BK : BN),
                "BlockGemm: LayoutB must describe the B tile, [BK][BN] or [BN][BK] if TransB");
  static_assert((LayoutA::kCols * 2) % 16 == 0 && (LayoutB::kCols * 2) % 16 == 0,
                "BlockGemm: shared tile rows must be multiples of 16 bytes (ldmatrix rows)");

  static constexpr int kBM = BM;
  static constexpr int kBN = BN;
  static constexpr int kBK = BK;
  static constexpr int kThreads = 32 * WarpsM * WarpsN;
  static constexpr int kWarpM = BM / WarpsM;
  static constexpr int kWarpN = BN / WarpsN;
  static constexpr int kMmaM = kWarpM / 16;  // m16 fragments per warp
  static constexpr int kMmaN = kWarpN / 8;   // n8 fragments per warp
  static constexpr int kKSteps = BK / 16;
  static constexpr int kAccPerThread = kMmaM * kMmaN * 4;

  // ---- accumulator layout (see the file comment) ----------------------------------------
  __host__ __device__ static constexpr int acc_row_in_warp(int i, int lane) {
    return (i / 4 / kMmaN) * 16 + lane / 4 + ((i % 4) / 2) * 8;
  }
  __host__ __device__ static constexpr int acc_col_in_warp(int i, int lane) {
    return (i / 4 % kMmaN) * 8 + (lane % 4) * 2 + i % 2;
  }
  __device__ static int warp_m() { return (threadIdx.x / 32) % WarpsM; }
  __device__ static int warp_n() { return (threadIdx.x / 32) / WarpsM; }
  __device__ static int acc_row(int i) {
    return warp_m() * kWarpM + acc_row_in_warp(i, threadIdx.x % 32);
  }
  __device__ static int acc_col(int i) {
    return warp_n() * kWarpN + acc_col_in_warp(i, threadIdx.x % 32);
  }

  // ---- ldmatrix addressing ----------------------------------------------------------------
  // The tile coordinate whose address `lane` gives to ldmatrix (thread t addresses row t % 8
  // of matrix t / 8). Public and constexpr so tests can check them against the PTX fragment
  // definitions without a GPU.
  //
  // A, x4 at (mi, kk): matrices j = 0..3 are a[j] of the mma: (m 0-7 | m 8-15) x (k 0-7 | k
  // 8-15), m fastest. Non-trans reads rows of A ([m][k]); .trans reads rows of A^T ([k][m]).
  __host__ __device__ static constexpr TileCoord a_load_coord(int lane, int warp_m, int mi, int kk) {
    const int m0 = warp_m * kWarpM + mi * 16;
    const int k0 = kk * 16;
    if (!TransA) return TileCoord{m0 + lane % 16, k0 + (lane / 16) * 8};
    return TileCoord{k0 + (lane / 16) * 8 + lane % 8, m0 + (lane / 8 % 2) * 8};
  }
  // B, x4 covering n8 fragments ni and ni + 1 at kk: matrices j = 0..3 are b[ni][0],
  // b[ni][1], b[ni+1][0], b[ni+1][1], i.e. (k 0-7 | k 8-15) x (n 0-7 | n 8-15), k fastest.
  // For an x2 (one n8 fragment) only lanes 0-15 matter; pass lane % 16.
  __host__ __device__ static constexpr TileCoord b_load_coord(int lane, int warp_n, int ni, int kk) {
    const int n0 = warp_n * kWarpN + ni * 8;
    const int k0 = kk * 16;
    if (!TransB) return TileCoord{k0 + lane % 16, n0 + (lane / 16) * 8};
    return TileCoord{n0 + (lane / 16) * 8 + lane % 8, k0 + (lane / 8 % 2) * 8};
  }

  struct Fragments {
    unsigned a[kMmaM][4];
    unsigned b[kMmaN][2];
  };

  // a_base, b_base: shared-window addresses of the tiles (smem_address).
  __device__ static void load_fragments(Fragments& f, unsigned a_base, unsigned b_base, int kk,
                                        int lane, int wm, int wn) {
    constexpr unsigned kBytes = sizeof(TIn);
#pragma unroll
    for (int mi = 0; mi < kMmaM; ++mi) {
      const TileCoord c = a_load_coord(lane, wm, mi, kk);
      const unsigned p = a_base + LayoutA::offset(c.row, c.col) * kBytes;
      if constexpr (TransA) {
        ldmatrix_x4_trans(f.a[mi], p);
      } else {
        ldmatrix_x4(f.a[mi], p);
      }
    }
#pragma unroll
    for (int ni = 0; ni + 1 < kMmaN; ni += 2) {
      const TileCoord c = b_load_coord(lane, wn, ni, kk);
      const unsigned p = b_base + LayoutB::offset(c.row, c.col) * kBytes;
      unsigned r[4];
      if constexpr (TransB) {
        ldmatrix_x4(r, p);
      } else {
        ldmatrix_x4_trans(r, p);
      }
      f.b[ni][0] = r[0];
      f.b[ni][1] = r[1];
      f.b[ni + 1][0] = r[2];
      f.b[ni + 1][1] = r[3];
    }
    if constexpr (kMmaN % 2 != 0) {
      const TileCoord c = b_load_coord(lane % 16, wn, kMmaN - 1, kk);
      const unsigned p = b_base + LayoutB::offset(c.row, c.col) * kBytes;
      if constexpr (TransB) {
        ldmatrix_x2(f.b[kMmaN - 1], p);
      } else {
        ldmatrix_x2_trans(f.b[kMmaN - 1], p);
      }
    }
  }

  // acc += A_tile * B_tile. All threads of the block call it (ldmatrix and mma are
  // warp-collective); the caller barriers so that the tiles are complete.
  // The fragments of k step kk + 1 are loaded before the mmas of step kk so that shared
  // memory latency overlaps tensor-core work within the warp.
  __device__ static void run(const TIn* sA, const TIn* sB, float (&acc)[kAccPerThread]) {
    const int lane = threadIdx.x % 32;
    const int wm = warp_m();
    const int wn = warp_n();
    const unsigned a_base = smem_address(sA);
    const unsigned b_base = smem_address(sB);
    Fragments frag[2];
    load_fragments(frag[0], a_base, b_base, 0, lane, wm, wn);
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      if (kk + 1 < kKSteps) load_fragments(frag[(kk + 1) % 2], a_base, b_base, kk + 1, lane, wm, wn);
      const Fragments& f = frag[kk % 2];
#pragma unroll
      for (int mi = 0; mi < kMmaM; ++mi) {
#pragma unroll
        for (int n = 0; n < kMmaN; ++n) {
          // Serpentine over n: consecutive mmas share an operand register set.
          const int ni = (mi % 2 == 0) ? n : kMmaN - 1 - n;
          float(&d)[4] = *reinterpret_cast<float(*)[4]>(&acc[(mi * kMmaN + ni) * 4]);
          mma_m16n8k16<TIn>(d, f.a[mi], f.b[ni]);
        }
      }
    }
  }
};

}  // namespace tessel
