// Row reductions and row-vector copies for fragments in the row-blocked layout (the layout the
// compiler gives element-wise tiles such as softmax rows): each row of a tile is spread over
// `Lanes` consecutive threads, each holding runs of `Vec` contiguous elements.
//
// A reduction is: per-thread partial over its registers, then a butterfly of warp shuffles
// over the lanes of a row, then (rows wider than a warp) one value per warp through shared
// memory. Max and min propagate NaN like PyTorch, not like fmaxf.
#pragma once

#include "cp_async.cuh"
#include "flat_rows.cuh"
#include "realign.cuh"
#include "smem.cuh"
#include "split_regs.cuh"
#include "types.cuh"

namespace tessel {

// max.NaN / min.NaN (sm_80+): one instruction that returns NaN when either input is NaN
// (fmaxf would drop it; the select form `(a != a || a > b) ? a : b` costs four).
struct ReduceMaxOp {
  __device__ static float identity() { return -__int_as_float(0x7f800000); }
  __device__ static float combine(float a, float b) {
    float r;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
  }
};
struct ReduceMinOp {
  __device__ static float identity() { return __int_as_float(0x7f800000); }
  __device__ static float combine(float a, float b) {
    float r;
    asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
  }
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
  block_sync();
  const int first = warp / WarpsPerRow * WarpsPerRow;
  float r;
  if constexpr ((WarpsPerRow & (WarpsPerRow - 1)) == 0) {
    // One read per lane, then a butterfly over WarpsPerRow lanes (every lane ends with the same
    // bits: each step combines the same two values, in either order).
    r = scratch[first + static_cast<int>(threadIdx.x % 32) % WarpsPerRow];
#pragma unroll
    for (int o = WarpsPerRow / 2; o > 0; o /= 2) r = Op::combine(r, __shfl_xor_sync(0xffffffffu, r, o));
  } else {
    r = scratch[first];
#pragma unroll
    for (int w = 1; w < WarpsPerRow; ++w) r = Op::combine(r, scratch[first + w]);
  }
  block_sync();  // the scratch may be reused by the next reduction
  return r;
}

// In-place forms over register arrays, for generated code: out[0] = Op over src[0..N), as a
// pairwise tree (depth log2 N instead of a chain of N - 1 dependent combines; the order is
// fixed, so results are reproducible).
template <class Op, int N, class P>
__device__ inline float reduce_registers_tree(P src) {
  if constexpr (N == 1) {
    return src[0];
  } else {
    constexpr int kHalf = N / 2;
    return Op::combine(reduce_registers_tree<Op, kHalf>(src), reduce_registers_tree<Op, N - kHalf>(src + kHalf));
  }
}
// Past 32 elements, trees of 8 combined in order, meant to keep few operands live for long
// rows whose elements are computed on the fly (a row kept as loaded: exp of an element made
// just before it is combined). Measured as part of the 64 K shared-tail kernel (run O); on its
// own it did not change registers or spills there (bf16: 8 B with trees of 8, 4 or 2).
template <class Op, int N, class P>
__device__ inline void reduce_registers(P src, float* out) {
  if constexpr (N > 32 && N % 8 == 0) {
    float v = reduce_registers_tree<Op, 8>(src);
#pragma unroll
    for (int k = 8; k < N; k += 8) v = Op::combine(v, reduce_registers_tree<Op, 8>(src + k));
    out[0] = v;
  } else {
    out[0] = reduce_registers_tree<Op, N>(src);
  }
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

namespace reduce_detail {
// An element of T as the fragment's type D: f32 for math, or T itself (a fragment that keeps
// the loaded bits, converted later by an element-wise cast).
template <class D, class T>
__device__ inline D as_fragment(T x) {
  if constexpr (is_same<D, T>::value) {
    return x;
  } else {
    return static_cast<D>(to_float(x));
  }
}
}  // namespace reduce_detail

__device__ inline bool warp_all(bool p);

// Whether a vector moves whole: per thread from global memory (the callers choose between
// whole-vector and masked copies per warp already); in shared memory per warp (`PerWarp`: a
// staged span's rows, one of eight of them aligned in a warp at 127 f16 columns), so that a warp
// issues the element path alone rather than both paths one after the other -- the results are
// the same either way.
template <bool PerThread>
__device__ inline bool whole_vector(bool whole) {
  if constexpr (PerThread) {
    return whole;
  } else {
    return warp_all(whole);
  }
}

// Loads Vec elements g[0..Vec) into dst[0..Vec) as D (float, or T itself); elements at or past
// `valid` are `pad`. One 16-byte (or 8/4-byte) load when all Vec are valid and the address is
// aligned (in shared memory, Global = false: when it is so for the whole warp; WarpMayBeWhole =
// false when the compiler proved it never is -- a warp over two or more rows of a span whose
// row length is not a multiple of Vec -- and the whole form is not compiled at all). This is the
// edge path; whole, aligned vectors take load_row_vector_whole.
template <class T, int Vec, class D = float, bool Global = true, bool WarpMayBeWhole = true>
__device__ inline void load_row_vector(const T* g, int valid, float pad, D* dst) {
  constexpr int kBytes = Vec * static_cast<int>(sizeof(T));
  if constexpr (is_same<D, T>::value && (kBytes == 16 || kBytes == 8 || kBytes == 4)) {
    // Into a register array of T: whole vectors only (see load_row_vector_whole), so the
    // array's elements stay packed.
    typedef typename reduce_detail::VectorWord<kBytes>::type Word;
    union {
      Word word;
      T elems[Vec];
    } pack;
    if ((Global || WarpMayBeWhole) &&
        whole_vector<Global>(valid >= Vec && (reinterpret_cast<unsigned long long>(g) % kBytes) == 0)) {
      if constexpr (Global) {
        pack.word = __ldg(reinterpret_cast<const Word*>(g));
      } else {
        pack.word = *reinterpret_cast<const Word*>(g);
      }
    } else {
      const T pad_value = from_float<T>(pad);
#pragma unroll
      for (int v = 0; v < Vec; ++v) pack.elems[v] = v < valid ? g[v] : pad_value;
    }
    *reinterpret_cast<Word*>(dst) = pack.word;
    return;
  }
  if constexpr ((kBytes == 16 || kBytes == 8 || kBytes == 4) && (Global || WarpMayBeWhole)) {
    typedef typename reduce_detail::VectorWord<kBytes>::type Word;
    if (whole_vector<Global>(valid >= Vec && (reinterpret_cast<unsigned long long>(g) % kBytes) == 0)) {
      union {
        Word word;
        T elems[Vec];
      } pack;
      if constexpr (Global) {
        pack.word = __ldg(reinterpret_cast<const Word*>(g));
      } else {
        pack.word = *reinterpret_cast<const Word*>(g);
      }
#pragma unroll
      for (int v = 0; v < Vec; ++v) dst[v] = reduce_detail::as_fragment<D>(pack.elems[v]);
      return;
    }
  }
  if constexpr (!Global) {
    // A warp whose vectors are all inside their rows, unaligned (a staged span's rows): element
    // by element with no test of each element against the row's end.
    if (warp_all(valid >= Vec)) {
#pragma unroll
      for (int v = 0; v < Vec; ++v) dst[v] = reduce_detail::as_fragment<D>(g[v]);
      return;
    }
  }
  const D pad_value = reduce_detail::as_fragment<D>(from_float<T>(pad));
#pragma unroll
  for (int v = 0; v < Vec; ++v) dst[v] = v < valid ? reduce_detail::as_fragment<D>(g[v]) : pad_value;
}

namespace reduce_detail {
// A Bytes-wide global load that happens only when `present` (a predicated instruction, not a
// branch); zeros otherwise.
template <int Bytes>
__device__ inline typename VectorWord<Bytes>::type load_if(const void* g, bool present) {
  typename VectorWord<Bytes>::type w;
  const int p = present ? 1 : 0;
  if constexpr (Bytes == 16) {
    asm volatile(
        "{\n .reg .pred p;\n setp.ne.b32 p, %5, 0;\n mov.b32 %0, 0;\n mov.b32 %1, 0;\n mov.b32 %2, 0;\n"
        " mov.b32 %3, 0;\n @p ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];\n}\n"
        : "=r"(w.x), "=r"(w.y), "=r"(w.z), "=r"(w.w)
        : "l"(g), "r"(p));
  } else if constexpr (Bytes == 8) {
    asm volatile(
        "{\n .reg .pred p;\n setp.ne.b32 p, %3, 0;\n mov.b32 %0, 0;\n mov.b32 %1, 0;\n"
        " @p ld.global.nc.v2.u32 {%0, %1}, [%2];\n}\n"
        : "=r"(w.x), "=r"(w.y)
        : "l"(g), "r"(p));
  } else {
    asm volatile(
        "{\n .reg .pred p;\n setp.ne.b32 p, %2, 0;\n mov.b32 %0, 0;\n @p ld.global.nc.u32 %0, [%1];\n}\n"
        : "=r"(w)
        : "l"(g), "r"(p));
  }
  return w;
}

// The matching predicated store.
template <int Bytes>
__device__ inline void store_if(void* g, bool present, typename VectorWord<Bytes>::type w) {
  const int p = present ? 1 : 0;
  if constexpr (Bytes == 16) {
    asm volatile(
        "{\n .reg .pred p;\n setp.ne.b32 p, %1, 0;\n @p st.global.v4.u32 [%0], {%2, %3, %4, %5};\n}\n"
        :
        : "l"(g), "r"(p), "r"(w.x), "r"(w.y), "r"(w.z), "r"(w.w)
        : "memory");
  } else if constexpr (Bytes == 8) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %1, 0;\n @p st.global.v2.u32 [%0], {%2, %3};\n}\n"
                 :
                 : "l"(g), "r"(p), "r"(w.x), "r"(w.y)
                 : "memory");
  } else {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %1, 0;\n @p st.global.u32 [%0], %2;\n}\n"
                 :
                 : "l"(g), "r"(p), "r"(w)
                 : "memory");
  }
}
}  // namespace reduce_detail

