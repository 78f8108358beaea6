// Attention configs as the command line spells them (`tessel bench attention --config`, `tessel
// dump attention --config`):
// "BMxBN:STAGES:THREADS[:pingpong|ring|cpasync][:persistent][:interleave][:lazy][:polyN]".
#pragma once

#include <string>

#include "tessel/kernels/attention/FlashAttention.hpp"

namespace tessel::cli {

inline constexpr const char* kAttentionConfigForm =
    "BMxBN:STAGES:THREADS[:pingpong|ring|cpasync][:persistent][:interleave][:lazy][:polyN]";

// "128x128:2:256:ring" -> config (no schedule: pingpong). Throws std::invalid_argument naming the
// text and the form.
kernels::AttentionConfig parse_attention_config(const std::string& text);
// The inverse: "128x128:2:256:ring".
std::string format_attention_config(const kernels::AttentionConfig& c);

}  // namespace tessel::cli
