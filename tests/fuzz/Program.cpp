// build_program: each family as a kernel author would write it (kernels/gemm/Matmul.cpp,
// kernels/softmax/Softmax.cpp and kernels/attention/GemmChain.cpp are the models).
#include "fuzz/Program.hpp"

#include <cmath>
#include <limits>

namespace tessel::fuzz {

namespace T = tessel;

namespace {

Expr to_expr(const ExprTree& e, const Expr& x, const Expr& r) {
  using Op = ExprTree::Op;
  auto a = [&](size_t i) { return to_expr(e.args[i], x, r); };
  switch (e.op) {
    case Op::X:
      return x;
    case Op::R:
      return r;
    case Op::Const:
      return Expr(e.value);
    case Op::Neg:
      return -a(0);
    case Op::Abs:
      return T::abs(a(0));
    case Op::Relu:
      return T::max(a(0), 0.0);
    case Op::Expc:
      return T::exp(T::min(a(0), 2.0));
    case Op::Exp2c:
      return T::fast_exp2(T::min(a(0), 2.0));
    case Op::PolyExp2c:
      return T::poly_exp2(T::min(a(0), 2.0));
    case Op::Add:
      return a(0) + a(1);
    case Op::Sub:
      return a(0) - a(1);
    case Op::Mul:
      return a(0) * a(1);
    case Op::Max:
      return T::max(a(0), a(1));
    case Op::Min:
      return T::min(a(0), a(1));
    case Op::Sdiv:
      return a(0) / (1.0 + T::abs(a(1)));
  }
  return x;
}

int ceil_div(int a, int b) {
  return (a + b - 1) / b;
}

void gemm_body(const FuzzCase& c, const Buffer& A, const Buffer& B, const Buffer* bias, const Buffer& C,
               const Buffer* R) {
  T::Kernel(T::ceildiv(c.N, c.BN), T::ceildiv(c.M, c.BM), c.threads, [&](T::Var bx, T::Var by) {
    auto A_s = c.trans_a ? T::alloc_shared({c.BK, c.BM}, c.dtype) : T::alloc_shared({c.BM, c.BK}, c.dtype);
    auto B_s = c.trans_b ? T::alloc_shared({c.BN, c.BK}, c.dtype) : T::alloc_shared({c.BK, c.BN}, c.dtype);
    auto acc = T::alloc_fragment({c.BM, c.BN}, T::f32);
    if (c.swizzle) T::use_swizzle(4);
    if (c.cluster) T::use_cluster(c.cluster == 1 ? 2 : 1, c.cluster == 1 ? 1 : 2);
    T::clear(acc);
    auto step = [&](T::Var ko) {
      if (c.trans_a)
        T::copy(A(ko * c.BK, by * c.BM), A_s);
      else
        T::copy(A(by * c.BM, ko * c.BK), A_s);
      if (c.trans_b)
        T::copy(B(bx * c.BN, ko * c.BK), B_s);
      else
        T::copy(B(ko * c.BK, bx * c.BN), B_s);
      T::gemm(A_s, B_s, acc, c.trans_a, c.trans_b, static_cast<GemmWarpPolicy>(c.policy));
    };
    // k_by_block: row block by sums only its first by + 1 tiles of K (Unroll: all of them).
    const Expr k_tiles = c.k_by_block ? T::min(T::ceildiv(c.K, c.BK), by + 1) : T::ceildiv(Expr(c.K), c.BK);
    if (c.stages > 0)
      T::Pipelined(k_tiles, c.stages, step);
    else if (c.stages < 0)
      T::Unroll(T::ceildiv(c.K, c.BK), step);
    else
      T::Serial(k_tiles, step);
    if (R) {
      auto sums = T::alloc_fragment({c.BM}, T::f32);
      T::reduce_sum(acc, sums, 1);
      T::copy(sums, T::region(*R, {by * c.BM, bx}, {c.BM, 1}));
    }
    if (!c.epilogue && !bias) {
      T::copy(acc, C(by * c.BM, bx * c.BN));
      return;
    }
    auto out = T::alloc_fragment({c.BM, c.BN}, c.out_dtype);
    T::Parallel(c.BM, c.BN, [&](T::Var i, T::Var j) {
      Expr v = acc(i, j);
      if (bias) v = v + T::select(bx * c.BN + j < c.N, (*bias)(bx * c.BN + j), 0.0);
      if (c.epilogue) v = to_expr(c.expr, v * epilogue_scale(c), Expr());
      out(i, j) = T::cast(c.out_dtype, v);
    });
    T::copy(out, C(by * c.BM, bx * c.BN));
  });
}

void tile_body(const FuzzCase& c, const Buffer& X, const Buffer& Y, const Buffer* R) {
  T::Kernel(T::ceildiv(c.N, c.BN), T::ceildiv(c.M, c.BM), c.threads, [&](T::Var bx, T::Var by) {
    auto xs = T::alloc_fragment({c.BM, c.BN}, c.frag_in_dtype ? c.dtype : T::f32);
    auto ys = T::alloc_fragment({c.BM, c.BN}, c.out_dtype);
    auto src = X(by * c.BM + c.row_off, bx * c.BN + c.col_off);
    auto load = [&](const RegionArg& dst) {
      if (c.padded)
        T::copy_padded(src, dst, Expr(c.pad));
      else
        T::copy(src, dst);
    };
    if (c.via_shared) {
      auto sh = T::alloc_shared({c.BM, c.BN}, c.dtype);
      load(sh);
      T::copy(sh, xs);
    } else {
      load(xs);
    }
    T::Parallel(c.BM, c.BN, [&](T::Var i, T::Var j) { xs(i, j) = to_expr(c.expr, xs(i, j), Expr()); });
    Buffer red;
    if (R) {
      red = T::alloc_fragment({c.BM}, T::f32);
      if (c.reduce_init) T::fill(red, Expr(c.init_value));
      const bool clear = !c.reduce_init;
      if (c.reduce == ReduceKind::Sum) T::reduce_sum(xs, red, 1, clear);
      if (c.reduce == ReduceKind::Max) T::reduce_max(xs, red, 1, clear);
      if (c.reduce == ReduceKind::Min) T::reduce_min(xs, red, 1, clear);
    }
    T::Parallel(c.BM, c.BN, [&](T::Var i, T::Var j) {
      Expr r = R ? red(i) * reduction_scale(c) : Expr();
      ys(i, j) = T::cast(c.out_dtype, to_expr(c.expr2, xs(i, j), r));
    });
    if (c.store_via_shared) {
      auto out = T::alloc_shared({c.BM, c.BN}, c.out_dtype);
      T::copy(ys, out);
      T::copy(out, Y(by * c.BM, bx * c.BN));
    } else {
      T::copy(ys, Y(by * c.BM, bx * c.BN));
    }
    if (R) T::copy(red, T::region(*R, {by * c.BM, bx}, {c.BM, 1}));
  });
}

// The rows as loaded, in the input dtype, part of each thread's share in shared memory
// (FragmentStorage): kernels/softmax's shared-tail variant.
void softmax_raw_body(const FuzzCase& c, const Buffer& X, const Buffer& Y) {
  T::Kernel(T::ceildiv(c.M, c.BM), c.threads, [&](T::Var bx) {
    auto raw = T::alloc_fragment({c.BM, c.BN}, c.dtype, T::FragmentStorage{c.shared_tail});
    auto x = T::alloc_fragment({c.BM, c.BN}, T::f32);
    auto m = T::alloc_fragment({c.BM}, T::f32);
    auto s = T::alloc_fragment({c.BM}, T::f32);
    if (c.window)
      T::copy_window(X(bx * c.BM, 0), raw, -T::infinity(c.dtype));
    else
      T::copy_padded(X(bx * c.BM, 0), raw, -T::infinity(c.dtype));
    T::Parallel(c.BM, c.BN, [&](T::Var i, T::Var j) { x(i, j) = T::cast(T::f32, raw(i, j)) * c.scale; });
    T::reduce_max(x, m, 1);
    T::Parallel(c.BM, c.BN,
                [&](T::Var i, T::Var j) { x(i, j) = T::exp(T::cast(T::f32, raw(i, j)) * c.scale - m(i)); });
    T::reduce_sum(x, s, 1);
    T::Parallel(c.BM, [&](T::Var i) { s(i) = 1.0f / s(i); });
    T::Parallel(c.BM, c.BN, [&](T::Var i, T::Var j) {
      raw(i, j) = T::cast(c.dtype, T::exp(T::cast(T::f32, raw(i, j)) * c.scale - m(i)) * s(i));
    });
    if (c.window)
      T::copy_window(raw, Y(bx * c.BM, 0));
    else
      T::copy(raw, Y(bx * c.BM, 0));
  });
}

// Two passes over BN-wide chunks: a running max and sum, then the outputs; the next chunk's
// load issued before the current chunk's reductions (kernels/softmax's online variant).
void softmax_online_body(const FuzzCase& c, const Buffer& X, const Buffer& Y) {
  T::Kernel(T::ceildiv(c.M, c.BM), c.threads, [&](T::Var bx) {
    auto raw = T::alloc_fragment({c.BM, c.BN}, c.dtype);
    auto x = T::alloc_fragment({c.BM, c.BN}, T::f32);
    auto m = T::alloc_fragment({c.BM}, T::f32);
    auto s = T::alloc_fragment({c.BM}, T::f32);
    auto cm = T::alloc_fragment({c.BM}, T::f32);
    auto cs = T::alloc_fragment({c.BM}, T::f32);
    // Windowed: every row's chunks start at the block's first row's shift (a column <= 0; the
    // other rows' starts are then not provably aligned: element by element).
    const long long vec = 16 / dtype_bytes(c.dtype);
    const Expr col0 = c.window ? -((T::cast(T::i64, bx * c.BM) * c.N) % vec) : Expr(0);
    const Expr chunks = T::ceildiv(c.N + (c.window ? vec - 1 : 0), c.BN);
    T::fill(m, -T::infinity(T::f32));
    T::clear(s);
    T::copy_padded(X(bx * c.BM, col0), raw, -T::infinity(c.dtype));
    T::Serial(chunks, [&](T::Var k) {
      T::Parallel(c.BM, c.BN, [&](T::Var i, T::Var j) { x(i, j) = T::cast(T::f32, raw(i, j)) * c.scale; });
      T::copy_padded(X(bx * c.BM, col0 + ((k + 1) % chunks) * c.BN), raw, -T::infinity(c.dtype));
      T::reduce_max(x, cm, 1);
      T::Parallel(c.BM, [&](T::Var i) { cm(i) = T::max(cm(i), m(i)); });
      T::Parallel(c.BM, c.BN, [&](T::Var i, T::Var j) { x(i, j) = T::exp(x(i, j) - cm(i)); });
      T::reduce_sum(x, cs, 1);
      T::Parallel(c.BM, [&](T::Var i) {
        s(i) = s(i) * T::select(m(i) == cm(i), 1.0f, T::exp(m(i) - cm(i))) + cs(i);
        m(i) = cm(i);
      });
    });
    T::Parallel(c.BM, [&](T::Var i) { s(i) = 1.0f / s(i); });
    T::Serial(chunks, [&](T::Var k) {
      T::Parallel(c.BM, c.BN, [&](T::Var i, T::Var j) {
        x(i, j) = T::exp(T::cast(T::f32, raw(i, j)) * c.scale - m(i)) * s(i);
      });
      T::copy_padded(X(bx * c.BM, col0 + (k + 1) * c.BN), raw, -T::infinity(c.dtype));
      T::copy(x, Y(bx * c.BM, col0 + k * c.BN));
    });
  });
}

void softmax_body(const FuzzCase& c, const Buffer& X, const Buffer& Y) {
  if (c.variant == 1) return softmax_raw_body(c, X, Y);
  if (c.variant == 2) return softmax_online_body(c, X, Y);
  T::Kernel(T::ceildiv(c.M, c.BM), c.threads, [&](T::Var bx) {
    auto x = T::alloc_fragment({c.BM, c.BN}, T::f32);
    auto y = T::alloc_fragment({c.BM, c.BN}, c.out_dtype);
    auto m = T::alloc_fragment({c.BM}, T::f32);
    auto s = T::alloc_fragment({c.BM}, T::f32);
    if (c.window) {
      // Each row shifted to its aligned word: the padding is the window's (-inf), not a column test.
      T::copy_window(X(bx * c.BM, 0), x, -T::infinity(T::f32));
      T::Parallel(c.BM, c.BN, [&](T::Var i, T::Var j) { x(i, j) = x(i, j) * c.scale; });
    } else {
      T::copy(X(bx * c.BM, 0), x);
      T::Parallel(c.BM, c.BN, [&](T::Var i, T::Var j) {
        x(i, j) = T::select(j < c.N, x(i, j) * c.scale, -T::infinity(T::f32));
      });
    }
    T::reduce_max(x, m, 1);
    T::Parallel(c.BM, c.BN, [&](T::Var i, T::Var j) { x(i, j) = T::exp(x(i, j) - m(i)); });
    T::reduce_sum(x, s, 1);
    T::Parallel(c.BM, c.BN, [&](T::Var i, T::Var j) { y(i, j) = T::cast(c.out_dtype, x(i, j) / s(i)); });
    if (c.window)
      T::copy_window(y, Y(bx * c.BM, 0));
    else
      T::copy(y, Y(bx * c.BM, 0));
  });
}

void attention_body(const FuzzCase& c, const Buffer& Q, const Buffer& K, const Buffer& V, const Buffer& O) {
  const int D = c.K;
  T::Kernel(T::ceildiv(c.M, c.BM), c.threads, [&](T::Var bx) {
    auto Q_s = T::alloc_shared({c.BM, D}, c.dtype);
    auto K_s = T::alloc_shared({c.BN, D}, c.dtype);
    auto V_s = T::alloc_shared({c.BN, D}, c.dtype);
    auto S = T::alloc_fragment({c.BM, c.BN}, T::f32);
    auto P = T::alloc_fragment({c.BM, c.BN}, c.dtype);
    auto O_f = T::alloc_fragment({c.BM, D}, T::f32);
    Buffer m, m_prev, l, row_sum, rescale;
    if (c.online) {
      m = T::alloc_fragment({c.BM}, T::f32);
      m_prev = T::alloc_fragment({c.BM}, T::f32);
      l = T::alloc_fragment({c.BM}, T::f32);
      row_sum = T::alloc_fragment({c.BM}, T::f32);
      rescale = T::alloc_fragment({c.BM}, T::f32);
    }
    T::copy(Q(bx * c.BM, 0), Q_s);
    T::clear(O_f);
    if (c.online) {
      T::fill(m, -T::infinity(T::f32));
      T::clear(l);
    }
    auto step = [&](T::Var j) {
      T::copy(K(j * c.BN, 0), K_s);
      T::copy(V(j * c.BN, 0), V_s);
      T::clear(S);
      T::gemm(Q_s, K_s, S, false, true);
      if (!c.online) {
        if (c.p_via_copy) {
          T::Parallel(c.BM, c.BN, [&](T::Var r, T::Var q) { S(r, q) = S(r, q) * c.scale; });
          T::copy(S, P);
        } else {
          T::Parallel(c.BM, c.BN, [&](T::Var r, T::Var q) { P(r, q) = T::cast(c.dtype, S(r, q) * c.scale); });
        }
        T::gemm(P, V_s, O_f);
        return;
      }
      T::Parallel(c.BM, c.BN, [&](T::Var r, T::Var q) {
        Expr keep = j * c.BN + q < c.N;
        if (c.causal) keep = keep && j * c.BN + q <= bx * c.BM + r;
        S(r, q) = T::select(keep, S(r, q) * c.scale, -T::infinity(T::f32));
      });
      T::copy(m, m_prev);
      T::reduce_max(S, m, 1, /*clear=*/false);
      T::Parallel(c.BM, [&](T::Var r) { rescale(r) = T::exp(m_prev(r) - m(r)); });
      T::Parallel(c.BM, c.BN, [&](T::Var r, T::Var q) { S(r, q) = T::exp(S(r, q) - m(r)); });
      T::reduce_sum(S, row_sum, 1);
      T::Parallel(c.BM, [&](T::Var r) { l(r) = l(r) * rescale(r) + row_sum(r); });
      T::Parallel(c.BM, D, [&](T::Var r, T::Var d) { O_f(r, d) = O_f(r, d) * rescale(r); });
      if (c.p_via_copy)
        T::copy(S, P);
      else
        T::Parallel(c.BM, c.BN, [&](T::Var r, T::Var q) { P(r, q) = T::cast(c.dtype, S(r, q)); });
      T::gemm(P, V_s, O_f);
    };
    // Causal with skip_masked: the blocks past the query block's last row are all masked (each
    // row has seen key 0 by then, so they would add nothing) and are not visited (an Unroll
    // loop, whose trip count must be a constant, visits them all).
    const Expr blocks = c.skip_masked ? T::min(T::ceildiv(c.N, c.BN), T::ceildiv((bx + 1) * c.BM, c.BN))
                                      : T::ceildiv(Expr(c.N), c.BN);
    if (c.stages > 0)
      T::Pipelined(blocks, c.stages, step);
    else if (c.stages < 0)
      T::Unroll(T::ceildiv(c.N, c.BN), step);
    else
      T::Serial(blocks, step);
    if (c.online) T::Parallel(c.BM, D, [&](T::Var r, T::Var d) { O_f(r, d) = O_f(r, d) / l(r); });
    T::copy(O_f, O(bx * c.BM, 0));
  });
}

}  // namespace

double epilogue_scale(const FuzzCase& c) {
  double s = 1;
  while (s * s * c.K > 4) s /= 2;  // |acc| ~ sqrt(K) / 3 for inputs uniform in [-1, 1)
  return s;
}

double reduction_scale(const FuzzCase& c) {
  return c.reduce == ReduceKind::Sum ? 1.0 / c.BN : 1.0;
}

std::vector<Param> parameters(const FuzzCase& c) {
  const std::int64_t M = c.M, N = c.N, K = c.K;
  switch (c.family) {
    case Family::Gemm: {
      std::vector<Param> p = {{"A", c.dtype, c.trans_a ? std::vector{K, M} : std::vector{M, K}},
                              {"B", c.dtype, c.trans_b ? std::vector{N, K} : std::vector{K, N}}};
      if (c.bias) p.push_back({"bias", c.dtype, {N}});
      p.push_back({"C", c.out_dtype, {M, N}, true});
      if (c.row_sums) p.push_back({"R", DType::f32, {M, ceil_div(c.N, c.BN)}, true});
      return p;
    }
    case Family::Tile: {
      std::vector<Param> p = {{"X", c.dtype, {M, N}}, {"Y", c.out_dtype, {M, N}, true}};
      if (c.reduce != ReduceKind::None) p.push_back({"R", DType::f32, {M, ceil_div(c.N, c.BN)}, true});
      return p;
    }
    case Family::Softmax:
      return {{"X", c.dtype, {M, N}}, {"Y", c.out_dtype, {M, N}, true}};
    case Family::Attention:
      return {{"Q", c.dtype, {M, K}},
              {"K", c.dtype, {N, K}},
              {"V", c.dtype, {N, K}},
              {"O", DType::f32, {M, K}, true}};
  }
  return {};
}

std::vector<int> output_indices(const FuzzCase& c) {
  std::vector<Param> p = parameters(c);
  std::vector<int> out;
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i].output) out.push_back(static_cast<int>(i));
  return out;
}