// True in every active lane of the warp when `p` holds in all of them: the choice between a
// row copy's vector path and its masked path is made per warp. A choice made per thread put the
// two unrolled paths side by side in one warp, which ptxas (CUDA 13.0, -O1 and up; right at -O0)
// compiled wrongly: rows summed without their neighbours' lanes, stores to wrong addresses
// (fuzz cases softmax-174597453747897 and tile-101809284207773 on the H200).
__device__ inline bool warp_all(bool p) { return __all_sync(__activemask(), p); }

// Row reductions of a flat-rows tile (infer_layouts' FlatRows layout: a [Rows, Cols] tile held
// as the contiguous run of Rows * Cols elements it is in memory, each thread the `Run`
// consecutive elements x[0..Run) from element t * Run on). A thread's run holds the end of one
// row and the start of the next where a row boundary falls inside it (Run <= Cols + 1: never
// more than two rows). Each run's two parts are combined in registers and written to `scratch`;
// a group of lanes per row combines the row's parts (flat_rows.cuh says which) and writes the
// row's result; out[0] and out[1] receive the results of the rows of the run's first and last
// elements (the last row's again past it). Where a warp's runs are shorter than a row, a warp
// whose runs each lie in one row combines them without the per-element selects (decided per warp). `scratch` holds 2 * Threads + Rows floats.
// All threads call it: three block barriers, the last before the scratch is reused.
template <class Op, int Run, int Threads, int Rows, int Cols>
__device__ inline void reduce_flat_rows(const float* x, float* out, float* scratch) {
  static_assert(Run <= Cols + 1 && Threads % 32 == 0, "reduce_flat_rows: a run holds parts of at most two rows");
  constexpr int kRuns = (Rows * Cols + Run - 1) / Run;
  constexpr int kLanes = flat_row_lanes(Rows, Threads), kGroups = Threads / kLanes;
  float* part = scratch;
  float* result = scratch + 2 * Threads;
  const int t = static_cast<int>(threadIdx.x);
  {
    const int head = flat_word_head(t, Run, Cols);
    float a = Op::identity(), b = Op::identity();
    // Every run of the warp in one row: no selects. Only where a warp's runs are shorter than a
    // row (most warps then hold no row boundary); shorter rows put one in every warp.
    if (32 * Run < Cols && warp_all(head >= Run)) {
      a = reduce_registers_tree<Op, Run>(x);
    } else {
#pragma unroll
      for (int e = 0; e < Run; ++e) {
        const bool first = e < head;
        a = Op::combine(a, first ? x[e] : Op::identity());
        b = Op::combine(b, first ? Op::identity() : x[e]);
      }
    }
    if (kRuns >= Threads || t < kRuns) {
      part[2 * t] = a;
      part[2 * t + 1] = b;
    }
  }
  block_sync();
  const int lane = t % kLanes;
#pragma unroll 1
  for (int r0 = 0; r0 < Rows; r0 += kGroups) {  // the same trip count in every thread: shuffles below
    const int r = r0 + t / kLanes;
    float v = Op::identity();
    if (r < Rows) {
      const int last = flat_row_last_word(r, Run, Cols);
      for (int w = flat_row_first_word(r, Run, Cols) + lane; w <= last; w += kLanes)
        v = Op::combine(v, part[flat_row_part(r, w, Run, Cols)]);
    }
    v = reduce_lanes<Op, kLanes>(v);
    if (r < Rows && lane == 0) result[r] = v;
  }
  block_sync();
  const int row = t * Run / Cols;
  out[0] = result[row < Rows ? row : Rows - 1];
  out[1] = result[row + 1 < Rows ? row + 1 : Rows - 1];
  block_sync();  // the scratch may be reused by the next reduction
}

