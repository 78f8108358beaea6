#include "tessel/runtime/Nvrtc.hpp"

#include <nvrtc.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <memory>
#include <string_view>

#include "tessel/runtime/EmbeddedHeaders.hpp"

namespace tessel {

namespace {

// The embedded headers as the C string arrays nvrtcCreateProgram takes; built once (a
// function-local static is initialised thread-safely) and read-only after.
struct HeaderTable {
  std::vector<std::string> names, texts;
  std::vector<const char*> name_ptrs, text_ptrs;
};

const HeaderTable& header_table() {
  static const HeaderTable table = [] {
    HeaderTable t;
    for (const EmbeddedFile& f : embedded_device_headers()) {
      t.names.emplace_back(f.include_name);
      t.texts.emplace_back(f.text);
      // The headers include each other by bare name ("gemm.cuh"); NVRTC matches in-memory
      // headers by the exact include string, so each is also registered under its bare name.
      std::string_view n = f.include_name;
      if (auto slash = n.rfind('/'); slash != std::string_view::npos) {
        t.names.emplace_back(n.substr(slash + 1));
        t.texts.emplace_back(f.text);
      }
    }
    for (size_t i = 0; i < t.names.size(); ++i) {
      t.name_ptrs.push_back(t.names[i].c_str());
      t.text_ptrs.push_back(t.texts[i].c_str());
    }
    return t;
  }();
  return table;
}

struct ProgramDeleter {
  void operator()(nvrtcProgram p) const { nvrtcDestroyProgram(&p); }
};
using ProgramHandle = std::unique_ptr<std::remove_pointer_t<nvrtcProgram>, ProgramDeleter>;

std::string program_log(nvrtcProgram p) {
  size_t size = 0;
  if (nvrtcGetProgramLogSize(p, &size) != NVRTC_SUCCESS || size == 0) return {};
  std::string log(size, '\0');
  if (nvrtcGetProgramLog(p, log.data()) != NVRTC_SUCCESS) return {};
  while (!log.empty() && log.back() == '\0') log.pop_back();
  return log;
}

// NVRTC API failures other than compile errors (out of memory, bad option): the program's
// log, if any, still says the most.
void check_nvrtc(nvrtcResult r, const char* what, const std::string& program_name, nvrtcProgram p) {
  if (r == NVRTC_SUCCESS) return;
  std::string log = p ? program_log(p) : std::string();
  throw NvrtcError(program_name, std::string(what) + ": " + nvrtcGetErrorString(r), log);
}

// The decimal number right before the first `suffix` in `text` ("Used 40 registers" with
// suffix " registers" -> 40), or -1.
int number_before(const std::string& text, std::string_view suffix) {
  for (size_t pos = text.find(suffix); pos != std::string::npos; pos = text.find(suffix, pos + 1)) {
    size_t begin = pos;
    while (begin > 0 && std::isdigit(static_cast<unsigned char>(text[begin - 1]))) --begin;
    if (begin < pos) return std::stoi(text.substr(begin, pos - begin));
  }
  return -1;
}

struct Deadline {
  std::chrono::steady_clock::time_point at;
};

int past_deadline(void* payload, void*) {
  return std::chrono::steady_clock::now() > static_cast<const Deadline*>(payload)->at ? 1 : 0;
}

}  // namespace

NvrtcError::NvrtcError(const std::string& program_name, const std::string& stage, const std::string& log)
    : RuntimeError("NVRTC failed to compile " + program_name + " (" + stage + ")" +
                   (log.empty() ? std::string(" with no log") : ":\n" + log)),
      log_(log) {}

int nvrtc_version() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return 0;
  return major * 1000 + minor * 10;
}

const std::vector<std::string>& tessel_archs() {
  static const std::vector<std::string> archs = [] {
    std::vector<std::string> out;
    int count = 0;
    if (nvrtcGetNumSupportedArchs(&count) != NVRTC_SUCCESS || count <= 0) return out;
    std::vector<int> numbers(static_cast<std::size_t>(count));
    if (nvrtcGetSupportedArchs(numbers.data()) != NVRTC_SUCCESS) return out;
    for (int n : numbers) {
      if (n < 80) continue;
      out.push_back("sm_" + std::to_string(n));
      if (n >= 90) out.push_back("sm_" + std::to_string(n) + "a");
    }
    return out;
  }();
  return archs;
}

std::optional<std::string> why_not_arch(const std::string& arch) {
  const std::vector<std::string>& legal = tessel_archs();
  if (std::find(legal.begin(), legal.end(), arch) != legal.end()) return std::nullopt;
  const int v = nvrtc_version();
  std::string list;
  for (const std::string& a : legal) list += (list.empty() ? "" : ", ") + a;
  return "'" + arch + "' is not a target Tessel compiles for with NVRTC " + std::to_string(v / 1000) + "." +
         std::to_string(v % 1000 / 10) +
         "; legal: " + (list.empty() ? "none (NVRTC lists no targets)" : list);
}

std::vector<std::string> nvrtc_flags(const CompileOptions& options) {
  std::vector<std::string> flags = {"-std=c++17",      "--gpu-architecture=" + options.arch,
                                    "-default-device", "--ptxas-options=-v",
                                    "-lineinfo",       "-DTESSEL_NVRTC"};
  flags.insert(flags.end(), options.extra_flags.begin(), options.extra_flags.end());
  return flags;
}

