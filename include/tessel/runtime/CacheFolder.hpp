// The folder the kernel cache and the tuning cache keep their files in, handled as a place
// other people may have tampered with (docs/security.md has the threat model):
//
// - the folder is used only when it belongs to this user and nobody else can write it; a folder
//   Tessel creates is 0700 and its files 0600, whatever the umask;
// - files are opened without following links and without blocking, and read only when they are
//   regular files no larger than the caller allows (a FIFO, a directory, a link or a 3 GB file
//   in place of an entry is refused with a reason, never waited on or read whole);
// - a per-user secret (32 random bytes, 0600, in the folder) keys a MAC that proves an entry
//   was written by a Tessel process of this user, for this key.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace tessel {

// HMAC-SHA256 (RFC 2104) of `data` under `key`, as 64 lowercase hex digits.
std::string hmac_sha256_hex(std::string_view key, std::string_view data);

// Makes sure `dir` is a folder fit for a cache: creates it (and missing parents) with mode 0700
// when absent, then checks that it is a directory owned by this user and not writable by group
// or others. nullopt when fit; otherwise why not, with the fix ("... chmod 700 <dir> ...").
std::optional<std::string> prepare_private_folder(const std::filesystem::path& dir);

// prepare_private_folder, and on failure the warning open_cache_folder gives. True when fit.
bool use_private_folder(const std::filesystem::path& dir);

// One file read under the rules above.
struct FileRead {
  enum class Status { ok, missing, refused };
  Status status = Status::missing;
  std::string data{};         // ok: the whole file
  std::string reason{};       // refused: why ("is a FIFO, not a regular file", "is 3221225472 bytes ...")
  bool regular_file = false;  // it is one (refused for its size or header, or ok)
  unsigned owner = 0;         // ok: the file's uid and permission bits
  unsigned mode = 0;
};
// Reads `file` when it is a regular file (not a link) of at most `max_bytes`. With
// `expected_size`, the first `header_bytes` are read first and passed to it; it returns the
// size the whole file must have (nullopt: the header is malformed), and the rest is read only
// when fstat agrees, so a damaged header never makes Tessel read more than it announces.
using ExpectedSize = std::function<std::optional<std::uint64_t>(std::string_view header)>;
FileRead read_private_file(const std::filesystem::path& file, std::uint64_t max_bytes,
                           std::size_t header_bytes = 0, const ExpectedSize& expected_size = {});

// Writes `data` to `file` atomically: a unique temporary file in the same folder (0600,
// O_EXCL, not following links), then rename(). False, without throwing, on any failure.
bool write_private_file(const std::filesystem::path& file, std::string_view data);

// The per-user secret of a cache folder: `dir`/secret, 32 bytes from /dev/urandom, created on
// first use (atomically: concurrent first uses agree on one secret). nullopt, with `why` set,
// when it cannot be created or read, or is not a private regular file of this user.
std::optional<std::string> folder_secret(const std::filesystem::path& dir, std::string* why = nullptr);

// What a cache needs before it touches `dir`: prepare_private_folder and folder_secret. The
// secret when both succeed; otherwise nullopt, after one warning on stderr per folder and
// process ("tessel: warning: <why>; running without the disk cache").
std::optional<std::string> open_cache_folder(const std::filesystem::path& dir);

// One line on stderr, "tessel: note: <text>", for entries refused or removed.
void cache_note(const std::string& text);

}  // namespace tessel
