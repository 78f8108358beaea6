// Row reductions and row-vector copies for fragments in the row-blocked layout (the layout the
// compiler gives element-wise tiles such as softmax rows): each row of a tile is spread over
// `Lanes` consecutive threads, each holding runs of `Vec` contiguous elements.
//
// A reduction is: per-thread partial over its registers, then a butterfly of warp shuffles
// over the lanes of a row, then (rows wider than a warp) one value per warp through shared
// memory. Max and min propagate NaN like PyTorch, not like fmaxf.
#pragma once

#include "types.cuh"

namespace tessel {

struct ReduceMaxOp {
  __device__ static float identity() { return -__int_as_float(0x7f800000); }
  __device__ static float combine(float a, float b) { return (a != a || a > b) ? a : b; }
};
struct ReduceMinOp {
  __device__ static float identity() { return __int_as_float(0x7f800000); }
  __device__ static float combine(float a, float b) { return (a != a || a < b) ? a : b; }
};
struct ReduceSumOp {
  __device__ static float identity() { return 0.0f; }
  __device__ static float combine(float a, float b) { return a + b; }
};

// Combines v over groups of `Width` consecutive lanes (Width a power of two <= 32); every lane
// of a group ends with the group's result.
template <class Op, int Width>
__device__ inline float reduce_lanes(float v) {
  static_assert(Width >= 1 && Width <= 32 && (Width & (Width - 1)) == 0,
                "reduce_lanes: Width must be a power of two from 1 to 32");
#pragma unroll
  for (int offset = Width / 2; offset > 0; offset /= 2)
    v = Op::combine(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Combines one value per warp across the `WarpsPerRow` warps that share a row. All threads of
// the block must call it (it has barriers). `scratch` holds RowsPerPass * WarpsPerRow floats.
template <class Op, int WarpsPerRow>
__device__ inline float reduce_warps(float v, float* scratch) {
  static_assert(WarpsPerRow >= 1 && WarpsPerRow <= 32, "reduce_warps: 1 to 32 warps per row");
  if (WarpsPerRow == 1) return v;
  const int warp = threadIdx.x / 32;
  if (threadIdx.x % 32 == 0) scratch[warp] = v;
  __syncthreads();
  const int first = warp / WarpsPerRow * WarpsPerRow;
  float r = scratch[first];
#pragma unroll
  for (int w = 1; w < WarpsPerRow; ++w) r = Op::combine(r, scratch[first + w]);
  __syncthreads();  // the scratch may be reused by the next reduction
  return r;
}

// In-place forms over register arrays, for generated code: out[0] = Op over src[0..N).
template <class Op, int N>
__device__ inline void reduce_registers(const float* src, float* out) {
  float v = src[0];
#pragma unroll
  for (int i = 1; i < N; ++i) v = Op::combine(v, src[i]);
  out[0] = v;
}
template <class Op, int Width>
__device__ inline void reduce_lanes_inplace(float* v) {
  v[0] = reduce_lanes<Op, Width>(v[0]);
}
template <class Op, int WarpsPerRow>
__device__ inline void reduce_warps_inplace(float* v, float* scratch) {
  v[0] = reduce_warps<Op, WarpsPerRow>(v[0], scratch);
}

namespace reduce_detail {
template <int Bytes>
struct VectorWord {};
template <>
struct VectorWord<16> {
  typedef uint4 type;
};
template <>
struct VectorWord<8> {
  typedef uint2 type;
};
template <>
struct VectorWord<4> {
  typedef unsigned type;
};
}  // namespace reduce_detail

// Loads Vec elements g[0..Vec) as floats into dst[0..Vec); elements at or past `valid` are
// `pad`. One 16-byte (or 8/4-byte) load when all Vec are valid and the address is aligned.
template <class T, int Vec>
__device__ inline void load_row_vector(const T* g, int valid, float pad, float* dst) {
  constexpr int kBytes = Vec * static_cast<int>(sizeof(T));
  if constexpr (kBytes == 16 || kBytes == 8 || kBytes == 4) {
    typedef typename reduce_detail::VectorWord<kBytes>::type Word;
    if (valid >= Vec && (reinterpret_cast<unsigned long long>(g) % kBytes) == 0) {
      union {
        Word word;
        T elems[Vec];
      } pack;
      pack.word = __ldg(reinterpret_cast<const Word*>(g));
#pragma unroll
      for (int v = 0; v < Vec; ++v) dst[v] = static_cast<float>(to_float(pack.elems[v]));
      return;
    }
  }
#pragma unroll
  for (int v = 0; v < Vec; ++v) dst[v] = v < valid ? static_cast<float>(to_float(g[v])) : pad;
}

// Two-phase form of load_row_vector, for a thread that loads several vectors: the compiler emits
// every fetch first and every unpack after, so that all of a thread's 16-byte loads are in
// flight together. (With one call per vector, the branch between the vector and the element
// path kept ptxas from hoisting the next load above the previous conversion: one memory round
// trip per vector.) `stage` holds Vec * sizeof(T) / 4 words per vector.
template <class T, int Vec>
__device__ inline bool row_vector_fast(const T* g, int valid) {
  constexpr int kBytes = Vec * static_cast<int>(sizeof(T));
  return valid >= Vec && (reinterpret_cast<unsigned long long>(g) % kBytes) == 0;
}

// Issues the vector load when the vector is whole and aligned (a predicated load: no branch);
// otherwise leaves zeros for unpack_row_vector, which then reads element by element.
template <class T, int Vec>
__device__ inline void fetch_row_vector(const T* g, int valid, int* stage) {
  constexpr int kBytes = Vec * static_cast<int>(sizeof(T));
  static_assert(kBytes == 16 || kBytes == 8 || kBytes == 4, "fetch_row_vector: 4, 8 or 16 bytes per vector");
  const int fast = row_vector_fast<T, Vec>(g, valid) ? 1 : 0;
  if constexpr (kBytes == 16) {
    asm volatile(
        "{\n .reg .pred p;\n setp.ne.b32 p, %5, 0;\n mov.b32 %0, 0;\n mov.b32 %1, 0;\n mov.b32 %2, 0;\n"
        " mov.b32 %3, 0;\n @p ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];\n}\n"
        : "=r"(stage[0]), "=r"(stage[1]), "=r"(stage[2]), "=r"(stage[3])
        : "l"(g), "r"(fast));
  } else if constexpr (kBytes == 8) {
    asm volatile(
        "{\n .reg .pred p;\n setp.ne.b32 p, %3, 0;\n mov.b32 %0, 0;\n mov.b32 %1, 0;\n"
        " @p ld.global.nc.v2.u32 {%0, %1}, [%2];\n}\n"
        : "=r"(stage[0]), "=r"(stage[1])
        : "l"(g), "r"(fast));
  } else {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %2, 0;\n mov.b32 %0, 0;\n @p ld.global.nc.u32 %0, [%1];\n}\n"
                 : "=r"(stage[0])
                 : "l"(g), "r"(fast));
  }
}

// Converts what fetch_row_vector loaded into dst[0..Vec) as floats; a vector that was not
// whole or not aligned is read here element by element, elements at or past `valid` as `pad`.
template <class T, int Vec>
__device__ inline void unpack_row_vector(const T* g, int valid, float pad, const int* stage, float* dst) {
  constexpr int kWords = Vec * static_cast<int>(sizeof(T)) / 4;
  if (row_vector_fast<T, Vec>(g, valid)) {
    union {
      int words[kWords];
      T elems[Vec];
    } pack;
#pragma unroll
    for (int w = 0; w < kWords; ++w) pack.words[w] = stage[w];
#pragma unroll
    for (int v = 0; v < Vec; ++v) dst[v] = static_cast<float>(to_float(pack.elems[v]));
    return;
  }
#pragma unroll
  for (int v = 0; v < Vec; ++v) dst[v] = v < valid ? static_cast<float>(to_float(g[v])) : pad;
}

// Stores src[0..Vec) converted to T into g[0..Vec), dropping elements at or past `valid`.
template <class T, int Vec>
__device__ inline void store_row_vector(T* g, int valid, const float* src) {
  constexpr int kBytes = Vec * static_cast<int>(sizeof(T));
  if constexpr (kBytes == 16 || kBytes == 8 || kBytes == 4) {
    typedef typename reduce_detail::VectorWord<kBytes>::type Word;
    if (valid >= Vec && (reinterpret_cast<unsigned long long>(g) % kBytes) == 0) {
      union {
        Word word;
        T elems[Vec];
      } pack;
#pragma unroll
      for (int v = 0; v < Vec; ++v) pack.elems[v] = from_float<T>(src[v]);
      *reinterpret_cast<Word*>(g) = pack.word;
      return;
    }
  }
#pragma unroll
  for (int v = 0; v < Vec; ++v)
    if (v < valid) g[v] = from_float<T>(src[v]);
}

}  // namespace tessel
