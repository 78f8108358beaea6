// Stable text form of the IR: what tests read and what TESSEL_DUMP prints. Variables print by
// name (with a #n suffix only when two distinct variables share a name within one dump).
#pragma once

#include <string>

#include "tessel/ir/IR.hpp"

namespace tessel::ir {

std::string to_string(const Expr& e);
std::string to_string(const Stmt& s);
std::string to_string(const PrimFuncNode& f);
std::string to_string(const Region& r);

}  // namespace tessel::ir
