#include "tools/tessel/GemmConfigs.hpp"

#include <stdexcept>

#include "tools/tessel/Parse.hpp"
#include "tools/tessel/System.hpp"

namespace tessel::cli {

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::size_t begin = 0;
  while (true) {
    std::size_t end = s.find(sep, begin);
    parts.push_back(s.substr(begin, end == std::string::npos ? std::string::npos : end - begin));
    if (end == std::string::npos) return parts;
    begin = end + 1;
  }
}

// A strict positive int (Parse.hpp): no sign, spaces, exponent or suffix; no overflow.
bool parse_positive(const std::string& s, int& out) {
  const auto v = parse_integer(s);
  if (!v || *v < 1 || *v > INT_MAX) return false;
  out = static_cast<int>(*v);
  return true;
}

}  // namespace

std::string GemmShape::describe() const {
  return std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K);
}

GemmShape parse_gemm_shape(const std::string& text) {
  const auto parts = split(text, 'x');
  GemmShape s;
  if (parts.size() != 3 || !parse_positive(parts[0], s.M) || !parse_positive(parts[1], s.N) ||
      !parse_positive(parts[2], s.K))
    throw std::invalid_argument("bad GEMM shape '" + text +
                                "': expected MxNxK with positive integers, e.g. 4096x4096x4096");
  return s;
}

kernels::MatmulConfig parse_matmul_config(const std::string& text, DType dtype) {
  const std::string expected =
      "expected BMxBNxBK:stages:threads[:swz[N]][:cXxY], e.g. 128x256x32:3:256, 128x128x32:2:128:swz or "
      "128x64x64:8:256:swz16:c2x1";
  const auto fields = split(text, ':');
  if (fields.size() < 3 || fields.size() > 5)
    throw std::invalid_argument("bad GEMM config '" + text + "': " + expected);
  const auto tile = split(fields[0], 'x');
  kernels::MatmulConfig c;
  c.dtype = dtype;
  if (tile.size() != 3 || !parse_positive(tile[0], c.block_M) || !parse_positive(tile[1], c.block_N) ||
      !parse_positive(tile[2], c.block_K) || !parse_positive(fields[1], c.num_stages) ||
      !parse_positive(fields[2], c.threads))
    throw std::invalid_argument("bad GEMM config '" + text + "': " + expected);
  for (std::size_t i = 3; i < fields.size(); ++i) {
    const std::string& f = fields[i];
    if (f.rfind("swz", 0) == 0 && i == 3) {
      // "swz" (panels of 10 blocks, the tutorial's) or "swzN" (panels of N).
      if (f.size() > 3 && !parse_positive(f.substr(3), c.panel_size))
        throw std::invalid_argument("bad GEMM config '" + text +
                                    "': 'swz' or 'swzN' swizzles in panels of N blocks");
      c.use_swizzle = true;
      continue;
    }
    // "cXxY": use_cluster(X, Y).
    const auto dims = f.size() > 1 && f[0] == 'c' ? split(f.substr(1), 'x') : std::vector<std::string>{};
    if (i + 1 != fields.size() || dims.size() != 2 || !parse_positive(dims[0], c.cluster_x) ||
        !parse_positive(dims[1], c.cluster_y))
      throw std::invalid_argument(
          "bad GEMM config '" + text + "': the optional fields after threads are " +
          "'swz' or 'swzN' (swizzle panels of N blocks), then 'cXxY' (use_cluster(X, Y), " + "e.g. c2x1)");
  }
  return c;
}

std::string format_matmul_config(const kernels::MatmulConfig& c) {
  return std::to_string(c.block_M) + "x" + std::to_string(c.block_N) + "x" + std::to_string(c.block_K) + ":" +
         std::to_string(c.num_stages) + ":" + std::to_string(c.threads) +
         (!c.use_swizzle       ? ""
          : c.panel_size == 10 ? ":swz"
                               : ":swz" + std::to_string(c.panel_size)) +
         (c.cluster_x * c.cluster_y > 1
              ? ":c" + std::to_string(c.cluster_x) + "x" + std::to_string(c.cluster_y)
              : "");
}

kernels::MatmulConfig fit_stages(kernels::MatmulConfig c, int smem_cap) {
  while (c.num_stages > 1 && kernels::matmul_smem_bytes(c) > smem_cap) --c.num_stages;
  return c;
}

kernels::MatmulConfig default_gemm_config(const GemmShape& shape, DType dtype, int smem_cap) {
  const SystemInfo& s = system_info();
  const std::string arch = s.arch();
  const int sms = s.gpu ? s.device.sm_count : 132;
  return fit_stages(kernels::default_matmul_config(shape.M, shape.N, shape.K, dtype, arch, sms), smem_cap);
}

nlohmann::json config_json(const kernels::MatmulConfig& c) {
  return {{"block_M", c.block_M},
          {"block_N", c.block_N},
          {"block_K", c.block_K},
          {"num_stages", c.num_stages},
          {"threads", c.threads},
          {"use_swizzle", c.use_swizzle},
          {"panel_size", c.panel_size},
          {"cluster", {c.cluster_x, c.cluster_y}},
          {"dtype", std::string(dtype_name(c.dtype))},
          {"accum_dtype", std::string(dtype_name(c.accum_dtype))},
          {"text", format_matmul_config(c)}};
}

}  // namespace tessel::cli
