// What the tuning commands and tutorial section 7 print: the table of candidates and its JSON.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessel/autotune/Autotune.hpp"

namespace tessel::cli {

// Every row: config, status, reason, ms (null when not timed), repeats, registers, compile_ms.
nlohmann::json tune_table_json(const std::vector<autotune::Row>& rows);

// The candidates that compiled or failed, fastest first, then the failures (pruned ones are
// counted, not listed), at most `max_rows` of them; `describe` spells a config as the kernel's
// --config does, `rate` turns milliseconds into the kernel's figure of merit.
void print_tune_table(const std::vector<autotune::Row>& table,
                      const std::function<std::string(const autotune::Config&)>& describe,
                      const std::function<std::string(double)>& rate, std::size_t max_rows = 20);

}  // namespace tessel::cli
