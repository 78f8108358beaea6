#include "tools/tessel/System.hpp"

#include <cublas_v2.h>

#include <chrono>
#include <cstdlib>
#include <ctime>

#include "tessel/runtime/Nvrtc.hpp"

namespace tessel::cli {

namespace {

int query_cublas_version() {
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) != CUBLAS_STATUS_SUCCESS) return 0;
  if (cublasGetProperty(MINOR_VERSION, &minor) != CUBLAS_STATUS_SUCCESS) return 0;
  if (cublasGetProperty(PATCH_LEVEL, &patch) != CUBLAS_STATUS_SUCCESS) return 0;
  return major * 10000 + minor * 100 + patch;
}

std::string& command_line_storage() {
  static std::string s;
  return s;
}

}  // namespace

const SystemInfo& system_info() {
  static const SystemInfo info = [] {
    SystemInfo i;
    i.tessel_version = TESSEL_VERSION;
    i.cuda_headers_version = CUDA_VERSION;
    i.cublas_version = query_cublas_version();
    try {
      i.nvrtc_version = nvrtc_version();
    } catch (const std::exception&) {
      i.nvrtc_version = 0;
    }
    i.gpu = gpu_available();
    if (i.gpu) {
      try {
        i.device = current_device();
      } catch (const std::exception& e) {
        i.gpu = false;
        i.no_gpu_reason = e.what();
      }
    } else {
      i.no_gpu_reason = gpu_unavailable_reason();
    }
    return i;
  }();
  return info;
}

std::string cuda_version_string(int v) {
  if (v <= 0) return "unknown";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::string cublas_version_string(int v) {
  if (v <= 0) return "unknown";
  return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." + std::to_string(v % 100);
}

std::string git_commit() {
  const char* c = std::getenv("TESSEL_GIT_COMMIT");
  return c && *c ? std::string(c) : std::string("unknown");
}

std::string utc_timestamp() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void set_command_line(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) {
    if (i) s += ' ';
    s += argv[i];
  }
  command_line_storage() = s;
}

const std::string& command_line() {
  return command_line_storage();
}

nlohmann::json device_json() {
  const SystemInfo& s = system_info();
  if (!s.gpu) return {{"gpu", false}, {"reason", s.no_gpu_reason}, {"compile_arch", s.arch()}};
  const DeviceInfo& d = s.device;
  return {{"gpu", true},
          {"name", d.name},
          {"ordinal", d.ordinal},
          {"compute_capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor)},
          {"arch", d.arch()},
          {"sm_count", d.sm_count},
          {"smem_optin_per_block", d.smem_optin_per_block},
          {"l2_bytes", d.l2_bytes},
          {"global_mem_bytes", d.global_mem_bytes},
          {"driver_version", cuda_version_string(d.driver_version)}};
}

// The environment variables that change what jit() compiles (the switches' TESSEL_ENABLE /
// TESSEL_DISABLE, TESSEL_MAX_PERSISTENT_CTAS), those set: a result under one is not the default's.
nlohmann::json compile_environment() {
  nlohmann::json env = nlohmann::json::object();
  for (const char* name : {"TESSEL_ENABLE", "TESSEL_DISABLE", "TESSEL_MAX_PERSISTENT_CTAS"})
    if (const char* v = std::getenv(name); v && *v) env[name] = v;
  return env;
}

nlohmann::json provenance_json() {
  const SystemInfo& s = system_info();
  return {{"date", utc_timestamp()},
          {"command", command_line()},
          {"environment", compile_environment()},
          {"git_commit", git_commit()},
          {"tessel_version", s.tessel_version},
          {"nvrtc_version", cuda_version_string(s.nvrtc_version)},
          {"cuda_headers_version", cuda_version_string(s.cuda_headers_version)},
          {"cublas_version", cublas_version_string(s.cublas_version)},
          {"device", device_json()}};
}

}  // namespace tessel::cli