// A vector that is either whole and aligned (`present`) or wholly past the end of its row (its
// elements are `pad`). The caller tested this for every vector of the copy, uniformly, so that a
// thread's loads sit in one basic block, predicated, with nothing between them: ptxas issues
// them all before the first use (one memory round trip for the whole copy, not one per vector),
// and rows whose tile is wider than the row (N = 1000 in a 1024 tile) stay on this path.
// Global = false: `g` points into shared memory (a plain load, predicated by the compiler).
template <class T, int Vec, class D = float, bool Global = true>
__device__ inline void load_row_vector_whole(const T* g, bool present, float pad, D* dst) {
  constexpr int kBytes = Vec * static_cast<int>(sizeof(T));
  static_assert(kBytes == 16 || kBytes == 8 || kBytes == 4, "load_row_vector_whole: 4, 8 or 16 bytes");
  union {
    typename reduce_detail::VectorWord<kBytes>::type word;
    T elems[Vec];
  } pack;
  if constexpr (Global) {
    pack.word = reduce_detail::load_if<kBytes>(g, present);
  } else {
    typedef typename reduce_detail::VectorWord<kBytes>::type Word;
    pack.word = present ? *reinterpret_cast<const Word*>(g) : Word{};
  }
  const D pad_value = reduce_detail::as_fragment<D>(from_float<T>(pad));
  if constexpr (is_same<D, T>::value) {
    // Kept as loaded: one vector write into the (16-byte aligned) register array, so that the
    // compiler keeps 16-bit elements packed two to a register instead of one each.
    union {
      typename reduce_detail::VectorWord<kBytes>::type word;
      T elems[Vec];
    } out;
#pragma unroll
    for (int v = 0; v < Vec; ++v) out.elems[v] = pad_value;
    if (present) out.word = pack.word;
    *reinterpret_cast<typename reduce_detail::VectorWord<kBytes>::type*>(dst) = out.word;
  } else {
#pragma unroll
    for (int v = 0; v < Vec; ++v) dst[v] = present ? reduce_detail::as_fragment<D>(pack.elems[v]) : pad_value;
  }
}

