// The interpreter's state while a program runs, and the compiled form it runs: every
// expression becomes a closure returning an int64 (integer and bool dtypes) or a double (float
// dtypes, holding a value exactly representable in the expression's dtype); every statement a
// closure over the Machine. Variables and buffers are resolved to slots once, at compile time,
// so running touches no maps.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <source_location>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tessel/interp/Interpreter.hpp"
#include "tessel/ir/IR.hpp"

namespace tessel::interp::detail {

// A buffer's elements: a global tensor's bytes (borrowed from its HostTensor) or a block's
// shared/fragment/local array (owned, re-made at each declaration).
struct Storage {
  const ir::BufferNode* buffer = nullptr;
  std::vector<std::int64_t> shape, strides;  // row-major
  std::int64_t numel = 0;
  unsigned char* data = nullptr;  // null until declared (or bound, for a parameter)
  std::vector<unsigned char> owned;
  // Shared buffers (InterpOptions::report_unwritten_shared_reads): 1 for each element written
  // since the declaration; empty when not tracked.
  std::vector<std::uint8_t> written;

  DType dtype() const { return buffer->dtype; }
  ir::Scope scope() const { return buffer->scope; }
  void set_shape(std::vector<std::int64_t> s);
};

struct Machine {
  std::vector<std::int64_t> ints;          // integer variable slots
  std::vector<double> floats;              // float variable slots
  std::vector<Storage> buffers;            // buffer slots
  std::source_location where{};            // the author's line of the statement running now
  const ir::KernelStmt* kernel = nullptr;  // the kernel running now, null between kernels
  std::int64_t block[3] = {0, 0, 0};
  InterpOptions options;

  // "<file:line>: error in <op> at block (bx, by) = (1, 0): <what>", as a RuntimeError.
  [[noreturn]] void fail(std::string_view op, const std::string& what) const;
};

// The written-element map of a tracked (shared) buffer: marks on writes, and a read of an element
// nothing wrote fails naming the buffer, the element and the statement's line.
inline void mark_written(Storage& st, std::int64_t offset, std::int64_t count = 1) {
  if (st.written.empty() || count <= 0) return;
  std::fill(st.written.begin() + offset, st.written.begin() + offset + count, std::uint8_t{1});
}
void fail_unwritten_read(Machine& m, const Storage& st, std::int64_t offset, std::string_view op);
inline void check_written(Machine& m, const Storage& st, std::int64_t offset, std::string_view op) {
  if (!st.written.empty() && !st.written[static_cast<size_t>(offset)]) fail_unwritten_read(m, st, offset, op);
}

using IntFn = std::function<std::int64_t(Machine&)>;
using FloatFn = std::function<double(Machine&)>;
using StmtFn = std::function<void(Machine&)>;

// Slots assigned while compiling, with the scoping the frontend implies (a loop variable is
// bound inside its loop, a kernel's buffers inside its kernel).
struct Symbols {
  std::unordered_map<const ir::VarNode*, int> int_vars, float_vars;
  std::unordered_map<const ir::BufferNode*, int> buffers;
  int num_ints = 0, num_floats = 0, num_buffers = 0;
  std::vector<const ir::BufferNode*> declared;  // buffers of the kernel being compiled
  struct Shadowed {
    const ir::VarNode* var;
    int previous_slot;  // -1: unbound before
  };
  std::vector<Shadowed> bindings;
  // The author's line of the statement being compiled: its own, or the innermost enclosing
  // statement's where its own is unknown or inside the library (see effective_location).
  std::source_location where{};

  // A fresh slot (int or float by dtype) for v; unbind_var restores what v named before.
  int bind_var(const ir::Var& v);
  void unbind_var(const ir::Var& v);
  int buffer_slot(const ir::Buffer& b, std::string_view op);  // error if not in scope
  [[noreturn]] void fail(std::string_view op, const std::string& what) const;
};

// Whether e is computed on the float path (double) or the integer path (int64).
bool is_float_expr(const ir::Expr& e);
IntFn compile_int(const ir::Expr& e, Symbols& sym);
FloatFn compile_float(const ir::Expr& e, Symbols& sym);

StmtFn compile_stmt(const ir::Stmt& s, Symbols& sym);
// The tile ops (TileOps.cpp).
StmtFn compile_copy(const ir::CopyStmt* op, Symbols& sym);
StmtFn compile_fill(const ir::FillStmt* op, Symbols& sym);
StmtFn compile_gemm(const ir::GemmStmt* op, Symbols& sym);
StmtFn compile_reduce(const ir::ReduceStmt* op, Symbols& sym);

// Flat element offset of `indices` in st, checked against its shape; an index outside it is
// reported as `op` (indices are re-evaluated for the message; expressions are pure).
std::int64_t checked_offset(Machine& m, const Storage& st, const std::vector<IntFn>& indices,
                            std::string_view op);

// "[3, 40]", "A_shared[0:128, 8:40]", "shared buffer A_shared of shape [128, 32]"
std::string index_string(const std::vector<std::int64_t>& idx);
std::string region_string(const Storage& st, const std::vector<std::int64_t>& starts,
                          const std::vector<std::int64_t>& extents);
std::string buffer_string(const Storage& st);

}  // namespace tessel::interp::detail
