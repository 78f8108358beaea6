// The regression cases kept under tests/fuzz/regressions/ (one .case file per failure the
// fuzzer ever found, reloadable with parse_case), for the test tiers.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "fuzz/FuzzCase.hpp"

namespace tessel::fuzz {

struct Regression {
  std::filesystem::path file;
  FuzzCase c;
  // The file says "# known-failing: <why>": a bug reported, not fixed yet; the tiers expect it
  // to fail still (so that a fix shows up) instead of passing.
  bool known_failing = false;
};

// Every *.case under `dir` (TESSEL_FUZZ_REGRESSION_DIR by default), sorted by name; a file
// that does not parse throws std::invalid_argument naming it.
std::vector<Regression> load_regressions(const std::filesystem::path& dir = TESSEL_FUZZ_REGRESSION_DIR);

}  // namespace tessel::fuzz
