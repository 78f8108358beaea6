// The autotuner on the GPU: a planted wrong candidate (the tutorial GEMM with its K loop one tile
// short) is caught by the check and never wins; the winner of a small GEMM space, timed
// again with the same timer, runs as fast as the table says; and the library's entry points,
// kernels::Matmul's split-K included, use what the tuning cache holds.
#include <cublas_v2.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <random>

#include "support/SoftmaxReference.hpp"
#include "support/TestSupport.hpp"
#include "tessel/autotune/Autotune.hpp"
#include "tessel/kernels/gemm/Matmul.hpp"
#include "tessel/runtime/Driver.hpp"

namespace {

namespace at = tessel::autotune;
namespace T = tessel;
using tessel::DType;
using tessel::Tensor;
using tessel::kernels::MatmulConfig;

// matmul_program (kernels/gemm/Matmul.cpp) with one change: the K loop stops a tile early, so
// every output misses the last block_K terms of its dot product.
T::PrimFunc matmul_one_k_tile_short(int M, int N, int K, const MatmulConfig& c) {
  T::PrimFunc f("matmul_short_k");
  auto A = f.tensor("A", {M, K}, c.dtype);
  auto B = f.tensor("B", {K, N}, c.dtype);
  auto C = f.tensor("C", {M, N}, c.dtype);
  f.body([&] {
    T::Kernel(T::ceildiv(N, c.block_N), T::ceildiv(M, c.block_M), c.threads, [&](T::Var bx, T::Var by) {
      auto A_shared = T::alloc_shared({c.block_M, c.block_K}, c.dtype);
      auto B_shared = T::alloc_shared({c.block_K, c.block_N}, c.dtype);
      auto C_local = T::alloc_fragment({c.block_M, c.block_N}, c.accum_dtype);
      if (c.use_swizzle) T::use_swizzle(c.panel_size);
      T::clear(C_local);
      T::Pipelined(T::ceildiv(K, c.block_K) - 1, c.num_stages, [&](T::Var ko) {
        T::copy(A(by * c.block_M, ko * c.block_K), A_shared);
        T::copy(B(ko * c.block_K, bx * c.block_N), B_shared);
        T::gemm(A_shared, B_shared, C_local);
      });
      T::copy(C_local, C(by * c.block_M, bx * c.block_N));
    });
  });
  return f;
}

// gemm_factory, except that a config with short_k=1 builds the planted wrong program.
at::Factory planted_factory(int M, int N, int K) {
  const at::Factory correct = at::gemm_factory(M, N, K, DType::f16);
  return [=](const at::Config& c) {
    if (at::get(c, "short_k") == 0) return correct(c);
    return T::jit(matmul_one_k_tile_short(M, N, K, at::gemm_config(c, DType::f16)), {.out_idx = {-1}});
  };
}

// C = A * B (row-major) with cuBLAS: in column-major terms C^T = B^T * A^T.
void cublas_gemm(const Tensor& a, const Tensor& b, Tensor& c, int M, int N, int K) {
  static cublasHandle_t handle = [] {
    cublasHandle_t h;
    EXPECT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
    return h;
  }();
  float alpha = 1, beta = 0;
  const cudaDataType t = a.dtype() == DType::f16 ? CUDA_R_16F : CUDA_R_16BF;
  ASSERT_EQ(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha, b.data_ptr(), t, N, a.data_ptr(),
                         t, K, &beta, c.data_ptr(), t, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_SUCCESS);
  tessel::check_cu(tessel::driver().cuCtxSynchronize(), "cuCtxSynchronize");
}

// The inputs, the reference and the callbacks autotune() needs for one GEMM shape.
struct GemmProblem {
  int M, N, K;
  Tensor a, b, c;
  std::vector<double> reference;

  GemmProblem(int m, int n, int k, bool f64_reference) : M(m), N(n), K(k) {
    std::mt19937_64 seeds(std::random_device{}());
    a = Tensor::empty({M, K}, DType::f16);
    b = Tensor::empty({K, N}, DType::f16);
    c = Tensor::empty({M, N}, DType::f16);
    a.fill_random(seeds());
    b.fill_random(seeds());
    if (f64_reference) {
      reference = tessel::test::reference_gemm(a.to_host_f64(), b.to_host_f64(), M, N, K);
    } else {
      Tensor r = Tensor::empty({M, N}, DType::f16);
      r.fill(std::nan(""));
      cublas_gemm(a, b, r, M, N, K);
      reference = r.to_host_f64();
    }
  }

