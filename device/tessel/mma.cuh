// Warp-level tensor-core primitives of the sm_80 path: ldmatrix and mma.sync.m16n8k16.
// All ldmatrix and mma inline PTX lives here.
//
// ldmatrix semantics (PTX ISA, "warp-level matrix load"): for .xN, thread t supplies the
// address of row t % 8 of matrix t / 8 (threads >= 8N are ignored); output register j of
// lane l holds row l / 4, elements 2 * (l % 4) and +1 of matrix j (two 16-bit values, lower
// column in the low half). .trans delivers the transposed matrix instead. Every row address
// must be 16-byte aligned.
#pragma once

#include "smem.cuh"
#include "types.cuh"

namespace tessel {

// Shared-window address versions (see smem.cuh): what BlockGemm calls, so that per-lane
// offsets are added to one base address per stage instead of re-deriving each pointer.
__device__ inline void ldmatrix_x4(unsigned (&r)[4], unsigned smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr));
}

__device__ inline void ldmatrix_x4_trans(unsigned (&r)[4], unsigned smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr));
}

__device__ inline void ldmatrix_x2(unsigned (&r)[2], unsigned smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_addr));
}

__device__ inline void ldmatrix_x2_trans(unsigned (&r)[2], unsigned smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_addr));
}

// Generic-pointer versions; `smem` must point into shared memory.
__device__ inline void ldmatrix_x4(unsigned (&r)[4], const void* smem) {
  ldmatrix_x4(r, smem_address(smem));
}
__device__ inline void ldmatrix_x4_trans(unsigned (&r)[4], const void* smem) {
  ldmatrix_x4_trans(r, smem_address(smem));
}
__device__ inline void ldmatrix_x2(unsigned (&r)[2], const void* smem) {
  ldmatrix_x2(r, smem_address(smem));
}
__device__ inline void ldmatrix_x2_trans(unsigned (&r)[2], const void* smem) {
  ldmatrix_x2_trans(r, smem_address(smem));
}

// ldmatrix is volatile because it reads shared memory behind the compiler's back (it must
// not be merged or moved across barriers); mma only touches registers, so it is not.

// d += A * B for one 16x8x16 tile, f32 accumulate. Fragments (lane l, g = l / 4, q = l % 4):
//   a[0]: A[g][2q..2q+1]  a[1]: A[g+8][2q..]  a[2]: A[g][2q+8..]  a[3]: A[g+8][2q+8..]
//   b[0]: B[2q..2q+1][g]  b[1]: B[2q+8..2q+9][g]
//   d[0], d[1]: D[g][2q], D[g][2q+1]          d[2], d[3]: D[g+8][2q], D[g+8][2q+1]
template <class T>
__device__ inline void mma_m16n8k16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  static_assert(is_mma_16bit<T>::value, "mma_m16n8k16<T>: T must be half_t or bfloat16_t");
  if constexpr (is_same<T, half_t>::value) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
}

}  // namespace tessel
