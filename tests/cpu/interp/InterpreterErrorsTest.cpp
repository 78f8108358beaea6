// The interpreter as a checker: planted out-of-bounds accesses and ill-shaped tile ops are
// reported with the op, the author's line, the block and the offending indices; bad arguments
// get the call-time errors the GPU path gives.
#include <gtest/gtest.h>

#include <cmath>

#include "InterpTestUtil.hpp"
#include "tessel/interp/Interpreter.hpp"
#include "tessel/kernels/gemm/Matmul.hpp"

namespace tessel::interp {
namespace {

namespace T = tessel;
using test::runtime_error_of;

std::string at_line(int line) {
  return "InterpreterErrorsTest.cpp:" + std::to_string(line) + ": ";
}

std::string run_error(const PrimFunc& f, std::vector<HostTensor> tensors) {
  std::vector<HostTensor*> args;
  for (HostTensor& t : tensors) args.push_back(&t);
  return runtime_error_of([&] { interpret(f.ir(), args); });
}

TEST(InterpreterChecks, UnmaskedGlobalLoadPastTheEdge) {
  int line = 0;
  T::PrimFunc f("load_past_edge");
  auto A = f.tensor("A", {100, 40}, T::f16);
  auto C = f.tensor("C", {100, 40}, T::f32);
  f.body([&] {
    T::Kernel(1, 2, 128, [&](T::Var, T::Var by) {
      auto frag = T::alloc_fragment({64, 40}, T::f32);
      T::Parallel(64, 40, [&](T::Var i, T::Var j) {
        line = __LINE__ + 1;
        frag.at({i, j}) = A.at({by * 64 + i, j});  // rows 100..127 do not exist
      });
      T::copy(frag, C(by * 64, 0));
    });
  });
  const std::string msg = run_error(f, {HostTensor(T::f16, {100, 40}), HostTensor(T::f32, {100, 40})});
  EXPECT_CONTAINS(msg, at_line(line) +
                           "error in load at block (bx, by) = (0, 1): index [100, 0] is outside "
                           "global buffer A of shape [100, 40]");
}

// Shared memory starts undefined: a read of an element nothing wrote is reported (by a copy,
// an element load and a gemm), and with the check off the poison flows on as NaN.
TEST(InterpreterChecks, SharedReadBeforeAnyWrite) {
  int line = 0;
  auto program = [&](int which) {
    T::PrimFunc f("unwritten_shared");
    auto A = f.tensor("A", {32, 32}, T::f16);
    auto C = f.tensor("C", {32, 32}, T::f32);
    f.body([&] {
      T::Kernel(1, 128, [&](T::Var) {
        auto s = T::alloc_shared({32, 32}, T::f16);
        auto frag = T::alloc_fragment({32, 32}, T::f32);
        T::copy(A(0, 0), T::region(s, {0, 0}, {16, 32}));  // rows 16..31 of s are never written
        if (which == 0) {
          line = __LINE__ + 1;
          T::copy(s, frag);
        } else if (which == 1) {
          T::Parallel(32, 32, [&](T::Var i, T::Var j) {
            line = __LINE__ + 1;
            frag.at({i, j}) = s.at({i, j});
          });
        } else {
          T::clear(frag);
          line = __LINE__ + 1;
          T::gemm(s, s, frag);
        }
        T::copy(frag, C);
      });
    });
    return f;
  };
  const char* ops[] = {"copy", "load", "gemm"};
  for (int which = 0; which < 3; ++which) {
    const std::string msg = run_error(program(which), {HostTensor(T::f16, {32, 32}), HostTensor(T::f32, {32, 32})});
    EXPECT_CONTAINS(msg, at_line(line) + "error in " + ops[which] + " at block (bx) = (0): reads element [16, 0] of shared "
                                                      "buffer shared_");
    EXPECT_CONTAINS(msg, "which nothing wrote since its declaration");
  }
  // Off: no error; the unwritten rows come out as the poison (NaN).
  std::vector<HostTensor> tensors{HostTensor(T::f16, {32, 32}), HostTensor(T::f32, {32, 32})};
  std::vector<HostTensor*> args{&tensors[0], &tensors[1]};
  InterpOptions off;
  off.report_unwritten_shared_reads = false;
  interpret(program(0).ir(), args, off);
  const std::vector<double> c = tensors[1].to_values();
  EXPECT_FALSE(std::isnan(c[0]));
  EXPECT_TRUE(std::isnan(c[16 * 32]));
}

TEST(InterpreterChecks, FragmentStorePastItsShape) {
  int line = 0;
  T::PrimFunc f("fragment_overrun");
  auto Out = f.tensor("Out", {16}, T::f32);
  f.body([&] {
    T::Kernel(2, 128, [&](T::Var) {
      auto frag = T::alloc_fragment({16}, T::f32);
      T::Parallel(17, [&](T::Var i) {
        line = __LINE__ + 1;
        frag.at({i}) = 1.0;
      });
      T::copy(frag, Out);
    });
  });
  const std::string msg = run_error(f, {HostTensor(T::f32, {16})});
  EXPECT_CONTAINS(msg, at_line(line) +
                           "error in store at block (bx) = (0): index [16] is outside fragment "
                           "buffer fragment_");
  EXPECT_CONTAINS(msg, "of shape [16]");
}

TEST(InterpreterChecks, LocalStoreAtANegativeIndex) {
  int line = 0;
  T::PrimFunc f("local_underrun");
  auto Out = f.tensor("Out", {4}, T::i32);
  f.body([&] {
    T::Kernel(1, 32, [&](T::Var) {
      auto loc = T::alloc_local({4}, T::i32);
      T::Serial(4, [&](T::Var i) {
        line = __LINE__ + 1;
        loc.at({i - 1}) = i;
      });
      T::copy(loc, Out);
    });
  });
  EXPECT_CONTAINS(run_error(f, {HostTensor(T::i32, {4})}),
                  at_line(line) + "error in store at block (bx) = (0): index [-1] is outside local buffer");
}

TEST(InterpreterChecks, UnmaskedGlobalStorePastTheEdge) {
  int line = 0;
  T::PrimFunc f("store_past_edge");
  auto Out = f.tensor("Out", {10}, T::f32);
  f.body([&] {
    T::Kernel(1, 32, [&](T::Var bx) {
      T::Parallel(16, [&](T::Var i) {
        line = __LINE__ + 1;
        Out.at({bx * 16 + i}) = 0.0;
      });
    });
  });
  EXPECT_CONTAINS(run_error(f, {HostTensor(T::f32, {10})}),
                  at_line(line) +
                      "error in store at block (bx) = (0): index [10] is outside global buffer Out "
                      "of shape [10]");
}

// buf(i) = v records a location inside the frontend's header: the error names the enclosing
// statement the author wrote instead.
TEST(InterpreterChecks, StoreWrittenAsACallNamesTheAuthorsLine) {
  int line = 0;
  T::PrimFunc f("call_store");
  auto Out = f.tensor("Out", {4}, T::f32);
  f.body([&] {
    T::Kernel(1, 32, [&](T::Var) {
      line = __LINE__ + 1;
      T::Parallel(5, [&](T::Var i) { Out(i) = 1.0; });
    });
  });
  EXPECT_CONTAINS(
      run_error(f, {HostTensor(T::f32, {4})}),
      at_line(line) + "error in store at block (bx) = (0): index [4] is outside global buffer Out");
}

// A 64x32 tile of A copied into a shared tile at column 8: columns 32..39 do not exist.
TEST(InterpreterChecks, CopyOverrunningASharedTile) {
  int line = 0;
  T::PrimFunc f("shared_overrun");
  auto A = f.tensor("A", {64, 64}, T::f16);
  f.body([&] {
    T::Kernel(1, 1, 128, [&](T::Var, T::Var) {
      auto A_s = T::alloc_shared({64, 32}, T::f16);
      line = __LINE__ + 1;
      T::copy(T::region(A, {0, 0}, {64, 32}), A_s(0, 8));
    });
  });
  const std::string msg = run_error(f, {HostTensor(T::f16, {64, 64})});
  EXPECT_CONTAINS(msg, at_line(line) +
                           "error in copy at block (bx, by) = (0, 0): the destination region "
                           "shared_");
  EXPECT_CONTAINS(msg, "[0:64, 8:40] overruns shared buffer shared_");
  EXPECT_CONTAINS(msg, "of shape [64, 32]: index [0, 32] is outside it");
}

TEST(InterpreterChecks, CopyReadingPastAFragment) {
  int line = 0;
  T::PrimFunc f("fragment_read_overrun");
  auto C = f.tensor("C", {32, 8}, T::f32);
  f.body([&] {
    T::Kernel(1, 128, [&](T::Var) {
      auto frag = T::alloc_fragment({16, 8}, T::f32);
      T::clear(frag);
      line = __LINE__ + 1;
      T::copy(frag(8, 0), T::region(C, {0, 0}, {16, 8}));
    });
  });
  EXPECT_CONTAINS(run_error(f, {HostTensor(T::f32, {32, 8})}),
                  "[8:24, 0:8] overruns fragment buffer fragment_");
  EXPECT_CONTAINS(run_error(f, {HostTensor(T::f32, {32, 8})}), at_line(line) + "error in copy");
  EXPECT_CONTAINS(run_error(f, {HostTensor(T::f32, {32, 8})}), "index [16, 0] is outside it");
}

TEST(InterpreterChecks, CopyBetweenRegionsOfDifferentExtents) {
  int line = 0;
  T::PrimFunc f("extents_differ");
  auto A = f.tensor("A", {64, 64}, T::f16);
  f.body([&] {
    T::Kernel(1, 128, [&](T::Var) {
      auto A_s = T::alloc_shared({64, 32}, T::f16);
      line = __LINE__ + 1;
      T::copy(T::region(A, {0, 0}, {32, 32}), A_s);
    });
  });
  const std::string msg = run_error(f, {HostTensor(T::f16, {64, 64})});
  EXPECT_CONTAINS(msg, at_line(line) +
                           "error in copy at block (bx) = (0): the regions have different extents: "
                           "source A[0:32, 0:32] is [32, 32], destination shared_");
  EXPECT_CONTAINS(msg, "[0:64, 0:32] is [64, 32]");
}

TEST(InterpreterChecks, GemmWhoseShapesDoNotChain) {
  int line = 0;
  T::PrimFunc f("gemm_mismatch");
  auto C = f.tensor("C", {64, 64}, T::f32);
  f.body([&] {
    T::Kernel(1, 128, [&](T::Var) {
      auto A_s = T::alloc_shared({64, 32}, T::f16);
      auto B_s = T::alloc_shared({16, 64}, T::f16);
      auto acc = T::alloc_fragment({64, 64}, T::f32);
      T::clear(A_s);
      T::clear(B_s);
      T::clear(acc);
      line = __LINE__ + 1;
      T::gemm(A_s, B_s, acc);
      T::copy(acc, C);
    });
  });
  const std::string msg = run_error(f, {HostTensor(T::f32, {64, 64})});
  EXPECT_CONTAINS(msg, at_line(line) + "error in gemm at block (bx) = (0): the operand shapes do not chain");
  EXPECT_CONTAINS(msg, "is 64x32 (M x K)");
  EXPECT_CONTAINS(msg, "is 16x64 (K x N)");
  EXPECT_CONTAINS(msg, "one K (32 vs 16)");
}

TEST(InterpreterChecks, ReduceIntoTheWrongShape) {
  int line = 0;
  T::PrimFunc f("reduce_mismatch");
  auto Out = f.tensor("Out", {8}, T::f32);
  f.body([&] {
    T::Kernel(1, 128, [&](T::Var) {
      auto x = T::alloc_fragment({16, 8}, T::f32);
      auto r = T::alloc_fragment({8}, T::f32);
      T::clear(x);
      line = __LINE__ + 1;
      T::reduce_sum(x, r, 1);
      T::copy(r, Out);
    });
  });
  EXPECT_CONTAINS(
      run_error(f, {HostTensor(T::f32, {8})}),
      at_line(line) + "error in reduce_sum at block (bx) = (0): the destination is fragment buffer");
  EXPECT_CONTAINS(run_error(f, {HostTensor(T::f32, {8})}), "along dim 1 gives shape [16]");
}

TEST(InterpreterChecks, IntegerDivisionByZero) {
  int line = 0;
  T::PrimFunc f("divide");
  auto In = f.tensor("In", {2}, T::i32);
  auto Out = f.tensor("Out", {1}, T::i32);
  f.body([&] {
    T::Kernel(1, 32, [&](T::Var) {
      line = __LINE__ + 1;
      Out.at({0}) = In(0) / In(1);
    });
  });
  EXPECT_CONTAINS(run_error(f, {HostTensor::from_values(T::i32, {2}, {7, 0}), HostTensor(T::i32, {1})}),
                  at_line(line) + "error in expression at block (bx) = (0): integer division by zero");
}

TEST(InterpreterChecks, BufferUsedOutsideItsKernel) {
  T::PrimFunc f("leak");
  auto Out = f.tensor("Out", {4}, T::f32);
  T::Buffer leaked;
  f.body([&] {
    T::Kernel(1, 32, [&](T::Var) { leaked = T::alloc_fragment({4}, T::f32); });
    T::Kernel(1, 32, [&](T::Var) { T::copy(leaked, Out); });
  });
  EXPECT_CONTAINS(run_error(f, {HostTensor(T::f32, {4})}), "is used outside the kernel that allocates it");
}

// ---- argument checks ------------------------------------------------------------------------------

PrimFunc small_matmul() {
  kernels::MatmulConfig c;
  c.block_M = c.block_N = 64;
  return kernels::matmul_program(64, 64, 32, c);
}

TEST(InterpreterArguments, CountDtypeShapeAndRankAreChecked) {
  PrimFunc f = small_matmul();
  HostTensor a(T::f16, {64, 32}), b(T::f16, {32, 64}), c(T::f16, {64, 64});
  EXPECT_CONTAINS(runtime_error_of([&] { run_on_cpu(f, {a}, {-1}); }),
                  "matmul: takes 2 inputs (A, B; outputs C), given 1");
  EXPECT_CONTAINS(runtime_error_of([&] {
                    run_on_cpu(f, {a, HostTensor(T::bf16, {32, 64})}, {-1});
                  }),
                  "matmul: parameter B expects dtype f16, given bf16 (bf16[32, 64])");
  EXPECT_CONTAINS(runtime_error_of([&] {
                    run_on_cpu(f, {HostTensor(T::f16, {64, 33}), b}, {-1});
                  }),
                  "matmul: parameter A expects shape [64, 32], given [64, 33]");
  EXPECT_CONTAINS(runtime_error_of([&] {
                    run_on_cpu(f, {HostTensor(T::f16, {64}), b}, {-1});
                  }),
                  "matmul: parameter A expects shape [64, 32] (2 dimensions), given [64]");
  EXPECT_CONTAINS(runtime_error_of([&] {
                    run_on_cpu(f, {a, b}, {3});
                  }),
                  "matmul: out_idx 3 is out of range for 3 parameters; legal: -3 .. 2");
  EXPECT_CONTAINS(runtime_error_of([&] {
                    interpret(f.ir(), {&a, &b});
                  }),
                  "matmul: takes 3 arguments (A, B, C), given 2");
  EXPECT_CONTAINS(runtime_error_of([&] {
                    interpret(f.ir(), {&a, nullptr, &c});
                  }),
                  "matmul: parameter B is given a null tensor");
  EXPECT_CONTAINS(runtime_error_of([&] {
                    interpret(f.ir(), {&a, &b, &a});
                  }),
                  "matmul: parameter C expects shape [64, 64], given [64, 32]");
}

PrimFunc symbolic_scale() {
  T::Var m("m");
  T::PrimFunc f("scale");
  auto X = f.tensor("X", {m, 8}, T::f32);
  auto Z = f.tensor("Z", {m, 8}, T::f32);
  auto Y = f.tensor("Y", {m, 8}, T::f32);
  f.body([&] {
    T::Kernel(T::ceildiv(m, 4), 32, [&](T::Var bx) {
      auto x = T::alloc_fragment({4, 8}, T::f32);
      auto z = T::alloc_fragment({4, 8}, T::f32);
      T::copy(X(bx * 4, 0), x);
      T::copy(Z(bx * 4, 0), z);
      T::Parallel(4, 8, [&](T::Var i, T::Var j) { x.at({i, j}) = x(i, j) * 2.0f + z(i, j); });
      T::copy(x, Y(bx * 4, 0));
    });
  });
  return f;
}

TEST(InterpreterArguments, SymbolicDimensionsBindFromTheInputs) {
  PrimFunc f = symbolic_scale();
  HostTensor x = HostTensor::random(T::f32, {7, 8}, 1), z = HostTensor::random(T::f32, {7, 8}, 2);
  auto out = run_on_cpu(f, {x, z}, {-1});
  ASSERT_EQ(out[0].describe(), "f32[7, 8]");
  for (std::int64_t i = 0; i < 56; ++i) EXPECT_EQ(out[0].get(i), static_cast<float>(x.get(i) * 2 + z.get(i)));
  EXPECT_CONTAINS(runtime_error_of([&] {
                    run_on_cpu(f, {x, HostTensor(T::f32, {6, 8})}, {-1});
                  }),
                  "scale: parameter Z expects shape [m = 7 from X, 8], given [6, 8]");
}

}  // namespace
}  // namespace tessel::interp