  at::Callbacks callbacks() {
    at::Callbacks cb;
    cb.run = [this](const T::JitKernel& k) { k.launch({a, b, c}); };
    cb.check = [this](const T::JitKernel& k, std::string& why) {
      c.fill(std::nan(""));  // an unwritten output cannot pass
      k.launch({a, b, c});
      tessel::check_cu(tessel::driver().cuCtxSynchronize(), "cuCtxSynchronize");
      const double err = tessel::test::rel_error(c.to_host_f64(), reference);
      if (err <= 2e-2) return true;
      why = "relative error " + std::to_string(err);
      return false;
    };
    return cb;
  }
};

at::Config gemm_point(int bm, int bn, int bk, int stages, int threads, int panel) {
  return {{"block_M", bm},        {"block_N", bn},      {"block_K", bk},
          {"num_stages", stages}, {"threads", threads}, {"panel", panel}};
}

}  // namespace

TEST(AutotuneGpu, PlantedWrongCandidateIsCaughtAndExcluded) {
  TESSEL_REQUIRE_GPU();
  constexpr int kSize = 256;
  GemmProblem p(kSize, kSize, kSize, /*f64_reference=*/true);
  // The planted candidate has the tiles of a correct one and a K loop one tile shorter (on
  // sm_90a the short loop keeps it on the mma.sync path while its twin takes wgmma); an output
  // missing 1/8 of every dot product is off by about 35 %, far outside the tolerance.
  at::Config planted = gemm_point(64, 64, 32, 2, 128, 0);
  planted["short_k"] = 1;
  at::Space space("planted wrong candidate");
  space.point(gemm_point(64, 64, 32, 2, 128, 0))
      .point(gemm_point(128, 128, 32, 3, 128, 0))
      .point(gemm_point(128, 64, 32, 3, 128, 0))
      .point(planted);
  at::Options o;
  o.search.strategy = at::Strategy::exhaustive;
  o.search.repeats = 5;
  const at::Result r = at::autotune(planted_factory(kSize, kSize, kSize), space, p.callbacks(), o);

  ASSERT_TRUE(r.found);
  EXPECT_EQ(at::get(r.config, "short_k"), 0)
      << "the winner is the planted wrong candidate: " << at::describe(r.config);
  ASSERT_EQ(r.table.size(), 4u);
  int wrong = 0, ok = 0;
  for (const at::Row& row : r.table) {
    if (at::get(row.config, "short_k") == 1) {
      EXPECT_EQ(row.status, at::Status::wrong) << at::status_name(row.status) << ": " << row.reason;
      EXPECT_NE(row.reason.find("relative error"), std::string::npos) << row.reason;
      EXPECT_LT(row.ms, 0) << "a wrong candidate is never timed";
      ++wrong;
    } else {
      EXPECT_EQ(row.status, at::Status::ok) << at::describe(row.config) << ": " << row.reason;
      EXPECT_GT(row.ms, 0);
      ++ok;
    }
  }
  EXPECT_EQ(wrong, 1);
  EXPECT_EQ(ok, 3);
}

TEST(AutotuneGpu, WinnerRetimedMatchesTheTable) {
  TESSEL_REQUIRE_GPU();
  constexpr int kSize = 2048;
  GemmProblem p(kSize, kSize, kSize, /*f64_reference=*/false);
  const std::string arch = tessel::current_device().arch();
  // Seven configs of gemm_space: mma.sync tiles (block_K 32) and, on Hopper, wgmma tiles.
  at::Space space("small gemm space");
  space.point(gemm_point(128, 128, 32, 3, 128, 0))
      .point(gemm_point(128, 128, 32, 4, 256, 8))
      .point(gemm_point(128, 256, 32, 3, 256, 16))
      .point(gemm_point(64, 128, 32, 4, 128, 0))
      .point(gemm_point(128, 128, 64, 4, 256, 16))
      .point(gemm_point(128, 256, 64, 4, 256, 16))
      .point(gemm_point(64, 128, 64, 5, 128, 8));
  space.smem_bytes(
      [](const at::Config& c) { return tessel::kernels::matmul_smem_bytes(at::gemm_config(c, DType::f16)); });
  at::Callbacks cb = p.callbacks();
  constexpr int kWarmup = 3, kRepeats = 20;
  cb.time = at::event_timer(cb.run, kWarmup);
  at::Options o;
  o.search.repeats = kRepeats;  // halving, the default strategy
  const at::Result r = at::autotune(at::gemm_factory(kSize, kSize, kSize, DType::f16), space, cb, o);

  ASSERT_TRUE(r.found) << "no candidate compiled, passed and ran";
  ASSERT_GT(r.ms, 0);
  for (const at::Row& row : r.table)
    EXPECT_NE(row.status, at::Status::wrong) << at::describe(row.config) << ": " << row.reason;
  std::string why;
  EXPECT_TRUE(cb.check(r.kernel, why)) << why;
  // The same timer, three more times: the median of those medians is within 15 % of the table.
  std::vector<double> again;
  for (int i = 0; i < 3; ++i) again.push_back(cb.time(r.kernel, kRepeats).median_ms);
  const double retimed = at::summarize(again).median_ms;
  std::cout << "[ autotune ] " << arch << " winner " << at::describe(r.config) << ": table " << r.ms
            << " ms, re-timed " << retimed << " ms\n";
  EXPECT_NEAR(retimed, r.ms, 0.15 * r.ms) << "winner " << at::describe(r.config);
  // And it is no slower than any other fully timed candidate by more than the same margin.
  for (const at::Row& row : r.table) {
    if (row.status == at::Status::ok && row.repeats >= kRepeats) {
      EXPECT_LE(r.ms, 1.15 * row.ms) << at::describe(row.config) << " at " << row.ms << " ms";
    }
  }
}

