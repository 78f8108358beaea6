#include "tessel/runtime/Cache.hpp"

#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "tessel/Version.hpp"
#include "tessel/runtime/CacheFolder.hpp"
#include "tessel/runtime/EmbeddedHeaders.hpp"

namespace tessel {

namespace fs = std::filesystem;

namespace {

// Entry file layout (all integers little-endian):
//   0   "TESSELK1"
//   8   u32 format version
//   12  u32 section count
//   16  u64 length of each section (kSectionCount of them)
//   64  HMAC-SHA256 of the key, the header above and the payload, under the folder's secret
//       (CacheFolder.hpp), 64 hex digits
//   128 payload: the sections back to back, in Section order
constexpr char kMagic[8] = {'T', 'E', 'S', 'S', 'E', 'L', 'K', '1'};
constexpr std::uint32_t kFormatVersion = 2;  // 2: a keyed MAC instead of a plain checksum
enum Section { kKey, kPtx, kCubin, kLog, kLoweredName, kResources, kSectionCount };
constexpr std::size_t kLengthsOffset = 16;
constexpr std::size_t kMacOffset = kLengthsOffset + 8 * kSectionCount;
constexpr std::size_t kHeaderSize = kMacOffset + 64;
static_assert(kHeaderSize == 128, "entry header layout changed: bump kFormatVersion");
// No kernel comes near this (the largest cubins are a few MB); anything bigger is junk, and is
// refused before it is read.
constexpr std::uint64_t kMaxEntryBytes = 64ull << 20;

void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::uint64_t get_le(std::string_view in, std::size_t offset, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= std::uint64_t{static_cast<unsigned char>(in[offset + i])} << (8 * i);
  return v;
}

// The entry's MAC: binds the payload to the key it is filed under and to this user's secret, so
// that neither another kernel's entry renamed to this key nor an entry forged without the secret
// (its checksum recomputed) is accepted.
std::string entry_mac(const std::string& secret, const std::string& key, std::string_view header,
                      std::string_view payload) {
  std::string text = "tessel kernel cache entry\n" + key + "\n";
  text.append(header.substr(0, kMacOffset));
  text.append(payload);
  return hmac_sha256_hex(secret, text);
}

// The size the whole entry must have, from its header; nullopt when the header is not ours.
std::optional<std::uint64_t> entry_size_from_header(std::string_view header) {
  if (header.size() < kHeaderSize || header.compare(0, 8, std::string_view(kMagic, 8)) != 0)
    return std::nullopt;
  if (get_le(header, 8, 4) != kFormatVersion || get_le(header, 12, 4) != kSectionCount) return std::nullopt;
  std::uint64_t total = kHeaderSize;
  for (int i = 0; i < kSectionCount; ++i) {
    const std::uint64_t length = get_le(header, kLengthsOffset + 8 * i, 8);
    if (length > kMaxEntryBytes) return std::nullopt;  // also keeps the sum from overflowing
    total += length;
  }
  return total;
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

enum class LoadResult { kOk, kMissing, kBad, kRefused };

// kBad: a regular file that is not a valid entry for `key` (remove it and rebuild); kRefused: not
// a regular file at all (a FIFO, a directory, a link: left alone, compiled around). `reason`
// says why, for the note.
LoadResult load_entry(const fs::path& file, const std::string& key, const std::string& secret,
                      CompiledKernel& out, std::string& reason) {
  FileRead read = read_private_file(file, kMaxEntryBytes, kHeaderSize, entry_size_from_header);
  if (read.status == FileRead::Status::missing) return LoadResult::kMissing;
  if (read.status == FileRead::Status::refused) {
    reason = read.reason;
    return read.regular_file ? LoadResult::kBad : LoadResult::kRefused;
  }
  const std::string& data = read.data;
  std::uint64_t lengths[kSectionCount];
  for (int i = 0; i < kSectionCount; ++i) lengths[i] = get_le(data, kLengthsOffset + 8 * i, 8);
  const std::string_view payload(data.data() + kHeaderSize, data.size() - kHeaderSize);
  if (entry_mac(secret, key, data, payload) != std::string_view(data.data() + kMacOffset, 64)) {
    reason = "fails its MAC check (damaged, written under another key or another secret, or tampered with)";
    return LoadResult::kBad;
  }

  std::string sections[kSectionCount];
  std::size_t offset = kHeaderSize;
  for (int i = 0; i < kSectionCount; ++i) {
    sections[i] = data.substr(offset, lengths[i]);
    offset += lengths[i];
  }
  reason = "holds another key or no cubin";
  if (sections[kKey] != key || sections[kCubin].empty()) return LoadResult::kBad;
  try {
    out.resources = resources_from_json(nlohmann::json::parse(sections[kResources]));
  } catch (const nlohmann::json::exception&) {
    reason = "holds malformed resources";
    return LoadResult::kBad;
  }
  out.ptx = std::move(sections[kPtx]);
  out.cubin.assign(sections[kCubin].begin(), sections[kCubin].end());
  out.log = std::move(sections[kLog]);
  out.lowered_name = std::move(sections[kLoweredName]);
  return LoadResult::kOk;
}

std::string entry_bytes(const std::string& key, const CompiledKernel& kernel, const std::string& secret) {
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
  data += entry_mac(secret, key, data, payload);
  data += payload;
  return data;
}

// Loads, and on a bad or refused entry leaves a note (and removes a bad one). The folder is
// assumed checked (open_cache_folder).
LoadResult load_and_report(const fs::path& file, const std::string& key, const std::string& secret,
                           CompiledKernel& out, bool remove_if_bad) {
  std::string reason;
  const LoadResult r = load_entry(file, key, secret, out, reason);
  if (r == LoadResult::kBad) {
    std::error_code ec;
    // A racing writer may already have replaced it; then it is rebuilt once more.
    if (remove_if_bad) fs::remove(file, ec);
    cache_note("kernel cache entry " + file.string() + " " + reason +
               (remove_if_bad ? "; removed, compiling instead" : "; not used"));
  } else if (r == LoadResult::kRefused) {
    cache_note("kernel cache entry " + file.string() + " " + reason + "; not used, compiling instead");
  }
  return r;
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
  const std::optional<std::string> secret = open_cache_folder(file.parent_path());
  if (!secret) return std::nullopt;
  CompiledKernel out;
  if (load_and_report(file, key, *secret, out, remove_if_bad) != LoadResult::kOk) return std::nullopt;
  return out;
}

bool write_cache_entry(const fs::path& file, const std::string& key, const CompiledKernel& kernel) {
  const std::optional<std::string> secret = open_cache_folder(file.parent_path());
  return secret && write_private_file(file, entry_bytes(key, kernel, *secret));
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

  // The disk level, when the environment asks for one and its folder is private to this user.
  const std::optional<fs::path> dir = cache_directory();
  const std::optional<std::string> secret = dir ? open_cache_folder(*dir) : std::nullopt;
  const std::optional<fs::path> file = secret ? std::optional<fs::path>(*dir / (k + ".tsk")) : std::nullopt;
  if (file) {
    CompiledKernel out;
    const LoadResult r = load_and_report(*file, k, *secret, out, /*remove_if_bad=*/true);
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
    if (r == LoadResult::kBad || r == LoadResult::kRefused) {
      std::lock_guard<std::mutex> lock(mutex_);
      ++stats_.corrupt_entries;
    }
  }

  // Compiled outside the lock: the autotuner compiles many variants in parallel. Two threads
  // missing on one key both compile it; the results are identical, so either may win.
  CompiledKernel out = compiler_(source, kernel_name, options);
  out.source = source;
  const bool written = file && write_private_file(*file, entry_bytes(k, out, *secret));
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
