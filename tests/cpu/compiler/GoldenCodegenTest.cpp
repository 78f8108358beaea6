// Reference kernels keep their generated CUDA as golden text, so a refactor that changes codegen
// shows up in review. After an intended change, regenerate with TESSEL_UPDATE_GOLDEN=1 and
// commit the new files.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "Lower.hpp"
#include "codegen/CodegenCuda.hpp"
#include "tessel/kernels/gemm/Matmul.hpp"

#ifndef TESSEL_SOURCE_DIR
#define TESSEL_SOURCE_DIR "."
#endif

namespace {

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void check_golden(const std::string& name, const std::string& text) {
  std::filesystem::path file = std::filesystem::path(TESSEL_SOURCE_DIR) / "tests/cpu/compiler/golden" / name;
  if (std::getenv("TESSEL_UPDATE_GOLDEN")) {
    std::ofstream(file) << text;
    GTEST_SKIP() << "SKIPPED: rewrote " << file;
  }
  ASSERT_TRUE(std::filesystem::exists(file)) << file << " is missing; run with TESSEL_UPDATE_GOLDEN=1";
  EXPECT_EQ(read_file(file), text) << "generated code for " << name
                                   << " changed; if intended, rerun with TESSEL_UPDATE_GOLDEN=1";
}

TEST(GoldenCodegen, TutorialMatmul) {
  auto f = tessel::kernels::matmul_program(1000, 1000, 1000, {});
  auto lowered = tessel::lower(f.ir(), {"sm_90a", 90, 232448});
  check_golden("matmul_1000_128x128x32_s3.cu", tessel::codegen::generate_cuda(lowered));
}

TEST(GoldenCodegen, TutorialMatmulSwizzledOddShape) {
  tessel::kernels::MatmulConfig c;
  c.block_M = 64;
  c.block_N = 64;
  c.num_stages = 2;
  c.use_swizzle = true;
  c.dtype = tessel::DType::bf16;
  auto f = tessel::kernels::matmul_program(17, 33, 65, c);
  auto lowered = tessel::lower(f.ir(), {"sm_80", 80, 166912});
  check_golden("matmul_17x33x65_64x64x32_s2_swz_bf16.cu", tessel::codegen::generate_cuda(lowered));
}

}  // namespace
