// The register layout of gemm tiles, shared by the mma.sync and wgmma block gemms and by the
// compiler's fragment layouts (FragmentLayout::GemmAccumulator).
//
// For a BM x BN tile over WarpsM x WarpsN warps (warp w at warp_m = w % WarpsM, warp_n = w /
// WarpsM owning kWarpM = BM / WarpsM rows and the kWarpN = BN / WarpsN columns from warp_n *
// kWarpN), the warp's part is a grid of (kWarpM/16) x (kWarpN/8) m16n8 mma C fragments, and
// register
//   i = (mi * (kWarpN/8) + ni) * 4 + e,   mi < kWarpM/16, ni < kWarpN/8, e < 4
// holds element
//   row(i) = block_row(mi, warp_m) + lane / 4 + (e / 2) * 8
//   col(i) = warp_n * kWarpN + ni * 8 + (lane % 4) * 2 + e % 2,
// where the warp's m16 row blocks are either contiguous, block_row = warp_m * kWarpM + mi * 16,
// or, Interleaved, one 16-row strip of every 16 * WarpsM rows, block_row = (mi * WarpsM + warp_m)
// * 16 -- what wgmma gives a warpgroup that issues several m64 instructions over its rows (warp w
// of a warpgroup owns rows 16 w .. 16 w + 15 of each). With one block per warp the two agree.
#pragma once

#include "types.cuh"

namespace tessel {

// BlockGemm's accumulator layout (gemm.cuh) on its own: what a fragment laid out like a
// gemm accumulator needs (its registers' coordinates), without the gemm. Three kinds of tile share
// it: a BlockGemm's accumulator, a WarpgroupGemm's (warpgroup_gemm.cuh: WarpsN = 1, the wgmma D
// fragments of its m64 instructions, Interleaved when there are several a warpgroup), and the
// 16-bit A operand a gemm takes from registers, whose m16k16 mma fragment is exactly two
// neighbouring m16n8 C fragments (register i here is element (acc_row(i), acc_col(i)) of the
// [BM][BK] A tile).
template <int BM, int BN, int WarpsM, int WarpsN, bool Interleaved = false>
struct AccumulatorLayout {
  static_assert(WarpsM > 0 && WarpsN > 0, "AccumulatorLayout: WarpsM and WarpsN must be positive");
  static_assert(!Interleaved || WarpsN == 1, "AccumulatorLayout: interleaved row blocks need WarpsN == 1");
  static_assert(BM % (WarpsM * 16) == 0,
                "AccumulatorLayout: BM must be a multiple of 16 * WarpsM (each warp owns whole m16 "
                "mma tiles)");
  static_assert(BN % (WarpsN * 8) == 0,
                "AccumulatorLayout: BN must be a multiple of 8 * WarpsN (each warp owns whole n8 "
                "mma tiles)");
  static constexpr int kBM = BM;
  static constexpr int kBN = BN;
  static constexpr int kWarpsM = WarpsM;
  static constexpr int kWarpsN = WarpsN;
  static constexpr bool kInterleaved = Interleaved;
  static constexpr int kThreads = 32 * WarpsM * WarpsN;
  static constexpr int kWarpM = BM / WarpsM;
  static constexpr int kWarpN = BN / WarpsN;
  static constexpr int kMmaM = kWarpM / 16;  // m16 fragments per warp
  static constexpr int kMmaN = kWarpN / 8;   // n8 fragments per warp
  static constexpr int kAccPerThread = kMmaM * kMmaN * 4;

  // The first row of m16 block mi of the warps at warp_m.
  __host__ __device__ static constexpr int block_row(int mi, int warp_m) {
    return Interleaved ? (mi * WarpsM + warp_m) * 16 : warp_m * kWarpM + mi * 16;
  }
  // The row of register i of lane `lane` in the warps at warp_m.
  __host__ __device__ static constexpr int acc_row_of(int i, int warp_m, int lane) {
    return block_row(i / 4 / kMmaN, warp_m) + lane / 4 + ((i % 4) / 2) * 8;
  }
  __host__ __device__ static constexpr int acc_col_in_warp(int i, int lane) {
    return (i / 4 % kMmaN) * 8 + (lane % 4) * 2 + i % 2;
  }
  __device__ static int warp_m() { return (threadIdx.x / 32) % WarpsM; }
  __device__ static int warp_n() { return (threadIdx.x / 32) / WarpsM; }
  __device__ static int acc_row(int i) { return acc_row_of(i, warp_m(), threadIdx.x % 32); }

