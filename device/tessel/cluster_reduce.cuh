// The split-K hand-off of generic kernels (the compiler's split_k_clusters pass and
// ops/ClusterReduce.cpp): the Ranks CTAs of a cluster (2, 4 or 8) each computed one share of an
// output tile's K loop into the same accumulator layout; their partial sums meet in the rank-0
// CTA's registers along a binary tree, one round per level: in round s (s = 1, 2, 4, ...) the
// CTAs of rank r = s mod 2s push their sums into the shared memory of rank r - s, which adds them
// to its own; a CTA that pushed is done.
//
// Protocol of one round, barriers bars[2 * round] ("the receiver's scratch is free", used in the
// sender) and bars[2 * round + 1] ("the sender's sums are in the scratch", used in the receiver),
// all initialized with the block's (consumer) thread count at kernel start and published to the
// cluster by cluster_sync:
//   receiver: every thread, once it no longer reads the scratch (its gemms completed -- the
//             caller waited for them -- and, after the first round, its loads of the previous
//             round's sums returned), arrives on the sender's free barrier with release at
//             cluster scope; waits on its own full barrier (acquire, cluster scope); adds slot
//             by slot;
//   sender:   every thread waits on its own free barrier; stores its registers into the
//             receiver's scratch (st.shared::cluster, 16 bytes a time, thread t's q-th vector at
//             (q * Threads + t) * 16); arrives on the receiver's full barrier with release at
//             cluster scope.
// Each barrier completes one phase per kernel (one output tile per CTA), parity 0. A CTA no
// longer touches a peer's shared memory once its round's arrival is made; the kernel still ends
// in a cluster_sync (insert_barriers), the CUDA model's rule before a CTA of a cluster exits.
#pragma once

#include "mbarrier.cuh"
#include "smem.cuh"

namespace tessel {

// acc (N f32 registers of thread `t` of `Threads`) += the same registers of the other Ranks - 1
// CTAs of the cluster, in rank 0; the other ranks' acc are left as they were.
template <int N, int Threads, int Ranks>
__device__ inline void cluster_reduce_to_rank0(float (&acc)[N], const void* scratch, const void* bars,
                                               int rank, int t) {
  static_assert(N % 4 == 0, "cluster_reduce_to_rank0: registers in 16-byte vectors");
  static_assert(Ranks == 2 || Ranks == 4 || Ranks == 8, "cluster_reduce_to_rank0: 2, 4 or 8 ranks");
  const unsigned bar0 = smem_address(bars);
  const unsigned slot = smem_address(scratch) + static_cast<unsigned>(t) * 16u;
  int round = 0;
#pragma unroll
  for (int s = 1; s < Ranks; s *= 2, ++round) {
    const unsigned free_bar = bar0 + 16u * round, full_bar = free_bar + 8u;
    if (rank % (2 * s) == s) {
      mbarrier_wait_parity_cluster(free_bar, 0);
      const unsigned remote = cluster_map_shared(slot, static_cast<unsigned>(rank - s));
#pragma unroll
      for (int q = 0; q < N / 4; ++q)
        st_shared_cluster_v4(remote + static_cast<unsigned>(q * Threads) * 16u, acc[4 * q], acc[4 * q + 1],
                             acc[4 * q + 2], acc[4 * q + 3]);
      mbarrier_arrive_release_cluster(full_bar, static_cast<unsigned>(rank - s));
      return;
    }
    if (rank % (2 * s) != 0) return;  // sent in an earlier round (unreachable: it returned there)
    mbarrier_arrive_release_cluster(free_bar, static_cast<unsigned>(rank + s));
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
}

}  // namespace tessel
