// cp.async (sm_80+): asynchronous 4/8/16-byte global -> shared copies and their group waits.
// All cp.async inline PTX lives here.
//
// Usage pattern the compiler emits for a pipeline: issue copies, cp_async_commit() once per
// stage (also when no copy was issued, so group counts stay uniform across threads and
// iterations), then cp_async_wait<stages - 2>() and a barrier before reading a stage.
#pragma once

#include "smem.cuh"

namespace tessel {

// Copies 16 bytes gmem -> smem, or writes 16 zero bytes when !pred. Both addresses must be
// 16-byte aligned. The zero fill uses the src-size operand (0 bytes read), so the source is
// not read when !pred, but it must still be a valid global address: pass the tile's base
// pointer rather than an out-of-bounds one.
// .cg caches in L2 only: the tile is reused from shared memory, not from L1.
__device__ inline void cp_async_16(void* smem, const void* gmem, bool pred) {
  const unsigned int dst = smem_address(smem);
  const int src_bytes = pred ? 16 : 0;
  asm volatile(
      "{\n"
      "  .reg .u64 src;\n"
      "  cvta.to.global.u64 src, %1;\n"
      "  cp.async.cg.shared.global.L2::128B [%0], [src], 16, %2;\n"
      "}\n" ::"r"(dst),
      "l"(gmem), "r"(src_bytes)
      : "memory");
}

// Copies src_bytes (0..Bytes) from gmem and zero-fills the rest of the Bytes-byte chunk at
// smem. Bytes is 4, 8 or 16; both addresses must be Bytes-aligned, and gmem must be a valid
// global address even when src_bytes == 0 (nothing is read then). 16 bytes go through L2
// only (.cg); 4 and 8 bytes must use .ca (PTX allows .cg for 16 bytes alone).
template <int Bytes>
__device__ inline void cp_async_n(void* smem, const void* gmem, int src_bytes) {
  static_assert(Bytes == 4 || Bytes == 8 || Bytes == 16, "cp_async_n: Bytes must be 4, 8 or 16");
  const unsigned int dst = smem_address(smem);
  if constexpr (Bytes == 16) {
    asm volatile(
        "{\n"
        "  .reg .u64 src;\n"
        "  cvta.to.global.u64 src, %1;\n"
        "  cp.async.cg.shared.global.L2::128B [%0], [src], 16, %2;\n"
        "}\n" ::"r"(dst),
        "l"(gmem), "r"(src_bytes)
        : "memory");
  } else {
    asm volatile(
        "{\n"
        "  .reg .u64 src;\n"
        "  cvta.to.global.u64 src, %1;\n"
        "  cp.async.ca.shared.global [%0], [src], %2, %3;\n"
        "}\n" ::"r"(dst),
        "l"(gmem), "n"(Bytes), "r"(src_bytes)
        : "memory");
  }
}

// Closes the group of all cp.async issued by this thread since the previous commit.
__device__ inline void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Waits until at most N of this thread's committed groups are still in flight. Only this
// thread's copies are covered: a barrier is needed before other threads read the data.
template <int N>
__device__ inline void cp_async_wait() {
  static_assert(N >= 0, "cp_async_wait<N>: N (groups left in flight) must be >= 0");
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Waits for every cp.async this thread issued, committed or not.
__device__ inline void cp_async_wait_all() {
  asm volatile("cp.async.wait_all;\n" ::: "memory");
}

}  // namespace tessel
