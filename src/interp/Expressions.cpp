// Compiles expressions into closures. The float path computes in the expression's dtype the
// way the generated code does: f32 in float, f16/bf16 in float rounded back after each
// operation (what half_t/bfloat16_t operators do), f64 in double. The integer path wraps to the
// dtype after each operation; / and % truncate toward zero like C++.
#include <cmath>
#include <limits>

#include "Elements.hpp"
#include "Machine.hpp"
#include "tessel/ir/Printer.hpp"

namespace tessel::interp::detail {

using namespace tessel::ir;

bool is_float_expr(const Expr& e) {
  return is_float_path(e.dtype());
}

namespace {

std::vector<IntFn> compile_indices(const std::vector<Expr>& indices, Symbols& sym) {
  std::vector<IntFn> out;
  out.reserve(indices.size());
  for (const Expr& i : indices) out.push_back(compile_int(i, sym));
  return out;
}

[[noreturn]] void unbound(const VarNode* v, Symbols& sym) {
  sym.fail("expression", "variable '" + v->name +
                             "' is used outside the loop, let or kernel that defines it (or is not a "
                             "dimension of any parameter)");
}

// ---- the integer path ------------------------------------------------------------------------

std::int64_t add_wrap(std::int64_t a, std::int64_t b) {
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
}
std::int64_t sub_wrap(std::int64_t a, std::int64_t b) {
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) - static_cast<std::uint64_t>(b));
}
std::int64_t mul_wrap(std::int64_t a, std::int64_t b) {
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) * static_cast<std::uint64_t>(b));
}
constexpr std::int64_t kInt64Min = std::numeric_limits<std::int64_t>::min();
std::int64_t div_trunc(std::int64_t a, std::int64_t b) {
  return (a == kInt64Min && b == -1) ? a : a / b;
}
std::int64_t mod_trunc(std::int64_t a, std::int64_t b) {
  return (b == -1) ? 0 : a % b;
}
std::int64_t div_floor(std::int64_t a, std::int64_t b) {
  std::int64_t q = div_trunc(a, b);
  return (mod_trunc(a, b) != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
std::int64_t mod_floor(std::int64_t a, std::int64_t b) {
  std::int64_t r = mod_trunc(a, b);
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

template <class Op>
IntFn int_binary(DType t, IntFn a, IntFn b, Op op) {
  if (t == DType::i64) return [a, b, op](Machine& m) { return op(a(m), b(m)); };
  return [a, b, op, t](Machine& m) { return wrap_to_dtype(op(a(m), b(m)), t); };
}

// Division and modulo check the divisor: the GPU would give garbage, the reference says so.
template <class Op>
IntFn int_division(DType t, IntFn a, IntFn b, Op op, const Expr& e) {
  std::string text = to_string(e);
  return [a, b, op, t, text](Machine& m) {
    const std::int64_t x = a(m), y = b(m);
    if (y == 0) m.fail("expression", "integer division by zero in " + text);
    return wrap_to_dtype(op(x, y), t);
  };
}

IntFn compile_binary_int(const Expr& self, Symbols& sym) {
  const auto* op = self.as<Binary>();
  const DType t = op->dtype;
  if (op->op == BinaryOp::And || op->op == BinaryOp::Or) {
    IntFn a = compile_int(op->a, sym), b = compile_int(op->b, sym);
    if (op->op == BinaryOp::And) return [a, b](Machine& m) -> std::int64_t { return a(m) != 0 && b(m) != 0; };
    return [a, b](Machine& m) -> std::int64_t { return a(m) != 0 || b(m) != 0; };
  }
  if (is_comparison(op->op)) {
    auto compare = [&](auto a, auto b) -> IntFn {
      switch (op->op) {
        case BinaryOp::EQ:
          return [a, b](Machine& m) -> std::int64_t { return a(m) == b(m); };
        case BinaryOp::NE:
          return [a, b](Machine& m) -> std::int64_t { return a(m) != b(m); };
        case BinaryOp::LT:
          return [a, b](Machine& m) -> std::int64_t { return a(m) < b(m); };
        case BinaryOp::LE:
          return [a, b](Machine& m) -> std::int64_t { return a(m) <= b(m); };
        case BinaryOp::GT:
          return [a, b](Machine& m) -> std::int64_t { return a(m) > b(m); };
        default:
          return [a, b](Machine& m) -> std::int64_t { return a(m) >= b(m); };
      }
    };
    if (is_float_expr(op->a)) return compare(compile_float(op->a, sym), compile_float(op->b, sym));
    return compare(compile_int(op->a, sym), compile_int(op->b, sym));
  }
  IntFn a = compile_int(op->a, sym), b = compile_int(op->b, sym);
  switch (op->op) {
    case BinaryOp::Add:
      return int_binary(t, a, b, add_wrap);
    case BinaryOp::Sub:
      return int_binary(t, a, b, sub_wrap);
    case BinaryOp::Mul:
      return int_binary(t, a, b, mul_wrap);
    case BinaryOp::Div:
      return int_division(t, a, b, div_trunc, self);
    case BinaryOp::Mod:
      return int_division(t, a, b, mod_trunc, self);
    case BinaryOp::FloorDiv:
      return int_division(t, a, b, div_floor, self);
    case BinaryOp::FloorMod:
      return int_division(t, a, b, mod_floor, self);
    case BinaryOp::Min:
      return int_binary(t, a, b, [](std::int64_t x, std::int64_t y) { return x < y ? x : y; });
    case BinaryOp::Max:
      return int_binary(t, a, b, [](std::int64_t x, std::int64_t y) { return x > y ? x : y; });
    default:
      break;
  }
  throw_internal_error(std::string("interpreter: integer binary op ") + binary_op_name(op->op));
}

// ---- the float path --------------------------------------------------------------------------

template <class Op>
FloatFn float_binary(DType t, FloatFn a, FloatFn b, Op op) {
  switch (t) {
    case DType::f64:
      return [a, b, op](Machine& m) { return static_cast<double>(op(a(m), b(m))); };
    case DType::f32:
      return [a, b, op](Machine& m) {
        return static_cast<double>(op(static_cast<float>(a(m)), static_cast<float>(b(m))));
      };
    case DType::f16:
      return [a, b, op](Machine& m) {
        return static_cast<double>(round_to_half(op(static_cast<float>(a(m)), static_cast<float>(b(m)))));
      };
    case DType::bf16:
      return [a, b, op](Machine& m) {
        return static_cast<double>(round_to_bf16(op(static_cast<float>(a(m)), static_cast<float>(b(m)))));
      };
    default:
      break;
  }
  throw_internal_error(std::string("interpreter: float arithmetic in ") + std::string(dtype_name(t)));
}

template <class Op>
FloatFn float_unary(DType t, FloatFn a, Op op) {
  switch (t) {
    case DType::f64:
      return [a, op](Machine& m) { return static_cast<double>(op(a(m))); };
    case DType::f32:
      return [a, op](Machine& m) { return static_cast<double>(op(static_cast<float>(a(m)))); };
    case DType::f16:
      return [a, op](Machine& m) { return static_cast<double>(round_to_half(op(static_cast<float>(a(m))))); };
    case DType::bf16:
      return [a, op](Machine& m) { return static_cast<double>(round_to_bf16(op(static_cast<float>(a(m))))); };
    default:
      break;
  }
  throw_internal_error(std::string("interpreter: float math in ") + std::string(dtype_name(t)));
}

FloatFn compile_binary_float(const Binary* op, Symbols& sym) {
  FloatFn a = compile_float(op->a, sym), b = compile_float(op->b, sym);
  const DType t = op->dtype;
  switch (op->op) {
    case BinaryOp::Add:
      return float_binary(t, a, b, [](auto x, auto y) { return x + y; });
    case BinaryOp::Sub:
      return float_binary(t, a, b, [](auto x, auto y) { return x - y; });
    case BinaryOp::Mul:
      return float_binary(t, a, b, [](auto x, auto y) { return x * y; });
    case BinaryOp::Div:
      return float_binary(t, a, b, [](auto x, auto y) { return x / y; });
    case BinaryOp::Mod:
      return float_binary(t, a, b, [](auto x, auto y) { return std::fmod(x, y); });
    case BinaryOp::FloorDiv:
      return float_binary(t, a, b, [](auto x, auto y) { return std::floor(x / y); });
    case BinaryOp::FloorMod:
      return float_binary(t, a, b, [](auto x, auto y) { return x - std::floor(x / y) * y; });
    case BinaryOp::Min:
      return float_binary(t, a, b, [](auto x, auto y) { return std::fmin(x, y); });
    case BinaryOp::Max:
      return float_binary(t, a, b, [](auto x, auto y) { return std::fmax(x, y); });
    default:
      break;
  }
  throw_internal_error(std::string("interpreter: float binary op ") + binary_op_name(op->op));
}

FloatFn compile_call_float(const Call* op, Symbols& sym) {
  const DType t = op->dtype;
  if (op->name == "infinity" && op->args.empty()) {
    const double inf = std::numeric_limits<double>::infinity();
    return [inf](Machine&) { return inf; };
  }
  if (op->args.size() != 1)
    sym.fail("expression", "the interpreter has no meaning for intrinsic " + op->name + " with " +
                               std::to_string(op->args.size()) + " arguments");
  FloatFn a = compile_float(op->args[0], sym);
  const std::string& n = op->name;
  if (n == "exp") return float_unary(t, a, [](auto x) { return std::exp(x); });
  if (n == "exp2") return float_unary(t, a, [](auto x) { return std::exp2(x); });
  if (n == "fast_exp2") {
    // ex2.approx.ftz.f32: a denormal input counts as 0, a result below 2^-126 is 0.
    if (t != DType::f32) sym.fail("expression", "fast_exp2 takes and gives f32");
    return float_unary(t, a, [](auto x) {
      const float in = std::fabs(static_cast<float>(x)) < std::numeric_limits<float>::min() ? 0.0f : static_cast<float>(x);
      const float r = std::exp2(in);
      return r < std::numeric_limits<float>::min() ? 0.0f : r;
    });
  }
  if (n == "poly_exp2") {
    if (t != DType::f32) sym.fail("expression", "poly_exp2 takes and gives f32");
    return float_unary(t, a, [](auto x) { return poly_exp2_like_the_gpu(static_cast<float>(x)); });
  }
  if (n == "log") return float_unary(t, a, [](auto x) { return std::log(x); });
  if (n == "log2") return float_unary(t, a, [](auto x) { return std::log2(x); });
  if (n == "sqrt") return float_unary(t, a, [](auto x) { return std::sqrt(x); });
  if (n == "rsqrt") return float_unary(t, a, [](auto x) { return decltype(x)(1) / std::sqrt(x); });
  if (n == "abs") return float_unary(t, a, [](auto x) { return std::fabs(x); });
  sym.fail("expression",
           "the interpreter has no meaning for intrinsic " + n +
               "; known: exp, exp2, fast_exp2, poly_exp2, log, log2, sqrt, rsqrt, abs, infinity");
}

}  // namespace

IntFn compile_int(const Expr& e, Symbols& sym) {
  TESSEL_INTERNAL_CHECK(e.defined(), "interpreter: undefined expression");
  TESSEL_INTERNAL_CHECK(!is_float_expr(e),
                        "interpreter: " << to_string(e) << " is not an integer expression");
  const DType t = e.dtype();
  switch (e->kind) {
    case NodeKind::IntImm: {
      const std::int64_t v = wrap_to_dtype(e.as<IntImm>()->value, t);
      return [v](Machine&) { return v; };
    }
    case NodeKind::VarNode: {
      auto it = sym.int_vars.find(e.as<VarNode>());
      if (it == sym.int_vars.end()) unbound(e.as<VarNode>(), sym);
      const int slot = it->second;
      return [slot](Machine& m) { return m.ints[static_cast<size_t>(slot)]; };
    }
    case NodeKind::Binary:
      return compile_binary_int(e, sym);
    case NodeKind::Unary: {
      const auto* u = e.as<Unary>();
      IntFn a = compile_int(u->a, sym);
      if (u->op == UnaryOp::Not) return [a](Machine& m) -> std::int64_t { return a(m) == 0; };
      return [a, t](Machine& m) { return wrap_to_dtype(sub_wrap(0, a(m)), t); };
    }
    case NodeKind::Select: {
      const auto* s = e.as<Select>();
      IntFn c = compile_int(s->cond, sym), x = compile_int(s->true_value, sym),
            y = compile_int(s->false_value, sym);
      return [c, x, y](Machine& m) { return c(m) ? x(m) : y(m); };
    }
    case NodeKind::Cast: {
      const auto* c = e.as<Cast>();
      if (is_float_expr(c->value)) {
        FloatFn v = compile_float(c->value, sym);
        return [v, t](Machine& m) { return float_to_int(v(m), t); };
      }
      IntFn v = compile_int(c->value, sym);
      return [v, t](Machine& m) { return wrap_to_dtype(v(m), t); };
    }
    case NodeKind::Call: {
      const auto* c = e.as<Call>();
      if (c->name == "abs" && c->args.size() == 1) {
        IntFn a = compile_int(c->args[0], sym);
        return [a, t](Machine& m) {
          const std::int64_t v = a(m);
          return wrap_to_dtype(v < 0 ? sub_wrap(0, v) : v, t);
        };
      }
      sym.fail("expression", "the interpreter has no integer meaning for intrinsic " + c->name);
    }
    case NodeKind::BufferLoad: {
      const auto* l = e.as<BufferLoad>();
      const int slot = sym.buffer_slot(l->buffer, "load");
      std::vector<IntFn> idx = compile_indices(l->indices, sym);
      return [slot, idx](Machine& m) {
        const Storage& st = m.buffers[static_cast<size_t>(slot)];
        const std::int64_t offset = checked_offset(m, st, idx, "load");
        check_written(m, st, offset, "load");
        return load_int(st.data, st.dtype(), offset);
      };
    }
    default:
      break;
  }
  throw_internal_error(std::string("interpreter: integer expression of kind ") + node_kind_name(e->kind));
}

FloatFn compile_float(const Expr& e, Symbols& sym) {
  TESSEL_INTERNAL_CHECK(e.defined(), "interpreter: undefined expression");
  const DType t = e.dtype();
  if (!is_float_expr(e)) {  // an integer used where a float is expected: convert
    IntFn v = compile_int(e, sym);
    return [v](Machine& m) { return static_cast<double>(v(m)); };
  }
  switch (e->kind) {
    case NodeKind::FloatImm: {
      const double v = round_to_dtype(e.as<FloatImm>()->value, t);
      return [v](Machine&) { return v; };
    }
    case NodeKind::VarNode: {
      auto it = sym.float_vars.find(e.as<VarNode>());
      if (it == sym.float_vars.end()) unbound(e.as<VarNode>(), sym);
      const int slot = it->second;
      return [slot](Machine& m) { return m.floats[static_cast<size_t>(slot)]; };
    }
    case NodeKind::Binary:
      return compile_binary_float(e.as<Binary>(), sym);
    case NodeKind::Unary: {
      FloatFn a = compile_float(e.as<Unary>()->a, sym);
      return [a](Machine& m) { return -a(m); };  // exact in every float format
    }
    case NodeKind::Select: {
      const auto* s = e.as<Select>();
      IntFn c = compile_int(s->cond, sym);
      FloatFn x = compile_float(s->true_value, sym), y = compile_float(s->false_value, sym);
      return [c, x, y](Machine& m) { return c(m) ? x(m) : y(m); };
    }
    case NodeKind::Cast: {
      const auto* c = e.as<Cast>();
      if (is_float_expr(c->value)) {
        FloatFn v = compile_float(c->value, sym);
        return [v, t](Machine& m) { return round_to_dtype(v(m), t); };
      }
      IntFn v = compile_int(c->value, sym);
      return [v, t](Machine& m) { return int_to_float(v(m), t); };
    }
    case NodeKind::Call:
      return compile_call_float(e.as<Call>(), sym);
    case NodeKind::BufferLoad: {
      const auto* l = e.as<BufferLoad>();
      const int slot = sym.buffer_slot(l->buffer, "load");
      std::vector<IntFn> idx = compile_indices(l->indices, sym);
      if (idx.size() == 2) {  // the common case, unrolled
        IntFn i0 = idx[0], i1 = idx[1];
        return [slot, i0, i1, idx](Machine& m) {
          const Storage& st = m.buffers[static_cast<size_t>(slot)];
          const std::int64_t a = i0(m), b = i1(m);
          if (a < 0 || a >= st.shape[0] || b < 0 || b >= st.shape[1]) checked_offset(m, st, idx, "load");
          check_written(m, st, a * st.strides[0] + b, "load");
          return load_float(st.data, st.dtype(), a * st.strides[0] + b);
        };
      }
      return [slot, idx](Machine& m) {
        const Storage& st = m.buffers[static_cast<size_t>(slot)];
        const std::int64_t offset = checked_offset(m, st, idx, "load");
        check_written(m, st, offset, "load");
        return load_float(st.data, st.dtype(), offset);
      };
    }
    default:
      break;
  }
  throw_internal_error(std::string("interpreter: float expression of kind ") + node_kind_name(e->kind));
}

}  // namespace tessel::interp::detail
