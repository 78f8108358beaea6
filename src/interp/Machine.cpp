#include "Machine.hpp"

#include <iterator>
#include <sstream>

#include "tessel/Error.hpp"

namespace tessel::interp::detail {

void Storage::set_shape(std::vector<std::int64_t> s) {
  shape = std::move(s);
  strides.assign(shape.size(), 1);
  numel = 1;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    strides[static_cast<size_t>(d)] = numel;
    numel *= shape[static_cast<size_t>(d)];
  }
}

void Machine::fail(std::string_view op, const std::string& what) const {
  std::ostringstream os;
  os << format_location(where) << ": error in " << op;
  if (kernel) {
    os << " at block (";
    const size_t n = kernel->block_vars.size();
    for (size_t d = 0; d < n; ++d) os << (d ? ", " : "") << kernel->block_vars[d].name();
    os << ") = (";
    for (size_t d = 0; d < n; ++d) os << (d ? ", " : "") << block[d];
    os << ")";
  }
  os << ": " << what;
  throw RuntimeError(os.str());
}

int Symbols::bind_var(const ir::Var& v) {
  const auto* node = v.as<ir::VarNode>();
  auto& table = is_float(node->dtype) ? float_vars : int_vars;
  auto it = table.find(node);
  bindings.push_back({node, it == table.end() ? -1 : it->second});
  return table[node] = is_float(node->dtype) ? num_floats++ : num_ints++;
}

void Symbols::unbind_var(const ir::Var& v) {
  const auto* node = v.as<ir::VarNode>();
  auto& table = is_float(node->dtype) ? float_vars : int_vars;
  for (auto it = bindings.rbegin(); it != bindings.rend(); ++it) {
    if (it->var != node) continue;
    if (it->previous_slot < 0) {
      table.erase(node);
    } else {
      table[node] = it->previous_slot;
    }
    bindings.erase(std::next(it).base());
    return;
  }
}

int Symbols::buffer_slot(const ir::Buffer& b, std::string_view op) {
  auto it = buffers.find(b.get());
  if (it == buffers.end())
    fail(op, "buffer " + b->name + " (" + ir::scope_name(b->scope) +
                 ") is used outside the kernel that allocates it, or before its allocation");
  return it->second;
}

void Symbols::fail(std::string_view op, const std::string& what) const {
  throw RuntimeError(format_location(where) + ": error in " + std::string(op) + ": " + what);
}

std::int64_t checked_offset(Machine& m, const Storage& st, const std::vector<IntFn>& indices,
                            std::string_view op) {
  std::int64_t offset = 0;
  bool inside = true;
  for (size_t d = 0; d < indices.size(); ++d) {
    const std::int64_t i = indices[d](m);
    inside = inside && i >= 0 && i < st.shape[d];
    offset += i * st.strides[d];
  }
  if (!inside) {
    std::vector<std::int64_t> idx;
    for (const IntFn& f : indices) idx.push_back(f(m));
    m.fail(op, "index " + index_string(idx) + " is outside " + buffer_string(st));
  }
  return offset;
}

std::string index_string(const std::vector<std::int64_t>& idx) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < idx.size(); ++i) os << (i ? ", " : "") << idx[i];
  os << "]";
  return os.str();
}

std::string region_string(const Storage& st, const std::vector<std::int64_t>& starts,
                          const std::vector<std::int64_t>& extents) {
  std::ostringstream os;
  os << st.buffer->name << "[";
  for (size_t i = 0; i < starts.size(); ++i) {
    os << (i ? ", " : "") << starts[i] << ":";
    if (i < extents.size()) os << starts[i] + extents[i];
  }
  os << "]";
  return os.str();
}

void fail_unwritten_read(Machine& m, const Storage& st, std::int64_t offset, std::string_view op) {
  std::vector<std::int64_t> idx(st.shape.size());
  for (size_t d = 0; d < st.shape.size(); ++d) {
    idx[d] = st.strides[d] ? offset / st.strides[d] : 0;
    offset -= idx[d] * st.strides[d];
  }
  m.fail(op, "reads element " + index_string(idx) + " of " + buffer_string(st) +
                 ", which nothing wrote since its declaration (shared memory starts undefined; "
                 "fill or copy into it first)");
}

std::string buffer_string(const Storage& st) {
  return std::string(ir::scope_name(st.scope())) + " buffer " + st.buffer->name + " of shape " +
         index_string(st.shape);
}

}  // namespace tessel::interp::detail
