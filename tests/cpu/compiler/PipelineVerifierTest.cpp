// verify_hopper_pipeline's model of the sm_90a GEMM's mbarrier protocol: every configuration the
// compiler emits passes, and each classic mistake planted in the model is caught with its reason.
#include <gtest/gtest.h>

#include <iostream>

#include "passes/PipelineModel.hpp"

namespace {

using tessel::passes::Bug;
using tessel::passes::check_hopper_pipeline;
using tessel::passes::PipelineModel;

PipelineModel model(int stages, int consumers, int split, int tiles, int k_tiles, Bug bug = Bug::None,
                    bool tma_store = false, int multicast = 1) {
  return PipelineModel{stages, consumers, split, tiles, k_tiles, tma_store, multicast, bug};
}

TEST(PipelineVerifier, TheEmittedConfigurationsPass) {
  for (int stages : {2, 3, 4, 5, 6})
    for (int consumers : {1, 2})
      for (int split : {1, 2})
        for (int tiles : {1, 3})
          for (int k : {1, 2, stages, 2 * stages + 3})
            for (bool tma_store : {false, true})
              for (int multicast : {1, 2}) {
                // Neither the TMA store nor a multicast cluster goes with split-K (hopper_gemm.cuh).
                if ((tma_store || multicast > 1) && split > 1) continue;
                const std::string v = check_hopper_pipeline(
                    model(stages, consumers, split, tiles, k * split, Bug::None, tma_store, multicast), 16);
                EXPECT_EQ(v, "");
              }
}

TEST(PipelineVerifier, PlantedMistakesAreCaught) {
  struct Planted {
    Bug bug;
    int split;
    const char* says;
    bool tma_store = false;
    int multicast = 1;
  };
  for (const Planted& p : {Planted{Bug::ProducerSkipsEmptyWait, 1, "overwrites ring stage"},
                           Planted{Bug::FullParityFlipped, 1, "passes on phase"},
                           Planted{Bug::ReleaseBeforeWgmmaWait, 1, "overwrites ring stage"},
                           Planted{Bug::EmptyCountOneShort, 1, "overwrites ring stage"},
                           Planted{Bug::SplitSkipsEmptyWait, 2, "slots of the reduction buffer"},
                           Planted{Bug::ReductionCountOneShort, 2, "reads fill"},
                           Planted{Bug::TmaStoreSkipsWaitRead, 1, "overwrites warpgroup", true},
                           Planted{Bug::TmaStoreNoFirstBarrier, 1, "overwrites warpgroup", true},
                           Planted{Bug::TmaStoreNoSecondBarrier, 1, "staging tile", true},
                           Planted{Bug::ProducerSkipsEmptyWait, 1, "share with fill", false, 2},
                           Planted{Bug::MulticastEmptyCountsOwnCta, 1, "deadlock", true, 2}}) {
    const std::string v =
        check_hopper_pipeline(model(3, 2, p.split, 3, 7 * p.split, p.bug, p.tma_store, p.multicast), 64);
    EXPECT_NE(v.find(p.says), std::string::npos) << static_cast<int>(p.bug) << ": '" << v << "'";
    std::cout << "[ caught ] " << v << "\n";
  }
}

TEST(PipelineVerifier, DeadlocksAndStalePhasesAreNamed) {
  // One arrival too many expected on empty[s]: the producer's second pass never starts.
  PipelineModel p = model(2, 1, 1, 1, 6, Bug::EmptyCountOneExtra);
  const std::string stuck = check_hopper_pipeline(p, 4);
  EXPECT_NE(stuck.find("deadlock: the producer waits for phase 0 of empty[0]"), std::string::npos) << stuck;
  // A flipped parity on the very first wait passes for "phase -1": named as phases behind.
  p.bug = Bug::FullParityFlipped;
  const std::string v = check_hopper_pipeline(p, 0);
  EXPECT_NE(v.find("consumer warp"), std::string::npos) << v;
  EXPECT_NE(v.find("full["), std::string::npos) << v;
  EXPECT_NE(v.find("round-robin"), std::string::npos) << v;
}

}  // namespace
