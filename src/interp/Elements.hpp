// Reading and writing one element of a typed byte array, with the conversions the GPU applies:
// floats round to nearest even into the element type (f16 and bf16 bit-exact, see
// runtime/HostFloat.hpp), integers wrap, float -> integer truncates toward zero and saturates
// (NaN gives 0), as cvt.rzi does. Values travel as double (every float dtype fits exactly) or
// int64 (every integer dtype fits).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "tessel/DType.hpp"
#include "tessel/runtime/HostFloat.hpp"

namespace tessel::interp::detail {

// Float storage is the float path; every other dtype (integers and bool) is the integer path.
inline bool is_float_path(DType t) {
  return is_float(t);
}

// d rounded to float toward zero, with the last bit set when inexact ("round to odd"). Rounding
// that float again to a format with at least two fewer mantissa bits (f16: 11, bf16: 8, float:
// 24) gives the correctly rounded result of d, so double -> f16/bf16 rounds once, not twice.
inline float double_to_float_round_to_odd(double d) {
  float f = static_cast<float>(d);
  if (std::isnan(d) || static_cast<double>(f) == d) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(f) | 1u);
}

inline std::uint16_t double_to_half_bits(double d) {
  return float_to_half_bits(double_to_float_round_to_odd(d));
}
inline std::uint16_t double_to_bf16_bits(double d) {
  return float_to_bf16_bits(double_to_float_round_to_odd(d));
}

// The float value v becomes once stored as t (t a float dtype).
inline double round_to_dtype(double v, DType t) {
  switch (t) {
    case DType::f16:
      return half_bits_to_float(double_to_half_bits(v));
    case DType::bf16:
      return bf16_bits_to_float(double_to_bf16_bits(v));
    case DType::f32:
      return static_cast<float>(v);
    default:
      return v;
  }
}

// The integer v becomes once stored as t (t on the integer path): two's-complement wrap.
inline std::int64_t wrap_to_dtype(std::int64_t v, DType t) {
  switch (t) {
    case DType::i8:
      return static_cast<std::int8_t>(static_cast<std::uint8_t>(v));
    case DType::u8:
      return static_cast<std::uint8_t>(v);
    case DType::i32:
      return static_cast<std::int32_t>(static_cast<std::uint32_t>(v));
    case DType::boolean:
      return v != 0;
    default:
      return v;
  }
}

// float -> integer dtype: truncation toward zero, saturating at the type's range, NaN -> 0.
inline std::int64_t float_to_int(double v, DType t) {
  if (t == DType::boolean) return v != 0.0;
  if (std::isnan(v)) return 0;
  double lo = 0, hi = 0;
  switch (t) {
    case DType::i8:
      lo = -128.0, hi = 127.0;
      break;
    case DType::u8:
      lo = 0.0, hi = 255.0;
      break;
    case DType::i32:
      lo = -2147483648.0, hi = 2147483647.0;
      break;
    default:
      if (v >= 9223372036854775807.0) return std::numeric_limits<std::int64_t>::max();
      if (v <= -9223372036854775808.0) return std::numeric_limits<std::int64_t>::min();
      return static_cast<std::int64_t>(v);
  }
  v = std::trunc(v);
  return static_cast<std::int64_t>(v < lo ? lo : v > hi ? hi : v);
}

// integer -> float dtype, rounded once.
inline double int_to_float(std::int64_t v, DType t) {
  if (t == DType::f32) return static_cast<float>(v);
  return round_to_dtype(static_cast<double>(v), t);
}

template <class T>
inline T read_raw(const unsigned char* base, std::int64_t i) {
  T v;
  std::memcpy(&v, base + i * static_cast<std::int64_t>(sizeof(T)), sizeof(T));
  return v;
}
template <class T>
inline void write_raw(unsigned char* base, std::int64_t i, T v) {
  std::memcpy(base + i * static_cast<std::int64_t>(sizeof(T)), &v, sizeof(T));
}

