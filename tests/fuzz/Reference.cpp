// evaluate_float64: the language's meaning of each family, tile by tile where tiles matter
// (reads past an edge give the pad value, reductions see the padded columns, writes past an
// edge are dropped), element by element in double otherwise.
#include "fuzz/Reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "fuzz/Program.hpp"

namespace tessel::fuzz {

namespace {

double unit_roundoff(DType t) {
  switch (t) {
    case DType::f16:
      return 0x1p-11;
    case DType::bf16:
      return 0x1p-8;
    case DType::f64:
      return 0x1p-53;
    default:
      return 0x1p-24;
  }
}

using Outputs = Expected;

Outputs gemm(const FuzzCase& c, const std::vector<interp::HostTensor>& args) {
  const std::vector<double> a = args[0].to_values(), b = args[1].to_values();
  std::vector<double> bias = c.bias ? args[2].to_values() : std::vector<double>{};
  const size_t M = c.M, N = c.N, K = c.K;
  const size_t GX = (N + c.BN - 1) / c.BN;
  std::vector<double> out(M * N), out_m(M * N), sums(M * GX, 0.0), sums_m(M * GX, 0.0);
  const double scale = epilogue_scale(c);
  // k_by_block (not with Unroll): row i's block sums its first i / BM + 1 tiles of K.
  const bool by_block = c.k_by_block && c.stages >= 0;
  for (size_t i = 0; i < M; ++i)
    for (size_t j = 0; j < N; ++j) {
      Value s;
      const size_t kmax = by_block ? std::min(K, (i / static_cast<size_t>(c.BM) + 1) * static_cast<size_t>(c.BK)) : K;
      for (size_t k = 0; k < kmax; ++k) {
        const double p =
            (c.trans_a ? a[k * M + i] : a[i * K + k]) * (c.trans_b ? b[j * K + k] : b[k * N + j]);
        s.v += p;
        s.m += std::abs(p);
      }
      sums[i * GX + j / c.BN] += s.v;  // columns past N hold zeros (B's tile is padded)
      sums_m[i * GX + j / c.BN] += s.m;
      if (c.bias) s = {s.v + bias[j], s.m + std::abs(bias[j])};
      if (c.epilogue) s = evaluate_expr(c.expr, {s.v * scale, s.m * scale}, {});
      out[i * N + j] = s.v;
      out_m[i * N + j] = s.m;
    }
  if (c.row_sums) return {{out, sums}, {out_m, sums_m}};
  return {{out}, {out_m}};
}

Outputs tile(const FuzzCase& c, const std::vector<interp::HostTensor>& args) {
  const std::vector<double> x = args[0].to_values();
  const int M = c.M, N = c.N, GX = (c.N + c.BN - 1) / c.BN, GY = (c.M + c.BM - 1) / c.BM;
  std::vector<double> y(static_cast<size_t>(M) * N), y_m(y.size()), red_out(static_cast<size_t>(M) * GX),
      red_m(red_out.size());
  std::vector<Value> xs(static_cast<size_t>(c.BM) * c.BN);
  const double rscale = reduction_scale(c);
  for (int by = 0; by < GY; ++by)
    for (int bx = 0; bx < GX; ++bx) {
      for (int i = 0; i < c.BM; ++i)
        for (int j = 0; j < c.BN; ++j) {
          const int r = by * c.BM + c.row_off + i, col = bx * c.BN + c.col_off + j;
          const double v = r < M && col < N ? x[static_cast<size_t>(r) * N + col] : (c.padded ? c.pad : 0.0);
          xs[static_cast<size_t>(i) * c.BN + j] = evaluate_expr(c.expr, {v, std::abs(v)}, {});
        }
      for (int i = 0; i < c.BM; ++i) {
        Value red;
        if (c.reduce != ReduceKind::None) {
          const Value* row = &xs[static_cast<size_t>(i) * c.BN];
          const double inf = std::numeric_limits<double>::infinity();
          red = c.reduce_init                 ? Value{c.init_value, std::abs(c.init_value)}
                : c.reduce == ReduceKind::Sum ? Value{0.0, 0.0}
                : c.reduce == ReduceKind::Max ? Value{-inf, 0.0}
                                              : Value{inf, 0.0};
          for (int j = 0; j < c.BN; ++j) {
            if (c.reduce == ReduceKind::Sum)
              red = {red.v + row[j].v, red.m + row[j].m};
            else
              red = {c.reduce == ReduceKind::Max ? std::max(red.v, row[j].v) : std::min(red.v, row[j].v),
                     std::max(red.m, row[j].m)};
          }
          if (by * c.BM + i < M) {
            red_out[static_cast<size_t>(by * c.BM + i) * GX + bx] = red.v;
            red_m[static_cast<size_t>(by * c.BM + i) * GX + bx] = red.m;
          }
        }
        for (int j = 0; j < c.BN; ++j) {
          const int r = by * c.BM + i, col = bx * c.BN + j;
          if (r >= M || col >= N) continue;
          const Value out =
              evaluate_expr(c.expr2, xs[static_cast<size_t>(i) * c.BN + j], {red.v * rscale, red.m * rscale});
          y[static_cast<size_t>(r) * N + col] = out.v;
          y_m[static_cast<size_t>(r) * N + col] = out.m;
        }
      }
    }
  if (c.reduce == ReduceKind::None) return {{y}, {y_m}};
  return {{y, red_out}, {y_m, red_m}};
}

// Softmax is well conditioned: every output's magnitude is itself.
Outputs softmax(const FuzzCase& c, const std::vector<interp::HostTensor>& args) {
  const std::vector<double> x = args[0].to_values();
  const size_t M = c.M, N = c.N;
  std::vector<double> y(M * N);
  for (size_t i = 0; i < M; ++i) {
    double m = -std::numeric_limits<double>::infinity(), s = 0;
    for (size_t j = 0; j < N; ++j) m = std::max(m, x[i * N + j] * c.scale);
    for (size_t j = 0; j < N; ++j) s += std::exp(x[i * N + j] * c.scale - m);
    for (size_t j = 0; j < N; ++j) y[i * N + j] = std::exp(x[i * N + j] * c.scale - m) / s;
  }
  return {{y}, {y}};
}

Outputs attention(const FuzzCase& c, const std::vector<interp::HostTensor>& args) {
  const std::vector<double> q = args[0].to_values(), k = args[1].to_values(), v = args[2].to_values();
  const size_t M = c.M, N = c.N, D = c.K;
  std::vector<double> o(M * D, 0.0), o_m(M * D, 0.0), s(N), s_m(N);
  for (size_t i = 0; i < M; ++i) {
    const size_t keys = c.causal ? std::min(N, i + 1) : N;
    double m = -std::numeric_limits<double>::infinity();
    for (size_t j = 0; j < keys; ++j) {
      double dot = 0, dot_m = 0;
      for (size_t d = 0; d < D; ++d) {
        dot += q[i * D + d] * k[j * D + d];
        dot_m += std::abs(q[i * D + d] * k[j * D + d]);
      }
      s[j] = dot * c.scale;
      s_m[j] = dot_m * c.scale;
      m = std::max(m, s[j]);
    }
    double l = 1;
    if (c.online) {
      l = 0;
      for (size_t j = 0; j < keys; ++j) l += (s[j] = s_m[j] = std::exp(s[j] - m));
    }
    for (size_t j = 0; j < keys; ++j)
      for (size_t d = 0; d < D; ++d) {
        o[i * D + d] += s[j] / l * v[j * D + d];
        o_m[i * D + d] += s_m[j] / l * std::abs(v[j * D + d]);
      }
  }
  return {{o}, {o_m}};
}

}  // namespace

Value evaluate_expr(const ExprTree& e, Value x, Value r) {
  using Op = ExprTree::Op;
  auto a = [&](size_t i) { return evaluate_expr(e.args[i], x, r); };
  switch (e.op) {
    case Op::X:
      return x;
    case Op::R:
      return r;
    case Op::Const:
      return {e.value, std::abs(e.value)};
    case Op::Neg: {
      const Value u = a(0);
      return {-u.v, u.m};
    }
    case Op::Abs: {
      const Value u = a(0);
      return {std::abs(u.v), u.m};
    }
    case Op::Relu: {
      const Value u = a(0);
      return {std::max(u.v, 0.0), u.m};
    }
    case Op::Exp2c:
    case Op::PolyExp2c: {
      // fast_exp2: 2^a, results below 2^-126 flushed to 0 (an absolute error under 2^-126); an
      // error d in the argument is a relative error d ln 2 < d in the result. poly_exp2 the same,
      // plus a relative error below 8.6e-5 of its own (tolerance() counts it).
      const Value u = a(0);
      const double ev = std::exp2(std::min(u.v, 2.0));
      return {ev, ev * (1 + u.m) + 0x1p-126};
    }
    case Op::Expc: {
      // An error d in the argument is a relative error d in the result.
      const Value u = a(0);
      const double ev = std::exp(std::min(u.v, 2.0));
      return {ev, ev * (1 + u.m)};
    }
    case Op::Add:
    case Op::Sub: {
      const Value u = a(0), w = a(1);
      return {e.op == Op::Add ? u.v + w.v : u.v - w.v, u.m + w.m};
    }
    case Op::Mul: {
      const Value u = a(0), w = a(1);
      return {u.v * w.v, u.m * w.m};
    }
    case Op::Max:
    case Op::Min: {
      const Value u = a(0), w = a(1);
      return {e.op == Op::Max ? std::max(u.v, w.v) : std::min(u.v, w.v), std::max(u.m, w.m)};
    }
    case Op::Sdiv: {
      const Value u = a(0), w = a(1);
      const double d = 1.0 + std::abs(w.v);
      return {u.v / d, u.m / d + std::abs(u.v) / d * w.m};
    }
  }
  return x;
}

Expected evaluate_float64(const FuzzCase& c, const std::vector<interp::HostTensor>& args) {
  switch (c.family) {
    case Family::Gemm:
      return gemm(c, args);
    case Family::Tile:
      return tile(c, args);
    case Family::Softmax:
      return softmax(c, args);
    case Family::Attention:
      return attention(c, args);
  }
  return {};
}

namespace {
int count_ops(const ExprTree& e, ExprTree::Op op) {
  int n = e.op == op;
  for (const ExprTree& a : e.args) n += count_ops(a, op);
  return n;
}
}  // namespace

double tolerance(const FuzzCase& c) {
  const double f32 = 0x1p-24;
  double tol = 4 * unit_roundoff(c.out_dtype);
  // Each poly_exp2 a relative error below 8.6e-5 of its value (at most its magnitude), carried
  // through the operators after it at most once more (a product of two: twice).
  tol +=
      2 * 8.6e-5 * (count_ops(c.expr, ExprTree::Op::PolyExp2c) + count_ops(c.expr2, ExprTree::Op::PolyExp2c));
  switch (c.family) {
    case Family::Gemm:
      // f32 accumulation over K; the expression's few f32 operations.
      tol += 16 * f32 * std::sqrt(static_cast<double>(c.K)) + 64 * f32;
      break;
    case Family::Tile:
      // 16-bit arithmetic in the work fragment rounds after every operation; the reduction
      // accumulates BN values in f32.
      if (c.frag_in_dtype) tol += 4.0 * c.expr.size() * unit_roundoff(c.dtype);
      tol += 16 * f32 * std::sqrt(static_cast<double>(c.BN)) + 64 * f32;
      break;
    case Family::Softmax:
      tol += 64 * f32 * std::sqrt(static_cast<double>(c.N));
      break;
    case Family::Attention:
      // P rounded to the input dtype before the second gemm.
      tol += 4 * unit_roundoff(c.dtype) + 64 * f32 * std::sqrt(static_cast<double>(c.N + c.K));
      break;
  }
  return tol;
}

}  // namespace tessel::fuzz
