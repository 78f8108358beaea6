#include "tessel/runtime/Cache.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "tessel/runtime/EmbeddedHeaders.hpp"

#ifndef TESSEL_VERSION
#error "TESSEL_VERSION must be defined by the build (CMakeLists.txt does)"
#endif

namespace tessel {

namespace fs = std::filesystem;

namespace {

// Entry file layout (all integers little-endian):
//   0   "TESSELK1"
//   8   u32 format version
//   12  u32 section count
//   16  u64 length of each section (kSectionCount of them)
//   64  sha256 of the payload, 64 hex digits
//   128 payload: the sections back to back, in Section order
constexpr char kMagic[8] = {'T', 'E', 'S', 'S', 'E', 'L', 'K', '1'};
constexpr std::uint32_t kFormatVersion = 1;
enum Section { kKey, kPtx, kCubin, kLog, kLoweredName, kResources, kSectionCount };
constexpr std::size_t kLengthsOffset = 16;
constexpr std::size_t kChecksumOffset = kLengthsOffset + 8 * kSectionCount;
constexpr std::size_t kHeaderSize = kChecksumOffset + 64;
static_assert(kHeaderSize == 128, "entry header layout changed: bump kFormatVersion");

void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::uint64_t get_le(const std::string& in, std::size_t offset, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= std::uint64_t{static_cast<unsigned char>(in[offset + i])} << (8 * i);
  return v;
}

nlohmann::json resources_to_json(const Resources& r) {
  return {{"registers", r.registers},
          {"spill_store_bytes", r.spill_store_bytes},
          {"spill_load_bytes", r.spill_load_bytes},
          {"stack_frame_bytes", r.stack_frame_bytes},
          {"static_smem_bytes", r.static_smem_bytes},
          {"barriers", r.barriers},
          {"arch", r.arch},
          {"cold_compile_ms", r.compile_ms}};
}

Resources resources_from_json(const nlohmann::json& j) {
  Resources r;
  r.registers = j.at("registers").get<int>();
  r.spill_store_bytes = j.at("spill_store_bytes").get<int>();
  r.spill_load_bytes = j.at("spill_load_bytes").get<int>();
  r.stack_frame_bytes = j.at("stack_frame_bytes").get<int>();
  r.static_smem_bytes = j.at("static_smem_bytes").get<int>();
  r.barriers = j.at("barriers").get<int>();
  r.arch = j.at("arch").get<std::string>();
  return r;
}

enum class LoadResult { kOk, kMissing, kBad };

LoadResult load_entry(const fs::path& file, const std::string& key, CompiledKernel& out) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return LoadResult::kMissing;
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return LoadResult::kBad;
  if (data.size() < kHeaderSize || data.compare(0, 8, kMagic, 8) != 0) return LoadResult::kBad;
  if (get_le(data, 8, 4) != kFormatVersion || get_le(data, 12, 4) != kSectionCount) return LoadResult::kBad;
  std::uint64_t lengths[kSectionCount];
  std::uint64_t total = 0;
  for (int i = 0; i < kSectionCount; ++i) {
    lengths[i] = get_le(data, kLengthsOffset + 8 * i, 8);
    if (lengths[i] > data.size()) return LoadResult::kBad;  // also keeps the sum from overflowing
    total += lengths[i];
  }
  if (total != data.size() - kHeaderSize) return LoadResult::kBad;
  const std::string_view payload(data.data() + kHeaderSize, total);
  if (sha256_hex(payload) != std::string_view(data.data() + kChecksumOffset, 64)) return LoadResult::kBad;

