#include "kernels/softmax/Softmax.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "tessel/autotune/Autotune.hpp"

namespace tessel::kernels {

namespace T = tessel;

namespace {

constexpr double kLog2e = 1.4426950408889634;

long long round_up(long long x, long long m) {
  return (x + m - 1) / m * m;
}
long long next_pow2(long long x) {
  long long p = 1;
  while (p < x) p *= 2;
  return p;
}

// exp(x - m) as exp2((x - m) * log2 e): one FFMA and the fast exp2 unit.
Expr exp_minus(Expr x, Expr m) {
  return T::exp2((x - m) * float(kLog2e));
}

// NaN-propagating max (PyTorch): a NaN anywhere in a row makes the row NaN.
Expr max_nan(Expr a, Expr b) {
  return T::select(a != a || a > b, a, b);
}

}  // namespace

const char* softmax_variant_name(SoftmaxVariant v) {
  switch (v) {
    case SoftmaxVariant::Rows:
      return "rows";
    case SoftmaxVariant::Row:
      return "row";
    case SoftmaxVariant::Online:
      return "online";
  }
  return "?";
}

std::string SoftmaxConfig::describe() const {
  std::string s = std::string(softmax_variant_name(variant)) + ":t" + std::to_string(threads);
  if (variant == SoftmaxVariant::Rows) s += ":r" + std::to_string(rows_per_block);
  if (block_N) s += ":bn" + std::to_string(block_N);
  return s;
}

SoftmaxConfig parse_softmax_config(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return std::invalid_argument("softmax config '" + text + "': " + why +
                                 " (expected VARIANT:tTHREADS[:rROWS][:bnBLOCK_N], VARIANT one of rows, row, "
                                 "online; e.g. rows:t256:r8:bn1024)");
  };
  std::vector<std::string> parts;
  std::string cur;
  for (char ch : text) {
    if (ch == ':' || ch == ' ') {
      if (!cur.empty()) parts.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  if (!cur.empty()) parts.push_back(cur);
  if (parts.empty()) throw bad("empty");
  SoftmaxConfig c;
  if (parts[0] == "rows") c.variant = SoftmaxVariant::Rows;
  else if (parts[0] == "row") c.variant = SoftmaxVariant::Row;
  else if (parts[0] == "online") c.variant = SoftmaxVariant::Online;
  else throw bad("unknown variant '" + parts[0] + "'");
  c.rows_per_block = c.variant == SoftmaxVariant::Rows ? 8 : 1;
  bool have_threads = false;
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string& p = parts[i];
    size_t digits = p.find_first_of("0123456789");
    if (digits == std::string::npos || digits == 0) throw bad("field '" + p + "' has no prefix or no number");
    const std::string key = p.substr(0, digits);
    int value = 0;
    try {
      size_t used = 0;
      value = std::stoi(p.substr(digits), &used);
      if (digits + used != p.size()) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      throw bad("field '" + p + "' is not a number");
    }
    if (value <= 0) throw bad("field '" + p + "' must be positive");
    if (key == "t") {
      c.threads = value;
      have_threads = true;
    } else if (key == "r") {
      if (c.variant != SoftmaxVariant::Rows) throw bad("rROWS applies to the rows variant only");
      c.rows_per_block = value;
    } else if (key == "bn") {
      c.block_N = value;
    } else {
      throw bad("unknown field '" + p + "'");
    }
  }
  if (!have_threads) throw bad("tTHREADS is required");
  return c;
}

SoftmaxConfig default_softmax_config(long long /*M*/, long long N, DType dtype) {
  const long long vec = 16 / dtype_bytes(dtype);
  SoftmaxConfig c;
  if (N <= 1024) {
    // Four vectors of a row per thread where the row is long enough (fewer shuffle steps per
    // element), at most a warp per row; enough rows that every thread has four 16-byte loads
    // in flight. infer_layouts makes the same choice of lanes for this tile.
    long long lanes = std::min<long long>(32, next_pow2((N + 4 * vec - 1) / (4 * vec)));
    long long bn = round_up(N, lanes * vec);
    long long chunks = bn / (lanes * vec);
    c.variant = SoftmaxVariant::Rows;
    c.threads = 256;
    long long rows_per_pass = c.threads / lanes;
    c.rows_per_block = static_cast<int>(rows_per_pass * std::max<long long>(1, 4 / chunks));
    c.block_N = static_cast<int>(bn);
  } else if (N <= 1024 * vec * 4) {
    // Four 16-byte vectors per thread (registers stay low, four loads in flight); as many
    // lanes per row as that takes, and several rows per block while a row needs fewer than
    // 256 threads. Measured first with a warp per row and 16 vectors per thread (195 registers,
    // 31 % of the copy at N = 4096, bench/results/2026-12-02-softmax-h200.json).
    long long lanes = next_pow2((N + 4 * vec - 1) / (4 * vec));
    c.threads = static_cast<int>(std::max<long long>(256, lanes));
    c.variant = SoftmaxVariant::Rows;
    c.rows_per_block = static_cast<int>(c.threads / lanes);
    c.block_N = static_cast<int>(round_up(N, lanes * vec));
  } else {
    // Longer rows do not fit in one block's registers; the second read of a row mostly hits
    // L2 (one row per SM in flight is a few hundred KB against a 60 MB L2).
    c.variant = SoftmaxVariant::Online;
    c.threads = 1024;
    c.block_N = static_cast<int>(c.threads * vec * 2);
  }
  return c;
}

PrimFunc softmax_program(long long M, long long N, DType dtype, const SoftmaxConfig& c) {
  const long long vec = 16 / dtype_bytes(dtype);
  const int BN = c.block_N ? c.block_N : static_cast<int>(round_up(N, c.threads * vec));
  T::PrimFunc f("softmax");
  auto X = f.tensor("X", {Expr(M), Expr(N)}, dtype);
  auto Y = f.tensor("Y", {Expr(M), Expr(N)}, dtype);
  if (c.variant != SoftmaxVariant::Online) {
    const int R = c.variant == SoftmaxVariant::Rows ? c.rows_per_block : 1;
    f.body([&] {
      T::Kernel(T::ceildiv(Expr(M), R), c.threads, [&](T::Var bx) {
        auto x = T::alloc_fragment({R, BN}, T::f32);
        auto row_max = T::alloc_fragment({R}, T::f32);
        auto row_sum = T::alloc_fragment({R}, T::f32);
        T::copy_padded(X(bx * R, 0), x, -T::infinity(T::f32));
        T::reduce_max(x, row_max, 1);
        T::Parallel(R, BN, [&](T::Var i, T::Var j) { x(i, j) = exp_minus(x(i, j), row_max(i)); });
        T::reduce_sum(x, row_sum, 1);
        T::Parallel(R, [&](T::Var i) { row_sum(i) = 1.0f / row_sum(i); });
        T::Parallel(R, BN, [&](T::Var i, T::Var j) { x(i, j) = x(i, j) * row_sum(i); });
        T::copy(x, Y(bx * R, 0));
      });
    });
    return f;
  }
  // Online: pass 1 keeps a running max m and a running sum s of exp(x - m), rescaling s when
  // m grows; pass 2 reads the row again and writes exp(x - m) / s.
  f.body([&] {
    T::Kernel(Expr(M), c.threads, [&](T::Var bx) {
      auto x = T::alloc_fragment({1, BN}, T::f32);
      auto m = T::alloc_fragment({1}, T::f32);
      auto s = T::alloc_fragment({1}, T::f32);
      auto chunk_max = T::alloc_fragment({1}, T::f32);
      auto chunk_sum = T::alloc_fragment({1}, T::f32);
      T::fill(m, -T::infinity(T::f32));
      T::clear(s);
      T::Serial(T::ceildiv(Expr(N), BN), [&](T::Var k) {
        T::copy_padded(X(bx, k * BN), x, -T::infinity(T::f32));
        T::reduce_max(x, chunk_max, 1);
        T::Parallel(1, [&](T::Var i) { chunk_max(i) = max_nan(chunk_max(i), m(i)); });
        T::Parallel(1, BN, [&](T::Var i, T::Var j) { x(i, j) = exp_minus(x(i, j), chunk_max(i)); });
        T::reduce_sum(x, chunk_sum, 1);
        T::Parallel(1, [&](T::Var i) {
          // exp(m - new m); equal maxima (both -inf included) scale by exactly 1.
          Expr scale = T::select(m(i) == chunk_max(i), 1.0f, exp_minus(m(i), chunk_max(i)));
          s(i) = s(i) * scale + chunk_sum(i);
          m(i) = chunk_max(i);
        });
      });
      T::Parallel(1, [&](T::Var i) { s(i) = 1.0f / s(i); });
      T::Serial(T::ceildiv(Expr(N), BN), [&](T::Var k) {
        T::copy_padded(X(bx, k * BN), x, -T::infinity(T::f32));
        T::Parallel(1, BN, [&](T::Var i, T::Var j) { x(i, j) = exp_minus(x(i, j), m(i)) * s(i); });
        T::copy(x, Y(bx, k * BN));
      });
    });
  });
  return f;
}

JitKernel make_softmax(long long M, long long N, DType dtype, const SoftmaxConfig& c,
                       const JitOptions& options) {
  JitOptions o = options;
  if (o.out_idx.empty()) o.out_idx = {-1};
  return jit(softmax_program(M, N, dtype, c), o);
}

SoftmaxChoice choose_softmax_config(long long M, long long N, DType dtype) {
  if (auto tuned = autotune::tuned_softmax_config(M, N, dtype)) return {*tuned, true};
  return {default_softmax_config(M, N, dtype), false};
}

JitKernel make_softmax(long long M, long long N, DType dtype) {
  return make_softmax(M, N, dtype, choose_softmax_config(M, N, dtype).config);
}

}  // namespace tessel::kernels
