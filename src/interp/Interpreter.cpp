// Entry points: argument checks (the same the GPU call makes: count, dtype, shape, with symbolic
// dimensions bound from the arguments), compilation of the program into closures, and the run.
#include "tessel/interp/Interpreter.hpp"

#include <cmath>
#include <limits>
#include <set>
#include <sstream>

#include "Elements.hpp"
#include "Machine.hpp"
#include "tessel/ir/Printer.hpp"

namespace tessel::interp {

using detail::IntFn;
using detail::Machine;
using detail::Symbols;
using ir::as_const_int;
using ir::Expr;
using ir::PrimFuncNode;
using ir::Var;
using ir::VarNode;

namespace {

[[noreturn]] void argument_error(const PrimFuncNode& f, const std::string& what) {
  throw RuntimeError(f.name + ": " + what);
}

std::string names(const PrimFuncNode& f, const std::vector<size_t>& which) {
  std::string out;
  for (size_t i : which) out += (out.empty() ? "" : ", ") + f.params[i]->name;
  return out;
}

// Binds the parameters' symbolic dimensions and checks tensors against the signature. Shared by
// interpret (every parameter given) and run_on_cpu (outputs shaped from the inputs).
class Signature {
 public:
  Signature(const PrimFuncNode& f, Symbols& sym, Machine& m) : f_(f), sym_(sym), m_(m) {
    for (const ir::Buffer& p : f.params) {
      sym.buffers[p.get()] = sym.num_buffers++;
      for (const Expr& d : p->shape)
        if (const auto* v = d.as<VarNode>(); v && !sym.int_vars.count(v))
          sym.bind_var(Var(std::static_pointer_cast<const VarNode>(d.ptr())));
    }
    for (const ir::Buffer& p : f.params) {
      std::vector<IntFn> dims;
      for (const Expr& d : p->shape) dims.push_back(detail::compile_int(d, sym));
      dims_.push_back(std::move(dims));
    }
    m.ints.assign(static_cast<size_t>(sym.num_ints), 0);
    bound_.assign(static_cast<size_t>(sym.num_ints), -1);
  }

  // dtype, rank; binds the symbolic dimensions that t fixes first.
  void bind(size_t i, const HostTensor& t) {
    const ir::Buffer& p = f_.params[i];
    if (t.dtype != p->dtype)
      argument_error(f_, "parameter " + p->name + " expects dtype " + std::string(dtype_name(p->dtype)) +
                             ", given " + std::string(dtype_name(t.dtype)) + " (" + t.describe() + ")");
    if (t.shape.size() != p->shape.size())
      argument_error(f_, "parameter " + p->name + " expects shape " + expected(i) + " (" +
                             std::to_string(p->shape.size()) + " dimensions), given " +
                             shape_string(t.shape));
    if (t.bytes.size() != static_cast<size_t>(t.numel() * dtype_bytes(t.dtype)))
      argument_error(f_, "parameter " + p->name + ": the tensor " + t.describe() + " holds " +
                             std::to_string(t.bytes.size()) + " bytes, not " +
                             std::to_string(t.numel() * dtype_bytes(t.dtype)));
    for (size_t d = 0; d < p->shape.size(); ++d) {
      const auto* v = p->shape[d].as<VarNode>();
      if (!v) continue;
      const auto slot = static_cast<size_t>(sym_.int_vars.at(v));
      if (bound_[slot] < 0) {
        m_.ints[slot] = t.shape[d];
        bound_[slot] = static_cast<int>(i);
      }
    }
  }

  // Every dimension of t equals the signature's, evaluated with the bound symbols.
  void check_shape(size_t i, const HostTensor& t) {
    if (shape(i) != t.shape)
      argument_error(f_, "parameter " + f_.params[i]->name + " expects shape " + expected(i) + ", given " +
                             shape_string(t.shape));
  }

  // The shape of parameter i (its symbols must be bound).
  std::vector<std::int64_t> shape(size_t i) {
    const ir::Buffer& p = f_.params[i];
    for (const Expr& d : p->shape)
      if (const auto* v = d.as<VarNode>(); v && bound_[static_cast<size_t>(sym_.int_vars.at(v))] < 0)
        argument_error(f_, "the dimension " + v->name + " of output " + p->name +
                               " is not a dimension of any input; it cannot be inferred");
    std::vector<std::int64_t> out;
    for (const IntFn& d : dims_[i]) out.push_back(d(m_));
    return out;
  }

