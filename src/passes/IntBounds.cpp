#include "passes/IntBounds.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace tessel::passes {

using namespace ir;

namespace {

constexpr std::int64_t kLimit = std::int64_t(1) << 61;  // sums of two stay in range

std::optional<IntRange> checked(std::int64_t lo, std::int64_t hi) {
  if (lo < -kLimit || hi > kLimit || lo > hi) return std::nullopt;
  return IntRange{lo, hi};
}

// Products of the corners, each within the working range (|a|, |b| <= 2^62 would overflow, so
// bail out past 2^31 on either side first).
std::optional<IntRange> multiply(IntRange a, IntRange b) {
  constexpr std::int64_t kSide = std::int64_t(1) << 31;
  auto small = [&](IntRange r) { return r.lo >= -kSide && r.hi <= kSide; };
  if (!small(a) || !small(b)) return std::nullopt;
  std::int64_t c[4] = {a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi};
  return checked(*std::min_element(c, c + 4), *std::max_element(c, c + 4));
}

}  // namespace

namespace {

constexpr std::int64_t kDivisorCap = std::int64_t(1) << 30;

std::int64_t low_bit(std::int64_t c) {
  if (c == 0) return kDivisorCap;
  const std::int64_t b = c & -c;
  return std::min(b < 0 ? kDivisorCap : b, kDivisorCap);
}

// One term of a sum: coefficient times an expression no sum or constant factor is left in (an
// atom), or a bare constant (atom undefined), or a multiple of a known power of two whose value
// is unknown (atom undefined, `multiple_of` set).
struct LinearTerm {
  std::int64_t coef = 0;
  Expr atom;
  std::int64_t multiple_of = 0;
};

// Structural key of an atom, casts between integer types looked through (the index arithmetic
// casts to i64 in some places and not others).
std::string atom_key(const Expr& e) {
  if (auto c = as_const_int(e)) return std::to_string(*c);
  if (const auto* v = e.as<VarNode>()) return "v" + std::to_string(reinterpret_cast<std::uintptr_t>(v));
  if (const auto* c = e.as<Cast>(); c && is_integer(c->value.dtype()) && is_integer(e.dtype()))
    return atom_key(c->value);
  if (const auto* b = e.as<Binary>())
    return "(" + std::to_string(static_cast<int>(b->op)) + " " + atom_key(b->a) + " " + atom_key(b->b) + ")";
  if (const auto* u = e.as<Unary>()) return "(u" + std::to_string(static_cast<int>(u->op)) + " " + atom_key(u->a) + ")";
  return "n" + std::to_string(reinterpret_cast<std::uintptr_t>(e.get()));
}

std::int64_t atom_divisor(const Expr& e);

// e * k as terms: sums, differences, negations and constant factors expanded; x % c (c > 0 a
// constant) as x minus an unknown multiple of c, so that x - x % c is known to be a multiple of
// c (truncated or floored, x - x % c = c * (x / c) either way).
void linear_terms(const Expr& e, std::int64_t k, std::vector<LinearTerm>& out) {
  constexpr std::int64_t kCoefLimit = std::int64_t(1) << 40;
  if (k == 0) return;
  if (auto c = as_const_int(e)) {
    if (*c > -kCoefLimit && *c < kCoefLimit && k > -kCoefLimit && k < kCoefLimit) {
      out.push_back({k * *c, Expr(), 0});
    } else {
      out.push_back({0, Expr(), std::min(low_bit(k), kDivisorCap) * std::min(low_bit(*c), kDivisorCap)});
    }
    return;
  }
  if (const auto* cast = e.as<Cast>(); cast && is_integer(cast->value.dtype()) && is_integer(e.dtype()))
    return linear_terms(cast->value, k, out);
  if (const auto* u = e.as<Unary>(); u && u->op == UnaryOp::Neg) return linear_terms(u->a, -k, out);
  if (const auto* b = e.as<Binary>()) {
    if (b->op == BinaryOp::Add || b->op == BinaryOp::Sub) {
      linear_terms(b->a, k, out);
      linear_terms(b->b, b->op == BinaryOp::Add ? k : -k, out);
      return;
    }
    if (b->op == BinaryOp::Mul) {
      auto ca = as_const_int(b->a), cb = as_const_int(b->b);
      if (cb && *cb > -kCoefLimit && *cb < kCoefLimit && k > -kCoefLimit && k < kCoefLimit)
        return linear_terms(b->a, k * *cb, out);
      if (ca && *ca > -kCoefLimit && *ca < kCoefLimit && k > -kCoefLimit && k < kCoefLimit)
        return linear_terms(b->b, k * *ca, out);
    }
    if (b->op == BinaryOp::Mod) {
      if (auto c = as_const_int(b->b); c && *c > 0 && *c < kCoefLimit && k > -kCoefLimit && k < kCoefLimit) {
        linear_terms(b->a, k, out);
        out.push_back({0, Expr(), std::min(low_bit(k * *c), kDivisorCap)});
        return;
      }
    }
  }
  out.push_back({k, e, 0});
}

// The divisor of an atom (no sum at its top): products, selects, casts.
std::int64_t atom_divisor(const Expr& e) {
  if (auto c = as_const_int(e)) return low_bit(*c);
  if (const auto* b = e.as<Binary>()) {
    if (b->op == BinaryOp::Mul) return std::min<std::int64_t>(known_divisor(b->a) * known_divisor(b->b), kDivisorCap);
    if (b->op == BinaryOp::Add || b->op == BinaryOp::Sub) return std::min(known_divisor(b->a), known_divisor(b->b));
  }
  if (const auto* c = e.as<Cast>()) return known_divisor(c->value);
  if (const auto* s = e.as<Select>()) return std::min(known_divisor(s->true_value), known_divisor(s->false_value));
  return 1;
}

}  // namespace

