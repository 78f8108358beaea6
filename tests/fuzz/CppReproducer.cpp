// cpp_reproducer: the program build_program records, as C++ source a kernel author would write,
// with a main() that runs it on the interpreter on the case's inputs (printing the outputs' sums)
// and compiles it for sm_80 and sm_90a. It must stay statement for statement what Program.cpp
// builds (a change to one is a change to the other).
#include <cmath>
#include <sstream>

#include "fuzz/Program.hpp"

namespace tessel::fuzz {

namespace {

std::string num(double v) {
  if (std::isinf(v)) return v > 0 ? "INFINITY" : "-INFINITY";
  std::ostringstream os;
  os.precision(17);
  os << v;
  std::string s = os.str();
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

std::string dt(DType t) {
  return "T::" + std::string(dtype_name(t) == std::string("bool") ? "boolean" : dtype_name(t));
}

std::string expr_cpp(const ExprTree& e, const std::string& x, const std::string& r) {
  using Op = ExprTree::Op;
  auto a = [&](size_t i) { return expr_cpp(e.args[i], x, r); };
  switch (e.op) {
    case Op::X:
      return x;
    case Op::R:
      return r;
    case Op::Const:
      return "Expr(" + num(e.value) + ")";
    case Op::Neg:
      return "(-" + a(0) + ")";
    case Op::Abs:
      return "T::abs(" + a(0) + ")";
    case Op::Relu:
      return "T::max(" + a(0) + ", 0.0)";
    case Op::Expc:
      return "T::exp(T::min(" + a(0) + ", 2.0))";
    case Op::Exp2c:
      return "T::fast_exp2(T::min(" + a(0) + ", 2.0))";
    case Op::PolyExp2c:
      return "T::poly_exp2(T::min(" + a(0) + ", 2.0))";
    case Op::Add:
      return "(" + a(0) + " + " + a(1) + ")";
    case Op::Sub:
      return "(" + a(0) + " - " + a(1) + ")";
    case Op::Mul:
      return "(" + a(0) + " * " + a(1) + ")";
    case Op::Max:
      return "T::max(" + a(0) + ", " + a(1) + ")";
    case Op::Min:
      return "T::min(" + a(0) + ", " + a(1) + ")";
    case Op::Sdiv:
      return "(" + a(0) + " / (1.0 + T::abs(" + a(1) + ")))";
  }
  return x;
}

void gemm(std::ostream& o, const FuzzCase& c) {
  const std::string A_s = c.trans_a ? "{BK, BM}" : "{BM, BK}", B_s = c.trans_b ? "{BN, BK}" : "{BK, BN}";
  o << "  const int M = " << c.M << ", N = " << c.N << ", K = " << c.K << ", BM = " << c.BM
    << ", BN = " << c.BN << ", BK = " << c.BK << ";\n";
  o << "  auto A = f.tensor(\"A\", " << (c.trans_a ? "{K, M}" : "{M, K}") << ", " << dt(c.dtype) << ");\n";
  o << "  auto B = f.tensor(\"B\", " << (c.trans_b ? "{N, K}" : "{K, N}") << ", " << dt(c.dtype) << ");\n";
  if (c.bias) o << "  auto bias = f.tensor(\"bias\", {N}, " << dt(c.dtype) << ");\n";
  o << "  auto C = f.tensor(\"C\", {M, N}, " << dt(c.out_dtype) << ");\n";
  if (c.row_sums) o << "  auto R = f.tensor(\"R\", {M, T::ceildiv(N, BN)}, T::f32);\n";
  o << "  f.body([&] {\n";
  o << "    T::Kernel(T::ceildiv(N, BN), T::ceildiv(M, BM), " << c.threads
    << ", [&](T::Var bx, T::Var by) {\n";
  o << "      auto A_s = T::alloc_shared(" << A_s << ", " << dt(c.dtype) << ");\n";
  o << "      auto B_s = T::alloc_shared(" << B_s << ", " << dt(c.dtype) << ");\n";
  o << "      auto acc = T::alloc_fragment({BM, BN}, T::f32);\n";
  if (c.swizzle) o << "      T::use_swizzle(4);\n";
  if (c.cluster) o << "      T::use_cluster(" << (c.cluster == 1 ? "2, 1" : "1, 2") << ");\n";
  o << "      T::clear(acc);\n";
  // k_by_block: row block by sums only its first by + 1 tiles of K (Unroll: all of them).
  const std::string k_tiles = c.k_by_block ? "T::min(T::ceildiv(K, BK), by + 1)" : "T::ceildiv(K, BK)";
  if (c.stages > 0)
    o << "      T::Pipelined(" << k_tiles << ", " << c.stages << ", [&](T::Var ko) {\n";
  else if (c.stages < 0)
    o << "      T::Unroll(T::ceildiv(K, BK), [&](T::Var ko) {\n";
  else
    o << "      T::Serial(" << k_tiles << ", [&](T::Var ko) {\n";
  o << "        T::copy(" << (c.trans_a ? "A(ko * BK, by * BM)" : "A(by * BM, ko * BK)") << ", A_s);\n";
  o << "        T::copy(" << (c.trans_b ? "B(bx * BN, ko * BK)" : "B(ko * BK, bx * BN)") << ", B_s);\n";
  static const char* policies[] = {"Square", "FullRow", "FullCol"};
  o << "        T::gemm(A_s, B_s, acc, " << (c.trans_a ? "true" : "false") << ", "
    << (c.trans_b ? "true" : "false") << ", T::GemmWarpPolicy::" << policies[c.policy % 3] << ");\n";
  o << "      });\n";
  if (c.row_sums) {
    o << "      auto sums = T::alloc_fragment({BM}, T::f32);\n";
    o << "      T::reduce_sum(acc, sums, 1);\n";
    o << "      T::copy(sums, T::region(R, {by * BM, bx}, {BM, 1}));\n";
  }
  if (!c.epilogue && !c.bias) {
    o << "      T::copy(acc, C(by * BM, bx * BN));\n";
  } else {
    o << "      auto out = T::alloc_fragment({BM, BN}, " << dt(c.out_dtype) << ");\n";
    o << "      T::Parallel(BM, BN, [&](T::Var i, T::Var j) {\n";
    o << "        Expr v = acc(i, j);\n";
    if (c.bias) o << "        v = v + T::select(bx * BN + j < N, bias(bx * BN + j), 0.0);\n";
    if (c.epilogue)
      o << "        v = " << expr_cpp(c.expr, "(v * " + num(epilogue_scale(c)) + ")", "") << ";\n";
    o << "        out(i, j) = T::cast(" << dt(c.out_dtype) << ", v);\n";
    o << "      });\n";
    o << "      T::copy(out, C(by * BM, bx * BN));\n";
  }
  o << "    });\n  });\n";
}

void tile(std::ostream& o, const FuzzCase& c) {
  const bool red = c.reduce != ReduceKind::None;
  o << "  const int M = " << c.M << ", N = " << c.N << ", BM = " << c.BM << ", BN = " << c.BN << ";\n";
  o << "  auto X = f.tensor(\"X\", {M, N}, " << dt(c.dtype) << ");\n";
  o << "  auto Y = f.tensor(\"Y\", {M, N}, " << dt(c.out_dtype) << ");\n";
  if (red) o << "  auto R = f.tensor(\"R\", {M, T::ceildiv(N, BN)}, T::f32);\n";
  o << "  f.body([&] {\n";
  o << "    T::Kernel(T::ceildiv(N, BN), T::ceildiv(M, BM), " << c.threads
    << ", [&](T::Var bx, T::Var by) {\n";
  o << "      auto xs = T::alloc_fragment({BM, BN}, " << (c.frag_in_dtype ? dt(c.dtype) : "T::f32") << ");\n";
  o << "      auto ys = T::alloc_fragment({BM, BN}, " << dt(c.out_dtype) << ");\n";
  const std::string src =
      "X(by * BM + " + std::to_string(c.row_off) + ", bx * BN + " + std::to_string(c.col_off) + ")";
  auto load = [&](const std::string& dst) {
    if (c.padded) return "      T::copy_padded(" + src + ", " + dst + ", Expr(" + num(c.pad) + "));\n";
    return "      T::copy(" + src + ", " + dst + ");\n";
  };
  if (c.via_shared) {
    o << "      auto sh = T::alloc_shared({BM, BN}, " << dt(c.dtype) << ");\n" << load("sh");
    o << "      T::copy(sh, xs);\n";
  } else {
    o << load("xs");
  }
  o << "      T::Parallel(BM, BN, [&](T::Var i, T::Var j) { xs(i, j) = " << expr_cpp(c.expr, "xs(i, j)", "")
    << "; });\n";
  if (red) {
    o << "      auto red = T::alloc_fragment({BM}, T::f32);\n";
    if (c.reduce_init) o << "      T::fill(red, Expr(" << num(c.init_value) << "));\n";
    o << "      T::reduce_" << reduce_name(c.reduce) << "(xs, red, 1, " << (c.reduce_init ? "false" : "true")
      << ");\n";
  }
  const std::string r = red ? "(red(i) * " + num(reduction_scale(c)) + ")" : "";
  o << "      T::Parallel(BM, BN, [&](T::Var i, T::Var j) {\n";
  o << "        ys(i, j) = T::cast(" << dt(c.out_dtype) << ", " << expr_cpp(c.expr2, "xs(i, j)", r) << ");\n";
  o << "      });\n";
  if (c.store_via_shared) {
    o << "      auto out = T::alloc_shared({BM, BN}, " << dt(c.out_dtype) << ");\n";
    o << "      T::copy(ys, out);\n      T::copy(out, Y(by * BM, bx * BN));\n";
  } else {
    o << "      T::copy(ys, Y(by * BM, bx * BN));\n";
  }
  if (red) o << "      T::copy(red, T::region(R, {by * BM, bx}, {BM, 1}));\n";
  o << "    });\n  });\n";
}

void softmax(std::ostream& o, const FuzzCase& c) {
  o << "  const int M = " << c.M << ", N = " << c.N << ", BM = " << c.BM << ", BN = " << c.BN << ";\n";
  o << "  auto X = f.tensor(\"X\", {M, N}, " << dt(c.dtype) << ");\n";
  o << "  auto Y = f.tensor(\"Y\", {M, N}, " << dt(c.out_dtype) << ");\n";
  o << "  f.body([&] {\n";
  o << "    T::Kernel(T::ceildiv(M, BM), " << c.threads << ", [&](T::Var bx) {\n";
  const std::string d = dt(c.dtype), scale = num(c.scale), raw_x = "T::cast(T::f32, raw(i, j)) * " + scale;
  if (c.variant == 1) {
    o << "      auto raw = T::alloc_fragment({BM, BN}, " << d << ", T::FragmentStorage{" << c.shared_tail
      << "});\n";
    o << "      auto x = T::alloc_fragment({BM, BN}, T::f32);\n";
    o << "      auto m = T::alloc_fragment({BM}, T::f32);\n      auto s = T::alloc_fragment({BM}, T::f32);\n";
    o << "      T::" << (c.window ? "copy_window" : "copy_padded") << "(X(bx * BM, 0), raw, -T::infinity(" << d
      << "));\n";
    o << "      T::Parallel(BM, BN, [&](T::Var i, T::Var j) { x(i, j) = " << raw_x << "; });\n";
    o << "      T::reduce_max(x, m, 1);\n";
    o << "      T::Parallel(BM, BN, [&](T::Var i, T::Var j) { x(i, j) = T::exp(" << raw_x
      << " - m(i)); });\n";
    o << "      T::reduce_sum(x, s, 1);\n";
    o << "      T::Parallel(BM, [&](T::Var i) { s(i) = 1.0f / s(i); });\n";
    o << "      T::Parallel(BM, BN, [&](T::Var i, T::Var j) {\n";
    o << "        raw(i, j) = T::cast(" << d << ", T::exp(" << raw_x << " - m(i)) * s(i));\n      });\n";
    o << "      T::" << (c.window ? "copy_window" : "copy") << "(raw, Y(bx * BM, 0));\n";
    o << "    });\n  });\n";
    return;
  }
  if (c.variant == 2) {
    o << "      auto raw = T::alloc_fragment({BM, BN}, " << d << ");\n";
    o << "      auto x = T::alloc_fragment({BM, BN}, T::f32);\n";
    for (const char* v : {"m", "s", "cm", "cs"})
      o << "      auto " << v << " = T::alloc_fragment({BM}, T::f32);\n";
    const int vec = 16 / dtype_bytes(c.dtype);
    o << "      const Expr col0 = "
      << (c.window ? "-((T::cast(T::i64, bx * BM) * N) % " + std::to_string(vec) + ")" : std::string("Expr(0)"))
      << ";\n";
    o << "      const Expr chunks = T::ceildiv(N" << (c.window ? " + " + std::to_string(vec - 1) : std::string())
      << ", BN);\n";
    o << "      T::fill(m, -T::infinity(T::f32));\n      T::clear(s);\n";
    o << "      T::copy_padded(X(bx * BM, col0), raw, -T::infinity(" << d << "));\n";
    o << "      T::Serial(chunks, [&](T::Var k) {\n";
    o << "        T::Parallel(BM, BN, [&](T::Var i, T::Var j) { x(i, j) = " << raw_x << "; });\n";
    o << "        T::copy_padded(X(bx * BM, col0 + ((k + 1) % chunks) * BN), raw, -T::infinity(" << d << "));\n";
    o << "        T::reduce_max(x, cm, 1);\n";
    o << "        T::Parallel(BM, [&](T::Var i) { cm(i) = T::max(cm(i), m(i)); });\n";
    o << "        T::Parallel(BM, BN, [&](T::Var i, T::Var j) { x(i, j) = T::exp(x(i, j) - cm(i)); });\n";
    o << "        T::reduce_sum(x, cs, 1);\n";
    o << "        T::Parallel(BM, [&](T::Var i) {\n";
    o << "          s(i) = s(i) * T::select(m(i) == cm(i), 1.0f, T::exp(m(i) - cm(i))) + cs(i);\n";
    o << "          m(i) = cm(i);\n        });\n      });\n";
    o << "      T::Parallel(BM, [&](T::Var i) { s(i) = 1.0f / s(i); });\n";
    o << "      T::Serial(chunks, [&](T::Var k) {\n";
    o << "        T::Parallel(BM, BN, [&](T::Var i, T::Var j) { x(i, j) = T::exp(" << raw_x
      << " - m(i)) * s(i); });\n";
    o << "        T::copy_padded(X(bx * BM, col0 + (k + 1) * BN), raw, -T::infinity(" << d << "));\n";
    o << "        T::copy(x, Y(bx * BM, col0 + k * BN));\n      });\n";
    o << "    });\n  });\n";
    return;
  }
  o << "      auto x = T::alloc_fragment({BM, BN}, T::f32);\n";
  o << "      auto y = T::alloc_fragment({BM, BN}, " << dt(c.out_dtype) << ");\n";
  o << "      auto m = T::alloc_fragment({BM}, T::f32);\n";
  o << "      auto s = T::alloc_fragment({BM}, T::f32);\n";
  if (c.window) {
    o << "      T::copy_window(X(bx * BM, 0), x, -T::infinity(T::f32));\n";
    o << "      T::Parallel(BM, BN, [&](T::Var i, T::Var j) { x(i, j) = x(i, j) * " << num(c.scale) << "; });\n";
  } else {
    o << "      T::copy(X(bx * BM, 0), x);\n";
    o << "      T::Parallel(BM, BN, [&](T::Var i, T::Var j) {\n";
    o << "        x(i, j) = T::select(j < N, x(i, j) * " << num(c.scale) << ", -T::infinity(T::f32));\n";
    o << "      });\n";
  }
  o << "      T::reduce_max(x, m, 1);\n";
  o << "      T::Parallel(BM, BN, [&](T::Var i, T::Var j) { x(i, j) = T::exp(x(i, j) - m(i)); });\n";
  o << "      T::reduce_sum(x, s, 1);\n";
  o << "      T::Parallel(BM, BN, [&](T::Var i, T::Var j) { y(i, j) = T::cast(" << dt(c.out_dtype)
    << ", x(i, j) / s(i)); });\n";
  o << "      T::" << (c.window ? "copy_window" : "copy") << "(y, Y(bx * BM, 0));\n";
  o << "    });\n  });\n";
}

void attention(std::ostream& o, const FuzzCase& c) {
  const std::string d = dt(c.dtype), scale = num(c.scale);
  o << "  const int M = " << c.M << ", N = " << c.N << ", D = " << c.K << ", BM = " << c.BM
    << ", BN = " << c.BN << ";\n";
  o << "  auto Q = f.tensor(\"Q\", {M, D}, " << d << ");\n";
  o << "  auto K = f.tensor(\"K\", {N, D}, " << d << ");\n";
  o << "  auto V = f.tensor(\"V\", {N, D}, " << d << ");\n";
  o << "  auto O = f.tensor(\"O\", {M, D}, T::f32);\n";
  o << "  f.body([&] {\n";
  o << "    T::Kernel(T::ceildiv(M, BM), " << c.threads << ", [&](T::Var bx) {\n";
  o << "      auto Q_s = T::alloc_shared({BM, D}, " << d << ");\n";
  o << "      auto K_s = T::alloc_shared({BN, D}, " << d << ");\n";
  o << "      auto V_s = T::alloc_shared({BN, D}, " << d << ");\n";
  o << "      auto S = T::alloc_fragment({BM, BN}, T::f32);\n";
  o << "      auto P = T::alloc_fragment({BM, BN}, " << d << ");\n";
  o << "      auto O_f = T::alloc_fragment({BM, D}, T::f32);\n";
  if (c.online)
    for (const char* v : {"m", "m_prev", "l", "row_sum", "rescale"})
      o << "      auto " << v << " = T::alloc_fragment({BM}, T::f32);\n";
  o << "      T::copy(Q(bx * BM, 0), Q_s);\n";
  o << "      T::clear(O_f);\n";
  if (c.online) o << "      T::fill(m, -T::infinity(T::f32));\n      T::clear(l);\n";
  // skip_masked: the key blocks past the query block's last row are not visited (Unroll: all).
  const std::string blocks =
      c.skip_masked ? "T::min(T::ceildiv(N, BN), T::ceildiv((bx + 1) * BM, BN))" : "T::ceildiv(N, BN)";
  if (c.stages > 0)
    o << "      T::Pipelined(" << blocks << ", " << c.stages << ", [&](T::Var j) {\n";
  else if (c.stages < 0)
    o << "      T::Unroll(T::ceildiv(N, BN), [&](T::Var j) {\n";
  else
    o << "      T::Serial(" << blocks << ", [&](T::Var j) {\n";
  o << "        T::copy(K(j * BN, 0), K_s);\n";
  o << "        T::copy(V(j * BN, 0), V_s);\n";
  o << "        T::clear(S);\n";
  o << "        T::gemm(Q_s, K_s, S, false, true);\n";
  if (!c.online) {
    if (c.p_via_copy)
      o << "        T::Parallel(BM, BN, [&](T::Var r, T::Var q) { S(r, q) = S(r, q) * " << scale
        << "; });\n        T::copy(S, P);\n";
    else
      o << "        T::Parallel(BM, BN, [&](T::Var r, T::Var q) { P(r, q) = T::cast(" << d << ", S(r, q) * "
        << scale << "); });\n";
  } else {
    o << "        T::Parallel(BM, BN, [&](T::Var r, T::Var q) {\n";
    o << "          Expr keep = j * BN + q < N;\n";
    if (c.causal) o << "          keep = keep && j * BN + q <= bx * BM + r;\n";
    o << "          S(r, q) = T::select(keep, S(r, q) * " << scale << ", -T::infinity(T::f32));\n";
    o << "        });\n";
    o << "        T::copy(m, m_prev);\n";
    o << "        T::reduce_max(S, m, 1, /*clear=*/false);\n";
    o << "        T::Parallel(BM, [&](T::Var r) { rescale(r) = T::exp(m_prev(r) - m(r)); });\n";
    o << "        T::Parallel(BM, BN, [&](T::Var r, T::Var q) { S(r, q) = T::exp(S(r, q) - m(r)); });\n";
    o << "        T::reduce_sum(S, row_sum, 1);\n";
    o << "        T::Parallel(BM, [&](T::Var r) { l(r) = l(r) * rescale(r) + row_sum(r); });\n";
    o << "        T::Parallel(BM, D, [&](T::Var r, T::Var d) { O_f(r, d) = O_f(r, d) * rescale(r); });\n";
    if (c.p_via_copy)
      o << "        T::copy(S, P);\n";
    else
      o << "        T::Parallel(BM, BN, [&](T::Var r, T::Var q) { P(r, q) = T::cast(" << d
        << ", S(r, q)); });\n";
  }
  o << "        T::gemm(P, V_s, O_f);\n";
  o << "      });\n";
  if (c.online) o << "      T::Parallel(BM, D, [&](T::Var r, T::Var d) { O_f(r, d) = O_f(r, d) / l(r); });\n";
  o << "      T::copy(O_f, O(bx * BM, 0));\n";
  o << "    });\n  });\n";
}

}  // namespace

std::string cpp_reproducer(const FuzzCase& c) {
  std::ostringstream o;
  o << "// A Tessel program found by tessel_fuzz (tests/fuzz; docs/fuzzing.md). The case:\n";
  std::istringstream lines(c.to_text());
  for (std::string line; std::getline(lines, line);) o << "//   " << line << "\n";
  o << "// Build against tessel::tessel; runs the program on the interpreter (inputs from the case's\n"
       "// seed, outputs NaN first) and compiles it for sm_80 and sm_90a. The float64 values it\n"
       "// should match are what `tessel_fuzz --replay` computes for the case.\n";
  o << "#include <tessel/tessel.hpp>\n#include <tessel/interp/Interpreter.hpp>\n\n#include <cmath>\n#include "
       "<cstdio>\n#include <limits>\n\nnamespace T = tessel;\nusing tessel::Expr;\n\n";
  o << "T::PrimFunc build() {\n";
  o << "  T::PrimFunc f(\"fuzz_" << family_name(c.family) << "\");\n";
  switch (c.family) {
    case Family::Gemm:
      gemm(o, c);
      break;
    case Family::Tile:
      tile(o, c);
      break;
    case Family::Softmax:
      softmax(o, c);
      break;
    case Family::Attention:
      attention(o, c);
      break;
  }
  o << "  return f;\n}\n\n";
  o << "int main() {\n";
  o << "  T::PrimFunc f = build();\n";
  o << "  std::printf(\"%s\\n\", f.script().c_str());\n";
  o << "  std::vector<T::interp::HostTensor> args;\n";
  std::uint64_t k = 0;
  for (const Param& p : parameters(c)) {
    std::string shape = "{";
    for (size_t i = 0; i < p.shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(p.shape[i]);
    shape += "}";
    if (p.output)
      o << "  args.push_back(T::interp::HostTensor::full(" << dt(p.dtype) << ", " << shape
        << ", std::numeric_limits<double>::quiet_NaN()));  // " << p.name << "\n";
    else
      o << "  args.push_back(T::interp::HostTensor::random(" << dt(p.dtype) << ", " << shape << ", "
        << c.seed * 7919 + ++k << "ull));  // " << p.name << "\n";
  }
  o << "  std::vector<T::interp::HostTensor*> ptrs;\n  for (auto& a : args) ptrs.push_back(&a);\n";
  o << "  T::interp::interpret(f.ir(), ptrs);\n";
  o << "  for (const auto& a : args) {\n    double sum = 0;\n    for (double v : a.to_values()) sum += v;\n"
       "    std::printf(\"%s: sum %.9g\\n\", a.describe().c_str(), sum);\n  }\n";
  std::string outs;
  for (int i : output_indices(c)) outs += (outs.empty() ? "" : ", ") + std::to_string(i);
  o << "  for (const char* arch : {\"sm_80\", \"sm_90a\"}) {\n";
  o << "    T::JitOptions o;\n    o.out_idx = {" << outs << "};\n    o.arch = arch;\n";
  o << "    T::JitKernel k = T::jit(f, o);\n";
  o << "    std::printf(\"%s: compiled, %d registers\\n\", arch, k.resources().registers);\n  }\n";
  o << "  return 0;\n}\n";
  return o.str();
}

}  // namespace tessel::fuzz
