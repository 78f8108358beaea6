// The lowering pipeline: a recorded program in, thread-level IR plus everything codegen needs out.
#pragma once

#include <string>
#include <vector>

#include "passes/PassContext.hpp"
#include "tessel/ir/IR.hpp"

namespace tessel {

struct JitOptions;  // tessel/Jit.hpp

struct LoweredFunc {
  std::string name;
  std::vector<ir::Buffer> params;
  ir::Stmt body;  // the thread-level kernel body (the KernelStmt is kept at the top)
  passes::PassContext ctx;
  // IR text after each pass, in order, when asked for (keep_stages).
  std::vector<std::pair<std::string, std::string>> stages;
};

// The passes in order (their names, for TESSEL_DUMP=after:<name> and tests).
const std::vector<std::string>& pass_names();

// Runs every pass. CompileError for the author's mistakes, InternalError for ours.
LoweredFunc lower(const ir::PrimFuncNode& f, const passes::Target& target, bool keep_stages = false);
LoweredFunc lower(const ir::PrimFuncNode& f, const passes::Target& target,
                  const passes::PassContext::Switches& s, bool keep_stages = false);

// Runs the passes up to and including `last_pass` (a name of pass_names()) and stops there: the
// IR and context a pass test starts from. InternalError for an unknown name.
LoweredFunc lower_until(const ir::PrimFuncNode& f, const passes::Target& target, const std::string& last_pass,
                        const passes::PassContext::Switches& s = {});

// The passes' switches jit() compiles under for `options` (the options, then TESSEL_DISABLE,
// TESSEL_ENABLE and TESSEL_MAX_PERSISTENT_CTAS from the environment; src/jit/Jit.cpp): for tools
// that lower without compiling and must plan what jit() builds (the tuning spaces).
passes::PassContext::Switches jit_switches(const JitOptions& options);
// Every switch as text ("tma wgmma ... max_persistent_ctas=0"): a key for caches of compiled
// kernels, which must not hand a kernel built under other switches to a call.
std::string switches_text(const passes::PassContext::Switches& s);

// The known shared-memory cap of an arch when no GPU can be asked (bytes per block, opt-in).
int default_smem_cap(const std::string& arch);

}  // namespace tessel