namespace reduce_detail {
// A loaded word's Vec elements into dst: the word itself where the fragment keeps the loaded
// type (kept packed), else each element converted.
template <class T, int Vec, class D, class Word>
__device__ inline void word_to_fragment(const Word& word, D* dst) {
  if constexpr (is_same<D, T>::value) {
    *reinterpret_cast<Word*>(dst) = word;
  } else {
    union {
      Word word;
      T elems[Vec];
    } pack;
    pack.word = word;
#pragma unroll
    for (int v = 0; v < Vec; ++v) dst[v] = as_fragment<D>(pack.elems[v]);
  }
}
}  // namespace reduce_detail

// A vector that is whole and aligned (`present`) or absent, where nothing reads an absent
// vector's values (a flat-rows tile's words past its block's run): zeros, with no padding value
// selected element by element.
template <class T, int Vec, class D = float>
__device__ inline void load_vector_or_zeros(const T* g, bool present, D* dst) {
  constexpr int kBytes = Vec * static_cast<int>(sizeof(T));
  static_assert(kBytes == 16 || kBytes == 8 || kBytes == 4, "load_vector_or_zeros: 4, 8 or 16 bytes");
  reduce_detail::word_to_fragment<T, Vec>(reduce_detail::load_if<kBytes>(g, present), dst);
}

