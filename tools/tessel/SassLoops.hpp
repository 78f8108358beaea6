// The loops of a kernel's SASS (nvdisasm -c text): each backward branch's range, how many
// instructions it holds and which opcodes -- where a kernel spends its time is its innermost
// loops. `tessel dump ... --sass-loops` prints it. ptxas places cold blocks (an mbarrier wait's
// retry, a loop's exit path) after the code they return to, so ranges overlap rather than nest;
// a range is innermost when no other range lies inside it.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace tessel::cli {

struct SassLoop {
  long long start = 0, end = 0;        // addresses of the first instruction and of the branch back
  int instructions = 0;                // from the first instruction to the branch, both included
  bool innermost = true;               // no other loop's range inside it
  std::map<std::string, int> opcodes;  // "FFMA" -> count (the opcode without its modifiers)
};

// The loops of `sass`, by start address (the longer first at the same start). Text that holds
// no instructions gives none.
std::vector<SassLoop> sass_loops(const std::string& sass);

// A line a loop: range, instruction count, innermost or not, then its 16 most frequent opcodes
// and how many other opcodes there are; a line saying so when there are none.
std::string format_sass_loops(const std::vector<SassLoop>& loops);

}  // namespace tessel::cli
