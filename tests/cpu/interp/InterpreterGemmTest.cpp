// The tutorial GEMM on the interpreter: every knob candidate of the tutorial at small and ragged
// sizes, f16 and bf16, against a float64 reference; a GEMM with a Parallel epilogue; and the
// 256^3 speed the test tier relies on.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>

#include "InterpTestUtil.hpp"
#include "tessel/interp/Interpreter.hpp"
#include "tessel/kernels/gemm/Matmul.hpp"

namespace tessel::interp {
namespace {

namespace T = tessel;
using kernels::MatmulConfig;
using test::fresh_seed;
using test::matmul_reference;

struct Shape {
  int M, N, K;
};

// The tutorial's six candidates: (block_M, block_N, block_K, stages, threads, swizzle).
std::vector<MatmulConfig> knob_candidates(DType dtype) {
  auto make = [&](int bm, int bn, int bk, int stages, int threads, bool swizzle) {
    MatmulConfig c;
    c.block_M = bm, c.block_N = bn, c.block_K = bk, c.num_stages = stages, c.threads = threads;
    c.use_swizzle = swizzle;
    c.dtype = dtype;
    return c;
  };
  return {make(64, 64, 32, 2, 128, false),   make(128, 128, 32, 2, 128, false),
          make(128, 128, 32, 2, 128, true),  make(128, 128, 32, 3, 128, false),
          make(128, 128, 64, 2, 256, false), make(128, 256, 32, 2, 256, false)};
}

// Runs C = A * B through interpret() with C poisoned; returns the relative Frobenius error.
double run_matmul(const Shape& s, const MatmulConfig& c) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  HostTensor A = HostTensor::random(c.dtype, {s.M, s.K}, seed);
  HostTensor B = HostTensor::random(c.dtype, {s.K, s.N}, seed + 1);
  HostTensor C = HostTensor::full(c.dtype, {s.M, s.N}, std::numeric_limits<double>::quiet_NaN());
  PrimFunc f = kernels::matmul_program(s.M, s.N, s.K, c);
  interpret(f.ir(), {&A, &B, &C});
  return relative_frobenius_error(C.to_values(), matmul_reference(A, B));
}

class MatmulKnobs : public ::testing::TestWithParam<DType> {};

TEST_P(MatmulKnobs, EveryCandidateAtSmallSizesMatchesFloat64) {
  for (const MatmulConfig& c : knob_candidates(GetParam()))
    for (Shape s : {Shape{64, 64, 64}, Shape{100, 72, 40}, Shape{1, 33, 65}}) {
      SCOPED_TRACE(c.describe() + " " + std::to_string(s.M) + "x" + std::to_string(s.N) + "x" +
                   std::to_string(s.K));
      EXPECT_LE(run_matmul(s, c), 1e-2);
    }
}

// use_cluster is a scheduling hint (operand tiles multicast on sm_90a): the interpreter's
// results are those of the same program without it, at a ragged size with odd tile counts.
TEST_P(MatmulKnobs, ClusterHintLeavesTheResultUnchanged) {
  for (auto [x, y] : {std::pair{2, 1}, std::pair{1, 2}}) {
    MatmulConfig c;
    c.block_M = 64, c.block_N = 64, c.block_K = 64, c.num_stages = 2, c.threads = 128;
    c.cluster_x = x, c.cluster_y = y;
    c.dtype = GetParam();
    EXPECT_NE(kernels::matmul_program(150, 136, 72, c)
                  .script()
                  .find("use_cluster(" + std::to_string(x) + ", " + std::to_string(y) + ")"),
              std::string::npos);
    EXPECT_LE(run_matmul(Shape{150, 136, 72}, c), 1e-2) << c.describe();
  }
}

TEST_P(MatmulKnobs, TutorialDefaultRunsThroughRunOnCpu) {
  MatmulConfig c;  // the tutorial's make_matmul defaults: 128x128x32, 3 stages, 128 threads
  c.dtype = GetParam();
  const int M = 100, N = 72, K = 40;
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  HostTensor A = HostTensor::random(c.dtype, {M, K}, seed), B = HostTensor::random(c.dtype, {K, N}, seed + 1);
  std::vector<HostTensor> out = run_on_cpu(kernels::matmul_program(M, N, K, c), {A, B}, {-1});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].describe(), std::string(dtype_name(c.dtype)) + "[100, 72]");
  EXPECT_LE(relative_frobenius_error(out[0].to_values(), matmul_reference(A, B)), 1e-2);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, MatmulKnobs, ::testing::Values(DType::f16, DType::bf16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// The tile GEMM with a Parallel epilogue on the accumulator: scale, ReLU, cast to the output type.
PrimFunc gemm_relu_program(int M, int N, int K, DType dtype, bool transpose_b) {
  const int bM = 64, bN = 64, bK = 32;
  T::PrimFunc f("gemm_relu");
  auto A = f.tensor("A", {M, K}, dtype);
  auto B = transpose_b ? f.tensor("B", {N, K}, dtype) : f.tensor("B", {K, N}, dtype);
  auto C = f.tensor("C", {M, N}, dtype);
  f.body([&] {
    T::Kernel(T::ceildiv(N, bN), T::ceildiv(M, bM), 128, [&](T::Var bx, T::Var by) {
      auto A_s = T::alloc_shared({bM, bK}, dtype);
      auto B_s = transpose_b ? T::alloc_shared({bN, bK}, dtype) : T::alloc_shared({bK, bN}, dtype);
      auto acc = T::alloc_fragment({bM, bN}, T::f32);
      auto out = T::alloc_fragment({bM, bN}, dtype);
      T::clear(acc);
      T::Pipelined(T::ceildiv(K, bK), 2, [&](T::Var ko) {
        T::copy(A(by * bM, ko * bK), A_s);
        if (transpose_b) {
          T::copy(B(bx * bN, ko * bK), B_s);
        } else {
          T::copy(B(ko * bK, bx * bN), B_s);
        }
        T::gemm(A_s, B_s, acc, false, transpose_b);
      });
      T::Parallel(bM, bN, [&](T::Var i, T::Var j) {
        out.at({i, j}) = T::cast(dtype, T::max(acc(i, j) * 0.5, 0.0));
      });
      T::copy(out, C(by * bM, bx * bN));
    });
  });
  return f;
}

TEST(InterpreterEpilogue, ScaleReluCastMatchesFloat64) {
  for (DType dtype : {DType::f16, DType::bf16})
    for (bool transpose_b : {false, true}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + (transpose_b ? " B^T" : ""));
      const int M = 70, N = 90, K = 50;
      const std::uint64_t seed = fresh_seed();
      SCOPED_TRACE("seed " + std::to_string(seed));
      HostTensor A = HostTensor::random(dtype, {M, K}, seed);
      HostTensor B = transpose_b ? HostTensor::random(dtype, {N, K}, seed + 1)
                                 : HostTensor::random(dtype, {K, N}, seed + 1);
      auto out = run_on_cpu(gemm_relu_program(M, N, K, dtype, transpose_b), {A, B}, {2});
      std::vector<double> want = matmul_reference(A, B, false, transpose_b);
      int negatives = 0;
      for (double& v : want) {
        negatives += v < 0;
        v = std::max(0.5 * v, 0.0);
      }
      EXPECT_GT(negatives, 0);  // the ReLU did something
      EXPECT_LE(relative_frobenius_error(out[0].to_values(), want), 1e-2);
    }
}

TEST(InterpreterSpeed, Gemm256CubedWellUnderASecond) {
  const int n = 256;
  MatmulConfig c;
  c.block_M = 128, c.block_N = 128, c.block_K = 32;
  HostTensor A = HostTensor::random(DType::f16, {n, n}, fresh_seed());
  HostTensor B = HostTensor::random(DType::f16, {n, n}, fresh_seed());
  HostTensor C(DType::f16, {n, n});
  PrimFunc f = kernels::matmul_program(n, n, n, c);
  const auto start = std::chrono::steady_clock::now();
  interpret(f.ir(), {&A, &B, &C});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ interp   ] 256x256x256 f16 GEMM (%s): %.1f ms on one core\n", c.describe().c_str(),
              seconds * 1e3);
  EXPECT_LE(relative_frobenius_error(C.to_values(), matmul_reference(A, B)), 1e-2);
#if !defined(__SANITIZE_ADDRESS__)
  EXPECT_LT(seconds, 0.5);
#endif
}

}  // namespace
}  // namespace tessel::interp
