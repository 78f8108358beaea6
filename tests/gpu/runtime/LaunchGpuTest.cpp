// Compiling, loading and launching NVRTC kernels through the driver API.
#include <gtest/gtest.h>

#include <cmath>

#include "support/TestSupport.hpp"
#include "tessel/runtime/Cache.hpp"
#include "tessel/runtime/Module.hpp"
#include "tessel/runtime/Tensor.hpp"

namespace tessel {
namespace {

const char* kVectorAdd = R"(
extern "C" __global__ void vadd(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
)";

const char* kSharedSum = R"(
extern "C" __global__ void shared_sum(const float* in, float* out, int n) {
  extern __shared__ float staged[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) staged[i] = in[i];
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0.0f;
    for (int i = 0; i < n; ++i) s += staged[i];
    out[0] = s;
  }
}
)";

CompileOptions local_arch() {
  CompileOptions o;
  o.arch = current_device().arch();
  return o;
}

TEST(LaunchGpu, VectorAdd) {
  TESSEL_REQUIRE_GPU();
  const int n = 1000;  // not a multiple of the block
  Tensor a = Tensor::empty({n}, DType::f32), b = Tensor::empty({n}, DType::f32),
         c = Tensor::empty({n}, DType::f32);
  a.fill_random(1);
  b.fill_random(2);
  c.fill(NAN);
  LoadedKernel k = load_kernel(kVectorAdd, "vadd", local_arch());
  EXPECT_EQ(k.name(), "vadd");
  EXPECT_GT(k.num_registers(), 0);
  CUdeviceptr pa = a.device_ptr(), pb = b.device_ptr(), pc = c.device_ptr();
  int count = n;
  void* args[] = {&pa, &pb, &pc, &count};
  k.launch({(n + 255) / 256, 1, 1}, {256, 1, 1}, 0, nullptr, args);
  check_cu(driver().cuCtxSynchronize(), "cuCtxSynchronize");
  const auto va = a.to_host<float>(), vb = b.to_host<float>(), vc = c.to_host<float>();
  for (int i = 0; i < n; ++i) ASSERT_EQ(vc[i], va[i] + vb[i]) << i;

  // Loading the same cubin again reuses the module and function.
  LoadedKernel again(compile_cached(kVectorAdd, "vadd", local_arch()));
  EXPECT_EQ(again.function(), k.function());
}

TEST(LaunchGpu, OptsIntoLargeDynamicSharedMemory) {
  TESSEL_REQUIRE_GPU();
  const int n = 100 * 1024 / 4;  // 100 KB: above the 48 KB default, below Hopper's cap
  if (current_device().smem_optin_per_block < n * 4) GTEST_SKIP() << "device allows less than 100 KB";
  std::vector<float> host(n);
  double expected = 0;
  for (int i = 0; i < n; ++i) expected += host[i] = static_cast<float>(i % 7);  // exact in float
  Tensor in = Tensor::from_host(host, {n}, DType::f32), out = Tensor::empty({1}, DType::f32);
  out.fill(NAN);
  LoadedKernel k = load_kernel(kSharedSum, "shared_sum", local_arch());
  CUdeviceptr pi = in.device_ptr(), po = out.device_ptr();
  int count = n;
  void* args[] = {&pi, &po, &count};
  Stream stream = Stream::create();
  EventTimer timer;
  timer.start(stream);
  k.launch({1, 1, 1}, {256, 1, 1}, n * 4, stream, args);
  timer.stop(stream);
  stream.synchronize();
  EXPECT_GE(timer.elapsed_ms(), 0.0f);
  EXPECT_EQ(out.to_host_f64()[0], expected);
}

TEST(LaunchGpu, TooMuchSharedMemoryIsAClearError) {
  TESSEL_REQUIRE_GPU();
  LoadedKernel k = load_kernel(kSharedSum, "shared_sum", local_arch());
  const int cap = current_device().smem_optin_per_block;
  CUdeviceptr p = 0;
  int count = 0;
  void* args[] = {&p, &p, &count};
  try {
    k.launch({1, 1, 1}, {32, 1, 1}, cap + 1024, nullptr, args);
    FAIL() << "launch with more shared memory than the device has";
  } catch (const RuntimeError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("kernel 'shared_sum'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(cap + 1024) + " bytes of dynamic shared memory"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("at most " + std::to_string(cap) + " bytes"), std::string::npos) << msg;
  }
}

TEST(LaunchGpu, LaunchErrorsNameTheKernel) {
  TESSEL_REQUIRE_GPU();
  LoadedKernel k = load_kernel(kVectorAdd, "vadd", local_arch());
  CUdeviceptr p = 0;
  int count = 0;
  void* args[] = {&p, &p, &p, &count};
  try {
    k.launch({1, 1, 1}, {4096, 1, 1}, 0, nullptr, args);  // more threads than a block may have
    FAIL();
  } catch (const RuntimeError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("CUDA driver call cuLaunchKernel(vadd"), std::string::npos) << msg;
    EXPECT_NE(msg.find("block (4096, 1, 1)"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace tessel
