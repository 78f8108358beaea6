// Element types and scalar conversions used by Tessel's generated code.
//
// Generated kernels never include <cuda_fp16.h> (NVRTC compile time, and no dependency on
// the toolkit's header layout), so the 16-bit float types here are plain storage structs and
// every conversion is one PTX instruction. Generated code converts with
// `tessel::to_float(x)` and `tessel::from_float<T>(f)` whatever the element type is.
#pragma once

namespace tessel {

// Fixed-width integers over NVRTC's builtin types (there is no <cstdint> under NVRTC).
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;

static_assert(sizeof(int16_t) == 2 && sizeof(int32_t) == 4 && sizeof(int64_t) == 8,
              "tessel fixed-width integer aliases have the wrong size on this target");

// IEEE binary16 and bfloat16, stored as raw bits. Arithmetic happens in float; these types
// only exist in memory and in the 16-bit operands of tensor-core instructions.
struct half_t {
  unsigned short bits;
};
struct bfloat16_t {
  unsigned short bits;
};

static_assert(sizeof(half_t) == 2 && sizeof(bfloat16_t) == 2,
              "16-bit float storage types must be exactly 2 bytes (they are reinterpreted in "
              "pairs as 32-bit mma operands)");

// True for the two 16-bit float types that mma.sync.m16n8k16 accepts.
template <class T>
struct is_mma_16bit {
  static constexpr bool value = false;
};
template <>
struct is_mma_16bit<half_t> {
  static constexpr bool value = true;
};
template <>
struct is_mma_16bit<bfloat16_t> {
  static constexpr bool value = true;
};

template <class A, class B>
struct is_same {
  static constexpr bool value = false;
};
template <class A>
struct is_same<A, A> {
  static constexpr bool value = true;
};

// ---- to_float: the value in its compute type --------------------------------------------
// 16-bit floats widen to float (exact); wider types are returned unchanged, so that
// `to_float(x)` never loses precision and generated code can use it on any element.

__device__ inline float to_float(half_t x) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits));
  return f;
}

// bf16 is the top half of a float, so widening is a shift (no cvt.f32.bf16 before sm_90).
__device__ inline float to_float(bfloat16_t x) {
  return __int_as_float(static_cast<int>(static_cast<unsigned int>(x.bits) << 16));
}

__device__ inline float to_float(float x) {
  return x;
}
__device__ inline double to_float(double x) {
  return x;
}
__device__ inline int to_float(int x) {
  return x;
}  // int8/uint8/int16 promote to this one
__device__ inline unsigned int to_float(unsigned int x) {
  return x;
}
__device__ inline long long to_float(long long x) {
  return x;
}

// ---- from_float<T>: round a float to the element type ----------------------------------
// 16-bit targets round to nearest even (cvt.rn), the same rounding as cuBLAS epilogues.

template <class T>
__device__ inline T from_float(float x) {
  static_assert(sizeof(T) == 0,
                "tessel::from_float<T>: T must be half_t, bfloat16_t, float, double or int; "
                "int8_t, uint8_t, uint32_t, int64_t");
  return T{};
}

template <>
__device__ inline half_t from_float<half_t>(float x) {
  half_t h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(x));
  return h;
}

template <>
__device__ inline bfloat16_t from_float<bfloat16_t>(float x) {
  bfloat16_t h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h.bits) : "f"(x));
  return h;
}

template <>
__device__ inline float from_float<float>(float x) {
  return x;
}
template <>
__device__ inline double from_float<double>(float x) {
  return static_cast<double>(x);
}
// Integers: C semantics (truncation toward zero), as a cast in the user's program would do.
template <>
__device__ inline int from_float<int>(float x) {
  return static_cast<int>(x);
}
template <>
__device__ inline long long from_float<long long>(float x) {
  return static_cast<long long>(x);
}
template <>
__device__ inline unsigned int from_float<unsigned int>(float x) {
  return static_cast<unsigned int>(x);
}
template <>
__device__ inline signed char from_float<signed char>(float x) {
  return static_cast<signed char>(x);
}
template <>
__device__ inline unsigned char from_float<unsigned char>(float x) {
  return static_cast<unsigned char>(x);
}

