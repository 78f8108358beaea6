// mbarrier: the shared-memory barrier objects that TMA loads complete on and that the
// producer/consumer warpgroups of a Hopper pipeline hand buffers over with (sm_90).
//
// One barrier is 8 bytes of shared memory (8-byte aligned) holding an expected arrival
// count, a pending transaction-byte count and a phase bit. A phase completes when every
// expected thread arrived AND all expected transaction bytes landed; the phase bit then
// flips. Waiters name the parity of the phase they wait for, so a ring buffer of Stages
// slots tracks one parity bit per pass around the ring (flipped each time the slot index
// wraps). Waiting on parity 1 of a freshly initialised barrier returns at once (the phase
// "before" phase 0 counts as complete): a producer's first pass over empty slots therefore
// waits on parity (phase ^ 1) with phase starting at 0 and does not block.
//
// All addresses are 32-bit shared-window addresses (smem_address in smem.cuh).
#pragma once

#include "smem.cuh"

namespace tessel {

// Initialises the barrier for `count` arrivals per phase. One thread does it; then
// mbarrier_init_fence() and a block barrier before anyone else (the TMA unit included,
// which is another proxy) uses it.
__device__ inline void mbarrier_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

// Makes initialised barriers visible to the async proxy (TMA complete_tx) and the cluster.
__device__ inline void mbarrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// One arrival (release semantics: this thread's earlier shared-memory accesses happen
// before the waiter's later ones).
__device__ inline void mbarrier_arrive(unsigned bar) {
  asm volatile("{\n .reg .b64 st;\n mbarrier.arrive.release.cta.shared::cta.b64 st, [%0];\n}" ::"r"(bar)
               : "memory");
}

// One arrival that also raises the phase's expected transaction bytes by `bytes`: the
// producer calls it once per stage before (or after; the count may go negative meanwhile)
// issuing the TMA loads that complete_tx on this barrier.
__device__ inline void mbarrier_arrive_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile(
      "{\n .reg .b64 st;\n mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 st, [%0], "
      "%1;\n}" ::"r"(bar),
      "r"(bytes)
      : "memory");
}

// Non-blocking probe: true once the phase with this parity has completed (acquire).
__device__ inline bool mbarrier_try_wait_parity(unsigned bar, unsigned parity) {
  unsigned ok;
  asm volatile(
      "{\n .reg .pred p;\n mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [%1], %2;\n"
      " selp.u32 %0, 1, 0, p;\n}"
      : "=r"(ok)
      : "r"(bar), "r"(parity)
      : "memory");
  return ok != 0;
}

// Blocks until the phase with this parity has completed. try_wait itself suspends the
// thread for a hardware-chosen time before returning false, so the loop does not spin hot.
__device__ inline void mbarrier_wait_parity(unsigned bar, unsigned parity) {
  while (!mbarrier_try_wait_parity(bar, parity)) {
  }
}

// Orders this thread's generic-proxy shared-memory writes (st.shared, stmatrix) before
// later async-proxy accesses (TMA store reading the tile, wgmma reading a descriptor
// operand). Each writing thread executes it, then the block (or a named) barrier.
__device__ inline void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Named barrier for a subset of warps (ids 1..15; 0 is __syncthreads). `threads` is a
// multiple of 32: e.g. the 128 threads of one consumer warpgroup.
__device__ inline void named_barrier_sync(unsigned id, unsigned threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// Arrives on named barrier `id` without waiting (the signalling side of a producer/consumer
// hand-off between warpgroups; the waiting side calls named_barrier_sync with the same
// `threads`, which counts the arriving and the waiting threads together).
__device__ inline void named_barrier_arrive(unsigned id, unsigned threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// ---- thread-block clusters ---------------------------------------------------------------
// This CTA's rank in its cluster (0 when launched without clusters).
__device__ inline unsigned cluster_ctarank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

// All threads of all CTAs of the cluster: release this CTA's shared-memory writes (mbarrier
// inits included), acquire the others'. Also keeps a CTA alive until its peers are done
// arriving on its barriers / multicasting into its shared memory (call it before exiting).
__device__ inline void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// Arrives on the mbarrier at the same shared offset `bar` in cluster CTA `cta` (itself
// included): how a consumer releases a stage that a peer's multicast TMA also writes.
// Default semantics (.release.cta): the only accesses being released are wgmma reads of
// the stage, already complete (wgmma_wait); a .cluster-scope release here measured 0.53x
// (it appears to fence behind the wgmma group still in flight).
__device__ inline void mbarrier_arrive_cluster(unsigned bar, unsigned cta) {
  asm volatile(
      "{\n .reg .b32 ra;\n mapa.shared::cluster.u32 ra, %0, %1;\n"
      " mbarrier.arrive.shared::cluster.b64 _, [ra];\n}" ::"r"(bar),
      "r"(cta)
      : "memory");
}

// The split-K reduction's hand-off between the CTAs of a cluster (hopper_gemm.cuh): a
// thread's earlier shared-memory accesses, to its own CTA's or (st.shared::cluster) a peer's,
// happen before those of the peer that waits on barrier `bar` of CTA `cta` with
// mbarrier_wait_parity_cluster. Release at cluster scope; only after the wgmmas completed.
__device__ inline void mbarrier_arrive_release_cluster(unsigned bar, unsigned cta) {
  asm volatile(
      "{\n .reg .b32 ra;\n mapa.shared::cluster.u32 ra, %0, %1;\n"
      " mbarrier.arrive.release.cluster.shared::cluster.b64 _, [ra];\n}" ::"r"(bar),
      "r"(cta)
      : "memory");
}

// mbarrier_wait_parity on this CTA's barrier with acquire at cluster scope: a peer's accesses
// released by mbarrier_arrive_release_cluster happen before this thread's later ones.
__device__ inline void mbarrier_wait_parity_cluster(unsigned bar, unsigned parity) {
  unsigned ok = 0;
  while (!ok) {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}"
        : "=r"(ok)
        : "r"(bar), "r"(parity)
        : "memory");
  }
}

// The shared::cluster address of shared offset `addr` in cluster CTA `cta`.
__device__ inline unsigned cluster_map_shared(unsigned addr, unsigned cta) {
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(addr), "r"(cta));
  return r;
}

// 16 bytes into a cluster peer's shared memory (an address from cluster_map_shared).
__device__ inline void st_shared_cluster_v4(unsigned addr, float a, float b, float c, float d) {
  asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "f"(a), "f"(b), "f"(c), "f"(d)
               : "memory");
}

}  // namespace tessel
