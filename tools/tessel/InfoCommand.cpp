// tessel info: the GPU (or why there is none), the versions that matter, the kernel cache.
#include <iostream>
#include <memory>

#include "tessel/runtime/Cache.hpp"
#include "tessel/runtime/CacheFolder.hpp"
#include "tools/tessel/Commands.hpp"
#include "tools/tessel/Output.hpp"
#include "tools/tessel/System.hpp"

namespace tessel::cli {

namespace {

struct InfoOptions {
  std::string json_file;
};

std::string kib(long long bytes) {
  return std::to_string(bytes / 1024) + " KB";
}

int run_info(const InfoOptions& o) {
  const SystemInfo& s = system_info();
  std::cout << "Tessel " << s.tessel_version << " (commit " << git_commit() << ")\n";
  if (s.gpu) {
    const DeviceInfo& d = s.device;
    std::cout << "GPU " << d.ordinal << ":        " << d.name << ", compute capability " << d.cc_major << "."
              << d.cc_minor << " (compiles for " << d.arch() << ")\n"
              << "  SMs:          " << d.sm_count << "\n"
              << "  shared mem:   " << kib(d.smem_optin_per_block) << " per block with opt-in ("
              << d.smem_optin_per_block << " bytes), " << kib(d.smem_per_block) << " without\n"
              << "  L2:           " << d.l2_bytes / (1024 * 1024) << " MB\n"
              << "  memory:       " << d.global_mem_bytes / (1024LL * 1024 * 1024) << " GB\n"
              << "  CUDA driver:  " << cuda_version_string(d.driver_version) << "\n";
  } else {
    std::cout << "GPU:            none — " << s.no_gpu_reason << "\n"
              << "                kernels still compile (NVRTC, for " << s.arch()
              << "); running and timing them needs an NVIDIA GPU (sm_80 or newer)\n";
  }
  std::cout << "NVRTC:          " << cuda_version_string(s.nvrtc_version) << "\n"
            << "cuBLAS:         " << cublas_version_string(s.cublas_version) << "\n"
            << "CUDA headers:   " << cuda_version_string(s.cuda_headers_version) << " (at build time)\n";
  const auto dir = cache_directory();
  // Whether the folder may be used (docs/security.md): private to this user, or why not.
  const std::optional<std::string> refused = dir ? prepare_private_folder(*dir) : std::nullopt;
  std::cout << "kernel cache:   " << (dir ? dir->string() : std::string("disk level off (TESSEL_CACHE=0)"))
            << (refused ? " — not used: " + *refused : std::string()) << "\n";
  if (!o.json_file.empty()) {
    nlohmann::json j = provenance_json();
    j["kernel_cache"] = dir ? nlohmann::json(dir->string()) : nlohmann::json(nullptr);
    j["kernel_cache_refused"] = refused ? nlohmann::json(*refused) : nlohmann::json(nullptr);
    write_json_file(o.json_file, j);
  }
  return kExitOk;
}

}  // namespace

Command add_info_command(CLI::App& root) {
  auto o = std::make_shared<InfoOptions>();
  CLI::App* app = root.add_subcommand(
      "info", "Show the GPU (or why there is none), the CUDA driver, NVRTC and cuBLAS versions");
  app->add_option("--json", o->json_file, "Also write the information as JSON to FILE")->type_name("FILE");
  return {app, [o] { return run_info(*o); }};
}

}  // namespace tessel::cli