namespace reduce_detail {
// The 16 bytes that start `sh` bytes (a multiple of 2) into the 32 bytes lo, hi: register
// selects for the whole words, a funnel shift for a half word; no branch on sh.
__device__ inline uint4 realign16(const uint4& lo, const uint4& hi, unsigned sh) {
  const unsigned x[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  unsigned r[4];
  realign_words(x, sh, r);  // realign.cuh (host-tested)
  return uint4{r[0], r[1], r[2], r[3]};
}

// dst[v] = the v-th element of `word` as D for v < valid, else pad.
template <class T, int Vec, class D>
__device__ inline void unpack_vector(const uint4& word, int valid, float pad, D* dst) {
  const D pad_value = as_fragment<D>(from_float<T>(pad));
  union {
    uint4 u;
    T e[Vec];
  } out;
  out.u = word;
#pragma unroll
  for (int v = 0; v < Vec; ++v) dst[v] = v < valid ? as_fragment<D>(out.e[v]) : pad_value;
}
}  // namespace reduce_detail

// Vec elements of T (16 bytes) from shared memory at `s`, which may sit at any multiple of
// sizeof(T): read as the two aligned 16-byte words that cover them (two vector loads where an
// unaligned address would take one scalar load per element) and shifted into place
// (reduce_detail::realign16). Elements at or past `valid` are `pad`; nothing is read when
// valid <= 0. The caller keeps both words inside its buffer (a span scratch tile has two spare
// vectors past its last element).
template <class T, int Vec, class D = float>
__device__ inline void load_shared_vector_realigned(const T* s, int valid, float pad, D* dst) {
  static_assert(Vec * sizeof(T) == 16, "load_shared_vector_realigned: 16-byte vectors");
  uint4 word{0u, 0u, 0u, 0u};
  if (valid > 0) {
    const unsigned sh = static_cast<unsigned>(reinterpret_cast<unsigned long long>(s) & 15ull);  // bytes
    const uint4* w = reinterpret_cast<const uint4*>(s - sh / sizeof(T));  // keeps the shared window
    word = reduce_detail::realign16(w[0], w[1], sh);
  }
  reduce_detail::unpack_vector<T, Vec>(word, valid, pad, dst);
}

// The same from global memory (read-only, through the non-coherent path), in two phases so that
// a thread's vectors are all in flight together: load_global_words_realigned issues the two
// aligned 16-byte words that cover g[0..Vec) into words[0..8) (predicated on valid > 0: no
// branch, so the generated loop over a thread's vectors is one basic block of loads), and
// unpack_global_words_realigned, called after every load was issued, shifts them into place and
// unpacks them. The caller proved both words inside the tensor for every thread of the warp (the
// tensor is 16-byte aligned; its end need not be) and takes the element-wise path otherwise. A
// word is shared with the neighbouring vector, so DRAM traffic is the copy's; L1 requests double.
template <class T, int Vec>
__device__ inline void load_global_words_realigned(const T* g, int valid, int* words) {
  static_assert(Vec * sizeof(T) == 16, "load_global_words_realigned: 16-byte vectors");
  const unsigned sh = static_cast<unsigned>(reinterpret_cast<unsigned long long>(g) & 15ull);  // bytes
  const uint4* w = reinterpret_cast<const uint4*>(g - sh / sizeof(T));
  const bool present = valid > 0;
  uint4* out = reinterpret_cast<uint4*>(words);  // the caller's array is 16-byte aligned
  out[0] = reduce_detail::load_if<16>(w, present);
  out[1] = reduce_detail::load_if<16>(w + 1, present);
}

// dst[0..Vec) from the words load_global_words_realigned read for the same valid: elements at
// or past `valid` are `pad`. `g` gives the shift only: the vector's own address, or any address
// a multiple of 16 bytes away (the generated code passes a thread's first vector's when it
// proved its vectors so placed, so the shift is computed once a thread). A warp whose vectors
// all lie inside their rows (all but the one holding a row's end) unpacks without testing each
// element against the row's end (decided per warp; the branch comes after every load of the
// thread was issued).
template <class T, int Vec, class D = float>
__device__ inline void unpack_global_words_realigned(const T* g, int valid, float pad, const int* words, D* dst) {
  static_assert(Vec * sizeof(T) == 16, "unpack_global_words_realigned: 16-byte vectors");
  const unsigned sh = static_cast<unsigned>(reinterpret_cast<unsigned long long>(g) & 15ull);  // bytes
  const unsigned* in = reinterpret_cast<const unsigned*>(words);
  const unsigned x[8] = {in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7]};
  unsigned r[4];
  realign_words_branched(x, sh, r);  // one row a warp: the shift is the warp's (realign.cuh)
  const uint4 word{r[0], r[1], r[2], r[3]};
  if (warp_all(valid >= Vec)) {
    reduce_detail::unpack_vector<T, Vec>(word, Vec, pad, dst);
    return;
  }
  reduce_detail::unpack_vector<T, Vec>(word, valid, pad, dst);
}

