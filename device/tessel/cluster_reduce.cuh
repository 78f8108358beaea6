// The split-K hand-off of generic kernels (the compiler's split_k_clusters pass and
// ops/ClusterReduce.cpp): the two CTAs of a cluster each computed one share of an output tile's K
// loop into the same accumulator layout; the rank-1 CTA pushes its partial sums into the rank-0
// CTA's shared memory and the rank-0 CTA adds them to its own.
//
// Protocol (bars[0] lives in each CTA but is used in rank 1: "rank 0's scratch is free"; bars[1]
// is used in rank 0: "rank 1's partial sums are in the scratch"; both initialized with the
// block's (consumer) thread count at kernel start and published to the cluster by cluster_sync):
//   rank 0: every thread, once its gemms have completed (the caller waited for them), arrives on
//           rank 1's bars[0] (so the scratch -- its drained ring -- is no longer read by its
//           wgmmas); waits on its own bars[1] (acquire, cluster scope); adds slot by slot.
//   rank 1: every thread waits on its own bars[0]; stores its registers into rank 0's scratch
//           (st.shared::cluster, 16 bytes a time, thread t's q-th vector at (q * Threads + t) * 16);
//           arrives on rank 0's bars[1] with release at cluster scope.
// Rank 0 no longer touches rank 1's shared memory once it has arrived on bars[0], and rank 1
// has finished with rank 0's when rank 0's wait returns; the kernel still ends in a
// cluster_sync (insert_barriers), the CUDA model's rule before a CTA of a cluster exits.
// Each barrier completes one phase per kernel (one output tile per CTA), parity 0.
#pragma once

#include "mbarrier.cuh"
#include "smem.cuh"

namespace tessel {

// acc (N f32 registers of thread `t` of `Threads`) += the peer's same registers, in rank 0.
template <int N, int Threads>
__device__ inline void cluster_reduce_to_rank0(float (&acc)[N], const void* scratch, const void* bars,
                                               int rank, int t) {
  static_assert(N % 4 == 0, "cluster_reduce_to_rank0: registers in 16-byte vectors");
  const unsigned free_bar = smem_address(bars), full_bar = free_bar + 8u;
  const unsigned slot = smem_address(scratch) + static_cast<unsigned>(t) * 16u;
  if (rank != 0) {
    mbarrier_wait_parity_cluster(free_bar, 0);
    const unsigned remote = cluster_map_shared(slot, 0);
#pragma unroll
    for (int q = 0; q < N / 4; ++q)
      st_shared_cluster_v4(remote + static_cast<unsigned>(q * Threads) * 16u, acc[4 * q], acc[4 * q + 1],
                           acc[4 * q + 2], acc[4 * q + 3]);
    mbarrier_arrive_release_cluster(full_bar, 0);
    return;
  }
  mbarrier_arrive_release_cluster(free_bar, 1);
  mbarrier_wait_parity_cluster(full_bar, 0);
#pragma unroll
  for (int q = 0; q < N / 4; ++q) {
    float a, b, c, d;
    asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(a), "=f"(b), "=f"(c), "=f"(d)
                 : "r"(slot + static_cast<unsigned>(q * Threads) * 16u)
                 : "memory");
    acc[4 * q] += a;
    acc[4 * q + 1] += b;
    acc[4 * q + 2] += c;
    acc[4 * q + 3] += d;
  }
}

}  // namespace tessel
