// Device tensors on a real GPU: host round trips (dense and strided), fills, DLPack.
#include <gtest/gtest.h>

#include <dlpack/dlpack.h>

#include <cmath>
#include <cstdint>

#include "support/TestSupport.hpp"
#include "tessel/runtime/HostFloat.hpp"
#include "tessel/runtime/Tensor.hpp"

namespace tessel {
namespace {

TEST(TensorGpu, DeviceInfo) {
  TESSEL_REQUIRE_GPU();
  const DeviceInfo& d = current_device();
  std::printf("%s: cc %d.%d (%s), %d SMs, smem %d/%d opt-in, L2 %lld MB, driver %d\n", d.name.c_str(),
              d.cc_major, d.cc_minor, d.arch().c_str(), d.sm_count, d.smem_per_block, d.smem_optin_per_block,
              d.l2_bytes >> 20, d.driver_version);
  EXPECT_GT(d.sm_count, 0);
  EXPECT_GE(d.smem_optin_per_block, d.smem_per_block);
  EXPECT_GE(d.max_threads_per_block, 1024);
  EXPECT_GT(d.global_mem_bytes, 0);
  if (d.cc_major == 9 && d.cc_minor == 0) {
    EXPECT_EQ(d.arch(), "sm_90a");
  }
}

TEST(TensorGpu, HostRoundTrip) {
  TESSEL_REQUIRE_GPU();
  std::vector<float> f32(6 * 7);
  for (std::size_t i = 0; i < f32.size(); ++i) f32[i] = 0.25f * static_cast<float>(i) - 3.0f;
  Tensor a = Tensor::from_host(f32, {6, 7}, DType::f32);
  EXPECT_EQ(a.describe(), "f32[6, 7] on cuda:" + std::to_string(current_device().ordinal));
  EXPECT_TRUE(a.owning());
  EXPECT_EQ(a.nbytes(), 6 * 7 * 4);
  EXPECT_EQ(a.to_host<float>(), f32);

  std::vector<std::uint16_t> half(f32.size()), bf(f32.size());
  for (std::size_t i = 0; i < f32.size(); ++i) {
    half[i] = float_to_half_bits(f32[i]);
    bf[i] = float_to_bf16_bits(f32[i]);
  }
  const std::vector<double> expected(f32.begin(), f32.end());  // all exact in f16 and bf16
  EXPECT_EQ(Tensor::from_host(half, {6, 7}, DType::f16).to_host_f64(), expected);
  EXPECT_EQ(Tensor::from_host(bf, {42}, DType::bf16).to_host_f64(), expected);
  std::vector<std::int32_t> ints = {-5, 0, 7, 1 << 30};
  EXPECT_EQ(Tensor::from_host(ints, {2, 2}, DType::i32).to_host<std::int32_t>(), ints);
  EXPECT_THROW(Tensor::from_host(ints, {2, 2}, DType::f16), RuntimeError);  // 4-byte elements for f16

  Tensor z = Tensor::zeros({3, 5}, DType::bf16);
  for (double v : z.to_host_f64()) EXPECT_EQ(v, 0.0);
  EXPECT_EQ(Tensor::empty({0, 4}, DType::f32).to_host_f64().size(), 0u);
}

TEST(TensorGpu, StridedViews) {
  TESSEL_REQUIRE_GPU();
  std::vector<float> host(4 * 5);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i);
  Tensor a = Tensor::from_host(host, {4, 5}, DType::f32);

  Tensor rows = a.slice(0, 1, 3);  // contiguous
  EXPECT_TRUE(rows.is_contiguous());
  EXPECT_EQ(rows.to_host<float>(), std::vector<float>(host.begin() + 5, host.begin() + 15));

  Tensor v = rows.view({10});
  EXPECT_EQ(v.to_host<float>(), std::vector<float>(host.begin() + 5, host.begin() + 15));

  Tensor col = a.slice(1, 2, 4);  // 4 x 2, strides [5, 1]
  EXPECT_FALSE(col.is_contiguous());
  EXPECT_EQ(col.to_host<float>(), (std::vector<float>{2, 3, 7, 8, 12, 13, 17, 18}));
  col.fill(-1);
  std::vector<float> after = a.to_host<float>();
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 5; ++c)
      EXPECT_EQ(after[r * 5 + c], (c == 2 || c == 3) ? -1.0f : host[r * 5 + c]) << r << "," << c;

