// Compiles statements into closures over the Machine. Each closure first records itself as the
// running statement, so that any error it or its expressions raise names the author's line.
#include <limits>
#include <string_view>

#include "Elements.hpp"
#include "Machine.hpp"

namespace tessel::interp::detail {

using namespace tessel::ir;

namespace {

// Whether a statement's recorded line is the author's. An unknown line, or one inside the
// frontend's own header (a call whose source_location default sits in a template body there),
// is not: errors then name the innermost enclosing statement the author wrote.
bool is_author_location(const std::source_location& where) {
  return where.line() != 0 && !std::string_view(where.file_name()).ends_with("tessel/Frontend.hpp");
}

StmtFn compile_for(const ForStmt* op, Symbols& sym) {
  IntFn lo = compile_int(op->min, sym), extent = compile_int(op->extent, sym);
  TESSEL_INTERNAL_CHECK(!is_float(op->var.dtype()), "interpreter: loop variable of a float type");
  const auto slot = static_cast<size_t>(sym.bind_var(op->var));
  StmtFn body = compile_stmt(op->body, sym);
  sym.unbind_var(op->var);
  return [where = sym.where, lo, extent, slot, body](Machine& m) {
    m.where = where;
    const std::int64_t first = lo(m), n = extent(m);
    for (std::int64_t i = 0; i < n; ++i) {
      m.ints[slot] = first + i;
      body(m);
    }
  };
}

StmtFn compile_let(const LetStmt* op, Symbols& sym) {
  const bool is_float_var = is_float(op->var.dtype());
  IntFn int_value = is_float_var ? IntFn() : compile_int(op->value, sym);
  FloatFn float_value = is_float_var ? compile_float(op->value, sym) : FloatFn();
  const auto slot = static_cast<size_t>(sym.bind_var(op->var));
  StmtFn body = compile_stmt(op->body, sym);
  sym.unbind_var(op->var);
  if (is_float_var) {
    const DType t = op->var.dtype();
    return [where = sym.where, float_value, slot, body, t](Machine& m) {
      m.where = where;
      m.floats[slot] = round_to_dtype(float_value(m), t);
      body(m);
    };
  }
  const DType t = op->var.dtype();
  return [where = sym.where, int_value, slot, body, t](Machine& m) {
    m.where = where;
    m.ints[slot] = wrap_to_dtype(int_value(m), t);
    body(m);
  };
}

StmtFn compile_store(const BufferStore* op, Symbols& sym) {
  const auto slot = static_cast<size_t>(sym.buffer_slot(op->buffer, "store"));
  std::vector<IntFn> idx;
  for (const Expr& i : op->indices) idx.push_back(compile_int(i, sym));
  if (is_float_expr(op->value)) {
    FloatFn value = compile_float(op->value, sym);
    return [where = sym.where, slot, idx, value](Machine& m) {
      m.where = where;
      Storage& st = m.buffers[slot];
      const std::int64_t offset = checked_offset(m, st, idx, "store");
      store_float(st.data, st.dtype(), offset, value(m));
      mark_written(st, offset);
    };
  }
  IntFn value = compile_int(op->value, sym);
  return [where = sym.where, slot, idx, value](Machine& m) {
    m.where = where;
    Storage& st = m.buffers[slot];
    const std::int64_t offset = checked_offset(m, st, idx, "store");
    store_int(st.data, st.dtype(), offset, value(m));
    mark_written(st, offset);
  };
}

// A fresh array for each execution, i.e. for each block; poisoned so that reading an element
// before writing it shows up as NaN instead of a plausible stale value.
StmtFn compile_decl(const DeclBuffer* op, Symbols& sym) {
  const BufferNode* node = op->buffer.get();
  std::vector<IntFn> shape;
  for (const Expr& d : node->shape) shape.push_back(compile_int(d, sym));
  const int slot = sym.num_buffers++;
  sym.buffers[node] = slot;
  sym.declared.push_back(node);
  return [where = sym.where, node, slot, shape](Machine& m) {
    m.where = where;
    Storage& st = m.buffers[static_cast<size_t>(slot)];
    st.buffer = node;
    std::vector<std::int64_t> dims;
    for (const IntFn& d : shape) dims.push_back(d(m));
    for (std::int64_t d : dims)
      if (d < 0) m.fail("alloc", "buffer " + node->name + " has negative shape " + index_string(dims));
    st.set_shape(std::move(dims));
    const auto elem = static_cast<size_t>(dtype_bytes(node->dtype));
    st.owned.assign(static_cast<size_t>(st.numel) * elem, 0);
    if (m.options.poison_scratch && st.numel > 0) {
      unsigned char poison[8];
      if (is_float_path(node->dtype)) {
        store_float(poison, node->dtype, 0, std::numeric_limits<double>::quiet_NaN());
      } else {
        std::fill(poison, poison + 8, 0x5a);
      }
      for (size_t i = 0; i < st.owned.size(); i += elem)
        std::copy(poison, poison + elem, st.owned.begin() + i);
    }
    st.data = st.owned.data();
    st.written.clear();
    if (m.options.report_unwritten_shared_reads && node->scope == Scope::Shared)
      st.written.assign(static_cast<size_t>(st.numel), 0);
  };
}

StmtFn compile_kernel(const KernelStmt* op, Symbols& sym) {
  std::vector<IntFn> grid;
  for (const Expr& g : op->grid) grid.push_back(compile_int(g, sym));
  std::vector<size_t> slots;
  for (const Var& v : op->block_vars) slots.push_back(static_cast<size_t>(sym.bind_var(v)));
  const size_t outer_decls = sym.declared.size();
  StmtFn body = compile_stmt(op->body, sym);
  // The kernel's buffers live only inside it.
  for (size_t i = outer_decls; i < sym.declared.size(); ++i) sym.buffers.erase(sym.declared[i]);
  sym.declared.resize(outer_decls);
  for (const Var& v : op->block_vars) sym.unbind_var(v);
  return [op, where = sym.where, grid, slots, body](Machine& m) {
    m.where = where;
    std::int64_t extent[3] = {1, 1, 1};
    for (size_t d = 0; d < grid.size(); ++d) {
      extent[d] = grid[d](m);
      if (extent[d] < 0)
        m.fail("Kernel", "grid dimension " + std::to_string(d) + " is " + std::to_string(extent[d]));
    }
    m.kernel = op;
    for (std::int64_t z = 0; z < extent[2]; ++z)
      for (std::int64_t y = 0; y < extent[1]; ++y)
        for (std::int64_t x = 0; x < extent[0]; ++x) {
          m.block[0] = x, m.block[1] = y, m.block[2] = z;
          for (size_t d = 0; d < slots.size(); ++d) m.ints[slots[d]] = m.block[d];
          body(m);
        }
    m.kernel = nullptr;
  };
}

StmtFn compile_node(const Stmt& s, Symbols& sym) {
  switch (s->kind) {
    case NodeKind::SeqStmt: {
      std::vector<StmtFn> parts;
      for (const Stmt& p : s.as<SeqStmt>()->stmts) parts.push_back(compile_stmt(p, sym));
      return [parts](Machine& m) {
        for (const StmtFn& p : parts) p(m);
      };
    }
    case NodeKind::ForStmt:
      return compile_for(s.as<ForStmt>(), sym);
    case NodeKind::IfStmt: {
      const auto* op = s.as<IfStmt>();
      IntFn cond = compile_int(op->cond, sym);
      StmtFn then_case = compile_stmt(op->then_case, sym), else_case = compile_stmt(op->else_case, sym);
      return [where = sym.where, cond, then_case, else_case](Machine& m) {
        m.where = where;
        if (cond(m)) {
          then_case(m);
        } else {
          else_case(m);
        }
      };
    }
    case NodeKind::LetStmt:
      return compile_let(s.as<LetStmt>(), sym);
    case NodeKind::BufferStore:
      return compile_store(s.as<BufferStore>(), sym);
    case NodeKind::DeclBuffer:
      return compile_decl(s.as<DeclBuffer>(), sym);
    case NodeKind::KernelStmt:
      return compile_kernel(s.as<KernelStmt>(), sym);
    case NodeKind::CopyStmt:
      return compile_copy(s.as<CopyStmt>(), sym);
    case NodeKind::GemmStmt:
      return compile_gemm(s.as<GemmStmt>(), sym);
    case NodeKind::FillStmt:
      return compile_fill(s.as<FillStmt>(), sym);
    case NodeKind::ReduceStmt:
      return compile_reduce(s.as<ReduceStmt>(), sym);
    // Block rasterization reorders blocks on the GPU; the result is the same.
    case NodeKind::SwizzleStmt:
    // Clusters share operand loads on the GPU (a hint); the result is the same.
    case NodeKind::ClusterStmt:
    // Whole-tile statements run one at a time on one CPU thread: nothing to wait for.
    case NodeKind::BarrierStmt:
    case NodeKind::AsyncCommit:
    case NodeKind::AsyncWait:
      return [](Machine&) {};
    case NodeKind::DeviceCall:
      sym.fail("device call", "the interpreter runs the tile-level program the frontend recorded; " +
                                  s.as<DeviceCall>()->callee +
                                  " is thread-level code from lowering (interpret the program before jit)");
    default:
      break;
  }
  throw_internal_error(std::string("interpreter: statement of kind ") + node_kind_name(s->kind));
}

}  // namespace

StmtFn compile_stmt(const Stmt& s, Symbols& sym) {
  if (!s.defined()) return [](Machine&) {};
  const std::source_location outer = sym.where;
  if (is_author_location(s->where)) sym.where = s->where;
  StmtFn out = compile_node(s, sym);
  sym.where = outer;
  return out;
}

}  // namespace tessel::interp::detail
