// plan_matmul: which operands the library's Matmul stages for rows that are not 16-byte aligned,
// the shape its kernel is compiled for, and the model's choice (no GPU needed).
#include <gtest/gtest.h>

#include <stdexcept>

#include "tessel/kernels/gemm/Matmul.hpp"

namespace {

using tessel::DType;
using tessel::kernels::MatmulStaging;
using tessel::kernels::plan_matmul;

TEST(MatmulPlan, AlignedRowsStageNothing) {
  for (auto s : {MatmulStaging::automatic, MatmulStaging::always, MatmulStaging::never}) {
    const auto p = plan_matmul(4096, 4096, 4096, DType::f16, "sm_90a", s);
    EXPECT_FALSE(p.staged());
    EXPECT_EQ(p.kernel_N, 4096);
    EXPECT_EQ(p.kernel_K, 4096);
    EXPECT_NE(p.why.find("aligned"), std::string::npos) << p.why;
  }
  // M is never a row length: any M is fine.
  EXPECT_FALSE(plan_matmul(4095, 4096, 4096, DType::bf16, "sm_90a").staged());
  // f32 rows are aligned at multiples of 4 elements.
  EXPECT_FALSE(plan_matmul(100, 4100, 4100, DType::f32, "sm_90a").staged());
}

TEST(MatmulPlan, OddKStagesAAndB) {
  const auto p = plan_matmul(3072, 3072, 3073, DType::f16, "sm_90a");
  EXPECT_TRUE(p.stage_a);
  EXPECT_TRUE(p.stage_b);
  EXPECT_FALSE(p.stage_c);
  EXPECT_EQ(p.kernel_K, 3080);
  EXPECT_EQ(p.kernel_N, 3072);
  EXPECT_LT(p.estimate_staged_us, p.estimate_direct_us);
  EXPECT_NE(p.why.find("K = 3073 not a multiple of 8 f16 elements"), std::string::npos) << p.why;
}

TEST(MatmulPlan, OddNStagesBAndC) {
  const auto p = plan_matmul(8192, 50257, 4096, DType::bf16, "sm_90a");
  EXPECT_FALSE(p.stage_a);
  EXPECT_TRUE(p.stage_b);
  EXPECT_TRUE(p.stage_c);
  EXPECT_EQ(p.kernel_N, 50264);
  EXPECT_EQ(p.kernel_K, 4096);
  const auto both = plan_matmul(12345, 6789, 1011, DType::f16, "sm_90a");
  EXPECT_TRUE(both.stage_a && both.stage_b && both.stage_c);
  EXPECT_EQ(both.kernel_N, 6792);
  EXPECT_EQ(both.kernel_K, 1016);
}

TEST(MatmulPlan, SmallProblemsAreNotWorthTheCopiesUnlessForced) {
  const auto p = plan_matmul(7, 9, 63, DType::f16, "sm_90a");
  EXPECT_FALSE(p.staged());
  EXPECT_NE(p.why.find("not staged: the model expects"), std::string::npos) << p.why;
  const auto forced = plan_matmul(7, 9, 63, DType::f16, "sm_90a", MatmulStaging::always);
  EXPECT_TRUE(forced.staged());
  EXPECT_EQ(forced.kernel_N, 16);
  EXPECT_EQ(forced.kernel_K, 64);
  const auto off = plan_matmul(4095, 4095, 4095, DType::f16, "sm_90a", MatmulStaging::never);
  EXPECT_FALSE(off.staged());
  EXPECT_NE(off.why.find("MatmulStaging::never"), std::string::npos) << off.why;
}

TEST(MatmulPlan, BadArgumentsAreNamed) {
  try {
    (void)plan_matmul(0, 4, 4, DType::f16, "sm_90a");
    FAIL() << "no error for M = 0";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("must be positive, not 0x4x4"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)plan_matmul(4, 4, 4, DType::i32, "sm_90a"), std::invalid_argument);
  EXPECT_STREQ(tessel::kernels::matmul_staging_name(MatmulStaging::automatic), "auto");
  // A dimension that padding would carry past what an int holds is refused, not wrapped: not
  // staged when automatic, an error when staging is demanded.
  const auto huge = plan_matmul(64, 2147483647, 4096, DType::f16, "sm_90a");
  EXPECT_FALSE(huge.staged());
  EXPECT_EQ(huge.kernel_N, 2147483647LL);
  EXPECT_NE(huge.why.find("padding to 2147483648 columns and K = 4096 passes 2^31 - 1"), std::string::npos) << huge.why;
  try {
    (void)plan_matmul(64, 2147483647, 64, DType::f16, "sm_90a", MatmulStaging::always);
    FAIL() << "no error for a padded N past 2^31 - 1";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("plan_matmul: N = 2147483647 not a multiple of 8 f16 elements; padding to "
                                         "2147483648 columns"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