TEST(AutotuneGpu, LibraryEntryPointsUseAPlantedTuningCacheEntry) {
  TESSEL_REQUIRE_GPU();
  tessel::test::TempDir dir;
  tessel::test::ScopedEnv env("TESSEL_CACHE_DIR", dir.path().string());
  const auto device = at::current_device_key();
  ASSERT_TRUE(device);
  const auto tune_dir = at::tuning_cache_directory();
  ASSERT_TRUE(tune_dir);

  // GEMM: a config the default table would not pick for 512^3.
  const at::Config gemm = gemm_point(64, 128, 32, 3, 128, 0);
  ASSERT_TRUE(at::write_tuning_entry(*tune_dir,
                                     at::tuning_key(at::gemm_key_parts(512, 512, 512, DType::f16, *device)),
                                     at::StoredResult{gemm, 0.01, "halving", "test"}));
  const auto choice = tessel::kernels::choose_matmul_config(512, 512, 512, DType::f16);
  EXPECT_TRUE(choice.tuned);
  EXPECT_EQ(choice.config.describe(), at::gemm_config(gemm, DType::f16).describe());
  EXPECT_EQ(tessel::kernels::make_matmul(512, 512, 512, DType::f16).source(),
            tessel::kernels::make_matmul(512, 512, 512, at::gemm_config(gemm, DType::f16)).source());
  EXPECT_FALSE(tessel::kernels::choose_matmul_config(512, 512, 1024, DType::f16).tuned) << "another shape";

  // Softmax: the tuned kernel is the one make_softmax builds, and it is right.
  tessel::kernels::SoftmaxConfig c;
  c.variant = tessel::kernels::SoftmaxVariant::Rows;
  c.threads = 128;
  c.rows_per_block = 4;
  c.block_N = 1024;
  const long long M = 512, N = 1000;
  ASSERT_TRUE(at::write_tuning_entry(*tune_dir,
                                     at::tuning_key(at::softmax_key_parts(M, N, DType::f16, *device)),
                                     at::StoredResult{at::softmax_point(c), 0.01, "halving", "test"}));
  EXPECT_TRUE(tessel::kernels::choose_softmax_config(M, N, DType::f16).tuned);
  EXPECT_FALSE(tessel::kernels::choose_softmax_config(M, N + 1, DType::f16).tuned) << "another shape";
  const T::JitKernel k = tessel::kernels::make_softmax(M, N, DType::f16);
  EXPECT_EQ(k.source(), tessel::kernels::make_softmax(M, N, DType::f16, c).source());
  Tensor x = Tensor::empty({M, N}, DType::f16), y = Tensor::empty({M, N}, DType::f16);
  x.fill_random(3, -6, 6);
  y.fill(std::nan(""));
  k.launch({x, y});
  tessel::check_cu(tessel::driver().cuCtxSynchronize(), "cuCtxSynchronize");
  const double err =
      tessel::test::rel_error(y.to_host_f64(), tessel::test::reference_softmax(x.to_host_f64(), M, N));
  EXPECT_LE(err, 1e-2) << "relative error " << err;
}