  EXPECT_THROW(col.view({8}), RuntimeError);
}

TEST(TensorGpu, FillAndPoison) {
  TESSEL_REQUIRE_GPU();
  Tensor h = Tensor::empty({1000}, DType::f16);
  h.fill(NAN);
  for (std::uint16_t bits : h.to_host<std::uint16_t>()) ASSERT_EQ(bits, 0x7e00);
  Tensor f = Tensor::empty({3, 333}, DType::f32);
  f.fill(NAN);
  for (double v : f.to_host_f64()) ASSERT_TRUE(std::isnan(v));
  f.fill(2.5);
  for (double v : f.to_host_f64()) ASSERT_EQ(v, 2.5);
  Tensor d = Tensor::empty({17}, DType::f64);  // 8-byte elements go through a host buffer
  d.fill(NAN);
  for (double v : d.to_host_f64()) ASSERT_TRUE(std::isnan(v));
  Tensor b = Tensor::empty({5}, DType::bf16);
  b.fill(1.0 / 3.0);
  for (double v : b.to_host_f64()) ASSERT_EQ(v, round_to_bf16(1.0f / 3.0f));
  Tensor i = Tensor::empty({9}, DType::i64);
  i.fill(-123456789012.0);
  for (std::int64_t v : i.to_host<std::int64_t>()) ASSERT_EQ(v, -123456789012);
  EXPECT_THROW(i.fill(NAN), RuntimeError);
}

TEST(TensorGpu, FillRandomIsDeterministicAndRounded) {
  TESSEL_REQUIRE_GPU();
  Tensor a = Tensor::empty({64, 64}, DType::f16), b = Tensor::empty({64, 64}, DType::f16);
  a.fill_random(7, -2, 2);
  b.fill_random(7, -2, 2);
  const auto va = a.to_host_f64(), vb = b.to_host_f64();
  EXPECT_EQ(va, vb);
  double sum = 0;
  for (double v : va) {
    EXPECT_GE(v, -2.0);
    EXPECT_LE(v, 2.0);
    EXPECT_EQ(v, static_cast<double>(round_to_half(static_cast<float>(v))));
    sum += v;
  }
  EXPECT_LT(std::abs(sum / va.size()), 0.1);  // centred
  b.fill_random(8, -2, 2);
  EXPECT_NE(b.to_host_f64(), va);
  Tensor ints = Tensor::empty({1000}, DType::i8);
  ints.fill_random(1, -3, 3);
  for (double v : ints.to_host_f64()) ASSERT_TRUE(v >= -3 && v <= 3 && v == std::floor(v));
}

TEST(TensorGpu, DLPackRoundTrip) {
  TESSEL_REQUIRE_GPU();
  std::vector<float> host = {1, 2, 3, 4, 5, 6};
  Tensor original = Tensor::from_host(host, {2, 3}, DType::f32);
  const CUdeviceptr ptr = original.device_ptr();
  DLManagedTensor* m = original.to_dlpack();
  EXPECT_EQ(m->dl_tensor.device.device_type, kDLCUDA);
  EXPECT_EQ(m->dl_tensor.device.device_id, current_device().ordinal);
  Tensor imported = Tensor::from_dlpack(m);
  original = Tensor();  // the export alone must keep the memory alive
  EXPECT_EQ(imported.device_ptr(), ptr);
  EXPECT_EQ(imported.to_host<float>(), host);
  // The memory is still a live allocation of this context.
  CUdeviceptr base = 0;
  EXPECT_EQ(driver().cuPointerGetAttribute(&base, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, ptr), CUDA_SUCCESS);
  EXPECT_EQ(base, ptr);
  // A strided slice survives export and import with its strides.
  Tensor col = imported.slice(1, 1, 2);
  Tensor back = Tensor::from_dlpack(col.to_dlpack());
  EXPECT_EQ(back.strides(), (std::vector<std::int64_t>{3, 1}));
  EXPECT_EQ(back.to_host<float>(), (std::vector<float>{2, 5}));
}

}  // namespace
}  // namespace tessel
