// Issue 18's smaller misuses, each a CompileError with its text and the line to blame: division
// by a constant zero, non-positive loop and tile extents, a tile size <= 0 in ceildiv, JitOptions
// out of range (arch, shared-memory cap, out_idx named twice), a grid past CUDA's limits.
#include <gtest/gtest.h>

#include "support/LoweringSupport.hpp"
#include "tessel/tessel.hpp"

namespace T = tessel;

namespace {

using tessel::test::compile_error_of;
using tessel::test::sm90;

// The line an error must name: set to __LINE__ + 1 right before the statement.
int marked = 0;

std::string line(int n) {
  return "MisuseErrorsTest.cpp:" + std::to_string(n) + ": ";
}

// A 1-D program: copy a 1024-element tile into a fragment, `body` in a Parallel over it, copy back.
T::PrimFunc one_d(const std::function<void(const T::Buffer&, T::Var)>& body) {
  T::PrimFunc f("one_d");
  auto X = f.tensor("X", {4096}, T::f32);
  auto Y = f.tensor("Y", {4096}, T::f32);
  f.body([&] {
    T::Kernel(4, 128, [&](T::Var bx) {
      auto frag = T::alloc_fragment({1024}, T::f32);
      T::copy(X(bx * 1024), frag);
      T::Parallel(1024, [&](T::Var i) { body(frag, i); });
      T::copy(frag, Y(bx * 1024));
    });
  });
  return f;
}

TEST(Misuse, IntegerDivisionAndRemainderByConstantZeroAtTheAuthorsLine) {
  auto f = one_d([](const T::Buffer& frag, T::Var i) {
    marked = __LINE__ + 1;
    frag(i) = frag(i) + T::cast(T::f32, i / 0);
  });
  std::string msg = compile_error_of([&] { tessel::lower(f.ir(), sm90()); });
  EXPECT_NE(msg.find(line(marked) + "error in expression: integer division by zero in (i / 0); the divisor "
                                    "must not be 0"),
            std::string::npos)
      << msg;

  auto g = one_d([](const T::Buffer& frag, T::Var i) {
    marked = __LINE__ + 1;
    frag(i) = T::cast(T::f32, (i + 3) % 0);
  });
  msg = compile_error_of([&] { tessel::lower(g.ir(), sm90()); });
  EXPECT_NE(msg.find(line(marked) + "error in expression: integer remainder by zero in ((i + 3) % 0)"),
            std::string::npos)
      << msg;

  // Float division by zero is IEEE arithmetic (an infinity), not an error.
  auto h = one_d([](const T::Buffer& frag, T::Var i) { frag(i) = frag(i) / 0.0f; });
  EXPECT_EQ(compile_error_of([&] { tessel::lower(h.ir(), sm90()); }), "<no error>");
}

TEST(Misuse, NonPositiveConstantExtentsAtTheAuthorsLine) {
  auto parallel = [](int extent) {
    return compile_error_of([&] {
      T::PrimFunc f("p");
      f.body([&] {
        T::Kernel(1, 128, [&](T::Var) {
          auto frag = T::alloc_fragment({64}, T::f32);
          marked = __LINE__ + 1;
          T::Parallel(extent, [&](T::Var i) { frag(i) = 0.0f; });
        });
      });
    });
  };
  EXPECT_NE(parallel(-8).find(line(marked) +
                              "error in Parallel: extent 0 is -8; a Parallel extent is the size of a "
                              "tile dimension and must be >= 1"),
            std::string::npos)
      << parallel(-8);
  EXPECT_NE(parallel(0).find("extent 0 is 0; a Parallel extent"), std::string::npos) << parallel(0);

  const std::string serial = compile_error_of([&] {
    T::PrimFunc f("s");
    f.body([&] {
      T::Kernel(1, 128, [&](T::Var) {
        marked = __LINE__ + 1;
        T::Serial(-3, [&](T::Var) {});
      });
    });
  });
  EXPECT_NE(serial.find(line(marked) + "error in Serial: the extent is -3; a loop's extent must be >= 0"),
            std::string::npos)
      << serial;
}

TEST(Misuse, ANegativeTileSizeIsReportedAtCeildivNotAsAGridOfZero) {
  const int block_M = -128;
  const std::string msg = compile_error_of([&] {
    T::PrimFunc f("neg_tile");
    f.body([&] {
      marked = __LINE__ + 1;
      T::Kernel(T::ceildiv(128, block_M), 128, [&](T::Var) {});
    });
  });
  EXPECT_NE(
      msg.find(
          line(marked) +
          "error in ceildiv: ceildiv(128, -128): the divisor is -128; it is a tile size and must be >= 1"),
      std::string::npos)
      << msg;
}

T::PrimFunc copy_program(int params) {
  T::PrimFunc f("copy3");
  std::vector<T::Buffer> t;
  for (int i = 0; i < params; ++i) t.push_back(f.tensor("T" + std::to_string(i), {1024}, T::f32));
  f.body([&] {
    T::Kernel(1, 128, [&](T::Var) {
      auto frag = T::alloc_fragment({1024}, T::f32);
      T::copy(t[0](0), frag);
      T::copy(frag, t.back()(0));
    });
  });
  return f;
}

TEST(Misuse, JitOptionsOutOfRangeAtTheJitCall) {
  const T::PrimFunc f = copy_program(3);
  const int jit_line = __LINE__ + 1;
  auto jit_error = [&](const T::JitOptions& o) { return compile_error_of([&] { T::jit(f, o); }); };

  T::JitOptions o;
  o.arch = "sm_80";
  o.smem_cap_bytes = -1;
  EXPECT_NE(jit_error(o).find(
                line(jit_line) +
                "error in jit: JitOptions::smem_cap_bytes is -1; legal: 0 (the GPU's opt-in cap, else "
                "the target's) or 1 to 16777216 bytes"),
            std::string::npos)
      << jit_error(o);
  o.smem_cap_bytes = 1 << 30;
  EXPECT_NE(jit_error(o).find("JitOptions::smem_cap_bytes is 1073741824; legal: "), std::string::npos)
      << jit_error(o);

  o.smem_cap_bytes = 0;
  o.compile_time_limit_s = -1;
  EXPECT_NE(
      jit_error(o).find(line(jit_line) + "error in jit: JitOptions::compile_time_limit_s is -1; legal: 0 (no "
                                         "limit) or a number of seconds > 0"),
      std::string::npos)
      << jit_error(o);
  o.compile_time_limit_s = 0;
  for (int blocks : {-1, 33}) {
    o.min_blocks_per_sm = blocks;
    EXPECT_NE(jit_error(o).find(line(jit_line) + "error in jit: JitOptions::min_blocks_per_sm is " +
                                std::to_string(blocks) + "; legal: 0 (no request) or 1 to 32 blocks per SM"),
              std::string::npos)
        << jit_error(o);
  }
  o.min_blocks_per_sm = 0;
  o.out_idx = {2, -1};
  EXPECT_NE(
      jit_error(o).find(line(jit_line) +
                        "error in jit: out_idx names parameter 2 (T2) twice, as 2 and -1; each output is "
                        "allocated and returned once"),
      std::string::npos)
      << jit_error(o);
  o.out_idx = {3};
  EXPECT_NE(
      jit_error(o).find("out_idx 3 is out of range for copy3 with 3 parameters; legal: 0 to 2, or -1 to -3"),
      std::string::npos)
      << jit_error(o);

  o.out_idx = {-1};
  for (const char* arch : {"sm_75", "sm_90b", "foo"}) {
    o.arch = arch;
    const std::string msg = jit_error(o);
    EXPECT_NE(msg.find(line(jit_line) + "error in jit: JitOptions::arch '" + arch +
                       "' is not a target Tessel compiles for with NVRTC "),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("; legal: sm_80, "), std::string::npos) << msg;
  }
}

// Two gemm tiles whose warps split them differently (FullRow and FullCol) cannot meet in one
// Parallel nest; the error names both layouts.
TEST(Misuse, GemmTilesOfTwoWarpSplitsInOneNest) {
  T::PrimFunc f("two_splits");
  auto A = f.tensor("A", {64, 64}, T::f16);
  auto B = f.tensor("B", {64, 64}, T::f16);
  auto C = f.tensor("C", {64, 64}, T::f32);
  f.body([&] {
    T::Kernel(1, 128, [&](T::Var) {
      auto a = T::alloc_shared({64, 64}, T::f16);
      auto b = T::alloc_shared({64, 64}, T::f16);
      auto c1 = T::alloc_fragment({64, 64}, T::f32);
      auto c2 = T::alloc_fragment({64, 64}, T::f32);
      T::copy(A(0, 0), a);
      T::copy(B(0, 0), b);
      T::clear(c1);
      T::clear(c2);
      T::gemm(a, b, c1, false, false, T::GemmWarpPolicy::FullRow);
      T::gemm(a, b, c2, false, false, T::GemmWarpPolicy::FullCol);
      T::Parallel(64, 64, [&](T::Var i, T::Var j) { c1(i, j) = c1(i, j) + c2(i, j); });
      T::copy(c1, C(0, 0));
    });
  });
  const std::string e = compile_error_of([&] { T::lower(f.ir(), tessel::test::sm80()); });
  EXPECT_NE(
      e.find("error in Parallel: fragments fragment_2 and fragment_3 are gemm tiles whose warps split them "
             "differently (gemm accumulator, warps 4x1; gemm accumulator, warps 1x4)"),
      std::string::npos)
      << e;
}

TEST(Misuse, AGridPastCudasLimitsIsRejectedBeforeCompiling) {
  auto grid_error = [](long long x, long long y) {
    return compile_error_of([&] {
      T::PrimFunc f("wide");
      f.body([&] {
        marked = __LINE__ + 1;
        T::Kernel(T::Expr(x), T::Expr(y), 128, [&](T::Var, T::Var) {
          auto frag = T::alloc_fragment({128}, T::f32);
          T::clear(frag);
        });
      });
      T::JitOptions o;
      o.arch = "sm_80";
      T::jit(f, o);
    });
  };
  const std::string x = grid_error(2147483648LL, 1);
  EXPECT_NE(
      x.find(
          line(marked) +
          "error in Kernel: the grid is 2147483648 x 1 x 1; the x extent may be at most 2147483647 and the "
          "y and z extents at most 65535 (CUDA's limits)"),
      std::string::npos)
      << x;
  EXPECT_NE(grid_error(1, 65536).find("the grid is 1 x 65536 x 1; the x extent may be at most"),
            std::string::npos);
}

}  // namespace
