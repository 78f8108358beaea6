// Test helper: compiles a CUDA source string with NVRTC against device/tessel/ and returns
// everything the device-header tests assert on (log, PTX, ptxas statistics per kernel).
// Deliberately independent of Tessel's own NVRTC wrapper, so that these tests pin the
// headers down even while the JIT changes.
#pragma once

#include <nvrtc.h>

#include <chrono>
#include <cstdio>
#include <regex>
#include <string>
#include <vector>

#ifndef TESSEL_DEVICE_INCLUDE_DIR
#define TESSEL_DEVICE_INCLUDE_DIR "/work/main/device"
#endif

namespace tessel_device_test {

// One kernel's line of `ptxas -v` output.
struct KernelResources {
  std::string name;
  int registers = -1;
  int stack_bytes = -1;
  int spill_store_bytes = -1;
  int spill_load_bytes = -1;
};

struct CompileResult {
  bool ok = false;
  std::string log;  // NVRTC diagnostics followed by the ptxas -v report
  std::string ptx;
  size_t cubin_bytes = 0;
  double seconds = 0;
  std::vector<KernelResources> kernels;
};

// Parses ptxas -v: "Compiling entry function 'NAME'", then "N bytes stack frame, S bytes
// spill stores, L bytes spill loads", then "Used R registers".
inline std::vector<KernelResources> parse_ptxas_log(const std::string& log) {
  std::vector<KernelResources> out;
  const std::regex entry(R"(Compiling entry function '([^']+)')");
  const std::regex frame(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  const std::regex used(R"(Used (\d+) registers)");
  size_t pos = 0;
  while (pos < log.size()) {
    size_t eol = log.find('\n', pos);
    if (eol == std::string::npos) eol = log.size();
    const std::string line = log.substr(pos, eol - pos);
    pos = eol + 1;
    std::smatch m;
    if (std::regex_search(line, m, entry)) {
      out.push_back(KernelResources{m[1].str()});
    } else if (!out.empty() && std::regex_search(line, m, frame)) {
      out.back().stack_bytes = std::stoi(m[1].str());
      out.back().spill_store_bytes = std::stoi(m[2].str());
      out.back().spill_load_bytes = std::stoi(m[3].str());
    } else if (!out.empty() && std::regex_search(line, m, used)) {
      out.back().registers = std::stoi(m[1].str());
    }
  }
  return out;
}

// arch: "sm_80", "sm_90a", ... (a real architecture, so that ptxas runs and reports).
inline CompileResult compile(const std::string& source, const std::string& arch,
                             const std::vector<std::string>& extra_options = {}) {
  CompileResult result;
  const auto start = std::chrono::steady_clock::now();
  nvrtcProgram prog = nullptr;
  if (nvrtcCreateProgram(&prog, source.c_str(), "tessel_device_test.cu", 0, nullptr, nullptr) !=
      NVRTC_SUCCESS) {
    result.log = "nvrtcCreateProgram failed";
    return result;
  }
  std::vector<std::string> options = {"-arch=" + arch, "-std=c++17",
                                      std::string("--include-path=") + TESSEL_DEVICE_INCLUDE_DIR,
                                      "--ptxas-options=-v"};
  options.insert(options.end(), extra_options.begin(), extra_options.end());
  std::vector<const char*> argv;
  for (const std::string& o : options) argv.push_back(o.c_str());
  const nvrtcResult status = nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());

  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  result.log.resize(log_size);
  if (log_size > 0) nvrtcGetProgramLog(prog, &result.log[0]);
  while (!result.log.empty() && result.log.back() == '\0') result.log.pop_back();

  result.ok = status == NVRTC_SUCCESS;
  if (result.ok) {
    size_t ptx_size = 0;
    if (nvrtcGetPTXSize(prog, &ptx_size) == NVRTC_SUCCESS && ptx_size > 0) {
      result.ptx.resize(ptx_size);
      nvrtcGetPTX(prog, &result.ptx[0]);
    }
    nvrtcGetCUBINSize(prog, &result.cubin_bytes);
    result.kernels = parse_ptxas_log(result.log);
  }
  nvrtcDestroyProgram(&prog);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

// Occurrences of `needle` in `haystack`.
inline int count(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (size_t p = haystack.find(needle); p != std::string::npos; p = haystack.find(needle, p + needle.size()))
    ++n;
  return n;
}

// The architectures every device header must compile for.
inline const std::vector<std::string>& arches() {
  static const std::vector<std::string> a = {"sm_80", "sm_90a"};
  return a;
}

}  // namespace tessel_device_test
