// Epilogues: BlockGemm accumulators -> a row-major global tile, converted to TOut and
// bounds-masked (element (r, c) is written iff r < rows_valid && c < cols_valid).
//
// Two variants, same result:
//   store_accumulators: straight from registers. Each thread writes its two adjacent
//     columns per fragment row, so a warp touches 8 rows x 16 bytes (f16) per store:
//     half-used 32-byte sectors. Needs no shared memory.
//   store_accumulators_wide: a wgmma tile straight from registers, a quad transpose first so that
//     each lane stores 8 consecutive columns at once (16-bit outputs, 16-byte aligned rows).
//   store_accumulators_via_shared: stages the tile through shared memory (swizzled, so the
//     fragment writes are conflict-free) and writes whole 16-byte chunks of consecutive
//     row data, fully coalesced. For large tiles where the epilogue's DRAM writes matter.
#pragma once

#include "accumulator.cuh"
#include "copy.cuh"
#include "cp_async.cuh"
#include "layout.cuh"
#include "smem.cuh"
#include "types.cuh"

namespace tessel {

namespace epilogue_detail {

// Writes the pair (acc[i], acc[i + 1]) = columns c, c + 1 of one row to p[0], p[1].
// Pair: one 4-byte (16-bit TOut) or 8-byte (float) store; the address must be aligned to
// two elements. Otherwise element stores. `n_valid` says how many of the two exist.
template <class TOut, bool Pair>
__device__ inline void store_pair(TOut* p, float lo, float hi, int n_valid) {
  if constexpr (Pair && is_mma_16bit<TOut>::value) {
    if (n_valid >= 2) {
      *reinterpret_cast<unsigned int*>(p) = pack2<TOut>(lo, hi);
      return;
    }
  } else if constexpr (Pair && is_same<TOut, float>::value) {
    if (n_valid >= 2) {
      *reinterpret_cast<float2*>(p) = make_float2(lo, hi);
      return;
    }
  }
  if (n_valid >= 1) p[0] = from_float<TOut>(lo);
  if (n_valid >= 2) p[1] = from_float<TOut>(hi);
}

}  // namespace epilogue_detail

// Vectorized: ld is even and gmem is aligned to 2 * sizeof(TOut), so column pairs are
// stored with one instruction. TAcc: float for a gemm's own accumulator; a 16-bit fragment
// computed element by element from one (an epilogue's output tile) has its layout too.
template <class TOut, class Gemm, bool Vectorized = false, class TAcc = float>
__device__ inline void store_accumulators(const TAcc (&acc)[Gemm::kAccPerThread], TOut* gmem, long long ld,
                                          int rows_valid, int cols_valid) {
#pragma unroll
  for (int i = 0; i < Gemm::kAccPerThread; i += 2) {
    const int r = Gemm::acc_row(i);
    const int c = Gemm::acc_col(i);
    if (r < rows_valid) {
      epilogue_detail::store_pair<TOut, Vectorized>(gmem + r * ld + c, float(to_float(acc[i])),
                                                    float(to_float(acc[i + 1])), cols_valid - c);
    }
  }
}

// smem_scratch: Gemm::kBM * Gemm::kBN elements of TOut, 16-byte aligned; it may alias the
// GEMM's operand buffers: this function first drains this thread's cp.async groups and
// barriers, so no copy or ldmatrix still touches it. It returns without a final barrier:
// barrier before reusing the scratch.
// Vectorized: ld * sizeof(TOut) % 16 == 0 and gmem is 16-byte aligned (16-byte stores).
template <class TOut, class Gemm, bool Vectorized = false, class TAcc = float>
__device__ inline void store_accumulators_via_shared(const TAcc (&acc)[Gemm::kAccPerThread],
                                                     TOut* smem_scratch, TOut* gmem, long long ld,
                                                     int rows_valid, int cols_valid) {
  using Scratch = PreferredSharedLayout<Gemm::kBM, Gemm::kBN, sizeof(TOut)>;
  static_assert(!Vectorized || (Gemm::kBN * sizeof(TOut)) % 16 == 0,
                "store_accumulators_via_shared<Vectorized>: BN * sizeof(TOut) must be a "
                "multiple of 16 bytes");
  cp_async_wait_all();
  block_sync();
  // A thread's column pair never straddles a 16-byte chunk (c is even), so it stays
  // contiguous under the swizzle and can be stored as a pair.
  constexpr bool kPair = (Gemm::kBN * sizeof(TOut)) % 16 == 0;
#pragma unroll
  for (int i = 0; i < Gemm::kAccPerThread; i += 2) {
    const int r = Gemm::acc_row(i);
    const int c = Gemm::acc_col(i);
    epilogue_detail::store_pair<TOut, kPair>(smem_scratch + Scratch::offset(r, c), float(to_float(acc[i])),
                                             float(to_float(acc[i + 1])), 2);
  }
  block_sync();
  copy_shared_to_global<TOut, Gemm::kBM, Gemm::kBN, Scratch, Gemm::kThreads, Vectorized>(
      gmem, smem_scratch, ld, rows_valid, cols_valid);
}

// A wgmma accumulator tile (warps along M in 16-row strips: WarpgroupGemm's layout) straight from
// registers in 16-byte stores, where no staging tile fits (tma_epilogue.cuh): the 4 lanes
// of a quad hold one row's 32 columns (8-column blocks 4 g .. 4 g + 3) as a 4 x 4 matrix of
// packed column pairs; two xor shuffles transpose it, so that lane q holds columns 8 (4 g + q) ..
// + 7 and stores them at once (4-byte pairs make half-used 32-byte sectors). gmem: the tile's
// first element, 16-byte aligned, ld a multiple of 8 (the caller proves both); element (r, c) is
// written iff r < rows_valid and c < cols_valid.
template <class TOut, class Gemm, class TAcc = float>
__device__ inline void store_accumulators_wide(const TAcc (&acc)[Gemm::kAccPerThread], TOut* gmem, long long ld,
                                               int rows_valid, int cols_valid) {
  constexpr int BN = Gemm::kBN;
  static_assert(is_mma_16bit<TOut>::value, "store_accumulators_wide: the output must be 16-bit");
  static_assert(Gemm::kWarpsN == 1 && BN % 32 == 0,
                "store_accumulators_wide: a wgmma accumulator (warps along M only), BN a multiple of 32");
  const int lane = threadIdx.x % 32, q = lane % 4;
#pragma unroll
  for (int mi = 0; mi < Gemm::kMmaM; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int first = mi * (BN / 2) + 2 * h;  // the row's first register in m16 block mi
      const int r = Gemm::acc_row(first);
#pragma unroll
      for (int g = 0; g < BN / 32; ++g) {
        unsigned w[4];
#pragma unroll
        for (int b = 0; b < 4; ++b) {
          const int i = first + (4 * g + b) * 4;
          w[b] = pack2<TOut>(float(to_float(acc[i])), float(to_float(acc[i + 1])));
        }
        transpose_quad_pairs(w, q);
        const int col = 8 * (4 * g + q);
        if (r >= rows_valid) continue;
        TOut* p = gmem + static_cast<long long>(r) * ld + col;
        if (col + 8 <= cols_valid) {
          *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
          continue;
        }
#pragma unroll
        for (int e = 0; e < 8; ++e)
          if (col + e < cols_valid)
            *reinterpret_cast<unsigned short*>(p + e) =
                static_cast<unsigned short>(w[e / 2] >> (16 * (e % 2)));
      }
    }
}

}  // namespace tessel
