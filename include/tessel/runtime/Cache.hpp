// The kernel cache: an in-process map, then a directory of compiled kernels shared by every
// Tessel process of the user. A hit costs a hash and a file read instead of an NVRTC run.
//
// Disk level: $TESSEL_CACHE_DIR, else $XDG_CACHE_HOME/tessel, else ~/.cache/tessel;
// TESSEL_CACHE=0 turns it off (the in-process map stays). The folder is used only when it is
// this user's and nobody else can write it (CacheFolder.hpp; otherwise one warning and no disk
// level); it is created 0700, entries 0600. Entries are written to a unique temporary file and
// renamed into place, so readers never see a partial entry and concurrent writers of one key
// cannot corrupt it; each entry carries a MAC of its key and contents under the folder's
// per-user secret, and an entry that fails it (truncated, flipped bits, another format, another
// kernel's entry, a forgery) is removed and rebuilt. A FIFO, a directory, a link or an
// oversized file in place of an entry is a miss with a note on stderr. docs/security.md has
// the threat model.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "tessel/runtime/Nvrtc.hpp"

namespace tessel {

// SHA-256 of `data` as 64 lowercase hex digits.
std::string sha256_hex(std::string_view data);

// The cache directory the environment selects now, or nullopt when the disk level is off.
std::optional<std::filesystem::path> cache_directory();

// Reads one entry file (its folder must pass open_cache_folder). nullopt when it is missing,
// damaged (bad magic, version, lengths, MAC or JSON), holds another key, or is not a regular
// file; a damaged file is removed when `remove_if_bad`.
std::optional<CompiledKernel> read_cache_entry(const std::filesystem::path& file, const std::string& key,
                                               bool remove_if_bad = true);
// Writes one entry atomically (temp file in the same directory, then rename). Returns false,
// without throwing, when the directory cannot be written or is not private: the cache is only an
// optimisation.
bool write_cache_entry(const std::filesystem::path& file, const std::string& key,
                       const CompiledKernel& kernel);

class KernelCache {
 public:
  using Compiler = std::function<CompiledKernel(const std::string& source, const std::string& kernel_name,
                                                const CompileOptions& options)>;

  struct Stats {
    std::uint64_t memory_hits = 0, disk_hits = 0, misses = 0;
    std::uint64_t corrupt_entries = 0;  // disk entries found damaged or unsafe and rebuilt
    std::uint64_t write_failures = 0;   // disk entries that could not be written
    std::uint64_t hits() const { return memory_hits + disk_hits; }
  };

  // `compiler` is nvrtc_compile unless a test substitutes one.
  explicit KernelCache(Compiler compiler = nvrtc_compile);

  // The process-wide cache compile_cached uses.
  static KernelCache& global();

  // The cache key: sha256 of the source, kernel name, arch, NVRTC flags, NVRTC version,
  // TESSEL_VERSION and the embedded device headers (a header edit must not hit old entries).
  static std::string key(const std::string& source, const std::string& kernel_name,
                         const CompileOptions& options);

  // memory -> disk -> compile. Sets resources.cache_hit and resources.compile_ms (the time
  // this call took, so a hit reports its own cost).
  CompiledKernel get_or_compile(const std::string& source, const std::string& kernel_name,
                                const CompileOptions& options);

  void clear_memory();
  Stats stats() const;
  void reset_stats();

 private:
  Compiler compiler_;
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const CompiledKernel>> memory_;
  Stats stats_;
};

// KernelCache::global().get_or_compile(...)
CompiledKernel compile_cached(const std::string& source, const std::string& kernel_name,
                              const CompileOptions& options);

}  // namespace tessel
