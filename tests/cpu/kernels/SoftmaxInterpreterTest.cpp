// The softmax kernels' numerics on the CPU interpreter (CI has no GPU), every variant, against a
// float64 reference.
#include <gtest/gtest.h>

#include <random>

#include "support/SoftmaxReference.hpp"
#include "support/TestSupport.hpp"
#include "tessel/interp/Interpreter.hpp"
#include "tessel/kernels/softmax/Softmax.hpp"

namespace {

using tessel::DType;
using tessel::kernels::SoftmaxConfig;
using tessel::kernels::SoftmaxVariant;

void check(long long M, long long N, DType t, const SoftmaxConfig& c) {
  SCOPED_TRACE(std::to_string(M) + "x" + std::to_string(N) + " " + std::string(tessel::dtype_name(t)) + " " +
               c.describe());
  std::mt19937_64 seeds(std::random_device{}());
  auto x = tessel::interp::HostTensor::random(t, {M, N}, seeds(), -4, 4);
  auto y = tessel::interp::run_on_cpu(tessel::kernels::softmax_program(M, N, t, c), {x}, {-1});
  auto ref = tessel::test::reference_softmax(x.to_values(), M, N);
  double err = tessel::test::rel_error(y[0].to_values(), ref);
  EXPECT_LE(err, t == DType::f32 ? 1e-5 : 1e-2) << "relative error " << err;
}

TEST(SoftmaxInterpreter, DefaultConfigsAcrossWidths) {
  for (DType t : {DType::f32, DType::f16, DType::bf16})
    for (long long N : {1, 2, 7, 31, 100, 256, 1000})
      check(12, N, t, tessel::kernels::default_softmax_config(12, N, t));
}

// Rows that do not start 16-byte aligned, one a block: the tile starts at the aligned word at
// or before each row (a negative column start, different per row), the head and tail padding;
// the online variant's chunks likewise. The widths of issue 17 and a few around them.
TEST(SoftmaxInterpreter, RowWindowsFromTheAlignedWordBefore) {
  for (DType t : {DType::f16, DType::bf16, DType::f32})
    for (long long N : {4099LL, 8191LL, 8193LL}) {
      check(9, N, t, tessel::kernels::default_softmax_config(9, N, t));
      check(9, N, t, tessel::kernels::parse_softmax_config("rows:t128:r1:bn" + std::to_string((N + 1000 + 1023) / 1024 * 1024) + ":s2:w"));
    }
  check(5, 50257, DType::f16, tessel::kernels::default_softmax_config(5, 50257, DType::f16));
  SoftmaxConfig online;
  online.variant = SoftmaxVariant::Online;
  online.threads = 64;
  online.block_N = 512;
  for (long long N : {513LL, 1023LL, 1025LL, 1537LL}) check(7, N, DType::f16, online);
}

TEST(SoftmaxInterpreter, OneRowPerBlock) {
  SoftmaxConfig c;
  c.variant = SoftmaxVariant::Row;
  c.threads = 128;
  c.block_N = 4096;
  check(3, 4097 - 1024, DType::f16, c);
}

TEST(SoftmaxInterpreter, OnlineTwoPassOverChunks) {
  SoftmaxConfig c;
  c.variant = SoftmaxVariant::Online;
  c.threads = 64;
  c.block_N = 512;
  for (DType t : {DType::f32, DType::bf16}) check(3, 1500, t, c);
}

}  // namespace

namespace {

// Rows kept as loaded with a shared tail: the storage changes where elements live, not values.
TEST(SoftmaxInterpreter, RowsWithASharedTail) {
  for (DType t : {DType::f16, DType::f32}) {
    check(3, 4096, t, tessel::kernels::parse_softmax_config("rows:t128:r1:bn4096:s5"));
    check(3, 3001, t, tessel::kernels::parse_softmax_config("rows:t128:r1:bn4096:s2"));
  }
}

}  // namespace

namespace {

// A rows tile narrower than the row would leave columns unread: a clear error, not wrong output.
TEST(SoftmaxConfigErrors, RowsTileNarrowerThanTheRow) {
  try {
    tessel::kernels::softmax_program(64, 32768, DType::f16, tessel::kernels::parse_softmax_config("rows:t512:r1:bn20480"));
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("block_N = 20480 is narrower than the row (N = 32768)"), std::string::npos)
        << e.what();
  }
}

}  // namespace

namespace {

// The w flag (row windows): read back as written, only on the rows variant, and a tile without
// room for the shift is an error naming the width it needs.
TEST(SoftmaxConfigErrors, RowWindowsFlag) {
  const auto c = tessel::kernels::parse_softmax_config("rows:t512:r1:bn53248:s11:w");
  EXPECT_TRUE(c.window);
  EXPECT_EQ(c.describe(), "rows:t512:r1:bn53248:s11:w");
  EXPECT_FALSE(tessel::kernels::parse_softmax_config("rows:t512:r1:bn53248:s11").window);
  EXPECT_TRUE(tessel::kernels::default_softmax_config(10000, 50257, DType::f16).window);
  // Long unaligned rows, one a block: windows on the lanes the windowed row needs (8198 columns
  // of 8191 f16 on 352 x 3, 3 % more than the realigned 256 x 4); where that pads more than 5 %
  // beyond the realigned tile (4095 f16: 4102 columns against an exact 128 x 4) or the rows are
  // short enough to share a block (1025 f16, four rows of 32 lanes), the realigned loads stay.
  EXPECT_EQ(tessel::kernels::default_softmax_config(10000, 8191, DType::f16).describe(),
            "rows:t352:r1:bn8448:w");
  EXPECT_EQ(tessel::kernels::default_softmax_config(10000, 4095, DType::f16).describe(),
            "rows:t128:r1:bn4096");
  EXPECT_EQ(tessel::kernels::default_softmax_config(10000, 1025, DType::f16).describe(),
            "rows:t128:r4:bn1280");
  EXPECT_FALSE(tessel::kernels::default_softmax_config(10000, 8192, DType::f16).window);
  try {
    tessel::kernels::parse_softmax_config("online:t256:bn4096:w");
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("w (row windows) applies to the rows variant only"), std::string::npos)
        << e.what();
  }
  try {
    tessel::kernels::softmax_program(64, 8191, DType::f16, tessel::kernels::parse_softmax_config("rows:t256:r1:bn8192:w"));
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("block_N = 8192 leaves no room for row windows (w) at N = 8191; they need "
                                         "block_N >= N + 7 = 8198 for f16"),
              std::string::npos)
        << e.what();
  }
  // Rows that start aligned: w changes nothing (and needs no room).
  EXPECT_EQ(tessel::kernels::softmax_program(64, 8192, DType::f16, tessel::kernels::parse_softmax_config("rows:t256:r1:bn8192:w"))
                .script(),
            tessel::kernels::softmax_program(64, 8192, DType::f16, tessel::kernels::parse_softmax_config("rows:t256:r1:bn8192"))
                .script());
}

}  // namespace