// Stores src[0..Vec) (float, or T itself) converted to T into g[0..Vec), dropping elements at or
// past `valid`. One vector store when all Vec are valid and the address aligned -- with PerWarp
// (a staged span in shared memory) when that holds for the whole warp (see whole_vector), and
// not compiled at all with WarpMayBeWhole = false (as in load_row_vector).
template <class T, int Vec, class S = float, bool PerWarp = false, bool WarpMayBeWhole = true>
__device__ inline void store_row_vector(T* g, int valid, const S* src) {
  auto as_element = [](S x) -> T {
    if constexpr (is_same<S, T>::value) {
      return x;
    } else {
      return from_float<T>(static_cast<float>(x));
    }
  };
  constexpr int kBytes = Vec * static_cast<int>(sizeof(T));
  if constexpr (is_same<S, T>::value && (kBytes == 16 || kBytes == 8 || kBytes == 4)) {
    // From a register array of T: one vector read (see load_row_vector).
    typedef typename reduce_detail::VectorWord<kBytes>::type Word;
    union {
      Word word;
      T elems[Vec];
    } pack;
    pack.word = *reinterpret_cast<const Word*>(src);
    if ((!PerWarp || WarpMayBeWhole) &&
        whole_vector<!PerWarp>(valid >= Vec && (reinterpret_cast<unsigned long long>(g) % kBytes) == 0)) {
      *reinterpret_cast<Word*>(g) = pack.word;
      return;
    }
#pragma unroll
    for (int v = 0; v < Vec; ++v)
      if (v < valid) g[v] = pack.elems[v];
    return;
  }
  if constexpr ((kBytes == 16 || kBytes == 8 || kBytes == 4) && (!PerWarp || WarpMayBeWhole)) {
    typedef typename reduce_detail::VectorWord<kBytes>::type Word;
    if (whole_vector<!PerWarp>(valid >= Vec && (reinterpret_cast<unsigned long long>(g) % kBytes) == 0)) {
      union {
        Word word;
        T elems[Vec];
      } pack;
#pragma unroll
      for (int v = 0; v < Vec; ++v) pack.elems[v] = as_element(src[v]);
      *reinterpret_cast<Word*>(g) = pack.word;
      return;
    }
  }
  if constexpr (PerWarp) {
    if (warp_all(valid >= Vec)) {  // every vector of the warp inside its row: no test per element
#pragma unroll
      for (int v = 0; v < Vec; ++v) g[v] = as_element(src[v]);
      return;
    }
  }
#pragma unroll
  for (int v = 0; v < Vec; ++v)
    if (v < valid) g[v] = as_element(src[v]);
}

// A vector that is whole and aligned (`present`: stored) or wholly past the end of its row
// (dropped); see load_row_vector_whole.
template <class T, int Vec, class S = float>
__device__ inline void store_row_vector_whole(T* g, bool present, const S* src) {
  constexpr int kBytes = Vec * static_cast<int>(sizeof(T));
  static_assert(kBytes == 16 || kBytes == 8 || kBytes == 4, "store_row_vector_whole: 4, 8 or 16 bytes");
  typedef typename reduce_detail::VectorWord<kBytes>::type Word;
  if constexpr (is_same<S, T>::value) {  // one vector read of the register array (see the load)
    reduce_detail::store_if<kBytes>(g, present, *reinterpret_cast<const Word*>(src));
  } else {
    union {
      Word word;
      T elems[Vec];
    } pack;
#pragma unroll
    for (int v = 0; v < Vec; ++v) pack.elems[v] = from_float<T>(static_cast<float>(src[v]));
    reduce_detail::store_if<kBytes>(g, present, pack.word);
  }
}

// Windowed row vectors: the copies of a row region whose column start may be negative (a tile
// that starts at the aligned word at or before its row's first element, so that every vector of
// the row is one aligned 16-byte word). Only elements [lo, hi) of the vector are the row's
// (lo > 0 at a row's head, hi < Vec at its tail; hi <= lo: none); the rest are `pad` on the way
// in and left alone on the way out. `g` is 16-byte aligned when the caller proved the tile's
// start aligned (Word = true); it then reads the whole word in one load and selects, which
// the caller allows only when the word lies inside the tensor for every lane of the warp.
template <class T, int Vec, class D = float, bool Word = true>
__device__ inline void load_row_window(const T* g, int lo, int hi, float pad, D* dst) {
  constexpr int kBytes = Vec * static_cast<int>(sizeof(T));
  constexpr bool kWord = kBytes == 16 || kBytes == 8 || kBytes == 4;
  typedef typename reduce_detail::VectorWord<kWord ? kBytes : 4>::type Word_t;
  const T pad_value = from_float<T>(pad);
  __align__(16) T elems[Vec];
  if constexpr (Word) {
    static_assert(kWord, "load_row_window: whole words of 4, 8 or 16 bytes");
    *reinterpret_cast<Word_t*>(elems) = reduce_detail::load_if<kBytes>(g, lo < hi && lo < Vec && hi > 0);
#pragma unroll
    for (int v = 0; v < Vec; ++v) elems[v] = v >= lo && v < hi ? elems[v] : pad_value;
  } else {
#pragma unroll
    for (int v = 0; v < Vec; ++v) elems[v] = v >= lo && v < hi ? g[v] : pad_value;
  }
  if constexpr (is_same<D, T>::value && kWord) {
    *reinterpret_cast<Word_t*>(dst) = *reinterpret_cast<const Word_t*>(elems);  // kept packed
  } else {
#pragma unroll
    for (int v = 0; v < Vec; ++v) dst[v] = reduce_detail::as_fragment<D>(elems[v]);
  }
}

