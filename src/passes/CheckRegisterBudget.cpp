// check_register_budget
//   Does:     adds up the values each thread keeps in registers — every fragment's per-thread
//             size from its layout (less the vectors a FragmentStorage puts in shared memory)
//             and every local array — and reports a fragment, or a kernel in total, past
//             kRegisterBudget values per thread as a CompileError at the buffer's line, naming
//             it, its per-thread size and the limit. Past the budget ptxas spills to local memory
//             on a large scale (8192 floats per thread: 160 KB of spills) and can take minutes;
//             JitOptions::allow_register_spills turns the check off.
//   Requires: infer_layouts (fragment_layouts for every fragment). The Hopper GEMM's whole-
//             kernel template (select_hopper_gemm) sizes its own registers and is not counted.
//   Ensures:  nothing changes in the IR.
//
// A value is counted as one 32-bit register whatever its dtype: generated code declares 16-bit
// fragments as arrays of half / bfloat16 scalars, which ptxas keeps one to a register in general
// (packing pairs is not guaranteed), and 64-bit values, rare in fragments, as two.
#include <algorithm>
#include <string>
#include <vector>

#include "passes/Passes.hpp"
#include "tessel/ir/Mutator.hpp"

namespace tessel::passes {

using namespace ir;

namespace {

struct Holder {
  Buffer buffer;
  std::int64_t registers = 0;
};

std::string describe(const Buffer& b) {
  std::string s = b->name + " (" + scope_name(b->scope) + " " + std::string(dtype_name(b->dtype)) + "[";
  const auto shape = b.const_shape();
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "])";
}

std::string limit_text() {
  return "the limit is " + std::to_string(kRegisterBudget) + " (twice the " +
         std::to_string(kMaxRegistersPerThread) +
         " registers a thread can have; past it ptxas spills most of it to local memory)";
}

const char* kRemedies =
    "use smaller tiles or more threads, keep part of each row in shared memory "
    "(alloc_fragment(shape, dtype, FragmentStorage{k})), or set JitOptions::allow_register_spills";

}  // namespace

Stmt check_register_budget(const Stmt& body, PassContext& ctx) {
  if (ctx.allow_register_spills || ctx.hopper.selected) return body;
  struct Collect : IRVisitor {
    const PassContext& ctx;
    std::vector<Holder> holders;
    std::source_location kernel_where;
    explicit Collect(const PassContext& c) : ctx(c) {}
    void visit_node(const KernelStmt* op) override {
      kernel_where = op->where;
      IRVisitor::visit_node(op);
    }
    void visit_node(const DeclBuffer* op) override {
      const Buffer& b = op->buffer;
      const std::int64_t width = dtype_bytes(b->dtype) > 4 ? 2 : 1;
      if (b->scope == Scope::Fragment) {
        auto it = ctx.fragment_layouts.find(b->id);
        TESSEL_INTERNAL_CHECK(it != ctx.fragment_layouts.end(), "fragment " << b->name << " has no layout");
        const FragmentLayout& l = it->second;
        const std::int64_t in_registers =
            std::max<std::int64_t>(0, l.per_thread - std::int64_t{b->shared_tail} * l.vec);
        holders.push_back({b, in_registers * width});
      } else if (b->scope == Scope::Local) {
        holders.push_back({b, b.const_numel() * width});
      }
      IRVisitor::visit_node(op);
    }
  } collect(ctx);
  collect.visit(body);

  std::int64_t total = 0;
  for (const Holder& h : collect.holders) {
    if (h.registers > kRegisterBudget)
      TESSEL_USER_ERROR("alloc_fragment", h.buffer->where,
                        describe(h.buffer)
                            << " holds " << h.registers << " values per thread with " << ctx.threads
                            << " threads; " << limit_text() << "; " << kRemedies);
    total += h.registers;
  }
  if (total > kRegisterBudget) {
    std::string parts;
    for (const Holder& h : collect.holders)
      parts += (parts.empty() ? "" : ", ") + h.buffer->name + " " + std::to_string(h.registers);
    TESSEL_USER_ERROR("Kernel", collect.kernel_where,
                      ctx.func_name << "'s fragments and local arrays hold " << total
                                    << " values per thread in all (" << parts << ") with " << ctx.threads
                                    << " threads; " << limit_text() << "; " << kRemedies);
  }
  return body;
}

}  // namespace tessel::passes
