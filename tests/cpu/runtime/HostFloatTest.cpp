// Host f16/bf16 conversions: ties to even, subnormals, overflow, NaN; cross-checked against the
// compiler's own _Float16 where it has one.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "tessel/runtime/HostFloat.hpp"

namespace tessel {
namespace {

bool half_is_nan(std::uint16_t h) {
  return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
}

TEST(HostFloat, HalfExactValues) {
  EXPECT_EQ(float_to_half_bits(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half_bits(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half_bits(0.0f), 0x0000);
  EXPECT_EQ(float_to_half_bits(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half_bits(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half_bits(0x1p-14f), 0x0400);  // smallest normal
  EXPECT_EQ(float_to_half_bits(0x1p-24f), 0x0001);  // smallest subnormal
  EXPECT_EQ(half_bits_to_float(0x0001), 0x1p-24f);
  EXPECT_EQ(half_bits_to_float(0x03ff), 1023 * 0x1p-24f);
  EXPECT_EQ(half_bits_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(half_bits_to_float(0xc000), -2.0f);
}

TEST(HostFloat, HalfTiesToEven) {
  EXPECT_EQ(float_to_half_bits(1.0f + 0x1p-11f), 0x3c00);             // halfway 1 | 1+2^-10: even is 1
  EXPECT_EQ(float_to_half_bits(1.0f + 3 * 0x1p-11f), 0x3c02);         // halfway 0x3c01 | 0x3c02: even
  EXPECT_EQ(float_to_half_bits(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);  // just above the tie
  EXPECT_EQ(float_to_half_bits(0x1p-25f), 0x0000);                    // halfway 0 | 2^-24
  EXPECT_EQ(float_to_half_bits(3 * 0x1p-25f), 0x0002);                // halfway 1 | 2 subnormal units
  EXPECT_EQ(float_to_half_bits(0x1p-25f * 1.0001f), 0x0001);
  EXPECT_EQ(float_to_half_bits(0x1p-14f - 0x1p-25f), 0x0400);  // the largest subnormal rounds up to normal
}

TEST(HostFloat, HalfOverflowAndSpecials) {
  EXPECT_EQ(float_to_half_bits(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_half_bits(65520.0f), 0x7c00);  // the tie rounds to even: infinity
  EXPECT_EQ(float_to_half_bits(1e10f), 0x7c00);
  EXPECT_EQ(float_to_half_bits(-1e10f), 0xfc00);
  EXPECT_EQ(float_to_half_bits(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_TRUE(half_is_nan(float_to_half_bits(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(
      half_is_nan(float_to_half_bits(std::bit_cast<float>(0x7f800001u))));  // payload only in low bits
  EXPECT_TRUE(std::isinf(half_bits_to_float(0x7c00)));
  EXPECT_TRUE(std::isnan(half_bits_to_float(0x7e00)));
  EXPECT_EQ(float_to_half_bits(1e-10f), 0x0000);
  EXPECT_EQ(float_to_half_bits(std::bit_cast<float>(1u)), 0x0000);  // float subnormal
}

TEST(HostFloat, HalfRoundTripsEveryValue) {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    if (half_is_nan(bits)) {
      EXPECT_TRUE(half_is_nan(float_to_half_bits(half_bits_to_float(bits))));
      continue;
    }
    ASSERT_EQ(float_to_half_bits(half_bits_to_float(bits)), bits) << std::hex << h;
  }
}

#if defined(__FLT16_MAX__) && defined(__x86_64__)
TEST(HostFloat, HalfMatchesCompilerFloat16) {
  std::uint32_t x = 12345;
  for (int i = 0; i < 2000000; ++i) {
    x = x * 1664525u + 1013904223u;  // every exponent, sign and mantissa pattern
    const float f = std::bit_cast<float>(x);
    if (std::isnan(f)) continue;
    const _Float16 ref = static_cast<_Float16>(f);
    ASSERT_EQ(float_to_half_bits(f), std::bit_cast<std::uint16_t>(ref)) << std::hexfloat << f;
  }
}
#endif

TEST(HostFloat, Bfloat16) {
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(bf16_bits_to_float(0x3f80), 1.0f);
  EXPECT_EQ(float_to_bf16_bits(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie: even stays
  EXPECT_EQ(float_to_bf16_bits(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie: odd rounds up
  EXPECT_EQ(float_to_bf16_bits(std::bit_cast<float>(0x3f808001u)), 0x3f81);
  EXPECT_EQ(float_to_bf16_bits(std::bit_cast<float>(0x7f7fffffu)), 0x7f80);  // overflow to inf
  EXPECT_EQ(float_to_bf16_bits(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(float_to_bf16_bits(std::bit_cast<float>(0x00018000u)), 0x0002);  // subnormal tie to even
  const std::uint16_t nan = float_to_bf16_bits(std::bit_cast<float>(0x7f800001u));
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(nan))) << std::hex << nan;
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const float f = bf16_bits_to_float(static_cast<std::uint16_t>(b));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_bf16_bits(f), b);
  }
}

TEST(HostFloat, RoundHelpers) {
  EXPECT_EQ(round_to_half(0.1f), half_bits_to_float(0x2e66));
  EXPECT_EQ(round_to_bf16(3.14159265f), 3.140625f);
}

}  // namespace
}  // namespace tessel
