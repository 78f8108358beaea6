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

std::vector<std::vector<double>> gemm(const FuzzCase& c, const std::vector<interp::HostTensor>& args) {
  const std::vector<double> a = args[0].to_values(), b = args[1].to_values();
  std::vector<double> bias = c.bias ? args[2].to_values() : std::vector<double>{};
  const size_t M = c.M, N = c.N, K = c.K;
  const size_t GX = (N + c.BN - 1) / c.BN;
  std::vector<double> out(M * N), sums(M * GX, 0.0);
  for (size_t i = 0; i < M; ++i)
    for (size_t j = 0; j < N; ++j) {
      double s = 0;
      for (size_t k = 0; k < K; ++k)
        s += (c.trans_a ? a[k * M + i] : a[i * K + k]) * (c.trans_b ? b[j * K + k] : b[k * N + j]);
      sums[i * GX + j / c.BN] += s;  // columns past N hold zeros (B's tile is padded)
      if (c.bias) s += bias[j];
      if (c.epilogue) s = evaluate_expr(c.expr, s * epilogue_scale(c), 0);
      out[i * N + j] = s;
    }
  if (c.row_sums) return {out, sums};
  return {out};
}

std::vector<std::vector<double>> tile(const FuzzCase& c, const std::vector<interp::HostTensor>& args) {
  const std::vector<double> x = args[0].to_values();
  const int M = c.M, N = c.N, GX = (c.N + c.BN - 1) / c.BN, GY = (c.M + c.BM - 1) / c.BM;
  std::vector<double> y(static_cast<size_t>(M) * N), red_out(static_cast<size_t>(M) * GX);
  std::vector<double> xs(static_cast<size_t>(c.BM) * c.BN);
  for (int by = 0; by < GY; ++by)
    for (int bx = 0; bx < GX; ++bx) {
      for (int i = 0; i < c.BM; ++i)
        for (int j = 0; j < c.BN; ++j) {
          const int r = by * c.BM + c.row_off + i, col = bx * c.BN + c.col_off + j;
          const double v = r < M && col < N ? x[static_cast<size_t>(r) * N + col] : (c.padded ? c.pad : 0.0);
          xs[static_cast<size_t>(i) * c.BN + j] = evaluate_expr(c.expr, v, 0);
        }
      for (int i = 0; i < c.BM; ++i) {
        double red = 0;
        if (c.reduce != ReduceKind::None) {
          const double* row = &xs[static_cast<size_t>(i) * c.BN];
          double acc = c.reduce_init ? c.init_value
                       : c.reduce == ReduceKind::Sum ? 0.0
                       : c.reduce == ReduceKind::Max ? -std::numeric_limits<double>::infinity()
                                                     : std::numeric_limits<double>::infinity();
          for (int j = 0; j < c.BN; ++j)
            acc = c.reduce == ReduceKind::Sum   ? acc + row[j]
                  : c.reduce == ReduceKind::Max ? std::max(acc, row[j])
                                                : std::min(acc, row[j]);
          red = acc;
          if (by * c.BM + i < M) red_out[static_cast<size_t>(by * c.BM + i) * GX + bx] = red;
        }
        for (int j = 0; j < c.BN; ++j) {
          const int r = by * c.BM + i, col = bx * c.BN + j;
          if (r < M && col < N)
            y[static_cast<size_t>(r) * N + col] =
                evaluate_expr(c.expr2, xs[static_cast<size_t>(i) * c.BN + j], red * reduction_scale(c));
        }
      }
    }
  if (c.reduce == ReduceKind::None) return {y};
  return {y, red_out};
}

std::vector<double> softmax(const FuzzCase& c, const std::vector<interp::HostTensor>& args) {
  const std::vector<double> x = args[0].to_values();
  const size_t M = c.M, N = c.N;
  std::vector<double> y(M * N);
  for (size_t i = 0; i < M; ++i) {
    double m = -std::numeric_limits<double>::infinity(), s = 0;
    for (size_t j = 0; j < N; ++j) m = std::max(m, x[i * N + j] * c.scale);
    for (size_t j = 0; j < N; ++j) s += std::exp(x[i * N + j] * c.scale - m);
    for (size_t j = 0; j < N; ++j) y[i * N + j] = std::exp(x[i * N + j] * c.scale - m) / s;
  }
  return y;
}

std::vector<double> attention(const FuzzCase& c, const std::vector<interp::HostTensor>& args) {
  const std::vector<double> q = args[0].to_values(), k = args[1].to_values(), v = args[2].to_values();
  const size_t M = c.M, N = c.N, D = c.K;
  std::vector<double> o(M * D, 0.0), s(N);
  for (size_t i = 0; i < M; ++i) {
    const size_t keys = c.causal ? std::min(N, i + 1) : N;
    double m = -std::numeric_limits<double>::infinity();
    for (size_t j = 0; j < keys; ++j) {
      double dot = 0;
      for (size_t d = 0; d < D; ++d) dot += q[i * D + d] * k[j * D + d];
      s[j] = dot * c.scale;
      m = std::max(m, s[j]);
    }
    double l = 0;
    if (c.online) {
      for (size_t j = 0; j < keys; ++j) l += (s[j] = std::exp(s[j] - m));
    } else {
      l = 1;
    }
    for (size_t j = 0; j < keys; ++j)
      for (size_t d = 0; d < D; ++d) o[i * D + d] += s[j] / l * v[j * D + d];
  }
  return o;
}

}  // namespace

double evaluate_expr(const ExprTree& e, double x, double r) {
  using Op = ExprTree::Op;
  auto a = [&](size_t i) { return evaluate_expr(e.args[i], x, r); };
  switch (e.op) {
    case Op::X:
      return x;
    case Op::R:
      return r;
    case Op::Const:
      return e.value;
    case Op::Neg:
      return -a(0);
    case Op::Abs:
      return std::abs(a(0));
    case Op::Relu:
      return std::max(a(0), 0.0);
    case Op::Expc:
      return std::exp(std::min(a(0), 2.0));
    case Op::Add:
      return a(0) + a(1);
    case Op::Sub:
      return a(0) - a(1);
    case Op::Mul:
      return a(0) * a(1);
    case Op::Max:
      return std::max(a(0), a(1));
    case Op::Min:
      return std::min(a(0), a(1));
    case Op::Sdiv:
      return a(0) / (1.0 + std::abs(a(1)));
  }
  return x;
}

std::vector<std::vector<double>> evaluate_float64(const FuzzCase& c, const std::vector<interp::HostTensor>& args) {
  switch (c.family) {
    case Family::Gemm:
      return gemm(c, args);
    case Family::Tile:
      return tile(c, args);
    case Family::Softmax:
      return {softmax(c, args)};
    case Family::Attention:
      return {attention(c, args)};
  }
  return {};
}

double tolerance(const FuzzCase& c) {
  const double f32 = 0x1p-24;
  double tol = 4 * unit_roundoff(c.out_dtype);
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
