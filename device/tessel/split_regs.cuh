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

}  // namespace tessel
