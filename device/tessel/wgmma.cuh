// wgmma.mma_async (sm_90a): warpgroup matrix multiply-accumulate, the one place for its
// inline PTX. A warpgroup is 4 consecutive warps whose first warp index is a multiple of 4;
// all 128 threads execute every call here together (".sync.aligned").
//
// Shapes: m64nNk16, N in {64, 96, 128, 160, 192, 224, 256} (multiples of 32 keep this file
// short; the hardware takes any multiple of 8), f16 or bf16 inputs, f32 accumulators.
//   wgmma_ss<T, N, TransA, TransB>(d, desc_a, desc_b, scale_d): A and B from shared memory.
//   wgmma_rs<T, N, TransB>(d, a, desc_b, scale_d): A from registers (4 x b32 per thread,
//     the mma.m16n8k16 A fragment of the warp's 16 rows), B from shared memory.
// scale_d = 0 computes d = A*B (the old d is ignored), 1 computes d += A*B.
// Trans = 0: the operand is K-major in shared memory (K contiguous: A row-major [M][K], B
// stored [N][K]); Trans = 1: MN-major (A [K][M]; B row-major [K][N], i.e. the tutorial's B).
//
// Accumulator layout (the PTX ISA's wgmma D fragment for .f32): thread t of the warpgroup,
// warp w = t / 32, lane l = t % 32, register i < N/2:
//   row(i) = 16 w + l / 4 + 8 ((i / 2) % 2)
//   col(i) = 8 (i / 4) + 2 (l % 4) + i % 2
// i.e. N/8 m16n8 mma.sync C fragments side by side, warp w owning rows 16w..16w+15.
//
// Ordering rules the caller follows (PTX ISA, "asynchronous warpgroup level matrix"):
//   wgmma_fence() before the first wgmma of a batch whenever the accumulator registers (or
//   the A registers) were touched by ordinary instructions since the last wgmma;
//   wgmma_commit() closes the batch into a group; wgmma_wait<N>() blocks until at most N
//   groups are pending: only then may the accumulators be read or the shared operands be
//   overwritten. wgmma_fence_operand(d) stops the compiler moving accesses to d across it.
#pragma once

#include "smem.cuh"
#include "types.cuh"

