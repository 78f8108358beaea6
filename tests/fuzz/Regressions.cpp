#include "fuzz/Regressions.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace tessel::fuzz {

std::vector<Regression> load_regressions(const std::filesystem::path& dir) {
  std::vector<Regression> out;
  if (!std::filesystem::is_directory(dir)) return out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".case") continue;
    std::ifstream in(entry.path());
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    Regression r;
    r.file = entry.path();
    try {
      r.c = parse_case(text);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(entry.path().string() + ": " + e.what());
    }
    r.known_failing = text.find("# known-failing") != std::string::npos;
    out.push_back(std::move(r));
  }
  std::sort(out.begin(), out.end(), [](const Regression& a, const Regression& b) { return a.file < b.file; });
  return out;
}

}  // namespace tessel::fuzz
