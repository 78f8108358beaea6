// minimize: greedy shrinking. Each round proposes simpler variants of the current case, in a
// fixed order, and keeps the first that is smaller by `complexity` and still fails with the same
// signature; it stops when a round keeps nothing or the attempts run out.
#include <algorithm>
#include <cstdlib>

#include "fuzz/Runner.hpp"

namespace tessel::fuzz {

namespace {

int complexity(const FuzzCase& c) {
  int flags = c.trans_a + c.trans_b + (c.policy != 0) + c.swizzle + (c.cluster != 0) + c.bias + c.row_sums +
              c.epilogue + c.via_shared + c.store_via_shared + c.padded + c.frag_in_dtype + c.reduce_init +
              c.causal + c.p_via_copy + (c.variant != 0) + c.shared_tail + (c.row_off != 0) +
              (c.col_off != 0) + (c.reduce != ReduceKind::None) + (c.dtype != DType::f16) +
              (c.out_dtype != c.dtype);
  return c.M + c.N + c.K + c.BM + c.BN + c.BK + c.threads / 8 + std::abs(c.stages) * 4 + c.row_off +
         c.col_off + flags * 16 + (c.expr.size() + c.expr2.size()) * 8;
}

// Simpler expressions: each subtree in the whole's place, and each operand replaced by x.
void simpler_exprs(const ExprTree& e, std::vector<ExprTree>& out) {
  for (const ExprTree& a : e.args) out.push_back(a);
  if (e.op != ExprTree::Op::X) out.push_back(ExprTree::leaf_x());
  for (size_t i = 0; i < e.args.size(); ++i) {
    std::vector<ExprTree> sub;
    simpler_exprs(e.args[i], sub);
    for (ExprTree& s : sub) {
      ExprTree copy = e;
      copy.args[i] = std::move(s);
      out.push_back(std::move(copy));
    }
  }
}

std::vector<FuzzCase> candidates(const FuzzCase& c) {
  std::vector<FuzzCase> out;
  auto with = [&](auto change) {
    FuzzCase d = c;
    change(d);
    out.push_back(d);
  };
  // Knobs off first: they remove whole features.
  with([](FuzzCase& d) { d.epilogue = false; });
  with([](FuzzCase& d) { d.bias = false; });
  with([](FuzzCase& d) { d.row_sums = false; });
  with([](FuzzCase& d) { d.swizzle = false; });
  with([](FuzzCase& d) { d.cluster = 0; });
  with([](FuzzCase& d) { d.trans_a = false; });
  with([](FuzzCase& d) { d.trans_b = false; });
  with([](FuzzCase& d) { d.policy = 0; });
  with([](FuzzCase& d) { d.via_shared = false; });
  with([](FuzzCase& d) { d.store_via_shared = false; });
  with([](FuzzCase& d) { d.padded = false; });
  with([](FuzzCase& d) { d.frag_in_dtype = false; });
  with([](FuzzCase& d) { d.reduce_init = false; });
  with([](FuzzCase& d) { d.reduce = ReduceKind::None; });
  with([](FuzzCase& d) { d.skip_masked = false; });
  with([](FuzzCase& d) { d.k_by_block = false; });
  with([](FuzzCase& d) { d.causal = false; d.skip_masked = false; });
  with([](FuzzCase& d) { d.variant = 0; });
  with([](FuzzCase& d) { d.shared_tail = 0; });
  with([](FuzzCase& d) { d.p_via_copy = false; });
  with([](FuzzCase& d) { d.row_off = 0; });
  with([](FuzzCase& d) { d.col_off = 0; });
  with([](FuzzCase& d) { d.row_off /= 2; });
  with([](FuzzCase& d) { d.col_off /= 2; });
  with([](FuzzCase& d) { d.out_dtype = d.dtype; });
  with([](FuzzCase& d) { d.dtype = DType::f16; });
  for (int s : {0, 1, 2}) with([&](FuzzCase& d) { d.stages = s; });
  // Sizes: one tile, one element, half, one less.
  for (int FuzzCase::*dim : {&FuzzCase::M, &FuzzCase::N, &FuzzCase::K}) {
    const int tile = dim == &FuzzCase::M ? c.BM : dim == &FuzzCase::N ? c.BN : c.BK;
    for (int v : {1, tile, c.*dim / 2, c.*dim - 1, c.*dim - tile})
      if (v >= 1) with([&](FuzzCase& d) { d.*dim = v; });
  }
  // Tiles and threads: halves (the compiler may refuse them; then they are not kept).
  for (int FuzzCase::*t : {&FuzzCase::BM, &FuzzCase::BN, &FuzzCase::BK})
    if (c.*t >= 2) with([&](FuzzCase& d) { d.*t /= 2; });
  if (c.threads > 32) with([](FuzzCase& d) { d.threads /= 2; });
  std::vector<ExprTree> e1, e2;
  simpler_exprs(c.expr, e1);
  simpler_exprs(c.expr2, e2);
  for (ExprTree& e : e1) with([&](FuzzCase& d) { d.expr = e; });
  for (ExprTree& e : e2) with([&](FuzzCase& d) { d.expr2 = e; });
  return out;
}

}  // namespace

FuzzCase minimize(const FuzzCase& c, const CaseResult& result, const RunOptions& o, int max_attempts,
                  const std::function<void(const std::string&)>& log) {
  // Only what the failure needs: no compiles for an interpreter failure, only its arch for a
  // compiler failure.
  RunOptions ro = o;
  if (result.stage == "interpreter" || result.stage == "frontend") {
    ro.archs.clear();
    ro.gpu = false;
  } else if (result.stage != "gpu") {
    ro.archs = {result.stage};
    ro.gpu = false;
    ro.interpret = result.kind == "interpreter-error";
  }
  const std::string want = result.signature();
  // A failure found without compiling keeps to programs the compiler accepts, so that the case
  // stays one that every tier can run: a kept step is compiled once, for the first arch.
  RunOptions legality;
  legality.interpret = false;
  if (ro.archs.empty() && !o.archs.empty()) legality.archs = {o.archs.front()};
  auto still_legal = [&](const FuzzCase& d) {
    return legality.archs.empty() || run_case(d, legality).outcome != Outcome::Rejected;
  };
  return shrink(
      c, [&](const FuzzCase& d) { return run_case(d, ro).signature() == want && still_legal(d); },
      max_attempts, log);
}

FuzzCase shrink(const FuzzCase& c, const std::function<bool(const FuzzCase&)>& still_fails, int max_attempts,
                const std::function<void(const std::string&)>& log) {
  FuzzCase best = c;
  int attempts = 0;
  for (bool progress = true; progress && attempts < max_attempts;) {
    progress = false;
    for (const FuzzCase& d : candidates(best)) {
      if (complexity(d) >= complexity(best)) continue;
      if (++attempts > max_attempts) break;
      if (!still_fails(d)) continue;
      best = d;
      progress = true;
      if (log) log("kept: " + best.summary());
      break;
    }
  }
  return best;
}

}  // namespace tessel::fuzz