// The windowed load of a register array in two loops, as the realigned loads: every aligned word
// of the thread first (load_global_words_window: one predicated load a vector, no branch, so the
// generated loop over a thread's vectors is one basic block of loads, all in flight together),
// then each vector unpacked (unpack_row_window) -- as it is in a warp whose vectors all lie
// wholly inside their rows (every warp but the ones holding a row's head or tail: decided per
// warp, after every load was issued), else with the head's and tail's padding selected element
// by element. `words` holds Vec * sizeof(T) bytes a vector (4, 8 or 16), 4-byte aligned and
// aligned to the word for 8- and 16-byte vectors (the caller's array is 16-byte aligned). The
// caller proved `g` aligned and, in the warp, inside the tensor wherever the vector has an
// element of the row (lo < hi, lo < Vec, hi > 0): nothing is read otherwise.
template <class T, int Vec>
__device__ inline void load_global_words_window(const T* g, int lo, int hi, int* words) {
  constexpr int kBytes = Vec * static_cast<int>(sizeof(T));
  static_assert(kBytes == 16 || kBytes == 8 || kBytes == 4,
                "load_global_words_window: words of 4, 8 or 16 bytes");
  typedef typename reduce_detail::VectorWord<kBytes>::type Word;
  *reinterpret_cast<Word*>(words) = reduce_detail::load_if<kBytes>(g, lo < hi && lo < Vec && hi > 0);
}
template <class T, int Vec, class D = float>
__device__ inline void unpack_row_window(int lo, int hi, float pad, const int* words, D* dst) {
  constexpr int kBytes = Vec * static_cast<int>(sizeof(T));
  static_assert(kBytes == 16 || kBytes == 8 || kBytes == 4, "unpack_row_window: words of 4, 8 or 16 bytes");
  typedef typename reduce_detail::VectorWord<kBytes>::type Word;
  union {
    Word word;
    T elems[Vec];
  } in;
  in.word = *reinterpret_cast<const Word*>(words);
  if (warp_all(lo <= 0 && hi >= Vec)) {
    reduce_detail::word_to_fragment<T, Vec>(in.word, dst);
    return;
  }
  const T pad_value = from_float<T>(pad);
#pragma unroll
  for (int v = 0; v < Vec; ++v)
    dst[v] = reduce_detail::as_fragment<D>(v >= lo && v < hi ? in.elems[v] : pad_value);
}

// The store side: the whole vector in one store when all of it is the row's and `g` is aligned,
// else element by element over [lo, hi).
template <class T, int Vec, class S = float>
__device__ inline void store_row_window(T* g, int lo, int hi, const S* src) {
  constexpr int kBytes = Vec * static_cast<int>(sizeof(T));
  constexpr bool kWord = kBytes == 16 || kBytes == 8 || kBytes == 4;
  typedef typename reduce_detail::VectorWord<kWord ? kBytes : 4>::type Word_t;
  __align__(16) T elems[Vec];
  if constexpr (is_same<S, T>::value && kWord) {
    *reinterpret_cast<Word_t*>(elems) = *reinterpret_cast<const Word_t*>(src);
  } else {
#pragma unroll
    for (int v = 0; v < Vec; ++v) elems[v] = from_float<T>(static_cast<float>(src[v]));
  }
  if constexpr (kWord) {
    if (lo <= 0 && hi >= Vec && (reinterpret_cast<unsigned long long>(g) % kBytes) == 0) {
      *reinterpret_cast<Word_t*>(g) = *reinterpret_cast<const Word_t*>(elems);
      return;
    }
  }
#pragma unroll
  for (int v = 0; v < Vec; ++v)
    if (v >= lo && v < hi) g[v] = elems[v];
}