Resources parse_ptxas_log(const std::string& log, const std::string& function_name) {
  // Cut the log down to the block of one entry function: from its "Compiling entry function"
  // line to the next one. (Plain string search, not <regex>: faster, and libstdc++'s regex
  // trips -Wmaybe-uninitialized in sanitizer builds.)
  static constexpr std::string_view kEntry = "Compiling entry function '";
  std::vector<std::pair<size_t, std::string>> entries;
  for (size_t pos = log.find(kEntry); pos != std::string::npos; pos = log.find(kEntry, pos + 1)) {
    const size_t name_begin = pos + kEntry.size();
    const size_t name_end = log.find('\'', name_begin);
    if (name_end == std::string::npos) break;
    entries.emplace_back(pos, log.substr(name_begin, name_end - name_begin));
  }
  std::string block = log;
  if (!entries.empty()) {
    size_t pick = 0;
    for (size_t i = 0; i < entries.size(); ++i)
      if (entries[i].second == function_name) pick = i;
    const size_t end = pick + 1 < entries.size() ? entries[pick + 1].first : log.size();
    block = log.substr(entries[pick].first, end - entries[pick].first);
  }
  Resources r;
  r.registers = number_before(block, " registers");
  r.stack_frame_bytes = std::max(0, number_before(block, " bytes stack frame"));
  r.spill_store_bytes = std::max(0, number_before(block, " bytes spill stores"));
  r.spill_load_bytes = std::max(0, number_before(block, " bytes spill loads"));
  r.static_smem_bytes = std::max(0, number_before(block, " bytes smem"));
  r.barriers = std::max(0, number_before(block, " barriers"));
  static constexpr std::string_view kFor = " for 'sm_";
  if (const size_t pos = block.find(kFor); pos != std::string::npos) {
    const size_t begin = pos + kFor.size() - 3;  // keep the "sm_"
    const size_t end = block.find('\'', begin);
    if (end != std::string::npos) r.arch = block.substr(begin, end - begin);
  }
  return r;
}

CompiledKernel nvrtc_compile(const std::string& source, const std::string& kernel_name,
                             const CompileOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  const HeaderTable& headers = header_table();
  const std::string& name = options.program_name;

  nvrtcProgram raw = nullptr;
  check_nvrtc(nvrtcCreateProgram(&raw, source.c_str(), name.c_str(), static_cast<int>(headers.names.size()),
                                 headers.text_ptrs.data(), headers.name_ptrs.data()),
              "nvrtcCreateProgram", name, nullptr);
  ProgramHandle program(raw);
  // A name expression works for extern "C" and C++-mangled kernels alike, and makes NVRTC
  // report a missing kernel as a compile error that names it.
  check_nvrtc(nvrtcAddNameExpression(raw, kernel_name.c_str()), "nvrtcAddNameExpression", name, raw);

  const std::vector<std::string> flags = nvrtc_flags(options);
  std::vector<const char*> flag_ptrs;
  for (const std::string& f : flags) flag_ptrs.push_back(f.c_str());
  // The time limit: NVRTC calls this at points during the compile and cancels once it says 1
  // (and it must keep saying 1; the clock only moves forward).
  Deadline deadline{t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                             std::chrono::duration<double>(options.time_limit_s))};
  if (options.time_limit_s > 0)
    check_nvrtc(nvrtcSetFlowCallback(raw, past_deadline, &deadline), "nvrtcSetFlowCallback", name, raw);
  nvrtcResult result = nvrtcCompileProgram(raw, static_cast<int>(flag_ptrs.size()), flag_ptrs.data());
  if (result == NVRTC_ERROR_CANCELLED && options.time_limit_s > 0) {
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    throw CompileTimeLimitError("NVRTC stopped compiling " + name + " after " + std::to_string(took) +
                                " s: CompileOptions::time_limit_s is " +
                                std::to_string(options.time_limit_s) +
                                " s (NVRTC checks it between its phases)");
  }

  CompiledKernel out;
  out.source = source;
  out.log = program_log(raw);
  if (result != NVRTC_SUCCESS) {
    std::string flat;
    for (const std::string& f : flags) flat += (flat.empty() ? "" : " ") + f;
    throw NvrtcError(name, std::string(nvrtcGetErrorString(result)) + ", flags: " + flat, out.log);
  }

  const char* lowered = nullptr;
  check_nvrtc(nvrtcGetLoweredName(raw, kernel_name.c_str(), &lowered), "nvrtcGetLoweredName", name, raw);
  out.lowered_name = lowered ? lowered : kernel_name;

  size_t ptx_size = 0;
  check_nvrtc(nvrtcGetPTXSize(raw, &ptx_size), "nvrtcGetPTXSize", name, raw);
  out.ptx.assign(ptx_size, '\0');
  check_nvrtc(nvrtcGetPTX(raw, out.ptx.data()), "nvrtcGetPTX", name, raw);
  while (!out.ptx.empty() && out.ptx.back() == '\0') out.ptx.pop_back();

  size_t cubin_size = 0;
  check_nvrtc(nvrtcGetCUBINSize(raw, &cubin_size), "nvrtcGetCUBINSize", name, raw);
  if (cubin_size == 0)  // a virtual arch (compute_XX) yields PTX only; Tessel always loads cubins
    throw NvrtcError(
        name, "no cubin for --gpu-architecture=" + options.arch + " (a real sm_XX arch is needed)", out.log);
  out.cubin.resize(cubin_size);
  check_nvrtc(nvrtcGetCUBIN(raw, out.cubin.data()), "nvrtcGetCUBIN", name, raw);

  out.resources = parse_ptxas_log(out.log, out.lowered_name);
  if (out.resources.arch.empty()) out.resources.arch = options.arch;
  out.resources.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace tessel
