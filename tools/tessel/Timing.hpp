// Timing on the GPU with CUDA events, shared by the tutorial's sections and the benchmarks
// (GemmBench has its own, with the L2 flush and the GEMM's checks).
#pragma once

#include <functional>
#include <vector>

namespace tessel::cli {

// The median of `repeats` timed runs of `run` (ms, CUDA events on the legacy default stream)
// after `warmup` untimed ones.
double median_ms(const std::function<void()>& run, int warmup, int repeats);

// Several sides timed in turn, `warmup` + `repeats` rounds, the side that goes first rotating
// from round to round; `before_each` (when set) runs untimed before every timed run (an L2
// flush). The median per side, in the order of `runs` (ms).
std::vector<double> interleaved_median_ms(const std::vector<std::function<void()>>& runs, int warmup, int repeats,
                                          const std::function<void()>& before_each = {});

}  // namespace tessel::cli