// Element i of a t-typed array, as a double (float dtypes) ...
inline double load_float(const unsigned char* base, DType t, std::int64_t i) {
  switch (t) {
    case DType::f16:
      return half_bits_to_float(read_raw<std::uint16_t>(base, i));
    case DType::bf16:
      return bf16_bits_to_float(read_raw<std::uint16_t>(base, i));
    case DType::f32:
      return read_raw<float>(base, i);
    case DType::f64:
      return read_raw<double>(base, i);
    case DType::i8:
      return read_raw<std::int8_t>(base, i);
    case DType::u8:
      return read_raw<std::uint8_t>(base, i);
    case DType::i32:
      return read_raw<std::int32_t>(base, i);
    case DType::i64:
      return static_cast<double>(read_raw<std::int64_t>(base, i));
    case DType::boolean:
      return read_raw<std::uint8_t>(base, i) != 0;
  }
  return 0;
}

// ... or as an int64 (integer dtypes; a float element converts as float_to_int does to i64).
inline std::int64_t load_int(const unsigned char* base, DType t, std::int64_t i) {
  switch (t) {
    case DType::i8:
      return read_raw<std::int8_t>(base, i);
    case DType::u8:
      return read_raw<std::uint8_t>(base, i);
    case DType::i32:
      return read_raw<std::int32_t>(base, i);
    case DType::i64:
      return read_raw<std::int64_t>(base, i);
    case DType::boolean:
      return read_raw<std::uint8_t>(base, i) != 0;
    default:
      return float_to_int(load_float(base, t, i), DType::i64);
  }
}

// Stores a float value into element i, rounding (float dtypes) or converting (integer dtypes).
inline void store_float(unsigned char* base, DType t, std::int64_t i, double v) {
  switch (t) {
    case DType::f16:
      write_raw<std::uint16_t>(base, i, double_to_half_bits(v));
      return;
    case DType::bf16:
      write_raw<std::uint16_t>(base, i, double_to_bf16_bits(v));
      return;
    case DType::f32:
      write_raw<float>(base, i, static_cast<float>(v));
      return;
    case DType::f64:
      write_raw<double>(base, i, v);
      return;
    case DType::i8:
      write_raw<std::int8_t>(base, i, static_cast<std::int8_t>(float_to_int(v, t)));
      return;
    case DType::u8:
      write_raw<std::uint8_t>(base, i, static_cast<std::uint8_t>(float_to_int(v, t)));
      return;
    case DType::i32:
      write_raw<std::int32_t>(base, i, static_cast<std::int32_t>(float_to_int(v, t)));
      return;
    case DType::i64:
      write_raw<std::int64_t>(base, i, float_to_int(v, t));
      return;
    case DType::boolean:
      write_raw<std::uint8_t>(base, i, v != 0.0);
      return;
  }
}

// Stores an integer value into element i, wrapping (integer dtypes) or rounding (float dtypes).
inline void store_int(unsigned char* base, DType t, std::int64_t i, std::int64_t v) {
  switch (t) {
    case DType::i8:
      write_raw<std::int8_t>(base, i, static_cast<std::int8_t>(wrap_to_dtype(v, t)));
      return;
    case DType::u8:
      write_raw<std::uint8_t>(base, i, static_cast<std::uint8_t>(wrap_to_dtype(v, t)));
      return;
    case DType::i32:
      write_raw<std::int32_t>(base, i, static_cast<std::int32_t>(wrap_to_dtype(v, t)));
      return;
    case DType::i64:
      write_raw<std::int64_t>(base, i, v);
      return;
    case DType::boolean:
      write_raw<std::uint8_t>(base, i, v != 0);
      return;
    default:
      store_float(base, t, i, int_to_float(v, t));
      return;
  }
}

// dst[j] = src[i] with the conversion a typed assignment makes on the GPU.
inline void convert_element(const unsigned char* src, DType st, std::int64_t i, unsigned char* dst, DType dt,
                            std::int64_t j) {
  if (st == dt) {
    const auto n = static_cast<std::size_t>(dtype_bytes(st));
    std::memcpy(dst + j * static_cast<std::int64_t>(n), src + i * static_cast<std::int64_t>(n), n);
  } else if (is_float_path(st)) {
    store_float(dst, dt, j, load_float(src, st, i));
  } else {
    store_int(dst, dt, j, load_int(src, st, i));
  }
}

}  // namespace tessel::interp::detail