// ---- pack2<T>: two floats -> one 32-bit register of two 16-bit values --------------------
// `lo` lands in the low half, i.e. at the lower address once stored; this is the order of
// the two accumulator columns an mma thread owns. Note cvt.*x2 puts its FIRST source in the
// HIGH half, hence the swapped operands.

template <class T>
__device__ inline unsigned int pack2(float lo, float hi) {
  static_assert(is_mma_16bit<T>::value, "tessel::pack2<T>: T must be half_t or bfloat16_t");
  unsigned int r;
  if constexpr (is_same<T, half_t>::value) {
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  } else {
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  }
  return r;
}

// ---- special values -----------------------------------------------------------------------
// Bit patterns rather than 1.0f/0.0f, which NVRTC folds with a warning and fast-math may
// not preserve. Used as identities of max/min reductions.

__device__ inline float infinity_f32() {
  return __int_as_float(0x7f800000);
}
__device__ inline float nan_f32() {
  return __int_as_float(0x7fffffff);
}

// 2^x by one MUFU.EX2 (the language's fast_exp2): results below 2^-126 flush to 0, as do
// denormal inputs. exp2f wraps the same instruction in a range check and two multiplies.
__device__ inline float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// 2^x on the FMA pipe (the language's poly_exp2), for kernels whose exponentials are bound by the
// MUFU unit's 16 a clock an SM (attention at D = 64 computes as many exponentials as tensor-core
// multiply-adds per clock can hide). x is clamped to [-127, 128] (NaN kept); j = floor(x) by an add
// rounded down against 1.5 * 2^23 (j lands in the sum's low bits); f = x - j in [0, 1) exactly;
// 2^f by a degree-3 polynomial p (a minimax fit of the relative error, p(0) = 1, below 8.6e-5 on
// [0, 1)); 2^j built in the exponent field (0 for j = -127, infinity for j = 128) and multiplied
// in. So: results below 2^-126 are 0 and -inf gives 0, as fast_exp2's; x >= 128 gives infinity,
// NaN gives NaN. Ten instructions (two FMNMX, three FADD, three FFMA, an IMAD, an FMUL), no MUFU.
// The interpreter computes the same bits (runtime/HostFloat.hpp's poly_exp2_like_the_gpu, with
// the same coefficients); PolyExp2Gpu.SameBitsAsTheInterpreter checks that they agree.
__device__ inline float poly_exp2(float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("max.NaN.f32 %0, %0, 0fC2FE0000;" : "+f"(x));  // -127
  asm("min.NaN.f32 %0, %0, 0f43000000;" : "+f"(x));  // 128
#else
  if (x == x) x = fminf(fmaxf(x, -127.0f), 128.0f);
#endif
  const float t = __fadd_rd(x, 12582912.0f);  // 1.5 * 2^23 + floor(x), exactly
  const float f = x - (t - 12582912.0f);      // x - floor(x), exactly
  float p = fmaf(0x1.3baac0p-4f, f, 0x1.d23778p-3f);
  p = fmaf(p, f, 0x1.63e65ap-1f);
  p = fmaf(p, f, 1.0f);
  // (bits(t) << 23) is floor(x) << 23: the 1.5 * 2^23's bits shift out.
  return p * __uint_as_float(__float_as_uint(t) * 8388608u + 0x3f800000u);
}

// The element-wise epilogue a GEMM applies when it is given none: values stored as they are.
struct NoEpilogue {};
template <class E>
struct is_no_epilogue {
  static constexpr bool value = false;
};
template <>
struct is_no_epilogue<NoEpilogue> {
  static constexpr bool value = true;
};

// select(c, a, b) with both a and b already evaluated (generated code: an arm that reads a
// global tensor, its index clamped when not taken), so that no branch guards the load.
template <class T>
__device__ __forceinline__ T pick(bool c, T a, T b) {
  return c ? a : b;
}

}  // namespace tessel
