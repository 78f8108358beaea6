// A fragment's per-thread register array whose tail lives in shared memory (alloc_fragment's
// FragmentStorage::shared_tail): elements [0, NR) are registers, elements [NR, NR + NT) are
// shared-memory slots only this thread touches. Vector v of the tail (Vec elements) of thread t
// is at slots + (v * Threads + t) * Vec, so a warp's 16-byte accesses to one vector cover 512
// contiguous bytes (no bank conflicts) and no barrier is ever needed.
//
// The generated code indexes it like the plain array it replaces: a[l] (after unrolling l is a
// constant, so the choice between register and slot folds away) and a + k (a view, for the row
// copies and reductions, which have overloads for it in reduce.cuh).
#pragma once

#include "types.cuh"

namespace tessel {

template <class T, int NR, int NT, int Vec, int Threads>
struct SplitRegs;

template <class T, int NR, int NT, int Vec, int Threads>
struct SplitView {
  SplitRegs<T, NR, NT, Vec, Threads>* a;
  int off;
  __device__ T& operator[](int i) const { return (*a)[off + i]; }
  __device__ SplitView operator+(int k) const { return {a, off + k}; }
  // A whole vector starting here is in registers (the split falls on a vector boundary).
  __device__ bool in_registers() const { return off < NR; }
  __device__ T* registers() const { return a->r + off; }
  __device__ T* slot() const { return a->slot(off); }
};

template <class T, int NR, int NT, int Vec, int Threads>
struct SplitRegs {
  static_assert(NR % Vec == 0 && NT % Vec == 0 && NT > 0, "SplitRegs: whole vectors in each part");
  __align__(16) T r[NR > 0 ? NR : Vec];
  T* base;  // this thread's first slot
  __device__ explicit SplitRegs(T* slots) : base(slots + threadIdx.x * Vec) {}
  __device__ T* slot(int l) { return base + ((l - NR) / Vec) * (Threads * Vec) + (l - NR) % Vec; }
  __device__ T& operator[](int l) { return l < NR ? r[l] : *slot(l); }
  __device__ SplitView<T, NR, NT, Vec, Threads> operator+(int k) { return {this, k}; }
};

// One vector of a split array into a 16-byte local and back (the vectorize_shared_tails pass):
// register moves for a vector in registers, one 16-byte shared access for one in the tail.
template <class T, int Vec, int NR, int NT, int V, int Threads>
__device__ inline void split_read_vector(SplitView<T, NR, NT, V, Threads> src, T* dst) {
  if (src.in_registers()) {
#pragma unroll
    for (int v = 0; v < Vec; ++v) dst[v] = src.registers()[v];
  } else {
    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src.slot());
  }
}
template <class T, int Vec, int NR, int NT, int V, int Threads>
__device__ inline void split_write_vector(SplitView<T, NR, NT, V, Threads> dst, const T* src) {
  if (dst.in_registers()) {
#pragma unroll
    for (int v = 0; v < Vec; ++v) dst.registers()[v] = src[v];
  } else {
    *reinterpret_cast<uint4*>(dst.slot()) = *reinterpret_cast<const uint4*>(src);
  }
}

}  // namespace tessel