PrimFunc build_program(const FuzzCase& c) {
  PrimFunc f(std::string("fuzz_") + family_name(c.family));
  std::vector<Buffer> b;
  for (const Param& p : parameters(c)) {
    std::vector<Expr> shape;
    for (std::int64_t d : p.shape) shape.push_back(Expr(static_cast<int>(d)));
    b.push_back(f.tensor(p.name, shape, p.dtype));
  }
  f.body([&] {
    switch (c.family) {
      case Family::Gemm:
        gemm_body(c, b[0], b[1], c.bias ? &b[2] : nullptr, c.row_sums ? b[b.size() - 2] : b.back(),
                  c.row_sums ? &b.back() : nullptr);
        break;
      case Family::Tile:
        tile_body(c, b[0], b[1], c.reduce != ReduceKind::None ? &b[2] : nullptr);
        break;
      case Family::Softmax:
        softmax_body(c, b[0], b[1]);
        break;
      case Family::Attention:
        attention_body(c, b[0], b[1], b[2], b[3]);
        break;
    }
  });
  return f;
}

std::vector<interp::HostTensor> make_arguments(const FuzzCase& c) {
  std::vector<interp::HostTensor> out;
  std::uint64_t k = 0;
  for (const Param& p : parameters(c)) {
    if (p.output)
      out.push_back(interp::HostTensor::full(p.dtype, p.shape, std::numeric_limits<double>::quiet_NaN()));
    else
      out.push_back(interp::HostTensor::random(p.dtype, p.shape, c.seed * 7919 + ++k));
  }
  return out;
}

}  // namespace tessel::fuzz
