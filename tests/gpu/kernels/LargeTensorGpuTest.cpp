// Tensors past 2^31 elements on the GPU (the H200 holds them): a user's 1-D kernel over
// 2^31 + 2048 elements, the library softmax over 2^31 + 1024 rows of 8 and over rows of 1023
// (unaligned, realigned loads) past 2^31 elements, the library GEMM with an A of 2^31 + 6144
// elements, and attention with Q, K, V and O of 2^31 + 2^17 elements each, checked against a
// reference at elements and rows past 2^31 (the indices that a 32-bit computation would wrap).
// Skipped without a GPU, or when the GPU has too little free memory (said in the message).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "tessel/kernels/attention/AttentionReference.hpp"
#include "tessel/kernels/attention/FlashAttention.hpp"
#include "tessel/kernels/gemm/Matmul.hpp"
#include "tessel/kernels/softmax/Softmax.hpp"
#include "support/TestSupport.hpp"
#include "tessel/tessel.hpp"

namespace {

namespace T = tessel;
using T::DType;
using T::Tensor;

bool enough_memory(std::int64_t bytes, std::string* why) {
  std::size_t free_bytes = 0, total = 0;
  T::ensure_context();  // the first test of a run may ask before anything made the context current
  T::check_cu(T::driver().cuMemGetInfo(&free_bytes, &total), "cuMemGetInfo");
  if (static_cast<std::int64_t>(free_bytes) >= bytes + (std::int64_t(1) << 30)) return true;
  *why =
      "needs " + std::to_string(bytes >> 30) + " GiB free, the GPU has " + std::to_string(free_bytes >> 30);
  return false;
}

// Fresh random f16 values in [-6, 6) in each of `rows` of the [M, N] tensor x; their values as
// stored, row by row.
template <size_t R>
std::vector<std::vector<double>> plant_random_rows(Tensor& x, std::int64_t N, const std::int64_t (&rows)[R],
                                                   std::mt19937_64& rng) {
  std::vector<std::vector<double>> in;
  for (std::int64_t r : rows) {
    std::vector<double> v(N);
    std::vector<std::uint16_t> bits(N);
    for (std::int64_t c = 0; c < N; ++c) {
      T::store_host_element(std::uniform_real_distribution<double>(-6, 6)(rng), DType::f16, &bits[c]);
      v[c] = T::load_host_element(&bits[c], DType::f16);
    }
    x.slice(0, r, r + 1).copy_from_host(bits.data());
    in.push_back(v);
  }
  return in;
}

// Each of `rows` of y against the float64 softmax of the values planted there.
template <size_t R>
void expect_softmax_rows(const Tensor& y, const std::int64_t (&rows)[R], const std::vector<std::vector<double>>& in) {
  for (size_t n = 0; n < in.size(); ++n) {
    double mx = -INFINITY, sum = 0;
    for (double v : in[n]) mx = std::max(mx, v);
    for (double v : in[n]) sum += std::exp(v - mx);
    std::vector<double> want;
    for (double v : in[n]) want.push_back(std::exp(v - mx) / sum);
    const double err = T::test::rel_error(y.slice(0, rows[n], rows[n] + 1).to_host_f64(), want);
    EXPECT_LE(err, 1e-2) << "row " << rows[n] << ": relative error " << err;
  }
}

TEST(LargeTensorGpu, ElementwiseKernelPast2To31Elements) {
  TESSEL_REQUIRE_GPU();
  const std::int64_t N = (std::int64_t(1) << 31) + 2048;
  std::string why;
  if (!enough_memory(2 * N * 2, &why)) GTEST_SKIP() << "SKIPPED: " << why;
  T::PrimFunc f("double_it");
  auto X = f.tensor("X", {N}, T::f16);
  auto Y = f.tensor("Y", {N}, T::f16);
  f.body([&] {
    T::Kernel(T::ceildiv(N, 1024), 128, [&](T::Var bx) {
      auto x = T::alloc_fragment({1024}, T::f16);
      T::copy(X(bx * 1024), x);
      T::Parallel(1024, [&](T::Var i) { x(i) = x(i) * 2.0f; });
      T::copy(x, Y(bx * 1024));
    });
  });
  T::JitKernel k = T::jit(f);
  Tensor x = Tensor::empty({N}, DType::f16), y = Tensor::empty({N}, DType::f16);
  x.fill(1.5);
  y.fill(std::nan(""));
  // Distinct values at the indices a 32-bit index would wrap: across 2^31, past it, the end
  // (four disjoint runs of 600).
  std::mt19937_64 rng(std::random_device{}());
  const std::int64_t starts[] = {0, (std::int64_t(1) << 31) - 300, (std::int64_t(1) << 31) + 400, N - 700};
  std::vector<std::vector<double>> values;
  for (std::int64_t s : starts) {
    std::vector<double> v(600);
    std::vector<std::uint16_t> bits(600);
    for (size_t i = 0; i < v.size(); ++i) {
      v[i] = std::uniform_real_distribution<double>(-4, 4)(rng);
      T::store_host_element(v[i], DType::f16, &bits[i]);
      v[i] = T::load_host_element(&bits[i], DType::f16);
    }
    x.slice(0, s, s + 600).copy_from_host(bits.data());
    values.push_back(v);
  }
  k.launch({x, y});
  T::check_cu(T::driver().cuCtxSynchronize(), "cuCtxSynchronize");
  for (size_t n = 0; n < values.size(); ++n) {
    const std::vector<double> got = y.slice(0, starts[n], starts[n] + 600).to_host_f64();
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(got[i], 2 * values[n][i]) << "element " << starts[n] + static_cast<std::int64_t>(i);
  }
  // Elements of the constant part on both sides of 2^31.
  for (std::int64_t at : {std::int64_t(1) << 30, (std::int64_t(1) << 31) + 1000, N - 50}) {
    EXPECT_EQ(y.slice(0, at, at + 1).to_host_f64()[0], 3.0) << "element " << at;
  }
  EXPECT_EQ(y.slice(0, N - 1, N).to_host_f64()[0], 3.0) << "the last element";
}

TEST(LargeTensorGpu, SoftmaxPast2To31Rows) {
  TESSEL_REQUIRE_GPU();
  const std::int64_t M = (std::int64_t(1) << 31) + 1024, N = 8;
  std::string why;
  if (!enough_memory(2 * M * N * 2, &why)) GTEST_SKIP() << "SKIPPED: " << why;
  T::JitKernel k = T::kernels::make_softmax(M, N, DType::f16);
  Tensor x = Tensor::empty({M, N}, DType::f16), y = Tensor::empty({M, N}, DType::f16);
  x.fill(0.75);
  y.fill(std::nan(""));
  std::mt19937_64 rng(std::random_device{}());
  const std::int64_t rows[] = {0, (std::int64_t(1) << 31) - 3, std::int64_t(1) << 31,
                               (std::int64_t(1) << 31) + 517, M - 1};
  const std::vector<std::vector<double>> in = plant_random_rows(x, N, rows, rng);
  k.launch({x, y});
  T::check_cu(T::driver().cuCtxSynchronize(), "cuCtxSynchronize");
  expect_softmax_rows(y, rows, in);
  // A constant row between them: every entry 1/8.
  for (double v : y.slice(0, (std::int64_t(1) << 31) + 100, (std::int64_t(1) << 31) + 101).to_host_f64())
    EXPECT_NEAR(v, 0.125, 1e-3);
}

// Rows of 1023 f16 (2046 bytes, each starting at a different alignment) past 2^31 elements: the
// default loads them as realigned global words (rows of 1024 bytes or more), so the two-word
// offsets and the "both words inside the tensor" test run on 64-bit indices; the last row's last
// vectors take the element-wise path (their second word would pass the tensor's end).
TEST(LargeTensorGpu, SoftmaxUnalignedRowsPast2To31Elements) {
  TESSEL_REQUIRE_GPU();
  const std::int64_t N = 1023, M = ((std::int64_t(1) << 31) / N) + 65;  // 2^31 + ~64 K elements
  std::string why;
  if (!enough_memory(2 * M * N * 2, &why)) GTEST_SKIP() << "SKIPPED: " << why;
  T::JitKernel k = T::kernels::make_softmax(M, N, DType::f16);
  EXPECT_NE(k.source().find("load_global_words_realigned"), std::string::npos) << "not the realigned loads";
  Tensor x = Tensor::empty({M, N}, DType::f16), y = Tensor::empty({M, N}, DType::f16);
  x.fill(0.5);
  y.fill(std::nan(""));
  std::mt19937_64 rng(std::random_device{}());
  // The row holding element 2^31, its neighbours, and the last rows.
  const std::int64_t boundary = (std::int64_t(1) << 31) / N;
  const std::int64_t rows[] = {0, boundary - 1, boundary, boundary + 1, M - 2, M - 1};
  const std::vector<std::vector<double>> in = plant_random_rows(x, N, rows, rng);
  k.launch({x, y});
  T::check_cu(T::driver().cuCtxSynchronize(), "cuCtxSynchronize");
  expect_softmax_rows(y, rows, in);
  // A constant row past 2^31 elements: every entry 1/1023.
  for (double v : y.slice(0, boundary + 17, boundary + 18).to_host_f64()) EXPECT_NEAR(v, 1.0 / 1023, 1e-5);
}

// The library GEMM (kernels::Matmul, its default kernel for the shape) with A [2^20 + 3, 2048]:
// 2^31 + 6144 elements, so the offset of every row past 2^20 passes 2^31; N = 264 leaves a tail
// column tile. C's entries in rows on both sides of that boundary and in the last row against
// float64.
TEST(LargeTensorGpu, GemmPast2To31Elements) {
  TESSEL_REQUIRE_GPU();
  const std::int64_t M = (std::int64_t(1) << 20) + 3, N = 264, K = 2048;
  std::string why;
  if (!enough_memory(2 * (M * K + K * N + M * N), &why)) GTEST_SKIP() << "SKIPPED: " << why;
  T::kernels::Matmul mm(static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), DType::f16);
  Tensor a = Tensor::empty({M, K}, DType::f16), b = Tensor::empty({K, N}, DType::f16),
         c = Tensor::empty({M, N}, DType::f16);
  std::mt19937_64 rng(std::random_device{}());
  a.fill_random(rng(), -1, 1);
  b.fill_random(rng(), -1, 1);
  c.fill(std::nan(""));
  mm(a, b, c);
  T::check_cu(T::driver().cuCtxSynchronize(), "cuCtxSynchronize");
  const std::vector<double> bh = b.to_host_f64();
  const std::int64_t boundary = (std::int64_t(1) << 31) / K;  // the first row past 2^31 elements
  for (std::int64_t row : {std::int64_t(0), boundary - 1, boundary, boundary + 1, M - 1}) {
    const std::vector<double> ar = a.slice(0, row, row + 1).to_host_f64();
    const std::vector<double> cr = c.slice(0, row, row + 1).to_host_f64();
    std::vector<double> want(static_cast<size_t>(N), 0.0);
    for (std::int64_t k = 0; k < K; ++k)
      for (std::int64_t j = 0; j < N; ++j) want[static_cast<size_t>(j)] += ar[static_cast<size_t>(k)] * bh[static_cast<size_t>(k * N + j)];
    const double err = T::test::rel_error(cr, want);
    EXPECT_LE(err, 5e-3) << "row " << row << " (" << mm.describe() << "): relative error " << err;
  }
}

