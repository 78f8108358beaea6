#include "tools/tessel/Timing.hpp"

#include "tessel/runtime/Driver.hpp"
#include "tools/tessel/Output.hpp"

namespace tessel::cli {

double median_ms(const std::function<void()>& run, int warmup, int repeats) {
  for (int i = 0; i < warmup; ++i) run();
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) {
    EventTimer t;
    t.start();
    run();
    t.stop();
    ms.push_back(t.elapsed_ms());
  }
  return median(ms);
}

std::vector<double> interleaved_median_ms(const std::vector<std::function<void()>>& runs, int warmup, int repeats,
                                          const std::function<void()>& before_each) {
  std::vector<std::vector<double>> ms(runs.size());
  for (int rep = 0; rep < warmup + repeats; ++rep) {
    for (size_t j = 0; j < runs.size(); ++j) {
      const size_t which = (j + rep) % runs.size();  // rotate who goes first
      if (before_each) before_each();
      EventTimer timer;
      timer.start();
      runs[which]();
      timer.stop();
      const float e = timer.elapsed_ms();
      if (rep >= warmup) ms[which].push_back(e);
    }
  }
  std::vector<double> out;
  for (const auto& m : ms) out.push_back(median(m));
  return out;
}

}  // namespace tessel::cli
