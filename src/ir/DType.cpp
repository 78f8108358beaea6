#include "tessel/DType.hpp"

namespace tessel {

namespace {
struct DTypeInfo {
  std::string_view name;
  int bytes;
  std::string_view cuda;
  int dl_code;
  int dl_bits;
};

constexpr DTypeInfo kInfo[] = {
#define TESSEL_DTYPE_INFO(name, str, bytes, cuda, dl_code, dl_bits) {str, bytes, cuda, dl_code, dl_bits},
    TESSEL_DTYPES(TESSEL_DTYPE_INFO)
#undef TESSEL_DTYPE_INFO
};

const DTypeInfo& info(DType t) {
  return kInfo[static_cast<int>(t)];
}
}  // namespace

std::string_view dtype_name(DType t) {
  return info(t).name;
}
int dtype_bytes(DType t) {
  return info(t).bytes;
}
std::string_view dtype_cuda_name(DType t) {
  return info(t).cuda;
}
int dlpack_code(DType t) {
  return info(t).dl_code;
}
int dlpack_bits(DType t) {
  return info(t).dl_bits;
}

bool is_float(DType t) {
  return t == DType::f16 || t == DType::bf16 || t == DType::f32 || t == DType::f64;
}
bool is_integer(DType t) {
  return t == DType::i8 || t == DType::u8 || t == DType::i32 || t == DType::i64;
}

std::optional<DType> parse_dtype(std::string_view s) {
  for (int i = 0; i < static_cast<int>(std::size(kInfo)); ++i)
    if (kInfo[i].name == s) return static_cast<DType>(i);
  if (s == "float16" || s == "half") return DType::f16;
  if (s == "bfloat16") return DType::bf16;
  if (s == "float32" || s == "float") return DType::f32;
  if (s == "float64" || s == "double") return DType::f64;
  if (s == "int32") return DType::i32;
  if (s == "int64") return DType::i64;
  if (s == "int8") return DType::i8;
  return std::nullopt;
}

std::optional<DType> dtype_from_dlpack(int code, int bits) {
  for (int i = 0; i < static_cast<int>(std::size(kInfo)); ++i)
    if (kInfo[i].dl_code == code && kInfo[i].dl_bits == bits) return static_cast<DType>(i);
  return std::nullopt;
}

}  // namespace tessel
