// IEEE binary16 (f16) and bfloat16 on the host, bit-exact with the GPU's conversions
// (round to nearest, ties to even; subnormals kept; overflow to infinity; NaN stays NaN).
// The runtime uses them to fill and read tensors; the reference interpreter and the tests use
// them to round exactly as the device does.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace tessel {

inline float half_bits_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  const std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24 is exact in float.
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31)  // infinity, or NaN with its payload kept
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 127 - 15) << 23) | (mantissa << 13));
}

inline float bf16_bits_to_float(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

inline std::uint16_t float_to_half_bits(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u)  // NaN: quiet it, keep the top payload bits
    return static_cast<std::uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  // 65520 is halfway between 65504 (the largest half, odd mantissa) and 2^16: it and everything
  // above round to infinity.
  if (a >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (a < 0x38800000u) {  // below 2^-14: a half subnormal (or zero)
    const std::uint32_t e = a >> 23;
    if (e < 102) return sign;  // below 2^-25: rounds to zero (2^-25 itself ties to even zero)
    const std::uint32_t m = (a & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126 - e;  // value / 2^-24 = m * 2^(e - 126)
    std::uint32_t r = m >> shift;
    const std::uint32_t rem = m & ((1u << shift) - 1);
    const std::uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;  // may carry into the smallest normal
    return static_cast<std::uint16_t>(sign | r);
  }
  const std::uint32_t rebiased = a - ((127u - 15u) << 23);
  std::uint32_t h = rebiased >> 13;
  const std::uint32_t rem = rebiased & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry bumps the exponent, as it should
  return static_cast<std::uint16_t>(sign | h);
}

inline std::uint16_t float_to_bf16_bits(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u)  // NaN: keep it NaN even if the payload sits in low bits
    return static_cast<std::uint16_t>((x >> 16) | 0x0040u);
  const std::uint32_t lsb = (x >> 16) & 1u;
  return static_cast<std::uint16_t>((x + 0x7fffu + lsb) >> 16);  // ties to even; overflows to inf
}

// The value after a round trip through the narrow type.
inline float round_to_half(float f) {
  return half_bits_to_float(float_to_half_bits(f));
}
inline float round_to_bf16(float f) {
  return bf16_bits_to_float(float_to_bf16_bits(f));
}

// The language's poly_exp2 (device/tessel/types.cuh's tessel::poly_exp2), bit for bit: x clamped
// to [-127, 128] (NaN kept), j = floor(x), f = x - j (exact), p = 1 + f (c1 + f (c2 + f c3)) by
// three fused multiply-adds, times 2^j built in the exponent field (0 at j = -127, infinity at
// j = 128). The coefficients are the device function's; PolyExp2Gpu.SameBitsAsTheInterpreter
// (tests/gpu/kernels/FastExp2GpuTest.cpp) compares the two's bits.
inline float poly_exp2_like_the_gpu(float x) {
  if (!std::isnan(x)) x = std::fmin(std::fmax(x, -127.0f), 128.0f);
  const float j = std::floor(x);  // the device's add rounded down against 1.5 * 2^23
  const float f = x - j;
  float p = std::fma(0x1.3baac0p-4f, f, 0x1.d23778p-3f);
  p = std::fma(p, f, 0x1.63e65ap-1f);
  p = std::fma(p, f, 1.0f);
  if (std::isnan(x)) return p;
  const auto exponent = static_cast<std::uint32_t>(static_cast<int>(j) + 127);
  return p * std::bit_cast<float>(exponent << 23);
}

}  // namespace tessel
