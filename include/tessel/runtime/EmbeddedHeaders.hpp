// The device headers (device/tessel/*.cuh), embedded in the library at build time by
// cmake/EmbedFiles.cmake and handed to NVRTC as in-memory headers.
#pragma once

#include <span>
#include <string_view>

namespace tessel {

struct EmbeddedFile {
  std::string_view include_name{};  // e.g. "tessel/gemm.cuh"
  std::string_view text{};
};

std::span<const EmbeddedFile> embedded_device_headers();

}  // namespace tessel
