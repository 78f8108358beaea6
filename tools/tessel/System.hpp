// What the commands report about the machine and the build: the GPU (or why there is none),
// the driver, NVRTC and cuBLAS versions, and the provenance a result file needs.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "tessel/Version.hpp"
#include "tessel/runtime/Driver.hpp"

namespace tessel::cli {

// The arch kernels are compiled for when there is no GPU (the H200's), and that arch's
// opt-in shared-memory cap per block, used to plan configs for compile-only runs.
inline constexpr const char* kCompileOnlyArch = "sm_90a";
inline constexpr int kCompileOnlySmemCap = 232448;

struct SystemInfo {
  bool gpu = false;
  std::string no_gpu_reason;     // when !gpu
  DeviceInfo device;             // when gpu
  int nvrtc_version = 0;         // 13000 for 13.0
  int cublas_version = 0;        // 130100 for 13.1.0; 0 when unknown
  int cuda_headers_version = 0;  // CUDA_VERSION the CLI was built against
  std::string tessel_version;

  std::string arch() const { return gpu ? device.arch() : kCompileOnlyArch; }
  int smem_cap() const { return gpu ? device.smem_optin_per_block : kCompileOnlySmemCap; }
};

// Queries once; never throws (a missing GPU is reported, not raised).
const SystemInfo& system_info();

// "13.0" from 13000 (CUDA/NVRTC style) ; "13.1.0" from 130100 (cuBLAS style).
std::string cuda_version_string(int v);
std::string cublas_version_string(int v);

// The commit the results came from: $TESSEL_GIT_COMMIT, else "unknown".
std::string git_commit();
// UTC now, ISO 8601 ("2026-12-02T17:40:00Z").
std::string utc_timestamp();
// The command line as typed (argv joined with spaces); set once by main.
void set_command_line(int argc, char** argv);
const std::string& command_line();

// {device, driver, nvrtc, cublas, tessel_version, git_commit, date, command} for result files.
nlohmann::json provenance_json();
nlohmann::json device_json();

}  // namespace tessel::cli
