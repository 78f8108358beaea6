// The driver without a GPU: a reason instead of a crash. These run on every machine; on one
// with a GPU they check the other side of the same contract.
#include <gtest/gtest.h>

#include "tessel/Error.hpp"
#include "tessel/runtime/Driver.hpp"
#include "tessel/runtime/Tensor.hpp"

namespace tessel {
namespace {

TEST(Driver, ReportsAReasonOrWorks) {
  if (gpu_available()) {
    EXPECT_EQ(gpu_unavailable_reason(), "");
    EXPECT_NO_THROW(driver());
    EXPECT_FALSE(current_device().name.empty());
    return;
  }
  const std::string reason = gpu_unavailable_reason();
  std::cout << "no GPU here: " << reason << "\n";
  EXPECT_FALSE(reason.empty());
  const bool known = reason.rfind("libcuda.so.1 not found: ", 0) == 0 ||
                     reason.rfind("cuInit failed: ", 0) == 0 || reason.rfind("no CUDA device", 0) == 0 ||
                     reason.find("TESSEL_DEVICE") != std::string::npos;
  EXPECT_TRUE(known) << reason;
  try {
    driver();
    FAIL() << "driver() did not throw without a GPU";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
  }
  EXPECT_THROW(current_device(), RuntimeError);
  EXPECT_THROW(ensure_context(), RuntimeError);
  EXPECT_THROW(Tensor::empty({4}, DType::f32), RuntimeError);
  EXPECT_THROW(Stream::create(), RuntimeError);
  EXPECT_THROW(EventTimer(), RuntimeError);
}

TEST(Driver, CheckCuMessage) {
  EXPECT_NO_THROW(check_cu(CUDA_SUCCESS, "cuNothing"));
  try {
    check_cu(CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc");
    FAIL();
  } catch (const RuntimeError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("CUDA driver call cuMemAlloc failed: ", 0), 0u) << msg;
    // With libcuda loaded the driver names the error; without it, the number stands in.
    EXPECT_TRUE(msg.find("CUDA_ERROR_OUT_OF_MEMORY") != std::string::npos ||
                msg.find("CUresult 2") != std::string::npos)
        << msg;
  }
}

TEST(Driver, ArchForComputeCapability) {
  EXPECT_EQ(arch_for_compute_capability(9, 0), "sm_90a");
  EXPECT_EQ(arch_for_compute_capability(8, 0), "sm_80");
  EXPECT_EQ(arch_for_compute_capability(8, 6), "sm_86");
  EXPECT_EQ(arch_for_compute_capability(8, 9), "sm_89");
  EXPECT_EQ(arch_for_compute_capability(10, 0), "sm_100a");
  EXPECT_EQ(arch_for_compute_capability(12, 0), "sm_120");
  DeviceInfo h200;
  h200.cc_major = 9;
  EXPECT_EQ(h200.arch(), "sm_90a");
}

TEST(Driver, DefaultStreamNeedsNoDriver) {
  Stream s;
  EXPECT_EQ(s.get(), nullptr);
  EXPECT_FALSE(s.owning());
  Stream w = Stream::wrap(reinterpret_cast<CUstream>(0x1234));
  EXPECT_EQ(static_cast<CUstream>(w), reinterpret_cast<CUstream>(0x1234));
  EXPECT_FALSE(w.owning());
}

}  // namespace
}  // namespace tessel
