// What the library kernels' default entry points get from the tuning cache: a planted entry is
// found for its own shape, dtype and device only; without an entry (or a GPU) the built-in
// default, and never an exception.
#include <gtest/gtest.h>

#include "support/TestSupport.hpp"
#include "tessel/autotune/Autotune.hpp"
#include "tessel/runtime/Driver.hpp"

namespace at = tessel::autotune;
using tessel::DType;

namespace {

const at::DeviceKey kH200{"NVIDIA H200", 9, 0, 132, 13000, 13000};

void plant(const std::filesystem::path& dir, const at::KeyParts& parts, const at::Config& config) {
  ASSERT_TRUE(
      at::write_tuning_entry(dir, at::tuning_key(parts), at::StoredResult{config, 0.5, "halving", "test"}));
}

}  // namespace

TEST(TunedConfigs, PlantedGemmEntryIsFoundForItsShapeDtypeAndDeviceOnly) {
  tessel::test::TempDir dir;
  EXPECT_FALSE(at::find_tuned_matmul_config(2048, 2048, 2048, DType::f16, kH200, dir.path()));
  const at::Config tuned = {{"block_M", 64},   {"block_N", 256}, {"block_K", 64},
                            {"num_stages", 4}, {"threads", 128}, {"panel", 8}};
  plant(dir.path(), at::gemm_key_parts(2048, 2048, 2048, DType::f16, kH200), tuned);

  const auto found = at::find_tuned_matmul_config(2048, 2048, 2048, DType::f16, kH200, dir.path());
  ASSERT_TRUE(found);
  EXPECT_EQ(found->block_M, 64);
  EXPECT_EQ(found->block_N, 256);
  EXPECT_EQ(found->block_K, 64);
  EXPECT_EQ(found->num_stages, 4);
  EXPECT_EQ(found->threads, 128);
  EXPECT_TRUE(found->use_swizzle);
  EXPECT_EQ(found->panel_size, 8);
  EXPECT_EQ(found->dtype, DType::f16);

  EXPECT_FALSE(at::find_tuned_matmul_config(2048, 2048, 4096, DType::f16, kH200, dir.path())) << "another K";
  EXPECT_FALSE(at::find_tuned_matmul_config(4096, 2048, 2048, DType::f16, kH200, dir.path())) << "another M";
  EXPECT_FALSE(at::find_tuned_matmul_config(2048, 2048, 2048, DType::bf16, kH200, dir.path()))
      << "another dtype";
  at::DeviceKey h100 = kH200;
  h100.name = "NVIDIA H100 80GB HBM3";
  EXPECT_FALSE(at::find_tuned_matmul_config(2048, 2048, 2048, DType::f16, h100, dir.path())) << "another GPU";
  at::DeviceKey a100 = kH200;
  a100.cc_major = 8;  // another arch: another gemm_space, so another key
  EXPECT_FALSE(at::find_tuned_matmul_config(2048, 2048, 2048, DType::f16, a100, dir.path()))
      << "another arch";
}

TEST(TunedConfigs, PlantedSoftmaxEntryIsFoundForItsShapeOnly) {
  tessel::test::TempDir dir;
  tessel::kernels::SoftmaxConfig c;
  c.variant = tessel::kernels::SoftmaxVariant::Rows;
  c.threads = 128;
  c.rows_per_block = 4;
  c.block_N = 1024;
  plant(dir.path(), at::softmax_key_parts(4096, 1000, DType::bf16, kH200), at::softmax_point(c));
  const auto found = at::find_tuned_softmax_config(4096, 1000, DType::bf16, kH200, dir.path());
  ASSERT_TRUE(found);
  EXPECT_EQ(found->describe(), "rows:t128:r4:bn1024");
  EXPECT_FALSE(at::find_tuned_softmax_config(4096, 1024, DType::bf16, kH200, dir.path())) << "another N";
  EXPECT_FALSE(at::find_tuned_softmax_config(8192, 1000, DType::bf16, kH200, dir.path())) << "another M";
  EXPECT_FALSE(at::find_tuned_softmax_config(4096, 1000, DType::f16, kH200, dir.path())) << "another dtype";
}

TEST(TunedConfigs, WithoutAnEntryTheKernelsUseTheirDefaults) {
  // An empty tuning cache; on a machine without a GPU there is no device to key on at all.
  tessel::test::TempDir dir;
  tessel::test::ScopedEnv env("TESSEL_CACHE_DIR", dir.path().string());
  const auto gemm = tessel::kernels::choose_matmul_config(2048, 2048, 2048, DType::f16);
  EXPECT_FALSE(gemm.tuned);
  const bool gpu = tessel::gpu_available();
  const auto expected = tessel::kernels::default_matmul_config(
      2048, 2048, 2048, DType::f16, gpu ? tessel::current_device().arch() : "sm_90a",
      gpu ? tessel::current_device().sm_count : 132);
  EXPECT_EQ(gemm.config.describe(), expected.describe());
  EXPECT_EQ(gemm.config.panel_size, expected.panel_size);
  const auto softmax = tessel::kernels::choose_softmax_config(4096, 1000, DType::f16);
  EXPECT_FALSE(softmax.tuned);
  EXPECT_EQ(softmax.config.describe(),
            tessel::kernels::default_softmax_config(4096, 1000, DType::f16).describe());
  if (!gpu) {
    EXPECT_FALSE(at::current_device_key());
    EXPECT_FALSE(at::tuned_matmul_config(2048, 2048, 2048, DType::f16));
  }
  // With the disk cache off there is no tuning cache either: still the default, no exception.
  tessel::test::ScopedEnv off("TESSEL_CACHE", "0");
  EXPECT_FALSE(at::tuned_softmax_config(4096, 1000, DType::f16));
  EXPECT_FALSE(tessel::kernels::choose_softmax_config(4096, 1000, DType::f16).tuned);
}
