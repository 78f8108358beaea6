// What the tuning commands and tutorial section 7 print: progress while tuning, the table of
// candidates and its JSON.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessel/autotune/Autotune.hpp"

namespace tessel::cli {

// Every row: config, status, reason, ms (null when not timed), repeats, registers, spill_bytes,
// smem_bytes (null when not compiled), compile_ms.
nlohmann::json tune_table_json(const std::vector<autotune::Row>& rows);

// The candidates that compiled or failed, fastest first, then the failures (pruned ones are
// counted, not listed), at most `max_rows` of them; `describe` spells a config as the kernel's
// --config does, `rate` turns milliseconds into the kernel's figure of merit.
void print_tune_table(const std::vector<autotune::Row>& table,
                      const std::function<std::string(const autotune::Config&)>& describe,
                      const std::function<std::string(double)>& rate, std::size_t max_rows = 20);

// The autotuner's progress on stderr. On a terminal (progress_on_terminal()) one line redrawn in
// place and erased at the end:
//   tuning [#########...............] compiled 120/120  checked 57/118  timed 0/31  block_K=64 ...
// elsewhere, with `plain_lines`, the autotuner's plain lines, one per candidate compiled, checked
// and timed (logs), or nothing. Attach it to the options before the tune; it must outlive the tune.
class TuneProgress {
 public:
  explicit TuneProgress(bool plain_lines = true);
  ~TuneProgress();
  TuneProgress(const TuneProgress&) = delete;
  TuneProgress& operator=(const TuneProgress&) = delete;

  void attach(autotune::Options& options);
  // compile_all on its own (--compile-only, tutorial section 7 without a GPU): `total` candidates.
  void attach(autotune::CompileOptions& options, int total);
  // Erases the bar (the next event draws it again).
  void clear();

 private:
  void update(const autotune::ProgressEvent& e);
  void draw(const std::string& label);

  bool tty_;
  bool plain_lines_;
  int compiled_ = 0, to_compile_ = 0, checked_ = 0, to_check_ = 0, timed_ = 0, to_time_ = 0;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace tessel::cli
