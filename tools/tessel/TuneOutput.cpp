#include "tools/tessel/TuneOutput.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>

#include "tools/tessel/Output.hpp"

namespace tessel::cli {

namespace at = tessel::autotune;

nlohmann::json tune_table_json(const std::vector<autotune::Row>& rows) {
  nlohmann::json a = nlohmann::json::array();
  for (const at::Row& r : rows)
    a.push_back({{"config", r.config},
                 {"status", at::status_name(r.status)},
                 {"reason", r.reason},
                 {"ms", r.ms < 0 ? nlohmann::json(nullptr) : nlohmann::json(r.ms)},
                 {"repeats", r.repeats},
                 {"registers", r.registers},
                 {"spill_bytes", r.spill_bytes},
                 {"smem_bytes", r.smem_bytes < 0 ? nlohmann::json(nullptr) : nlohmann::json(r.smem_bytes)},
                 {"compile_ms", r.compile_ms}});
  return a;
}

void print_tune_table(const std::vector<autotune::Row>& table,
                      const std::function<std::string(const autotune::Config&)>& describe,
                      const std::function<std::string(double)>& rate, std::size_t max_rows) {
  // Timed candidates fastest first, then the ones that failed (pruned ones are only counted).
  std::vector<const at::Row*> rows;
  int pruned = 0;
  for (const at::Row& r : table) {
    if (r.status == at::Status::pruned)
      ++pruned;
    else
      rows.push_back(&r);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const at::Row* a, const at::Row* b) {
    const bool ta = a->ms >= 0, tb = b->ms >= 0;
    return ta != tb ? ta : (ta && a->ms < b->ms);
  });
  std::cout << "  " << left("config", 24) << left("status", 15) << right("ms", 9) << right("rate", 16)
            << right("repeats", 8) << right("regs", 6) << "  note\n";
  std::size_t shown = 0;
  for (const at::Row* r : rows) {
    if (shown++ == max_rows) {
      std::cout << "  ... " << rows.size() - max_rows << " more (all of them in --json)\n";
      break;
    }
    std::cout << "  " << left(describe(r->config), 24) << left(at::status_name(r->status), 15)
              << right(r->ms >= 0 ? fixed(r->ms, 4) : "-", 9) << right(r->ms >= 0 ? rate(r->ms) : "-", 16)
              << right(std::to_string(r->repeats), 8)
              << right(r->registers >= 0 ? std::to_string(r->registers) : "-", 6) << "  " << r->reason
              << "\n";
  }
  if (pruned) std::cout << "  (" << pruned << " pruned before compiling)\n";
}

namespace {

int terminal_columns() {
  winsize w{};
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 0) return w.ws_col;
  return 80;
}

std::string count(const char* what, int done, int total) {
  return std::string(what) + " " + std::to_string(done) + "/" + std::to_string(total);
}

}  // namespace

TuneProgress::TuneProgress(bool plain_lines) : tty_(progress_on_terminal()), plain_lines_(plain_lines) {}

TuneProgress::~TuneProgress() {
  clear();
}

void TuneProgress::attach(autotune::Options& options) {
  if (tty_) {
    options.progress = nullptr;
    options.on_progress = [this](const autotune::ProgressEvent& e) { update(e); };
  } else {
    options.progress = nullptr;
    if (plain_lines_)
      options.progress = [](const std::string& line) { std::cerr << line << "\n" << std::flush; };
    options.on_progress = nullptr;
  }
}

void TuneProgress::attach(autotune::CompileOptions& options, int total) {
  options.on_compiled = [this, total, done = 0](std::size_t, const autotune::Row& row) mutable {
    ++done;
    if (tty_) {
      update({autotune::ProgressEvent::Phase::compiling, done, total, autotune::describe(row.config)});
    } else if (plain_lines_) {
      std::cerr << "  compiled " << done << "/" << total << " " << autotune::describe(row.config) << ": "
                << (row.status == autotune::Status::not_timed
                        ? std::to_string(row.registers) + " registers"
                        : std::string(autotune::status_name(row.status)))
                << ", " << static_cast<int>(row.compile_ms) << " ms\n"
                << std::flush;
    }
  };
}

void TuneProgress::update(const autotune::ProgressEvent& e) {
  using Phase = autotune::ProgressEvent::Phase;
  int done = e.done, total = e.total;
  switch (e.phase) {
    case Phase::compiling:
      compiled_ = done, to_compile_ = total;
      break;
    case Phase::checking:
      checked_ = done, to_check_ = total;
      break;
    case Phase::timing:
      timed_ = done, to_time_ = total;
      break;
  }
  // At most ~20 redraws a second, but always the last step of a phase.
  const auto now = std::chrono::steady_clock::now();
  if (done < total && drawn_ && now - last_draw_ < std::chrono::milliseconds(50)) return;
  last_draw_ = now;
  draw(e.label);
}

void TuneProgress::draw(const std::string& label) {
  // The bar follows the phase under way: compiling, then checking, then timing.
  const bool timing = to_time_ > 0, checking = !timing && to_check_ > 0;
  const int done = timing ? timed_ : checking ? checked_ : compiled_;
  const int total = timing ? to_time_ : checking ? to_check_ : to_compile_;
  constexpr int kWidth = 24;
  const int filled = total > 0 ? std::min(kWidth, done * kWidth / total) : 0;
  std::string line = "tuning [" + std::string(filled, '#') + std::string(kWidth - filled, '.') + "] " +
                     count("compiled", compiled_, to_compile_);
  if (to_check_ > 0 || timing) line += "  " + count("checked", checked_, to_check_);
  if (timing) line += "  " + count("timed", timed_, to_time_);
  line += "  " + label;
  const std::size_t columns = static_cast<std::size_t>(std::max(20, terminal_columns() - 1));
  if (line.size() > columns) line = line.substr(0, columns - 3) + "...";
  std::cerr << "\r\033[K" << line << std::flush;
  drawn_ = true;
}

void TuneProgress::clear() {
  if (tty_ && drawn_) {
    std::cerr << "\r\033[K" << std::flush;
    drawn_ = false;
  }
}

}  // namespace tessel::cli
