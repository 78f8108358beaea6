// Parallel compilation of GEMM candidates for sm_90a (no GPU needed), with its throughput.
#include <gtest/gtest.h>

#include <iostream>
#include <thread>

#include "support/TestSupport.hpp"
#include "tessel/autotune/Autotune.hpp"
#include "tessel/runtime/Cache.hpp"

namespace at = tessel::autotune;

TEST(AutotuneCompile, GemmCandidatesCompileInParallelForSm90a) {
  tessel::test::TempDir dir;
  tessel::test::ScopedEnv env("TESSEL_CACHE_DIR", dir.path().string());
  tessel::KernelCache::global().clear_memory();  // cold: every candidate goes through NVRTC
  const at::Space space = at::gemm_space("sm_90a", tessel::DType::f16);
  const auto e = space.enumerate({.smem_per_block = 232448, .threads_per_block = 1024});
  // Four candidates of both paths: mma.sync tiles (block_K 32) and wgmma tiles (block_K 64).
  std::vector<at::Config> pick;
  for (const auto& c : e.kept) {
    const bool a = at::get(c, "block_M") == 128 && at::get(c, "block_N") == 128 &&
                   at::get(c, "num_stages") == 3 && at::get(c, "panel") == 0;
    const bool b = at::get(c, "block_M") == 128 && at::get(c, "block_N") == 256 &&
                   at::get(c, "block_K") == 64 && at::get(c, "num_stages") == 4 &&
                   at::get(c, "threads") == 256 && at::get(c, "panel") == 16;
    if (a || b) pick.push_back(c);
  }
  ASSERT_EQ(pick.size(), 5u);     // 128x128 x {32, 64} x {128, 256} threads, and the 128x256 Hopper tile
  pick.push_back(e.kept.back());  // an explicit sm_90a point: 64x128x64, 6 stages
  tessel::JitOptions jo;
  jo.arch = "sm_90a";
  const auto r = at::compile_all(at::gemm_factory(512, 512, 512, tessel::DType::f16, jo), pick);
  ASSERT_EQ(r.rows.size(), pick.size());
  for (std::size_t i = 0; i < pick.size(); ++i) {
    EXPECT_NE(r.rows[i].status, at::Status::compile_failed)
        << at::describe(pick[i]) << ": " << r.rows[i].reason;
    EXPECT_EQ(r.rows[i].status, at::Status::not_timed) << at::describe(pick[i]) << ": " << r.rows[i].reason;
    EXPECT_TRUE(r.kernels[i].defined());
    EXPECT_GT(r.rows[i].registers, 0);
  }
  std::cout << "[ autotune ] compiled " << pick.size() << " GEMM candidates for sm_90a in " << r.seconds
            << " s on " << std::thread::hardware_concurrency() << " threads: " << pick.size() / r.seconds
            << " candidates/s\n";
}

TEST(AutotuneCompile, SoftmaxSpacesCompileForSm90aWithoutSpills) {
  tessel::test::TempDir dir;
  tessel::test::ScopedEnv env("TESSEL_CACHE_DIR", dir.path().string());
  tessel::JitOptions jo;
  jo.arch = "sm_90a";
  // Every kept candidate of a short, a medium and a long row (softmax kernels compile in a tenth
  // of a second): each compiles, and none spills (the space caps the values per thread).
  for (auto [N, t] : {std::pair{1000LL, tessel::DType::f16}, std::pair{5000LL, tessel::DType::bf16},
                      std::pair{100003LL, tessel::DType::f32}}) {
    const long long M = 4096;
    const auto e =
        at::softmax_space("sm_90a", M, N, t).enumerate({.smem_per_block = 232448, .threads_per_block = 1024});
    ASSERT_GE(e.kept.size(), 5u);
    const auto r = at::compile_all(at::softmax_factory(M, N, t, jo), e.kept);
    for (std::size_t i = 0; i < e.kept.size(); ++i) {
      const std::string what = "N=" + std::to_string(N) + " " + at::softmax_config(e.kept[i]).describe();
      EXPECT_EQ(r.rows[i].status, at::Status::not_timed) << what << ": " << r.rows[i].reason;
      EXPECT_GT(r.rows[i].registers, 0) << what;
    }
    std::cout << "[ autotune ] softmax N=" << N << " " << tessel::dtype_name(t) << ": compiled "
              << e.kept.size() << " candidates in " << r.seconds << " s\n";
  }
}