// Issue 17: a split stored by `tessel tune gemm` for a skinny shape is what kernels::Matmul's
// automatic split-K runs (also a split its model would not pick, and no split when one kernel
// won); a one-kernel entry of the space without split-K leaves the choice to the model.
TEST(AutotuneGpu, MatmulTakesTheTunedSplit) {
  TESSEL_REQUIRE_GPU();
  tessel::test::TempDir dir;
  tessel::test::ScopedEnv env("TESSEL_CACHE_DIR", dir.path().string());
  const auto device = at::current_device_key();
  ASSERT_TRUE(device);
  if (tessel::kernels::split_k_candidates(16, 4096, 4096, DType::f16, device->arch()).empty())
    GTEST_SKIP() << device->arch() << " has no split-K candidates";
  const auto tune_dir = at::tuning_cache_directory();
  ASSERT_TRUE(tune_dir);
  const int M = 16, N = 4096, K = 4096;
  const std::string key = at::tuning_key(at::gemm_split_k_key_parts(M, N, K, DType::f16, *device));
  auto plant = [&](const std::string& k, const at::Config& c) {
    ASSERT_TRUE(at::write_tuning_entry(*tune_dir, k, at::StoredResult{c, 0.01, "halving", "test"}));
  };
  const auto model = tessel::kernels::plan_matmul(
      M, N, K, DType::f16, device->arch(), tessel::kernels::MatmulStaging::automatic, 0, device->sm_count);
  Tensor a = Tensor::empty({M, K}, DType::f16), b = Tensor::empty({K, N}, DType::f16);
  a.fill_random(5);
  b.fill_random(6);
  const std::vector<double> reference =
      tessel::test::reference_gemm(a.to_host_f64(), b.to_host_f64(), M, N, K);

  // A split of 3 (the model runs one kernel of 16x32 tiles on the H200).
  plant(key, {{"block_K", 64},
              {"block_M", 16},
              {"block_N", 256},
              {"num_stages", 4},
              {"panel", 0},
              {"split_k", 3},
              {"threads", 128}});
  const tessel::kernels::Matmul split(M, N, K, DType::f16);
  EXPECT_EQ(split.plan().split_k, 3) << split.plan().why;
  EXPECT_TRUE(split.plan().split_tuned);
  EXPECT_TRUE(split.tuned());
  EXPECT_NE(split.plan().why.find("split-K 3 (tuned: `tessel tune gemm` timed it fastest): "),
            std::string::npos)
      << split.plan().why;
  Tensor c = Tensor::empty({M, N}, DType::f16);
  c.fill(std::nan(""));
  split(a, b, c);
  tessel::check_cu(tessel::driver().cuCtxSynchronize(), "cuCtxSynchronize");
  EXPECT_LE(tessel::test::rel_error(c.to_host_f64(), reference), 1e-2);
  // One kernel cannot run it: make_matmul's choice stays the default; a forced count still wins.
  EXPECT_FALSE(tessel::kernels::choose_matmul_config(M, N, K, DType::f16).tuned);
  EXPECT_EQ(tessel::kernels::Matmul(M, N, K, DType::f16, tessel::kernels::MatmulStaging::automatic, {}, 1)
                .plan()
                .split_k,
            1);

  // One kernel won the tune: no split, and that kernel.
  const at::Config one = gemm_point(64, 128, 64, 4, 128, 16);
  plant(key, one);
  const tessel::kernels::Matmul whole(M, N, K, DType::f16);
  EXPECT_FALSE(whole.plan().split()) << whole.plan().why;
  EXPECT_TRUE(whole.plan().split_tuned);
  EXPECT_NE(whole.plan().why.find(
                "split-K off (tuned: `tessel tune gemm` timed one kernel faster than every split)"),
            std::string::npos)
      << whole.plan().why;
  EXPECT_TRUE(whole.tuned());
  EXPECT_EQ(whole.config().describe(), at::gemm_config(one, DType::f16).describe());
  c.fill(std::nan(""));
  whole(a, b, c);
  tessel::check_cu(tessel::driver().cuCtxSynchronize(), "cuCtxSynchronize");
  EXPECT_LE(tessel::test::rel_error(c.to_host_f64(), reference), 1e-2);

  // Only an entry of the one-kernel space (tessel.tune in Python): the model's split.
  std::filesystem::remove(*tune_dir / (key + ".json"));
  plant(at::tuning_key(at::gemm_key_parts(M, N, K, DType::f16, *device)), one);
  const tessel::kernels::Matmul modelled(M, N, K, DType::f16);
  EXPECT_EQ(modelled.plan().split_k, model.split_k) << modelled.plan().why;
  EXPECT_FALSE(modelled.plan().split_tuned);
}
