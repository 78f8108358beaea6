// The software-pipelined GEMM main loop of the mma.sync path: what plan_pipelines emits for a
// Pipelined loop whose compute is one gemm. The compiler hands over the loop's copies as
// `issue(k_tile, stage)` (global->shared cp.async copies of tile k_tile into ring stage
// `stage`, no commit); this function owns the ring's schedule:
//
//   prologue: tiles 0 .. S-2, one cp.async group each
//   wait for tile 0, barrier, load k step 0 of tile 0 into registers
//   per tile kt: BlockGemm::run_pipelined — the mmas of tile kt, with the copies of tile
//     kt+S-1 issued after its first k step and the wait + barrier for tile kt+1 inside its
//     last k step, so the first fragments of tile kt+1 load while tile kt's last mmas run
//   drain: wait for every group, barrier (the ring's memory may be reused after it)
//
// One barrier per tile suffices (gemm.cuh, run_pipelined): the copies into the stage of tile
// kt-1 are issued after the barrier that follows tile kt-1's last ldmatrix.
#pragma once

#include "cp_async.cuh"
#include "gemm.cuh"
#include "smem.cuh"

namespace tessel {

template <class Gemm, int Stages, class TIn, class Issue>
__device__ __forceinline__ void gemm_mainloop(int k_tiles, TIn* sA, TIn* sB, int stage_elems_a,
                                              int stage_elems_b, float (&acc)[Gemm::kAccPerThread],
                                              Issue&& issue) {
  static_assert(Stages >= 2, "gemm_mainloop: the ring needs at least 2 stages (1 stage is a plain loop)");
#pragma unroll
  for (int s = 0; s < Stages - 1; ++s) {
    if (s < k_tiles) issue(s, s);
    cp_async_commit();
  }
  cp_async_wait<Stages - 2>();
  block_sync();
  typename Gemm::Fragments frag[2];
  Gemm::load_first(frag, sA, sB);
  int stage = 0;
  for (int kt = 0; kt < k_tiles; ++kt) {
    const int next = stage + 1 == Stages ? 0 : stage + 1;
    const int refill = stage == 0 ? Stages - 1 : stage - 1;  // (kt + S - 1) % S: the stage of tile kt-1
    Gemm::run_pipelined(
        frag, sA + stage * stage_elems_a, sB + stage * stage_elems_b, sA + next * stage_elems_a,
        sB + next * stage_elems_b, acc,
        [&] {
          cp_async_wait<Stages - 2>();
          block_sync();
        },
        [&] {
          if (kt + Stages - 1 < k_tiles) issue(kt + Stages - 1, refill);
          cp_async_commit();
        });
    stage = next;
  }
  cp_async_wait_all();
  block_sync();
}

}  // namespace tessel