namespace tessel {

// ---- shared-memory matrix descriptors ---------------------------------------------------
// 64-bit descriptor (PTX ISA "matrix descriptor format"):
//   bits  0-13 start address >> 4      bits 16-29 leading-dimension byte offset >> 4
//   bits 32-45 stride-dimension byte offset >> 4
//   bits 49-51 base offset (0: every swizzle atom starts on a 1024-byte boundary here)
//   bits 62-63 swizzle: 0 none, 1 128-byte, 2 64-byte, 3 32-byte
enum class WgmmaSwizzle : unsigned { kNone = 0, k128B = 1, k64B = 2, k32B = 3 };

__device__ inline unsigned long long make_wgmma_desc(unsigned smem_addr, unsigned lbo_bytes,
                                                     unsigned sbo_bytes, WgmmaSwizzle swz) {
  unsigned long long d = 0;
  d |= static_cast<unsigned long long>((smem_addr >> 4) & 0x3FFF);
  d |= static_cast<unsigned long long>((lbo_bytes >> 4) & 0x3FFF) << 16;
  d |= static_cast<unsigned long long>((sbo_bytes >> 4) & 0x3FFF) << 32;
  d |= static_cast<unsigned long long>(static_cast<unsigned>(swz)) << 62;
  return d;
}

// Descriptors for tiles in WgmmaSwizzle128Layout (hopper_layout.cuh), 16-bit elements. A
// swizzle atom is 8 rows of 128 bytes (1024 bytes, 1024-aligned).
//  K-major (rows = M or N, 64 K elements per 128-byte row): the 8-row groups along M/N are
//    1024 bytes apart (SBO); one k16 step stays inside a 128-byte row, so LBO is unused
//    (set to 1 by convention). Step k16 -> start address + 32 bytes.
//  MN-major (rows = K, 64 M/N elements per 128-byte row, column panels of 64 elements
//    each `panel_bytes` apart): 8-row groups along K are 1024 bytes apart (SBO), 64-element
//    panels along M/N are panel_bytes apart (LBO). Step k16 -> start address + 2048 bytes.
__device__ inline unsigned long long wgmma_desc_kmajor_sw128(unsigned smem_addr) {
  return make_wgmma_desc(smem_addr, 16, 1024, WgmmaSwizzle::k128B);
}
__device__ inline unsigned long long wgmma_desc_mnmajor_sw128(unsigned smem_addr, unsigned panel_bytes) {
#ifdef TESSEL_WGMMA_MN_SWAP_OFFSETS  // debugging aid: the other reading of LBO/SBO
  return make_wgmma_desc(smem_addr, 1024, panel_bytes, WgmmaSwizzle::k128B);
#else
  return make_wgmma_desc(smem_addr, panel_bytes, 1024, WgmmaSwizzle::k128B);
#endif
}

// K-major operand in WgmmaSwizzleLayout<..., S> (S = 32, 64 or 128 byte rows, 16-bit
// elements): 8-row groups 8 * S bytes apart (SBO); a k16 step (32 bytes) stays inside a row
// for S >= 32, so LBO is unused. wgmma_desc_kmajor(a, 128) == wgmma_desc_kmajor_sw128(a).
__device__ inline unsigned long long wgmma_desc_kmajor(unsigned smem_addr, int swizzle_bytes) {
  const WgmmaSwizzle swz = swizzle_bytes == 128  ? WgmmaSwizzle::k128B
                           : swizzle_bytes == 64 ? WgmmaSwizzle::k64B
                                                 : WgmmaSwizzle::k32B;
  return make_wgmma_desc(smem_addr, 16, 8 * swizzle_bytes, swz);
}

// ---- ordering ------------------------------------------------------------------------------
__device__ inline void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ inline void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N>
__device__ inline void wgmma_wait() {
  static_assert(N >= 0 && N <= 7, "wgmma_wait<N>: N is the number of groups left pending, 0..7");
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
template <int R>
__device__ inline void wgmma_fence_operand(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// A 16-bit A operand in registers (half_t / bfloat16_t: raw bits).
template <class T, int R>
__device__ inline void wgmma_fence_operand(T (&d)[R]) {
  static_assert(sizeof(T) == 2, "wgmma_fence_operand: float accumulators or 16-bit A operands");
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+h"(d[i].bits)::"memory");
}

// ---- the instructions ----------------------------------------------------------------------
template <class T, int N>
struct Wgmma {
  static_assert(sizeof(T) == 0,
                "tessel::Wgmma<T, N>: T must be half_t or bfloat16_t and N a multiple of 16 "
                "in 64..256");
};

#define TESSEL_WGMMA_F4(b) "+f"(d[b]), "+f"(d[b + 1]), "+f"(d[b + 2]), "+f"(d[b + 3])
#define TESSEL_WGMMA_F16(b) \
  TESSEL_WGMMA_F4(b), TESSEL_WGMMA_F4(b + 4), TESSEL_WGMMA_F4(b + 8), TESSEL_WGMMA_F4(b + 12)
#define TESSEL_WGMMA_F32(b) TESSEL_WGMMA_F16(b), TESSEL_WGMMA_F16(b + 16)
#define TESSEL_WGMMA_OPS(...) __VA_ARGS__
// Operand numbering after the N/2 accumulators: %I0 desc_b, %I1 scale_d, %I2 trans_b, then
// ss: %I3 desc_a, %I4 trans_a;  rs: %I3..%I6 the four A registers.
#define TESSEL_WGMMA_DEFINE(N, TYPE, TS, DREGS, OPS, I0, I1, I2, I3, I4, I5, I6)                            \
  template <>                                                                                               \
  struct Wgmma<TYPE, N> {                                                                                   \
    template <int TA, int TB>                                                                               \
    __device__ static void ss(float (&d)[N / 2], unsigned long long da, unsigned long long db,              \
                              int scale_d) {                                                                \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" I1                                                  \
                   ", 0;\n"                                                                                 \
                   "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TS "." TS " " DREGS ", %" I3 ", %" I0  \
                   ", p, 1, 1, %" I4 ", %" I2 ";\n}\n"                                                      \
                   : OPS                                                                                    \
                   : "l"(db), "r"(scale_d), "n"(TB), "l"(da), "n"(TA));                                     \
    }                                                                                                       \
    template <int TB>                                                                                       \
    __device__ static void rs(float (&d)[N / 2], const unsigned (&a)[4], unsigned long long db,             \
                              int scale_d) {                                                                \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" I1                                                  \
                   ", 0;\n"                                                                                 \
                   "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TS "." TS " " DREGS ", {%" I3 ", %" I4 \
                   ", %" I5 ", %" I6 "}, %" I0 ", p, 1, 1, %" I2 ";\n}\n"                                   \
                   : OPS                                                                                    \
                   : "l"(db), "r"(scale_d), "n"(TB), "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]));           \
    }                                                                                                       \
  };

// Register lists "{%0, ..., %R-1}" for R = N/2 accumulators (string literals: inline asm
// cannot build them at compile time).
#define TESSEL_WGMMA_D32 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define TESSEL_WGMMA_D40 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39}"
#define TESSEL_WGMMA_D48 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, " \
  "%40, %41, %42, %43, %44, %45, %46, %47}"
#define TESSEL_WGMMA_D56 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, " \
  "%40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55}"
#define TESSEL_WGMMA_D64 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, " \
  "%40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, " \
  "%59, %60, %61, %62, %63}"
#define TESSEL_WGMMA_D72 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, " \
  "%40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, " \
  "%59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71}"
#define TESSEL_WGMMA_D80 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, " \
  "%40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, " \
  "%59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, " \
  "%78, %79}"
#define TESSEL_WGMMA_D88 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, " \
  "%40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, " \
  "%59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, " \
  "%78, %79, %80, %81, %82, %83, %84, %85, %86, %87}"
#define TESSEL_WGMMA_D96 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, " \
  "%40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, " \
  "%59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, " \
  "%78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}"
#define TESSEL_WGMMA_D104 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, " \
  "%40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, " \
  "%59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, " \
  "%78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, " \
  "%97, %98, %99, %100, %101, %102, %103}"
#define TESSEL_WGMMA_D112 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, " \
  "%40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, " \
  "%59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, " \
  "%78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, " \
  "%97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111}"
#define TESSEL_WGMMA_D120 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, " \
  "%40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, " \
  "%59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, " \
  "%78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, " \
  "%97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, " \
  "%114, %115, %116, %117, %118, %119}"
#define TESSEL_WGMMA_D128 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, " \
  "%40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, " \
  "%59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, " \
  "%78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, " \
  "%97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, " \
  "%114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"

TESSEL_WGMMA_DEFINE(64, half_t, "f16", TESSEL_WGMMA_D32, TESSEL_WGMMA_OPS(TESSEL_WGMMA_F32(0)), "32", "33", "34", "35", "36", "37", "38")
TESSEL_WGMMA_DEFINE(64, bfloat16_t, "bf16", TESSEL_WGMMA_D32, TESSEL_WGMMA_OPS(TESSEL_WGMMA_F32(0)), "32", "33", "34", "35", "36", "37", "38")
TESSEL_WGMMA_DEFINE(80, half_t, "f16", TESSEL_WGMMA_D40, TESSEL_WGMMA_OPS(TESSEL_WGMMA_F32(0), TESSEL_WGMMA_F4(32), TESSEL_WGMMA_F4(36)), "40", "41", "42", "43", "44", "45", "46")
TESSEL_WGMMA_DEFINE(80, bfloat16_t, "bf16", TESSEL_WGMMA_D40, TESSEL_WGMMA_OPS(TESSEL_WGMMA_F32(0), TESSEL_WGMMA_F4(32), TESSEL_WGMMA_F4(36)), "40", "41", "42", "43", "44", "45", "46")
TESSEL_WGMMA_DEFINE(96, half_t, "f16", TESSEL_WGMMA_D48, TESSEL_WGMMA_OPS(TESSEL_WGMMA_F32(0), TESSEL_WGMMA_F16(32)), "48", "49", "50", "51", "52", "53", "54")
TESSEL_WGMMA_DEFINE(96, bfloat16_t, "bf16", TESSEL_WGMMA_D48, TESSEL_WGMMA_OPS(TESSEL_WGMMA_F32(0), TESSEL_WGMMA_F16(32)), "48", "49", "50", "51", "52", "53", "54")
TESSEL_WGMMA_DEFINE(112, half_t, "f16", TESSEL_WGMMA_D56, TESSEL_WGMMA_OPS(TESSEL_WGMMA_F32(0), TESSEL_WGMMA_F16(32), TESSEL_WGMMA_F4(48), TESSEL_WGMMA_F4(52)), "56", "57", "58", "59", "60", "61", "62")
TESSEL_WGMMA_DEFINE(112, bfloat16_t, "bf16", TESSEL_WGMMA_D56, TESSEL_WGMMA_OPS(TESSEL_WGMMA_F32(0), TESSEL_WGMMA_F16(32), TESSEL_WGMMA_F4(48), TESSEL_WGMMA_F4(52)), "56", "57", "58", "59", "60", "61", "62")
TESSEL_WGMMA_DEFINE(128, half_t, "f16", TESSEL_WGMMA_D64, TESSEL_WGMMA_OPS(TESSEL_WGMMA_F32(0), TESSEL_WGMMA_F32(32)), "64", "65", "66", "67", "68", "69", "70")
TESSEL_WGMMA_DEFINE(128, bfloat16_t, "bf16", TESSEL_WGMMA_D64, TESSEL_WGMMA_OPS(TESSEL_WGMMA_F32(0), TESSEL_WGMMA_F32(32)), "64", "65", "66", "67", "68", "69", "70")
TESSEL_WGMMA_DEFINE(144, half_t, "f16", TESSEL_WGMMA_D72, TESSEL_WGMMA_OPS(TESSEL_WGMMA_F32(0), TESSEL_WGMMA_F32(32), TESSEL_WGMMA_F4(64), TESSEL_WGMMA_F4(68)), "72", "73", "74", "75", "76", "77", "78")
TESSEL_WGMMA_DEFINE(144, bfloat16_t, "bf16", TESSEL_WGMMA_D72, TESSEL_WGMMA_OPS(TESSEL_WGMMA_F32(0), TESSEL_WGMMA_F32(32), TESSEL_WGMMA_F4(64), TESSEL_WGMMA_F4(68)), "72", "73", "74", "75", "76", "77", "78")
TESSEL_WGMMA_DEFINE(160, half_t, "f16", TESSEL_WGMMA_D80, TESSEL_WGMMA_OPS(TESSEL_WGMMA_F32(0), TESSEL_WGMMA_F32(32), TESSEL_WGMMA_F16(64)), "80", "81", "82", "83", "84", "85", "86")
TESSEL_WGMMA_DEFINE(160, bfloat16_t, "bf16", TESSEL_WGMMA_D80, TESSEL_WGMMA_OPS(TESSEL_WGMMA_F32(0), TESSEL_WGMMA_F32(32), TESSEL_WGMMA_F16(64)), "80", "81", "82", "83", "84", "85", "86")
TESSEL_WGMMA_DEFINE(176, half_t, "f16", TESSEL_WGMMA_D88, TESSEL_WGMMA_OPS(TESSEL_WGMMA_F32(0), TESSEL_WGMMA_F32(32), TESSEL_WGMMA_F16(64), TESSEL_WGMMA_F4(80), TESSEL_WGMMA_F4(84)), "88", "89", "90", "91", "92", "93", "94")
TESSEL_WGMMA_DEFINE(176, bfloat16_t, "bf16", TESSEL_WGMMA_D88, TESSEL_WGMMA_OPS(TESSEL_WGMMA_F32(0), TESSEL_WGMMA_F32(32), TESSEL_WGMMA_F16(64), TESSEL_WGMMA_F4(80), TESSEL_WGMMA_F4(84)), "88", "89", "90", "91", "92", "93", "94")
TESSEL_WGMMA_DEFINE(192, half_t, "f16", TESSEL_WGMMA_D96, TESSEL_WGMMA_OPS(TESSEL_WGMMA_F32(0), TESSEL_WGMMA_F32(32), TESSEL_WGMMA_F32(64)), "96", "97", "98", "99", "100", "101", "102")
TESSEL_WGMMA_DEFINE(192, bfloat16_t, "bf16", TESSEL_WGMMA_D96, TESSEL_WGMMA_OPS(TESSEL_WGMMA_F32(0), TESSEL_WGMMA_F32(32), TESSEL_WGMMA_F32(64)), "96", "97", "98", "99", "100", "101", "102")
TESSEL_WGMMA_DEFINE(208, half_t, "f16", TESSEL_WGMMA_D104, TESSEL_WGMMA_OPS(TESSEL_WGMMA_F32(0), TESSEL_WGMMA_F32(32), TESSEL_WGMMA_F32(64), TESSEL_WGMMA_F4(96), TESSEL_WGMMA_F4(100)), "104", "105", "106", "107", "108", "109", "110")
TESSEL_WGMMA_DEFINE(208, bfloat16_t, "bf16", TESSEL_WGMMA_D104, TESSEL_WGMMA_OPS(TESSEL_WGMMA_F32(0), TESSEL_WGMMA_F32(32), TESSEL_WGMMA_F32(64), TESSEL_WGMMA_F4(96), TESSEL_WGMMA_F4(100)), "104", "105", "106", "107", "108", "109", "110")
TESSEL_WGMMA_DEFINE(224, half_t, "f16", TESSEL_WGMMA_D112, TESSEL_WGMMA_OPS(TESSEL_WGMMA_F32(0), TESSEL_WGMMA_F32(32), TESSEL_WGMMA_F32(64), TESSEL_WGMMA_F16(96)), "112", "113", "114", "115", "116", "117", "118")
TESSEL_WGMMA_DEFINE(224, bfloat16_t, "bf16", TESSEL_WGMMA_D112, TESSEL_WGMMA_OPS(TESSEL_WGMMA_F32(0), TESSEL_WGMMA_F32(32), TESSEL_WGMMA_F32(64), TESSEL_WGMMA_F16(96)), "112", "113", "114", "115", "116", "117", "118")
TESSEL_WGMMA_DEFINE(240, half_t, "f16", TESSEL_WGMMA_D120, TESSEL_WGMMA_OPS(TESSEL_WGMMA_F32(0), TESSEL_WGMMA_F32(32), TESSEL_WGMMA_F32(64), TESSEL_WGMMA_F16(96), TESSEL_WGMMA_F4(112), TESSEL_WGMMA_F4(116)), "120", "121", "122", "123", "124", "125", "126")
TESSEL_WGMMA_DEFINE(240, bfloat16_t, "bf16", TESSEL_WGMMA_D120, TESSEL_WGMMA_OPS(TESSEL_WGMMA_F32(0), TESSEL_WGMMA_F32(32), TESSEL_WGMMA_F32(64), TESSEL_WGMMA_F16(96), TESSEL_WGMMA_F4(112), TESSEL_WGMMA_F4(116)), "120", "121", "122", "123", "124", "125", "126")
TESSEL_WGMMA_DEFINE(256, half_t, "f16", TESSEL_WGMMA_D128, TESSEL_WGMMA_OPS(TESSEL_WGMMA_F32(0), TESSEL_WGMMA_F32(32), TESSEL_WGMMA_F32(64), TESSEL_WGMMA_F32(96)), "128", "129", "130", "131", "132", "133", "134")
TESSEL_WGMMA_DEFINE(256, bfloat16_t, "bf16", TESSEL_WGMMA_D128, TESSEL_WGMMA_OPS(TESSEL_WGMMA_F32(0), TESSEL_WGMMA_F32(32), TESSEL_WGMMA_F32(64), TESSEL_WGMMA_F32(96)), "128", "129", "130", "131", "132", "133", "134")

#undef TESSEL_WGMMA_DEFINE
#undef TESSEL_WGMMA_D32
#undef TESSEL_WGMMA_D40
#undef TESSEL_WGMMA_D48
#undef TESSEL_WGMMA_D56
#undef TESSEL_WGMMA_D64
#undef TESSEL_WGMMA_D72
#undef TESSEL_WGMMA_D80
#undef TESSEL_WGMMA_D88
#undef TESSEL_WGMMA_D96
#undef TESSEL_WGMMA_D104
#undef TESSEL_WGMMA_D112
#undef TESSEL_WGMMA_D120
#undef TESSEL_WGMMA_D128
#undef TESSEL_WGMMA_OPS
#undef TESSEL_WGMMA_F32
#undef TESSEL_WGMMA_F16
#undef TESSEL_WGMMA_F4

// d (+)= A * B for one m64nNk16 step, both operands from shared memory.
template <class T, int N, int TransA, int TransB>
__device__ inline void wgmma_ss(float (&d)[N / 2], unsigned long long desc_a, unsigned long long desc_b,
                                int scale_d) {
  static_assert(is_mma_16bit<T>::value, "wgmma_ss: T must be half_t or bfloat16_t");
  static_assert(TransA == 0 || TransA == 1, "wgmma_ss: TransA is 0 (K-major) or 1 (M-major)");
  static_assert(TransB == 0 || TransB == 1, "wgmma_ss: TransB is 0 (K-major) or 1 (N-major)");
  Wgmma<T, N>::template ss<TransA, TransB>(d, desc_a, desc_b, scale_d);
}

// d (+)= A * B with A from registers: a[0..3] hold, for lane l of warp w, the elements
// (row 16w + l/4 + 8 (j % 2), k 2 (l % 4) + 8 (j / 2) + h) in register j, half h (low half
// first) -- the same fragment mma.m16n8k16 takes, so an accumulator tile converted with
// pack2 pairs (i, i+1) and regrouped per k16 is a ready A operand (FlashAttention's P*V).
template <class T, int N, int TransB>
__device__ inline void wgmma_rs(float (&d)[N / 2], const unsigned (&a)[4], unsigned long long desc_b,
                                int scale_d) {
  static_assert(is_mma_16bit<T>::value, "wgmma_rs: T must be half_t or bfloat16_t");
  static_assert(TransB == 0 || TransB == 1, "wgmma_rs: TransB is 0 (K-major) or 1 (N-major)");
  Wgmma<T, N>::template rs<TransB>(d, a, desc_b, scale_d);
}

// ---- setmaxnreg ----------------------------------------------------------------------------
// Moves registers between warpgroups of a warp-specialized kernel: a producer that only
// issues TMA gives registers back (dec), the MMA warpgroups take them (inc). Effective only
// when the kernel has a register cap at entry (__launch_bounds__(threads, 1)) and all warps
// of a warpgroup execute it; the count is a multiple of 8 in 24..256.
template <int Regs>
__device__ inline void setmaxnreg_inc() {
  static_assert(Regs % 8 == 0 && Regs >= 24 && Regs <= 256,
                "setmaxnreg_inc<Regs>: Regs must be a multiple of 8 in 24..256");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(Regs));
}
template <int Regs>
__device__ inline void setmaxnreg_dec() {
  static_assert(Regs % 8 == 0 && Regs >= 24 && Regs <= 256,
                "setmaxnreg_dec<Regs>: Regs must be a multiple of 8 in 24..256");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(Regs));
}

}  // namespace tessel
