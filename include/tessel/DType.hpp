// Element types of Tessel tensors and buffers, shared by the frontend, the IR, codegen and
// the runtime. One list (TESSEL_DTYPES) drives every table so that they cannot drift apart.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tessel {

// X(enum name, user-facing name, bytes, CUDA device type, DLPack code, DLPack bits)
// DLPack codes: 0 int, 1 uint, 2 float, 4 bfloat, 6 bool.
#define TESSEL_DTYPES(X)                          \
  X(f16, "f16", 2, "tessel::half_t", 2, 16)       \
  X(bf16, "bf16", 2, "tessel::bfloat16_t", 4, 16) \
  X(f32, "f32", 4, "float", 2, 32)                \
  X(f64, "f64", 8, "double", 2, 64)               \
  X(i8, "i8", 1, "signed char", 0, 8)             \
  X(u8, "u8", 1, "unsigned char", 1, 8)           \
  X(i32, "i32", 4, "int", 0, 32)                  \
  X(i64, "i64", 8, "long long", 0, 64)            \
  X(boolean, "bool", 1, "bool", 6, 8)

enum class DType : std::uint8_t {
#define TESSEL_DTYPE_ENUM(name, str, bytes, cuda, dl_code, dl_bits) name,
  TESSEL_DTYPES(TESSEL_DTYPE_ENUM)
#undef TESSEL_DTYPE_ENUM
};

// Short spellings for kernel authors: T::f16, T::bf16, T::f32 ...
inline constexpr DType f16 = DType::f16;
inline constexpr DType bf16 = DType::bf16;
inline constexpr DType f32 = DType::f32;
inline constexpr DType f64 = DType::f64;
inline constexpr DType i8 = DType::i8;
inline constexpr DType u8 = DType::u8;
inline constexpr DType i32 = DType::i32;
inline constexpr DType i64 = DType::i64;
inline constexpr DType boolean = DType::boolean;

// "f16", "bf16", ... — the spelling used in IR text, errors and the CLI.
std::string_view dtype_name(DType t);
// Parses the spelling above (also accepts "float16", "bfloat16", "float32", "float", "half").
std::optional<DType> parse_dtype(std::string_view s);
int dtype_bytes(DType t);
// The element type generated CUDA code uses for this dtype.
std::string_view dtype_cuda_name(DType t);
bool is_float(DType t);
bool is_integer(DType t);  // bool counts as neither float nor integer
int dlpack_code(DType t);
int dlpack_bits(DType t);
std::optional<DType> dtype_from_dlpack(int code, int bits);

}  // namespace tessel