// The sum's terms with equal atoms combined (x - x cancels), then the smallest divisor of what
// is left.
std::int64_t known_divisor(const Expr& e) {
  std::vector<LinearTerm> terms;
  linear_terms(e, 1, terms);
  std::vector<std::pair<std::string, LinearTerm>> atoms;
  std::int64_t constant = 0, divisor = kDivisorCap;
  for (const LinearTerm& t : terms) {
    if (t.multiple_of) {
      divisor = std::min(divisor, t.multiple_of);
    } else if (!t.atom.defined()) {
      constant += t.coef;
    } else {
      std::string key = atom_key(t.atom);
      auto it = std::find_if(atoms.begin(), atoms.end(), [&](const auto& a) { return a.first == key; });
      if (it == atoms.end()) {
        atoms.emplace_back(std::move(key), t);
      } else {
        it->second.coef += t.coef;
      }
    }
  }
  divisor = std::min(divisor, low_bit(constant));
  for (const auto& [key, t] : atoms)
    if (t.coef != 0)
      divisor = std::min(divisor, std::min<std::int64_t>(low_bit(t.coef) * atom_divisor(t.atom), kDivisorCap));
  return divisor;
}

std::optional<IntRange> int_bounds(const Expr& e, const VarRanges& vars) {
  if (!e.defined() || !is_integer(e.dtype())) return std::nullopt;
  if (auto c = as_const_int(e)) return IntRange{*c, *c};
  if (e.as<VarNode>()) return vars.find(e.get());
  if (const auto* c = e.as<Cast>()) {
    if (!is_integer(c->value.dtype())) return std::nullopt;
    auto r = int_bounds(c->value, vars);
    // A narrowing cast keeps the value only when it fits.
    if (r && dtype_bytes(e.dtype()) < 8 && (r->lo < INT32_MIN || r->hi > INT32_MAX)) return std::nullopt;
    return r;
  }
  if (const auto* s = e.as<Select>()) {
    auto c = prove(s->cond, vars);
    auto t = int_bounds(s->true_value, vars), f = int_bounds(s->false_value, vars);
    if (c && *c) return t;
    if (c && !*c) return f;
    if (!t || !f) return std::nullopt;
    return IntRange{std::min(t->lo, f->lo), std::max(t->hi, f->hi)};
  }
  if (const auto* u = e.as<Unary>(); u && u->op == UnaryOp::Neg) {
    auto r = int_bounds(u->a, vars);
    if (!r) return std::nullopt;
    return checked(-r->hi, -r->lo);
  }
  const auto* b = e.as<Binary>();
  if (!b || is_comparison(b->op) || b->op == BinaryOp::And || b->op == BinaryOp::Or) return std::nullopt;
  auto x = int_bounds(b->a, vars), y = int_bounds(b->b, vars);
  if (!x || !y) return std::nullopt;
  switch (b->op) {
    case BinaryOp::Add:
      return checked(x->lo + y->lo, x->hi + y->hi);
    case BinaryOp::Sub:
      return checked(x->lo - y->hi, x->hi - y->lo);
    case BinaryOp::Mul:
      return multiply(*x, *y);
    case BinaryOp::Min:
      return IntRange{std::min(x->lo, y->lo), std::min(x->hi, y->hi)};
    case BinaryOp::Max:
      return IntRange{std::max(x->lo, y->lo), std::max(x->hi, y->hi)};
    case BinaryOp::Div:
    case BinaryOp::FloorDiv:
      // Only a non-negative dividend over a positive constant (C and floor division agree).
      if (y->lo != y->hi || y->lo <= 0 || x->lo < 0) return std::nullopt;
      return IntRange{x->lo / y->lo, x->hi / y->lo};
    case BinaryOp::Mod:
    case BinaryOp::FloorMod: {
      if (y->lo != y->hi || y->lo <= 0 || x->lo < 0) return std::nullopt;
      const std::int64_t m = y->lo;
      if (x->hi / m == x->lo / m) return IntRange{x->lo % m, x->hi % m};  // no wrap in range
      return IntRange{0, m - 1};
    }
    default:
      return std::nullopt;
  }
}

