// Integer interval analysis for index expressions: the range an expression can take given
// ranges for the variables it reads (block indices in [0, grid), the thread index in
// [0, threads), loop variables in [min, min + extent)), and proofs of conditions built from
// such expressions. Lowering uses it to drop edge-handling code that can never run (a copy
// whose vectors are provably whole and aligned emits only the fast path).
#pragma once

#include <cstdint>
#include <map>
#include <optional>

#include "tessel/ir/IR.hpp"

namespace tessel::passes {

struct IntRange {
  std::int64_t lo = 0, hi = 0;  // inclusive
};

// Variable ranges by node identity.
class VarRanges {
 public:
  void set(const ir::Var& v, IntRange r) { ranges_[v.get()] = r; }
  void erase(const ir::Var& v) { ranges_.erase(v.get()); }
  std::optional<IntRange> find(const ir::ExprNode* v) const {
    auto it = ranges_.find(v);
    if (it == ranges_.end()) return std::nullopt;
    return it->second;
  }
  void set(const ir::ExprNode* v, IntRange r) { ranges_[v] = r; }

 private:
  std::map<const ir::ExprNode*, IntRange> ranges_;
};

// The range of an integer expression (nullopt when unknown: an unbounded variable, a load, a
// division by a non-constant, an overflow of the 61-bit working range).
std::optional<IntRange> int_bounds(const ir::Expr& e, const VarRanges& vars);

// The truth value of a boolean expression for every value of its variables in range (true or
// false when provable, nullopt otherwise). Understands comparisons of bounded expressions,
// `x % m == 0` where m provably divides x, &&, || and !.
std::optional<bool> prove(const ir::Expr& cond, const VarRanges& vars);

// prove(), and where that cannot decide, the same question once per value of a variable of
// few values (a loop of at most 64 iterations; at most `budget` cases in all): proves facts
// that hold for each iteration but not for their hull, such as "this chunk is whole or wholly
// past the row's end".
std::optional<bool> prove_by_cases(const ir::Expr& cond, const VarRanges& vars, int budget = 4096);

// The largest power of two that provably divides e (variables count as arbitrary integers). Sums
// are expanded into terms with constant coefficients and equal terms combined, and x % c (c a
// positive constant) counts as x minus a multiple of c: x - x % 8 is a multiple of 8.
std::int64_t known_divisor(const ir::Expr& e);

}  // namespace tessel::passes
