#include "tools/tessel/TuneOutput.hpp"

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

}  // namespace tessel::cli