 private:
  // "[64, 32]", or "[m = 64, 32]" with symbols.
  std::string expected(size_t i) {
    const ir::Buffer& p = f_.params[i];
    std::ostringstream os;
    os << "[";
    for (size_t d = 0; d < p->shape.size(); ++d) {
      os << (d ? ", " : "");
      if (auto c = as_const_int(p->shape[d])) {
        os << *c;
        continue;
      }
      os << ir::to_string(p->shape[d]);
      const auto* v = p->shape[d].as<VarNode>();
      if (v && bound_[static_cast<size_t>(sym_.int_vars.at(v))] >= 0) {
        const auto slot = static_cast<size_t>(sym_.int_vars.at(v));
        os << " = " << m_.ints[slot] << " from " << f_.params[static_cast<size_t>(bound_[slot])]->name;
      }
    }
    os << "]";
    return os.str();
  }

  const PrimFuncNode& f_;
  Symbols& sym_;
  Machine& m_;
  std::vector<std::vector<IntFn>> dims_;
  std::vector<int> bound_;  // per int slot: the parameter that bound it, or -1
};

}  // namespace

void interpret(const PrimFuncNode& f, const std::vector<HostTensor*>& args, const InterpOptions& options) {
  if (args.size() != f.params.size()) {
    std::vector<size_t> all;
    for (size_t i = 0; i < f.params.size(); ++i) all.push_back(i);
    argument_error(f, "takes " + std::to_string(f.params.size()) + " arguments (" + names(f, all) +
                          "), given " + std::to_string(args.size()));
  }
  Symbols sym;
  Machine m;
  m.options = options;
  Signature sig(f, sym, m);
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i]) argument_error(f, "parameter " + f.params[i]->name + " is given a null tensor");
    sig.bind(i, *args[i]);
  }
  for (size_t i = 0; i < args.size(); ++i) sig.check_shape(i, *args[i]);

  detail::StmtFn body = detail::compile_stmt(f.body, sym);
  m.ints.resize(static_cast<size_t>(sym.num_ints), 0);  // keeps the bound dimensions
  m.floats.assign(static_cast<size_t>(sym.num_floats), 0.0);
  m.buffers.resize(static_cast<size_t>(sym.num_buffers));
  for (size_t i = 0; i < args.size(); ++i) {
    detail::Storage& st = m.buffers[i];
    st.buffer = f.params[i].get();
    st.set_shape(args[i]->shape);
    st.data = args[i]->bytes.data();
  }
  body(m);
}

std::vector<HostTensor> run_on_cpu(const PrimFunc& func, const std::vector<HostTensor>& inputs,
                                   const std::vector<int>& out_idx, const InterpOptions& options) {
  const PrimFuncNode& f = func.ir();
  const int n = static_cast<int>(f.params.size());
  std::vector<size_t> outs;
  std::set<size_t> seen;
  for (int i : out_idx) {
    if (i < -n || i >= n)
      argument_error(f, "out_idx " + std::to_string(i) + " is out of range for " + std::to_string(n) +
                            " parameters; legal: " + std::to_string(-n) + " .. " + std::to_string(n - 1));
    const auto k = static_cast<size_t>(i < 0 ? i + n : i);
    if (!seen.insert(k).second) argument_error(f, "out_idx names parameter " + f.params[k]->name + " twice");
    outs.push_back(k);
  }
  std::vector<size_t> ins;
  for (size_t i = 0; i < f.params.size(); ++i)
    if (!seen.count(i)) ins.push_back(i);
  if (inputs.size() != ins.size())
    argument_error(f, "takes " + std::to_string(ins.size()) + " inputs (" + names(f, ins) +
                          (outs.empty() ? "" : "; outputs ") + names(f, outs) + "), given " +
                          std::to_string(inputs.size()));

  // Shape the outputs from the inputs; interpret() checks everything again, cheaply.
  std::vector<HostTensor> all(f.params.size());
  {
    Symbols sym;
    Machine m;
    Signature sig(f, sym, m);
    for (size_t k = 0; k < ins.size(); ++k) sig.bind(ins[k], inputs[k]);
    for (size_t k = 0; k < ins.size(); ++k) sig.check_shape(ins[k], inputs[k]);
    for (size_t k = 0; k < ins.size(); ++k) all[ins[k]] = inputs[k];
    for (size_t o : outs) {
      all[o] = HostTensor(f.params[o]->dtype, sig.shape(o));
      if (is_float(all[o].dtype)) all[o].fill(std::numeric_limits<double>::quiet_NaN());
    }
  }
  std::vector<HostTensor*> args;
  for (HostTensor& t : all) args.push_back(&t);
  interpret(f, args, options);
  std::vector<HostTensor> result;
  for (size_t o : outs) result.push_back(std::move(all[o]));
  return result;
}

}  // namespace tessel::interp