  std::string sections[kSectionCount];
  std::size_t offset = kHeaderSize;
  for (int i = 0; i < kSectionCount; ++i) {
    sections[i] = data.substr(offset, lengths[i]);
    offset += lengths[i];
  }
  if (sections[kKey] != key || sections[kCubin].empty()) return LoadResult::kBad;
  try {
    out.resources = resources_from_json(nlohmann::json::parse(sections[kResources]));
  } catch (const nlohmann::json::exception&) {
    return LoadResult::kBad;
  }
  out.ptx = std::move(sections[kPtx]);
  out.cubin.assign(sections[kCubin].begin(), sections[kCubin].end());
  out.log = std::move(sections[kLog]);
  out.lowered_name = std::move(sections[kLoweredName]);
  return LoadResult::kOk;
}

// Unique per process, thread and call: pid + thread id + a random draw, so that concurrent
// writers (threads or processes, even after fork) never share a temporary file.
std::string temp_suffix() {
  thread_local std::mt19937_64 rng(std::random_device{}() ^
                                   std::hash<std::thread::id>{}(std::this_thread::get_id()));
  std::ostringstream os;
  os << ".tmp." << ::getpid() << "." << std::hex << std::hash<std::thread::id>{}(std::this_thread::get_id())
     << "." << rng();
  return os.str();
}

const std::string& embedded_headers_hash() {
  static const std::string hash = [] {
    std::string all;
    for (const EmbeddedFile& f : embedded_device_headers()) {
      all += std::to_string(f.include_name.size()) + ":" + std::string(f.include_name) + "\n";
      all += std::to_string(f.text.size()) + ":" + std::string(f.text) + "\n";
    }
    return sha256_hex(all);
  }();
  return hash;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::optional<fs::path> cache_directory() {
  const char* enabled = std::getenv("TESSEL_CACHE");
  if (enabled && std::string(enabled) == "0") return std::nullopt;
  if (const char* dir = std::getenv("TESSEL_CACHE_DIR"); dir && *dir) return fs::path(dir);
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return fs::path(xdg) / "tessel";
  if (const char* home = std::getenv("HOME"); home && *home) return fs::path(home) / ".cache" / "tessel";
  return std::nullopt;  // nowhere sensible to write
}

std::optional<CompiledKernel> read_cache_entry(const fs::path& file, const std::string& key,
                                               bool remove_if_bad) {
  CompiledKernel out;
  const LoadResult r = load_entry(file, key, out);
  if (r == LoadResult::kBad && remove_if_bad) {
    std::error_code ec;
    fs::remove(file, ec);  // a racing writer may already have replaced it; then it is rebuilt once more
  }
  if (r != LoadResult::kOk) return std::nullopt;
  return out;
}

bool write_cache_entry(const fs::path& file, const std::string& key, const CompiledKernel& kernel) {
  std::string sections[kSectionCount];
  sections[kKey] = key;
  sections[kPtx] = kernel.ptx;
  sections[kCubin].assign(kernel.cubin.begin(), kernel.cubin.end());
  sections[kLog] = kernel.log;
  sections[kLoweredName] = kernel.lowered_name;
  sections[kResources] = resources_to_json(kernel.resources).dump();

  std::string payload;
  for (const std::string& s : sections) payload += s;
  std::string data(kMagic, sizeof(kMagic));
  put_le(data, kFormatVersion, 4);
  put_le(data, kSectionCount, 4);
  for (const std::string& s : sections) put_le(data, s.size(), 8);
  data += sha256_hex(payload);
  data += payload;

  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  const fs::path temp = file.string() + temp_suffix();
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) return false;
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    out.close();
    if (!out) {
      fs::remove(temp, ec);
      return false;
    }
  }
  // No fsync: after a crash a half-written entry fails its checksum and is rebuilt, which is
  // cheaper than syncing every compile.
  fs::rename(temp, file, ec);
  if (ec) {
    fs::remove(temp, ec);
    return false;
  }
  return true;
}

KernelCache::KernelCache(Compiler compiler) : compiler_(std::move(compiler)) {}

KernelCache& KernelCache::global() {
  static KernelCache* cache = new KernelCache();  // leaked: used until the last static destructor
  return *cache;
}

std::string KernelCache::key(const std::string& source, const std::string& kernel_name,
                             const CompileOptions& options) {
  static const int nvrtc = nvrtc_version();
  // Length-prefixed fields, so that no two different inputs concatenate to the same text.
  std::string text;
  auto field = [&](std::string_view name, std::string_view value) {
    text += name;
    text += ' ';
    text += std::to_string(value.size());
    text += ':';
    text += value;
    text += '\n';
  };
  field("source", source);
  field("kernel", kernel_name);
  field("arch", options.arch);
  field("program", options.program_name);
  for (const std::string& flag : nvrtc_flags(options)) field("flag", flag);
  field("nvrtc", std::to_string(nvrtc));
  field("tessel", TESSEL_VERSION);
  field("headers", embedded_headers_hash());
  field("format", std::to_string(kFormatVersion));
  return sha256_hex(text);
}

CompiledKernel KernelCache::get_or_compile(const std::string& source, const std::string& kernel_name,
                                           const CompileOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string k = key(source, kernel_name, options);

  std::shared_ptr<const CompiledKernel> cached;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = memory_.find(k); it != memory_.end()) {
      cached = it->second;
      ++stats_.memory_hits;
    }
  }
  if (cached) {
    CompiledKernel out = *cached;
    out.resources.cache_hit = true;
    out.resources.compile_ms = ms_since(t0);
    return out;
  }

  const std::optional<fs::path> dir = cache_directory();
  const std::optional<fs::path> file = dir ? std::optional<fs::path>(*dir / (k + ".tsk")) : std::nullopt;
  if (file) {
    CompiledKernel out;
    const LoadResult r = load_entry(*file, k, out);
    if (r == LoadResult::kOk) {
      out.source = source;
      out.resources.cache_hit = false;
      auto shared = std::make_shared<const CompiledKernel>(out);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        memory_.emplace(k, shared);
        ++stats_.disk_hits;
      }
      out.resources.cache_hit = true;
      out.resources.compile_ms = ms_since(t0);
      return out;
    }
    if (r == LoadResult::kBad) {
      std::error_code ec;
      fs::remove(*file, ec);
      std::lock_guard<std::mutex> lock(mutex_);
      ++stats_.corrupt_entries;
    }
  }

  // Compiled outside the lock: the autotuner compiles many variants in parallel. Two threads
  // missing on one key both compile it; the results are identical, so either may win.
  CompiledKernel out = compiler_(source, kernel_name, options);
  out.source = source;
  const bool written = file && write_cache_entry(*file, k, out);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    memory_.emplace(k, std::make_shared<const CompiledKernel>(out));
    ++stats_.misses;
    if (file && !written) ++stats_.write_failures;
  }
  out.resources.cache_hit = false;
  out.resources.compile_ms = ms_since(t0);
  return out;
}

void KernelCache::clear_memory() {
  std::lock_guard<std::mutex> lock(mutex_);
  memory_.clear();
}

KernelCache::Stats KernelCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void KernelCache::reset_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_ = Stats{};
}

CompiledKernel compile_cached(const std::string& source, const std::string& kernel_name,
                              const CompileOptions& options) {
  return KernelCache::global().get_or_compile(source, kernel_name, options);
}

}  // namespace tessel
