// Private cache folders and files: POSIX calls rather than <filesystem> and <fstream>, because
// the checks need O_NOFOLLOW, O_NONBLOCK, fstat on the open descriptor and exact modes.
#include "tessel/runtime/CacheFolder.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

namespace tessel {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kSecretBytes = 32;

std::string octal_mode(mode_t mode) {
  std::ostringstream os;
  os << '0' << std::oct << (mode & 07777);
  return os.str();
}

std::string file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// Reads exactly `size` bytes into `out` (appended); false on an error or an early end.
bool read_exactly(int fd, std::size_t size, std::string& out) {
  const std::size_t start = out.size();
  out.resize(start + size);
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, out.data() + start + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

bool write_all(int fd, std::string_view data) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

// Unique per process, thread and call, so that concurrent writers (threads or processes, even
// after fork) never share a temporary file.
std::string temp_suffix() {
  thread_local std::mt19937_64 rng(std::random_device{}() ^
                                   std::hash<std::thread::id>{}(std::this_thread::get_id()));
  std::ostringstream os;
  os << ".tmp." << ::getpid() << "." << std::hex << std::hash<std::thread::id>{}(std::this_thread::get_id())
     << "." << rng();
  return os.str();
}

// A new private file holding `data` at `path` (which must not exist); the descriptor is closed.
bool create_private_file(const fs::path& path, std::string_view data) {
  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (fd.get() < 0) return false;
  // The umask can only remove bits from 0600, but be exact whatever it is.
  bool ok = ::fchmod(fd.get(), 0600) == 0 && write_all(fd.get(), data);
  ok = ::close(fd.release()) == 0 && ok;
  if (!ok) ::unlink(path.c_str());
  return ok;
}

// mkdir -p with mode 0700 for every folder it creates.
bool make_folders(const fs::path& dir) {
  fs::path partial;
  for (const fs::path& part : dir) {
    partial /= part;
    if (::mkdir(partial.c_str(), 0700) == 0) {
      if (::chmod(partial.c_str(), 0700) != 0) return false;  // exact, whatever the umask
    } else if (errno != EEXIST) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::optional<std::string> prepare_private_folder(const fs::path& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT || !make_folders(dir) || ::stat(dir.c_str(), &st) != 0)
      return "the cache folder " + dir.string() + " cannot be created (" + std::strerror(errno) +
             "); fix: set TESSEL_CACHE_DIR to a folder you can write";
  }
  if (!S_ISDIR(st.st_mode))
    return "the cache folder " + dir.string() + " is " + file_kind(st.st_mode) +
           "; fix: remove it or set TESSEL_CACHE_DIR to a folder of yours";
  if (st.st_uid != ::geteuid())
    return "the cache folder " + dir.string() + " belongs to uid " + std::to_string(st.st_uid) +
           ", not to you (uid " + std::to_string(::geteuid()) +
           "), so its owner could plant kernels in it; fix: set TESSEL_CACHE_DIR to a folder of yours";
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return "the cache folder " + dir.string() + " is writable by " +
           ((st.st_mode & S_IWOTH) ? "others" : "its group") + " (mode " + octal_mode(st.st_mode) +
           "), so they could plant kernels in it; fix: chmod 700 " + dir.string();
  return std::nullopt;
}

namespace {
void warn_once(const fs::path& dir, const std::string& why) {
  static std::mutex mutex;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(mutex);
  if (warned.insert(dir.string()).second)
    std::cerr << "tessel: warning: " << why << "; running without the disk cache\n";
}
}  // namespace

bool use_private_folder(const fs::path& dir) {
  const std::optional<std::string> why = prepare_private_folder(dir);
  if (why) warn_once(dir, *why);
  return !why;
}

std::optional<std::string> open_cache_folder(const fs::path& dir) {
  if (!use_private_folder(dir)) return std::nullopt;
  std::string why;
  std::optional<std::string> secret = folder_secret(dir, &why);
  if (!secret) warn_once(dir, why);
  return secret;
}

FileRead read_private_file(const fs::path& file, std::uint64_t max_bytes, std::size_t header_bytes,
                           const ExpectedSize& expected_size) {
  FileRead out;
  // O_NONBLOCK: opening a FIFO must not wait for a writer. O_NOFOLLOW: a link is refused.
  Fd fd(::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  auto refuse = [&](const std::string& reason) {
    out.status = FileRead::Status::refused;
    out.reason = reason;
    out.data.clear();
    return out;
  };
  if (fd.get() < 0) {
    if (errno == ENOENT) return out;
    if (errno == ELOOP) return refuse("is a symbolic link");
    return refuse(std::string("cannot be opened (") + std::strerror(errno) + ")");
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    return refuse(std::string("cannot be examined (") + std::strerror(errno) + ")");
  if (!S_ISREG(st.st_mode)) return refuse("is " + file_kind(st.st_mode) + ", not a regular file");
  out.regular_file = true;
  out.owner = st.st_uid;
  out.mode = st.st_mode & 07777;
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size > max_bytes)
    return refuse("is " + std::to_string(size) + " bytes, more than the " + std::to_string(max_bytes) +
                  " an entry may have");
  if (expected_size) {
    if (size < header_bytes)
      return refuse("is " + std::to_string(size) + " bytes, shorter than its " +
                    std::to_string(header_bytes) + "-byte header");
    if (!read_exactly(fd.get(), header_bytes, out.data)) return refuse("could not be read");
    const std::optional<std::uint64_t> expected = expected_size(out.data);
    if (!expected) return refuse("has a malformed header");
    if (*expected != size)
      return refuse("is " + std::to_string(size) + " bytes, but its header announces " +
                    std::to_string(*expected));
  }
  if (!read_exactly(fd.get(), static_cast<std::size_t>(size) - out.data.size(), out.data))
    return refuse("could not be read (it changed while being read)");
  out.status = FileRead::Status::ok;
  return out;
}

bool write_private_file(const fs::path& file, std::string_view data) {
  const fs::path temp = file.string() + temp_suffix();
  if (!create_private_file(temp, data)) return false;
  // No fsync: after a crash a half-written entry fails its checks and is rebuilt, which is
  // cheaper than syncing every compile.
  if (::rename(temp.c_str(), file.c_str()) != 0) {
    ::unlink(temp.c_str());
    return false;
  }
  return true;
}

std::optional<std::string> folder_secret(const fs::path& dir, std::string* why) {
  const fs::path file = dir / "secret";
  auto fail = [&](const std::string& reason) -> std::optional<std::string> {
    if (why) *why = reason;
    return std::nullopt;
  };
  FileRead read = read_private_file(file, 4096);
  if (read.status == FileRead::Status::missing) {
    std::string secret;
    {
      Fd random(::open("/dev/urandom", O_RDONLY | O_CLOEXEC));
      if (random.get() < 0 || !read_exactly(random.get(), kSecretBytes, secret))
        return fail("/dev/urandom cannot be read, so no cache secret can be made");
    }
    // Written aside, then linked into place: link() fails when another process got there first,
    // and then both use that one; nobody ever reads a half-written secret.
    const fs::path temp = file.string() + temp_suffix();
    if (!create_private_file(temp, secret))
      return fail("the cache secret " + file.string() + " cannot be written");
    const bool linked = ::link(temp.c_str(), file.c_str()) == 0;
    const int link_errno = errno;
    ::unlink(temp.c_str());
    if (!linked && link_errno != EEXIST)
      return fail("the cache secret " + file.string() + " cannot be created (" + std::strerror(link_errno) +
                  ")");
    read = read_private_file(file, 4096);
  }
  if (read.status != FileRead::Status::ok)
    return fail("the cache secret " + file.string() + " " +
                (read.status == FileRead::Status::missing ? std::string("vanished") : read.reason) +
                "; fix: remove it (a new one is made; cached kernels are compiled again)");
  if (read.owner != ::geteuid() || (read.mode & 077) != 0 || read.data.size() != kSecretBytes)
    return fail("the cache secret " + file.string() + " is not a " + std::to_string(kSecretBytes) +
                "-byte file of yours readable by you alone (mode " + octal_mode(read.mode) +
                "); fix: remove it (a new one is made; cached kernels are compiled again)");
  return read.data;
}

void cache_note(const std::string& text) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  std::cerr << "tessel: note: " << text << "\n";
}

}  // namespace tessel
