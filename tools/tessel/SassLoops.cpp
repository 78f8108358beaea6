#include "tools/tessel/SassLoops.hpp"

#include <algorithm>
#include <regex>
#include <sstream>

namespace tessel::cli {

namespace {

struct Instruction {
  long long address = 0;
  std::string text;  // without the address comment and the trailing ';'
};

// "@!P0 BRA `(.L_x_14)" -> "BRA"; "FMNMX.NAN R1, R2, R3, !PT" -> "FMNMX".
std::string opcode(const std::string& text) {
  std::istringstream in(text);
  std::string word;
  in >> word;
  if (!word.empty() && word[0] == '@') in >> word;  // the guard predicate
  return word.substr(0, word.find('.'));
}

}  // namespace

std::vector<SassLoop> sass_loops(const std::string& sass) {
  static const std::regex label(R"(^\s*(\.L_x_\d+):)");
  static const std::regex instruction(R"(^\s*/\*([0-9a-fA-F]+)\*/\s+(.*?)\s*;)");
  static const std::regex branch(R"(\bBRA\b[^`]*`\((\.L_x_\d+)\))");
  std::vector<Instruction> code;
  std::map<std::string, size_t> labels;  // label -> index of the instruction it names
  std::vector<std::string> pending;
  std::istringstream in(sass);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, label)) {
      pending.push_back(m[1]);
      continue;
    }
    if (!std::regex_search(line, m, instruction)) continue;
    for (const std::string& l : pending) labels[l] = code.size();
    pending.clear();
    code.push_back({std::stoll(m[1], nullptr, 16), m[2]});
  }
  std::vector<std::pair<size_t, size_t>> ranges;  // [first, branch] indices
  for (size_t i = 0; i < code.size(); ++i) {
    if (!std::regex_search(code[i].text, m, branch)) continue;
    const auto target = labels.find(m[1]);
    if (target != labels.end() && target->second <= i) ranges.emplace_back(target->second, i);
  }
  std::sort(ranges.begin(), ranges.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : a.second > b.second;
  });
  ranges.erase(std::unique(ranges.begin(), ranges.end()), ranges.end());
  std::vector<SassLoop> loops;
  for (const auto& [first, last] : ranges) {
    SassLoop l;
    l.start = code[first].address;
    l.end = code[last].address;
    l.instructions = static_cast<int>(last - first + 1);
    for (const auto& [f, e] : ranges)
      if ((f != first || e != last) && f >= first && e <= last) l.innermost = false;
    for (size_t i = first; i <= last; ++i) ++l.opcodes[opcode(code[i].text)];
    loops.push_back(std::move(l));
  }
  return loops;
}

std::string format_sass_loops(const std::vector<SassLoop>& loops) {
  if (loops.empty()) return "no loops (no branch back to an earlier instruction)\n";
  std::ostringstream os;
  for (const SassLoop& l : loops) {
    os << "loop 0x" << std::hex << l.start << "-0x" << l.end << std::dec << ": " << l.instructions
       << " instructions" << (l.innermost ? ", innermost" : "") << ":";
    std::vector<std::pair<std::string, int>> mix(l.opcodes.begin(), l.opcodes.end());
    std::stable_sort(mix.begin(), mix.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    constexpr size_t kShown = 16;
    for (size_t i = 0; i < mix.size() && i < kShown; ++i) os << " " << mix[i].first << " " << mix[i].second;
    if (mix.size() > kShown) os << " (+" << mix.size() - kShown << " other opcodes)";
    os << "\n";
  }
  return os.str();
}

}  // namespace tessel::cli
