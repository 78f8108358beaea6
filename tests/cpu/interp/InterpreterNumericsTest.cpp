// The interpreter's arithmetic: f16/bf16 rounding on every store (ties to even, subnormals,
// overflow to infinity, NaN), 16-bit arithmetic, integer wrap and division, expressions of
// every kind, reductions and a softmax built from them.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "InterpTestUtil.hpp"
#include "Lower.hpp"
#include "codegen/CodegenCuda.hpp"
#include "tessel/interp/Interpreter.hpp"
#include "tessel/ir/IR.hpp"

namespace tessel::interp {
namespace {

namespace T = tessel;
using test::fresh_seed;

std::uint16_t bits16(const HostTensor& t, size_t i) {
  std::uint16_t b;
  std::memcpy(&b, t.bytes.data() + 2 * i, 2);
  return b;
}

struct RoundingCase {
  double value;
  std::uint16_t f16, bf16;
};

// Expected patterns worked out by hand from IEEE binary16 / bfloat16.
const RoundingCase kCases[] = {
    {1.0, 0x3C00, 0x3F80},
    {1.0 + 0x1p-11, 0x3C00, 0x3F80},      // f16 tie -> even (down); bf16 far below half an ulp
    {1.0 + 3 * 0x1p-11, 0x3C02, 0x3F80},  // f16 tie between 0x3C01 and 0x3C02 -> even (up)
    {1.0 + 0x1p-8, 0x3C04, 0x3F80},       // bf16 tie -> even (down)
    {1.0 + 3 * 0x1p-8, 0x3C0C, 0x3F82},   // bf16 tie -> even (up)
    {0x1p-24, 0x0001, 0x3380},            // smallest f16 subnormal
    {0x1p-25, 0x0000, 0x3300},            // f16: exactly half the smallest subnormal -> 0
    {3 * 0x1p-25, 0x0002, 0x33C0},        // f16: 1.5 ulp -> tie -> 2 ulp
    {0x1p-14 - 0x1p-24, 0x03FF, 0x3880},  // largest f16 subnormal (bf16 rounds up)
    {65504.0, 0x7BFF, 0x4780},            // largest f16
    {65519.0, 0x7BFF, 0x4780},            // just under the f16 overflow threshold
    {65520.0, 0x7C00, 0x4780},            // f16 overflow threshold -> inf
    {-1e6, 0xFC00, 0xC974},               // f16 -inf; bf16 -999424
    {static_cast<double>(std::numeric_limits<float>::max()), 0x7C00, 0x7F80},  // bf16 overflow -> inf
    {0x1p-134, 0x0000, 0x0000},                                                // bf16 subnormal tie -> 0
    {3 * 0x1p-134, 0x0000, 0x0002},  // bf16 subnormal tie -> even (up)
    {-0.0, 0x8000, 0x8000},
    {std::numeric_limits<double>::infinity(), 0x7C00, 0x7F80},
};

// Out16[i] = In[i] and OutB[i] = In[i] through a Parallel store (a cast on the way), and the same
// through copies via a 16-bit fragment.
PrimFunc rounding_program(int n) {
  T::PrimFunc f("rounding");
  auto In = f.tensor("In", {n}, T::f32);
  auto S16 = f.tensor("S16", {n}, T::f16);
  auto SB = f.tensor("SB", {n}, T::bf16);
  auto C16 = f.tensor("C16", {n}, T::f16);
  auto CB = f.tensor("CB", {n}, T::bf16);
  f.body([&] {
    T::Kernel(1, 128, [&](T::Var) {
      T::Parallel(n, [&](T::Var i) {
        S16.at({i}) = In(i);
        SB.at({i}) = In(i);
      });
      auto h = T::alloc_fragment({n}, T::f16);
      auto b = T::alloc_fragment({n}, T::bf16);
      T::copy(In, h);
      T::copy(In, b);
      T::copy(h, C16);
      T::copy(b, CB);
    });
  });
  return f;
}

TEST(InterpreterRounding, StoresAndCopiesRoundToNearestEven) {
  const int n = static_cast<int>(std::size(kCases)) + 1;
  std::vector<double> values;
  for (const auto& c : kCases) values.push_back(c.value);
  values.push_back(std::numeric_limits<double>::quiet_NaN());
  HostTensor in = HostTensor::from_values(DType::f32, {n}, values);
  auto out = run_on_cpu(rounding_program(n), {in}, {1, 2, 3, 4});
  for (size_t i = 0; i < std::size(kCases); ++i) {
    SCOPED_TRACE("value " + std::to_string(kCases[i].value) + " (case " + std::to_string(i) + ")");
    EXPECT_EQ(bits16(out[0], i), kCases[i].f16) << "store f16";
    EXPECT_EQ(bits16(out[1], i), kCases[i].bf16) << "store bf16";
    EXPECT_EQ(bits16(out[2], i), kCases[i].f16) << "copy f16";
    EXPECT_EQ(bits16(out[3], i), kCases[i].bf16) << "copy bf16";
  }
  const size_t nan = std::size(kCases);
  for (const auto& o : out) EXPECT_TRUE(std::isnan(o.get(static_cast<std::int64_t>(nan)))) << o.describe();
}

TEST(InterpreterRounding, F64RoundsOnceNotTwice) {
  // 1 + 2^-11 + 2^-40 is above the f16 tie: the answer is 1 + 2^-10. Rounding to f32 first would
  // land on the tie and then go to even, 1.0.
  T::PrimFunc f("narrow");
  auto In = f.tensor("In", {2}, T::f64);
  auto Out = f.tensor("Out", {2}, T::f16);
  auto OutB = f.tensor("OutB", {2}, T::bf16);
  f.body([&] {
    T::Kernel(1, 32, [&](T::Var) {
      T::Parallel(2, [&](T::Var i) {
        Out.at({i}) = In(i);
        OutB.at({i}) = In(i);
      });
    });
  });
  HostTensor in = HostTensor::from_values(DType::f64, {2}, {1.0 + 0x1p-11 + 0x1p-40, 1.0 + 0x1p-8 + 0x1p-40});
  auto out = run_on_cpu(f, {in}, {1, 2});
  EXPECT_EQ(bits16(out[0], 0), 0x3C01);
  EXPECT_EQ(bits16(out[1], 1), 0x3F81);
}

TEST(InterpreterRounding, SixteenBitArithmeticRoundsEachOperation) {
  T::PrimFunc f("half_math");
  auto X = f.tensor("X", {4}, T::f16);
  auto Y = f.tensor("Y", {4}, T::f16);
  auto Sum = f.tensor("Sum", {4}, T::f16);
  auto Wide = f.tensor("Wide", {4}, T::f32);
  f.body([&] {
    T::Kernel(1, 32, [&](T::Var) {
      T::Parallel(4, [&](T::Var i) {
        Sum.at({i}) = X(i) + Y(i);  // computed in f16
        Wide.at({i}) = T::cast(T::f32, X(i)) + T::cast(T::f32, Y(i)) - T::cast(T::f32, X(i));  // in f32
      });
    });
  });
  HostTensor x = HostTensor::from_values(DType::f16, {4}, {2048, 2048, 1, 65504});
  HostTensor y = HostTensor::from_values(DType::f16, {4}, {1, 3, 0x1p-11, 65504});
  auto out = run_on_cpu(f, {x, y}, {2, 3});
  EXPECT_EQ(out[0].to_values(),
            (std::vector<double>{2048, 2052, 1, std::numeric_limits<double>::infinity()}));
  EXPECT_EQ(out[1].to_values(), (std::vector<double>{1, 3, 0x1p-11, 65504}));
}

TEST(InterpreterIntegers, WrapTruncateAndFloorLikeTheGpu) {
  // Out[k] for a few expressions of In[0] = -7, In[1] = 2, In[2] = 2147483647, In[3] = 65536.
  T::PrimFunc f("ints");
  auto In = f.tensor("In", {4}, T::i32);
  auto F = f.tensor("F", {4}, T::f32);
  auto Out = f.tensor("Out", {20}, T::i32);
  auto Half = f.tensor("Half", {1}, T::f16);
  f.body([&] {
    T::Kernel(1, 32, [&](T::Var) {
      T::Serial(1, [&](T::Var) {
        Expr a = In(0), b = In(1), big = In(2), s = In(3);
        std::vector<Expr> e = {a / b,
                               a % b,
                               ir::make_binary(ir::BinaryOp::FloorDiv, a, b),
                               ir::make_binary(ir::BinaryOp::FloorMod, a, b),
                               -a / -b,
                               ir::make_binary(ir::BinaryOp::FloorMod, -a, -b),
                               big + 1,
                               s * s,
                               T::min(a, b),
                               T::max(a, b),
                               T::select(a < b, 10, 20),
                               T::cast(T::i32, a < b && b < a),
                               T::cast(T::i32, a < b || b < a),
                               T::cast(T::i32, !(a < b)),
                               T::abs(a),
                               T::cast(T::i32, F(0)),
                               T::cast(T::i32, F(1)),
                               T::cast(T::i32, F(2)),
                               T::cast(T::i32, F(3)),
                               T::cast(T::i32, T::cast(T::i8, big))};
        for (size_t k = 0; k < e.size(); ++k) Out.at({static_cast<int>(k)}) = e[k];
        Half.at({0}) = T::cast(T::f16, s / 32 + 1);  // 2049 -> 2048 in f16
      });
    });
  });
  HostTensor in = HostTensor::from_values(DType::i32, {4}, {-7, 2, 2147483647, 65536});
  HostTensor fl = HostTensor::from_values(DType::f32, {4}, {2.9, -2.9, 1e10, std::nan("")});
  auto out = run_on_cpu(f, {in, fl}, {2, 3});
  const std::vector<double> want = {-3, -1, -4, 1, -3, -1, -2147483648.0, 0, -7, 2, 10,
                                    0,  1,  0,  7, 2,  -2, 2147483647,    0, -1};
  EXPECT_EQ(out[0].to_values(), want);
  EXPECT_EQ(out[1].get(0), 2048.0);
}

// Hand-built IR for what the frontend has no spelling for yet: let, if/else, float floor ops.
TEST(InterpreterStatements, LetIfElseAndFloatFloorOps) {
  using namespace ir;
  std::source_location here = std::source_location::current();
  ir::Buffer in = ir::Buffer::make("In", {make_int(4)}, DType::f32, Scope::Global, here);
  ir::Buffer out = ir::Buffer::make("Out", {make_int(4)}, DType::f32, Scope::Global, here);
  Var bx("bx"), i("i"), t("t", DType::f32);
  Expr x = make_load(in, {i});
  Stmt body = make_let(
      t, make_binary(BinaryOp::FloorMod, x, make_float(2.0)),
      make_if(make_binary(BinaryOp::LT, x, make_float(0.0)),
              make_store(out, {i},
                         make_binary(BinaryOp::Sub, t, make_binary(BinaryOp::FloorDiv, x, make_float(2.0))),
                         here),
              make_store(out, {i}, make_call("sqrt", {x}, DType::f32), here), here),
      here);
  PrimFuncNode f;
  f.name = "let_if";
  f.params = {in, out};
  f.body = make_kernel({make_int(1)}, 32, {bx},
                       make_for(i, make_int(0), make_int(4), ForKind::Serial, 0, body, here), here);
  HostTensor a = HostTensor::from_values(DType::f32, {4}, {-3.0, 4.0, -0.5, 9.0});
  HostTensor b(DType::f32, {4});
  interpret(f, {&a, &b});
  // -3: floormod 1, floordiv -2 -> 3;  -0.5: floormod 1.5, floordiv -1 -> 2.5
  EXPECT_EQ(b.to_values(), (std::vector<double>{3.0, 2.0, 2.5, 3.0}));
}

TEST(InterpreterExpressions, ShortCircuitAndSelectEvaluateOnlyWhatTheyNeed) {
  // In has 4 elements; the guarded loads at i >= 4 must not be made (nor reported).
  T::PrimFunc f("guards");
  auto In = f.tensor("In", {4}, T::f32);
  auto Out = f.tensor("Out", {8}, T::f32);
  f.body([&] {
    T::Kernel(1, 32, [&](T::Var) {
      T::Parallel(8, [&](T::Var i) {
        Out.at({i}) = T::select(i < 4, In(i), -1.0);
        T::If(i < 4 && In(i) > 1.5f, [&] { Out.at({i}) = T::exp(In(i) * 0.0f) + T::log2(In(i)); });
      });
    });
  });
  HostTensor in = HostTensor::from_values(DType::f32, {4}, {1, 2, 4, 8});
  auto out = run_on_cpu(f, {in}, {-1});
  EXPECT_EQ(out[0].to_values(), (std::vector<double>{1, 2, 3, 4, -1, -1, -1, -1}));
}

// fast_exp2 means ex2.approx.ftz.f32: 2^x, with results below 2^-126 (and denormal inputs,
// as 0) flushed; infinities and NaN as exp2. Codegen prints the device function that issues it;
// an f64 argument is a user error naming the op.
TEST(InterpreterExpressions, FastExp2FlushesWhatTheHardwareFlushes) {
  T::PrimFunc f("fast_exp2");
  auto In = f.tensor("In", {10}, T::f32);
  auto Out = f.tensor("Out", {10}, T::f32);
  f.body([&] {
    T::Kernel(1, 32, [&](T::Var) { T::Parallel(10, [&](T::Var i) { Out.at({i}) = T::fast_exp2(In(i)); }); });
  });
  const double inf = std::numeric_limits<double>::infinity();
  const double denormal_in = std::ldexp(1.0, -130);
  HostTensor in =
      HostTensor::from_values(DType::f32, {10}, {0.0, 3.5, -1.0, -126.0, -126.5, -130.0, -inf, inf, denormal_in, 20.0});
  auto out = run_on_cpu(f, {in}, {-1})[0].to_values();
  EXPECT_EQ(out[0], 1.0);
  EXPECT_NEAR(out[1], std::exp2(3.5), 1e-5);
  EXPECT_EQ(out[2], 0.5);
  EXPECT_EQ(out[3], std::ldexp(1.0, -126));  // the smallest normal f32 is kept
  EXPECT_EQ(out[4], 0.0);                    // a denormal result is flushed
  EXPECT_EQ(out[5], 0.0);
  EXPECT_EQ(out[6], 0.0);
  EXPECT_EQ(out[7], inf);
  EXPECT_EQ(out[8], 1.0);  // a denormal input counts as 0
  EXPECT_EQ(out[9], 1048576.0);
  const std::string cuda = T::codegen::generate_cuda(T::lower(f.ir(), T::passes::Target{"sm_90a", 90, 232448, 0}));
  EXPECT_NE(cuda.find("tessel::fast_exp2("), std::string::npos) << cuda;
  EXPECT_EQ(cuda.find("exp2f("), std::string::npos) << cuda;
  T::PrimFunc g("fast_exp2_f64");
  auto D = g.tensor("D", {4}, T::f64);
  try {
    g.body([&] { T::Kernel(1, 32, [&](T::Var) { T::Parallel(4, [&](T::Var i) { D.at({i}) = T::fast_exp2(D(i)); }); }); });
    ADD_FAILURE() << "fast_exp2 of an f64 value was accepted";
  } catch (const T::Error& e) {
    EXPECT_NE(std::string(e.what()).find("fast_exp2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not f64"), std::string::npos) << e.what();
  }
}

// poly_exp2 means tessel::poly_exp2 (device/tessel/types.cuh): 2^x by a degree-3 polynomial of
// the fraction, relative error below 8.6e-5 on the whole normal range, results below 2^-126 as 0
// (and -inf), x >= 128 as infinity, NaN as NaN, exact at integers; its codegen prints the device
// function (no MUFU instruction, no exp2f); an f64 argument is a user error naming the op.
TEST(InterpreterExpressions, PolyExp2IsWithinItsBoundAndKeepsFastExp2sEdges) {
  const int n = 4096 + 12;
  T::PrimFunc f("poly_exp2");
  auto In = f.tensor("In", {n}, T::f32);
  auto Out = f.tensor("Out", {n}, T::f32);
  f.body([&] {
    T::Kernel(1, 128, [&](T::Var) { T::Parallel(n, [&](T::Var i) { Out.at({i}) = T::poly_exp2(In(i)); }); });
  });
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> x = {0.0,    -0.0,    3.0,  -1.0, -126.0, -126.5,
                           -127.0, -1000.0, -inf, inf,  128.0,  std::nan("")};
  std::mt19937 rng(std::random_device{}());
  for (int i = 0; i < 4096; ++i) x.push_back(std::uniform_real_distribution<double>(-126.0, 127.99)(rng));
  auto out = run_on_cpu(f, {HostTensor::from_values(DType::f32, {n}, x)}, {-1})[0].to_values();
  EXPECT_EQ(out[0], 1.0);
  EXPECT_EQ(out[1], 1.0);
  EXPECT_EQ(out[2], 8.0);  // p(0) = 1: integers are exact
  EXPECT_EQ(out[3], 0.5);
  EXPECT_EQ(out[4], std::ldexp(1.0, -126));
  for (int i = 5; i <= 8; ++i)
    EXPECT_EQ(out[static_cast<size_t>(i)], 0.0) << "x = " << x[static_cast<size_t>(i)];
  EXPECT_EQ(out[9], inf);
  EXPECT_EQ(out[10], inf);
  EXPECT_TRUE(std::isnan(out[11]));
  double worst = 0;
  for (size_t i = 12; i < x.size(); ++i) {
    const double want = std::exp2(static_cast<double>(static_cast<float>(x[i])));
    worst = std::max(worst, std::abs(out[i] / want - 1));
  }
  EXPECT_LT(worst, 8.6e-5);
  EXPECT_GT(worst, 1e-6) << "as fine as f32: this is not the polynomial";
  const std::string cuda =
      T::codegen::generate_cuda(T::lower(f.ir(), T::passes::Target{"sm_90a", 90, 232448, 0}));
  EXPECT_NE(cuda.find("tessel::poly_exp2("), std::string::npos) << cuda;
  EXPECT_EQ(cuda.find("exp2f("), std::string::npos) << cuda;
  T::PrimFunc g("poly_exp2_f64");
  auto D = g.tensor("D", {4}, T::f64);
  try {
    g.body([&] {
      T::Kernel(1, 32, [&](T::Var) { T::Parallel(4, [&](T::Var i) { D.at({i}) = T::poly_exp2(D(i)); }); });
    });
    ADD_FAILURE() << "poly_exp2 of an f64 value was accepted";
  } catch (const T::Error& e) {
    EXPECT_NE(std::string(e.what()).find("poly_exp2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not f64"), std::string::npos) << e.what();
  }
}

// Row max / row sum / column sum / a sum onto old values, and a softmax from them.
PrimFunc reduce_program(int M, int N, int bM) {
  T::PrimFunc f("reduce");
  auto X = f.tensor("X", {M, N}, T::f16);
  auto RowMax = f.tensor("RowMax", {M}, T::f32);
  auto RowMin = f.tensor("RowMin", {M}, T::f32);
  auto RowSumPlusOne = f.tensor("RowSumPlusOne", {M}, T::f32);
  auto ColSum = f.tensor("ColSum", {T::ceildiv(M, bM), N}, T::f32);
  auto Softmax = f.tensor("Softmax", {M, N}, T::f16);
  f.body([&] {
    T::Kernel(T::ceildiv(M, bM), 128, [&](T::Var bx) {
      auto x = T::alloc_fragment({bM, N}, T::f32);
      auto mx = T::alloc_fragment({bM}, T::f32);
      auto mn = T::alloc_fragment({bM}, T::f32);
      auto sum = T::alloc_fragment({bM}, T::f32);
      auto col = T::alloc_fragment({1, N}, T::f32);
      auto y = T::alloc_fragment({bM, N}, T::f16);
      T::copy(X(bx * bM, 0), x);
      T::reduce_max(x, mx, 1);
      T::reduce_min(x, mn, 1);
      T::reduce_sum(x, col, 0);
      T::fill(sum, 1.0);
      T::reduce_sum(x, sum, 1, /*clear=*/false);
      T::copy(mx, RowMax(bx * bM));
      T::copy(mn, RowMin(bx * bM));
      T::copy(sum, RowSumPlusOne(bx * bM));
      T::copy(col, ColSum(bx, 0));
      T::Parallel(bM, N, [&](T::Var i, T::Var j) {
        x.at({i, j}) = T::exp2((x(i, j) - mx(i)) * 1.4426950408889634);
      });
      T::reduce_sum(x, sum, 1);
      T::Parallel(bM, N, [&](T::Var i, T::Var j) { y.at({i, j}) = x(i, j) / sum(i); });
      T::copy(y, Softmax(bx * bM, 0));
    });
  });
  return f;
}

TEST(InterpreterReduce, MaxMinSumAndSoftmaxMatchFloat64) {
  const int M = 50, N = 24, bM = 16;  // the last block is partial: masked reads give zeros
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  HostTensor X = HostTensor::random(DType::f16, {M, N}, seed, -4.0, 4.0);
  auto out = run_on_cpu(reduce_program(M, N, bM), {X}, {1, 2, 3, 4, 5});
  const std::vector<double> x = X.to_values();
  std::vector<double> rmax(M), rmin(M), rsum(M), csum(static_cast<size_t>((M + bM - 1) / bM * N), 0.0),
      soft(M * N);
  for (int i = 0; i < M; ++i) {
    double mx = -INFINITY, mn = INFINITY, s = 1, e = 0;
    for (int j = 0; j < N; ++j) {
      const double v = x[static_cast<size_t>(i * N + j)];
      mx = std::max(mx, v), mn = std::min(mn, v), s += v;
      csum[static_cast<size_t>(i / bM * N + j)] += v;
    }
    for (int j = 0; j < N; ++j) e += std::exp(x[static_cast<size_t>(i * N + j)] - mx);
    for (int j = 0; j < N; ++j)
      soft[static_cast<size_t>(i * N + j)] = std::exp(x[static_cast<size_t>(i * N + j)] - mx) / e;
    rmax[static_cast<size_t>(i)] = mx, rmin[static_cast<size_t>(i)] = mn, rsum[static_cast<size_t>(i)] = s;
  }
  EXPECT_EQ(out[0].to_values(), rmax);  // max and min are exact
  EXPECT_EQ(out[1].to_values(), rmin);
  EXPECT_LE(relative_frobenius_error(out[2].to_values(), rsum), 1e-6);
  EXPECT_LE(relative_frobenius_error(out[3].to_values(), csum), 1e-6);
  EXPECT_LE(relative_frobenius_error(out[4].to_values(), soft), 1e-3);
}

TEST(InterpreterScratch, FragmentsArePoisonedPerBlock) {
  // A fragment read before it is written is NaN, in every block: nothing leaks between blocks.
  T::PrimFunc f("poison");
  auto Out = f.tensor("Out", {2, 4}, T::f32);
  f.body([&] {
    T::Kernel(2, 32, [&](T::Var bx) {
      auto frag = T::alloc_fragment({4}, T::f32);
      T::Parallel(4, [&](T::Var i) { Out.at({bx, i}) = frag(i); });
      T::fill(frag, 1.0);
    });
  });
  HostTensor out(DType::f32, {2, 4});  // zeros: a NaN can only come from the fragment
  interpret(f.ir(), {&out});
  for (double v : out.to_values()) EXPECT_TRUE(std::isnan(v));
}

}  // namespace
}  // namespace tessel::interp
