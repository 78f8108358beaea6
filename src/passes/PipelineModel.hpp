// The mbarrier protocol model that verify_hopper_pipeline runs (VerifyHopperPipeline.cpp),
// exposed for its tests, which plant the classic mistakes (Bug) and expect each to be caught.
#pragma once

#include <string>

namespace tessel::passes {

enum class Bug {
  None,
  ProducerSkipsEmptyWait,      // the producer refills a stage without waiting for its release
  FullParityFlipped,           // consumers wait on the wrong parity of full[s]
  ReleaseBeforeWgmmaWait,      // a stage released right after its wgmma is issued, not completed
  EmptyCountOneShort,          // empty[s] expects one arrival fewer than the warps that read it
  EmptyCountOneExtra,          // empty[s] expects one arrival more: the producer waits forever
  SplitSkipsEmptyWait,         // split-K: rank 1 rewrites the partial sums before rank 0 read them
  ReductionCountOneShort,      // split-K: red_full completes before every rank-1 warp wrote
  TmaStoreSkipsWaitRead,       // TMA store: staging rewritten while the last stores still read it
  TmaStoreNoFirstBarrier,      // TMA store: warps write before warp 0 has waited for those reads
  TmaStoreNoSecondBarrier,     // TMA store: the store issued before every warp wrote its rows
  MulticastEmptyCountsOwnCta,  // multicast: empty[s] completes on its own CTA's releases only
};

struct PipelineModel {
  int stages = 4;
  int consumer_warpgroups = 2;
  int split_k = 1;         // CTAs per tile (2: the cluster's K halves and the hand-off)
  int tiles = 1;           // tiles per CTA (persistent loop)
  int k_tiles = 8;         // K tiles per tile, over all split_k CTAs
  bool tma_store = false;  // the TMA-store epilogue (staging tiles, named barriers)
  int multicast = 1;       // CTAs whose producers each fill a share of every stage (use_cluster)
  Bug bug = Bug::None;
};

// "" when every schedule tried (round-robin, then `random_schedules` random interleavings)
// completes without a violation; else the first violation, with the model's parameters.
std::string check_hopper_pipeline(const PipelineModel& p, int random_schedules);

}  // namespace tessel::passes
