// GEMM shapes and configs as the command line spells them, and the built-in default config
// per shape (the one table to tune until the autotuner, issue #6, replaces it).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessel/kernels/gemm/Matmul.hpp"

namespace tessel::cli {

struct GemmShape {
  int M = 0, N = 0, K = 0;
  std::string describe() const;  // "2048x2048x2048"
};

// "MxNxK" -> shape; throws std::invalid_argument naming the text and the expected form.
GemmShape parse_gemm_shape(const std::string& text);
// "BMxBNxBK:stages:threads[:swz[N]][:cXxY]" -> config (dtype left as given); throws std::invalid_argument.
kernels::MatmulConfig parse_matmul_config(const std::string& text, DType dtype);
// The inverse of parse_matmul_config: "128x256x32:3:256" or "128x128x32:2:128:swz".
std::string format_matmul_config(const kernels::MatmulConfig& c);

// The config `tessel bench gemm`, `bench compile` and `dump gemm` use when --config is absent:
// kernels::default_matmul_config for this machine's arch (sm_90a without a GPU) and SM count,
// with the stage count then lowered until the pipeline fits `smem_cap` bytes.
kernels::MatmulConfig default_gemm_config(const GemmShape& shape, DType dtype, int smem_cap);

// Lowers num_stages (not below 1) until matmul_smem_bytes fits `smem_cap`.
kernels::MatmulConfig fit_stages(kernels::MatmulConfig c, int smem_cap);

nlohmann::json config_json(const kernels::MatmulConfig& c);

}  // namespace tessel::cli