std::optional<bool> prove(const Expr& cond, const VarRanges& vars) {
  if (!cond.defined()) return std::nullopt;
  if (auto c = as_const_int(cond)) return *c != 0;
  if (const auto* u = cond.as<Unary>()) {
    if (u->op != UnaryOp::Not) return std::nullopt;
    auto v = prove(u->a, vars);
    if (!v) return std::nullopt;
    return !*v;
  }
  const auto* b = cond.as<Binary>();
  if (!b) return std::nullopt;
  if (b->op == BinaryOp::And || b->op == BinaryOp::Or) {
    auto x = prove(b->a, vars), y = prove(b->b, vars);
    const bool is_and = b->op == BinaryOp::And;
    // One decisive side settles it (false for &&, true for ||).
    if ((x && *x != is_and) || (y && *y != is_and)) return !is_and;
    if (x && y) return is_and;
    return std::nullopt;
  }
  if (!is_comparison(b->op)) return std::nullopt;
  // x % m == 0 (or != 0) where m divides x.
  if ((b->op == BinaryOp::EQ || b->op == BinaryOp::NE) &&
      as_const_int(b->b) == std::optional<std::int64_t>(0)) {
    if (const auto* m = b->a.as<Binary>(); m && (m->op == BinaryOp::Mod || m->op == BinaryOp::FloorMod)) {
      if (auto d = as_const_int(m->b); d && *d > 0 && known_divisor(m->a) % *d == 0)
        return b->op == BinaryOp::EQ;
    }
  }
  auto x = int_bounds(b->a, vars), y = int_bounds(b->b, vars);
  if (!x || !y) return std::nullopt;
  switch (b->op) {
    case BinaryOp::LT:
      if (x->hi < y->lo) return true;
      if (x->lo >= y->hi) return false;
      return std::nullopt;
    case BinaryOp::LE:
      if (x->hi <= y->lo) return true;
      if (x->lo > y->hi) return false;
      return std::nullopt;
    case BinaryOp::GT:
      if (x->lo > y->hi) return true;
      if (x->hi <= y->lo) return false;
      return std::nullopt;
    case BinaryOp::GE:
      if (x->lo >= y->hi) return true;
      if (x->hi < y->lo) return false;
      return std::nullopt;
    case BinaryOp::EQ:
      if (x->lo == x->hi && y->lo == y->hi && x->lo == y->lo) return true;
      if (x->hi < y->lo || y->hi < x->lo) return false;
      return std::nullopt;
    case BinaryOp::NE:
      if (x->lo == x->hi && y->lo == y->hi && x->lo == y->lo) return false;
      if (x->hi < y->lo || y->hi < x->lo) return true;
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

namespace {

void collect_vars(const Expr& e, std::vector<const ExprNode*>& out) {
  if (!e.defined()) return;
  if (e.as<VarNode>()) {
    if (std::find(out.begin(), out.end(), e.get()) == out.end()) out.push_back(e.get());
  } else if (const auto* b = e.as<Binary>()) {
    collect_vars(b->a, out);
    collect_vars(b->b, out);
  } else if (const auto* u = e.as<Unary>()) {
    collect_vars(u->a, out);
  } else if (const auto* s = e.as<Select>()) {
    collect_vars(s->cond, out);
    collect_vars(s->true_value, out);
    collect_vars(s->false_value, out);
  } else if (const auto* c = e.as<Cast>()) {
    collect_vars(c->value, out);
  }
}

std::optional<bool> cases(const Expr& cond, const VarRanges& vars, const std::vector<const ExprNode*>& split,
                          size_t next) {
  if (auto v = prove(cond, vars)) return v;
  if (next == split.size()) return std::nullopt;
  IntRange r = *vars.find(split[next]);
  std::optional<bool> all;
  for (std::int64_t x = r.lo; x <= r.hi; ++x) {
    VarRanges one = vars;
    one.set(split[next], {x, x});
    auto v = cases(cond, one, split, next + 1);
    if (!v || (all && *all != *v)) return std::nullopt;
    all = v;
  }
  return all;
}

}  // namespace

std::optional<bool> prove_by_cases(const Expr& cond, const VarRanges& vars, int budget) {
  if (auto v = prove(cond, vars)) return v;
  std::vector<const ExprNode*> all, split;
  collect_vars(cond, all);
  std::int64_t total = 1;
  for (const ExprNode* v : all) {
    auto r = vars.find(v);
    if (!r || r->hi - r->lo + 1 > 64 || total * (r->hi - r->lo + 1) > budget) continue;
    total *= r->hi - r->lo + 1;
    split.push_back(v);
  }
  if (split.empty()) return std::nullopt;
  return cases(cond, vars, split, 0);
}

}  // namespace tessel::passes