// kernels::flash_attention with B = 16385 sequences of 1024 queries and keys, one head, D = 128:
// Q, K, V and O hold 2^31 + 2^17 elements each, so the last batch's offsets pass 2^31. Its rows,
// and the first batch's, against float64 (the reference on each batch's slices); causal too.
TEST(LargeTensorGpu, AttentionPast2To31Elements) {
  TESSEL_REQUIRE_GPU();
  const std::int64_t B = 16385, S = 1024, H = 1, D = 128;
  std::string why;
  if (!enough_memory(4 * 2 * B * S * H * D, &why)) GTEST_SKIP() << "SKIPPED: " << why;
  std::mt19937_64 rng(std::random_device{}());
  Tensor q = Tensor::empty({B, S, H, D}, DType::bf16), k = Tensor::empty({B, S, H, D}, DType::bf16),
         v = Tensor::empty({B, S, H, D}, DType::bf16);
  q.fill_random(rng(), -2, 2);
  k.fill_random(rng(), -2, 2);
  v.fill_random(rng(), -2, 2);
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "not causal");
    T::kernels::AttentionOptions o;
    o.causal = causal;
    T::kernels::AttentionOutput out = T::kernels::flash_attention(q, k, v, o);
    T::check_cu(T::driver().cuCtxSynchronize(), "cuCtxSynchronize");
    for (std::int64_t batch : {std::int64_t(0), B - 2, B - 1}) {
      T::kernels::AttentionShape one;
      one.batch = 1, one.heads = H, one.kv_heads = H, one.seqlen_q = S, one.seqlen_k = S, one.dim = D;
      std::vector<T::kernels::AttentionSample> rows;
      for (std::int64_t r : {std::int64_t(0), std::int64_t(1), S / 2 + 7, S - 1}) rows.push_back({0, 0, r});
      const auto ref = T::kernels::attention_reference(q.slice(0, batch, batch + 1).to_host_f64(),
                                                       k.slice(0, batch, batch + 1).to_host_f64(),
                                                       v.slice(0, batch, batch + 1).to_host_f64(), one, causal, 0.0, rows);
      const std::vector<double> oh = out.O.slice(0, batch, batch + 1).to_host_f64();
      const std::vector<double> lh = out.LSE.slice(0, batch, batch + 1).to_host_f64();
      T::kernels::AttentionRows got;
      for (const auto& r : rows) {
        for (std::int64_t d = 0; d < D; ++d) got.O.push_back(oh[static_cast<size_t>(r.row * D + d)]);
        got.LSE.push_back(lh[static_cast<size_t>(r.row)]);
      }
      const T::kernels::AttentionError err = T::kernels::attention_error(ref, got);
      EXPECT_LE(err.O, 2e-2) << "batch " << batch << ": O relative error " << err.O;
      EXPECT_LE(err.LSE, 1e-3) << "batch " << batch << ": LSE relative error " << err.LSE;
    }
  }
}

}  // namespace