  // Row vectors reduced from the tile (WarpsN = 1): register r of a thread holds the row
  // its accumulator registers i with (i / 4 / kMmaN) * 2 + (i % 4) / 2 == r belong to.
  static constexpr int kRowsPerThread = kMmaM * 2;
  __device__ static int row_of_register(int r) {
    return block_row(r / 2, warp_m()) + (threadIdx.x % 32) / 4 + (r % 2) * 8;
  }
  // rows[r] = op over the row's elements of acc: this thread's registers, then the quad's 4
  // lanes (every lane of the quad ends with the row's value). All lanes of the warp call it.
  template <class Op>
  __device__ static void reduce_rows(const float (&acc)[kAccPerThread], float (&rows)[kRowsPerThread]) {
    static_assert(WarpsN == 1, "AccumulatorLayout::reduce_rows: the warps must split M only (policy FullRow)");
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int base = (r / 2) * kMmaN * 4 + (r % 2) * 2;
      float v = Op::combine(acc[base], acc[base + 1]);
#pragma unroll
      for (int ni = 1; ni < kMmaN; ++ni) v = Op::combine(v, Op::combine(acc[base + ni * 4], acc[base + ni * 4 + 1]));
      v = Op::combine(v, __shfl_xor_sync(0xffffffffu, v, 1));
      v = Op::combine(v, __shfl_xor_sync(0xffffffffu, v, 2));
      rows[r] = v;
    }
  }
  __device__ static int acc_col(int i) { return warp_n() * kWarpN + acc_col_in_warp(i, threadIdx.x % 32); }
};

// The 4 lanes of a quad (lane q = lane % 4) hold one row of four 8-column blocks as 16-bit pairs:
// w[b] is pair q of block b. Two xor shuffles transpose the 4 x 4 matrix, so that lane q ends with
// block q's four pairs (8 consecutive columns, one 16-byte store) in w[0..3]. Every lane of the
// warp calls it.
__device__ __forceinline__ void transpose_quad_pairs(unsigned (&w)[4], int q) {
#pragma unroll
  for (int p = 0; p < 2; ++p) {  // 2 x 2 blocks: swap with lane q ^ 1
    const unsigned v = __shfl_xor_sync(0xffffffffu, (q & 1) ? w[2 * p] : w[2 * p + 1], 1);
    if (q & 1)
      w[2 * p] = v;
    else
      w[2 * p + 1] = v;
  }
#pragma unroll
  for (int p = 0; p < 2; ++p) {  // the blocks: swap with lane q ^ 2
    const unsigned v = __shfl_xor_sync(0xffffffffu, (q & 2) ? w[p] : w[p + 2], 2);
    if (q & 2)
      w[p] = v;
    else
      w[p + 2] = v;
  }
}

// The four 32-bit A registers of mma.m16n8k16 (and of wgmma with A from registers) for m16
// row block mi and k16 step kk of a 16-bit A tile held in AccumulatorLayout<BM, BK, WarpsM, 1>
// (kMmaN = BK / 8 n8 blocks per row block): registers 8 (mi * BK/16 + kk) + 0..7, in order,
// are a0..a7 of the PTX fragment, packed in pairs (low half first).
template <class TIn, int KSteps>
__device__ __forceinline__ void pack_a_operand(const TIn* a, int mi, int kk, unsigned (&out)[4]) {
  const int base = (mi * KSteps + kk) * 8;
#pragma unroll
  for (int j = 0; j < 4; ++j)
    out[j] = static_cast<unsigned>(a[base + 2 * j].bits) | (static_cast<unsigned>(a[base + 2 * j + 1].bits) << 16);
}

}  // namespace tessel