// The row copies into and out of a register array with a shared tail (split_regs.cuh): vectors
// in the register part take the functions above; vectors in the tail move between global
// memory and their slot whole, by cp.async on the way in (no registers in between; the caller
// commits and waits before any use) and by one 16-byte shared load on the way out.
template <class T, int Vec, class D = float, bool Global = true, int NR, int NT, int V, int Threads>
__device__ inline void load_row_vector_whole(const T* g, bool present, float pad, SplitView<D, NR, NT, V, Threads> dst) {
  if (dst.in_registers()) {
    load_row_vector_whole<T, Vec, D, Global>(g, present, pad, dst.registers());
    return;
  }
  static_assert(is_same<D, T>::value, "a fragment's shared tail keeps its elements as loaded");
  constexpr int kBytes = Vec * static_cast<int>(sizeof(T));
  typedef typename reduce_detail::VectorWord<kBytes>::type Word;
  if constexpr (Global && kBytes == 16) {
    if (present) {
      cp_async_16(dst.slot(), g, true);
      return;
    }
  } else if (present) {
    *reinterpret_cast<Word*>(dst.slot()) = Global ? __ldg(reinterpret_cast<const Word*>(g))
                                                  : *reinterpret_cast<const Word*>(g);
    return;
  }
  union {
    Word word;
    T elems[Vec];
  } out;
  const T pad_value = from_float<T>(pad);
#pragma unroll
  for (int v = 0; v < Vec; ++v) out.elems[v] = pad_value;
  *reinterpret_cast<Word*>(dst.slot()) = out.word;
}
template <class T, int Vec, class D = float, bool Global = true, int NR, int NT, int V, int Threads>
__device__ inline void load_row_vector(const T* g, int valid, float pad, SplitView<D, NR, NT, V, Threads> dst) {
  if (dst.in_registers()) {
    load_row_vector<T, Vec, D, Global>(g, valid, pad, dst.registers());
    return;
  }
  __align__(16) D tmp[Vec];
  load_row_vector<T, Vec, D, Global>(g, valid, pad, tmp);
#pragma unroll
  for (int v = 0; v < Vec; ++v) dst.slot()[v] = tmp[v];
}
template <class T, int Vec, class S = float, int NR, int NT, int V, int Threads>
__device__ inline void store_row_vector_whole(T* g, bool present, SplitView<S, NR, NT, V, Threads> src) {
  if (src.in_registers()) {
    store_row_vector_whole<T, Vec, S>(g, present, src.registers());
    return;
  }
  __align__(16) S tmp[Vec];
  constexpr int kBytes = Vec * static_cast<int>(sizeof(S));
  if constexpr (kBytes == 16 || kBytes == 8 || kBytes == 4) {
    typedef typename reduce_detail::VectorWord<kBytes>::type Word;
    *reinterpret_cast<Word*>(tmp) = *reinterpret_cast<const Word*>(src.slot());
  } else {
#pragma unroll
    for (int v = 0; v < Vec; ++v) tmp[v] = src.slot()[v];
  }
  store_row_vector_whole<T, Vec, S>(g, present, tmp);
}
template <class T, int Vec, class S = float, int NR, int NT, int V, int Threads>
__device__ inline void store_row_vector(T* g, int valid, SplitView<S, NR, NT, V, Threads> src) {
  if (src.in_registers()) {
    store_row_vector<T, Vec, S>(g, valid, src.registers());
    return;
  }
  __align__(16) S tmp[Vec];
#pragma unroll
  for (int v = 0; v < Vec; ++v) tmp[v] = src.slot()[v];
  store_row_vector<T, Vec, S>(g, valid, tmp);
}

// The windowed row copies (load_row_window, store_row_window) into and out of a register array
// with a shared tail: a whole vector bound for the tail goes by cp.async as above; a row's head
// or tail vector (or any, element-wise: Word = false) through registers, its padding selected.
template <class T, int Vec, class D = float, bool Word = true, int NR, int NT, int V, int Threads>
__device__ inline void load_row_window(const T* g, int lo, int hi, float pad, SplitView<D, NR, NT, V, Threads> dst) {
  if (dst.in_registers()) {
    load_row_window<T, Vec, D, Word>(g, lo, hi, pad, dst.registers());
    return;
  }
  static_assert(is_same<D, T>::value, "a fragment's shared tail keeps its elements as loaded");
  constexpr int kBytes = Vec * static_cast<int>(sizeof(T));
  static_assert(kBytes == 16, "a fragment's shared tail holds 16-byte vectors");
  if constexpr (Word) {
    if (lo <= 0 && hi >= Vec) {
      cp_async_16(dst.slot(), g, true);
      return;
    }
  }
  __align__(16) D tmp[Vec];
  load_row_window<T, Vec, D, Word>(g, lo, hi, pad, tmp);
  *reinterpret_cast<uint4*>(dst.slot()) = *reinterpret_cast<const uint4*>(tmp);
}
template <class T, int Vec, class S = float, int NR, int NT, int V, int Threads>
__device__ inline void store_row_window(T* g, int lo, int hi, SplitView<S, NR, NT, V, Threads> src) {
  if (src.in_registers()) {
    store_row_window<T, Vec, S>(g, lo, hi, src.registers());
    return;
  }
  __align__(16) S tmp[Vec];
  split_read_vector<S, Vec>(src, tmp);
  store_row_window<T, Vec, S>(g, lo, hi, tmp);
}

}  // namespace tessel
