// Helpers for tests that run the compiler's passes without a GPU: targets, the text of a
// CompileError, and the IR text after one pass.
#pragma once

#include <functional>
#include <string>

#include "Lower.hpp"
#include "tessel/Error.hpp"

namespace tessel::test {

// The targets of the two tensor-core paths (sm_90a takes tutorial-shaped GEMMs to the Hopper
// kernel; sm_80 keeps everything on mma.sync).
inline passes::Target sm90() {
  return {"sm_90a", 90, 232448};
}
// The switches that keep select_hopper_gemm's hand-written template (JitOptions::gemm_from_passes =
// false): what tests of the template itself lower under, now that the passes compile every GEMM.
inline passes::PassContext::Switches template_gemm() {
  passes::PassContext::Switches s;
  s.gemm_from_passes = false;
  return s;
}
inline passes::Target sm80() {
  return {"sm_80", 80, 166912};
}

// What fn's CompileError says; "<no error>" when it throws none.
inline std::string compile_error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const CompileError& e) {
    return e.what();
  }
  return "<no error>";
}

// The IR text (with layouts and shared-memory plan) after `pass`, from lower(..., keep_stages).
inline std::string stage_text(const LoweredFunc& l, const std::string& pass) {
  for (const auto& [name, text] : l.stages)
    if (name == pass) return text;
  return "<no pass " + pass + ">";
}

}  // namespace tessel::test
