// The kernel cache with a stand-in compiler (no NVRTC needed): levels, damage detection,
// environment selection, and concurrent writers (threads and forked processes).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <iterator>
#include <thread>

#include "support/TestSupport.hpp"
#include "tessel/runtime/Cache.hpp"

namespace tessel {
namespace {

namespace fs = std::filesystem;
using test::ScopedEnv;
using test::TempDir;

CompiledKernel fake_kernel(const std::string& source, const std::string& name, const CompileOptions& options,
                           std::size_t cubin_bytes = 4096) {
  CompiledKernel k;
  k.source = source;
  k.ptx = "// ptx for " + name + " on " + options.arch + "\n" + std::string(1000, 'p');
  k.cubin.resize(cubin_bytes);
  for (std::size_t i = 0; i < k.cubin.size(); ++i) k.cubin[i] = static_cast<char>(i * 7 + cubin_bytes);
  k.log = "ptxas info    : Used 42 registers";
  k.lowered_name = name;
  k.resources.registers = 42;
  k.resources.static_smem_bytes = 256;
  k.resources.barriers = 1;
  k.resources.arch = options.arch;
  return k;
}

struct CountingCompiler {
  std::shared_ptr<std::atomic<int>> calls = std::make_shared<std::atomic<int>>(0);
  CompiledKernel operator()(const std::string& s, const std::string& n, const CompileOptions& o) const {
    ++*calls;
    return fake_kernel(s, n, o);
  }
};

class CacheTest : public ::testing::Test {
 protected:
  TempDir dir;
  ScopedEnv cache_dir{"TESSEL_CACHE_DIR", dir.path().string()};
  ScopedEnv cache_on{"TESSEL_CACHE", std::nullopt};
  CompileOptions options;
  const std::string source = "extern \"C\" __global__ void k() {}";

  fs::path entry() const { return dir.path() / (KernelCache::key(source, "k", options) + ".tsk"); }
};

TEST_F(CacheTest, MissThenMemoryHitThenDiskHit) {
  CountingCompiler compiler;
  KernelCache cache(compiler);
  CompiledKernel first = cache.get_or_compile(source, "k", options);
  EXPECT_FALSE(first.resources.cache_hit);
  EXPECT_EQ(*compiler.calls, 1);
  EXPECT_TRUE(fs::exists(entry()));

  CompiledKernel second = cache.get_or_compile(source, "k", options);
  EXPECT_TRUE(second.resources.cache_hit);
  EXPECT_EQ(*compiler.calls, 1);
  EXPECT_EQ(second.cubin, first.cubin);
  EXPECT_EQ(cache.stats().memory_hits, 1u);

  // A fresh process-like cache: nothing in memory, the entry on disk.
  CountingCompiler other;
  KernelCache fresh(other);
  CompiledKernel third = fresh.get_or_compile(source, "k", options);
  EXPECT_TRUE(third.resources.cache_hit);
  EXPECT_EQ(*other.calls, 0);
  EXPECT_EQ(third.cubin, first.cubin);
  EXPECT_EQ(third.ptx, first.ptx);
  EXPECT_EQ(third.log, first.log);
  EXPECT_EQ(third.source, source);
  EXPECT_EQ(third.lowered_name, "k");
  EXPECT_EQ(third.resources.registers, 42);
  EXPECT_EQ(third.resources.static_smem_bytes, 256);
  EXPECT_EQ(third.resources.arch, "sm_90a");
  EXPECT_EQ(fresh.stats().disk_hits, 1u);

  fresh.clear_memory();
  EXPECT_TRUE(fresh.get_or_compile(source, "k", options).resources.cache_hit);
  EXPECT_EQ(fresh.stats().disk_hits, 2u);
  EXPECT_EQ(*other.calls, 0);
}

TEST_F(CacheTest, KeyCoversEveryInput) {
  const std::string base = KernelCache::key(source, "k", options);
  EXPECT_EQ(base.size(), 64u);
  EXPECT_EQ(base, KernelCache::key(source, "k", options));
  CompileOptions sm80 = options;
  sm80.arch = "sm_80";
  CompileOptions flagged = options;
  flagged.extra_flags = {"-DX=1"};
  EXPECT_NE(base, KernelCache::key(source + " ", "k", options));
  EXPECT_NE(base, KernelCache::key(source, "k2", options));
  EXPECT_NE(base, KernelCache::key(source, "k", sm80));
  EXPECT_NE(base, KernelCache::key(source, "k", flagged));
}

// Damages the entry with `damage`, then checks that a fresh cache detects it, recompiles and
// leaves a valid entry behind.
void expect_rebuilt(const fs::path& file, const std::string& key, const std::function<void()>& damage,
                    const std::string& source, const CompileOptions& options) {
  damage();
  EXPECT_FALSE(read_cache_entry(file, key, /*remove_if_bad=*/false).has_value());
  CountingCompiler compiler;
  KernelCache fresh(compiler);
  CompiledKernel k = fresh.get_or_compile(source, "k", options);
  EXPECT_FALSE(k.resources.cache_hit);
  EXPECT_EQ(*compiler.calls, 1);
  EXPECT_EQ(fresh.stats().corrupt_entries, 1u);
  EXPECT_TRUE(read_cache_entry(file, key).has_value());
}

TEST_F(CacheTest, DamagedEntriesAreDetectedAndRebuilt) {
  KernelCache cache(CountingCompiler{});
  cache.get_or_compile(source, "k", options);
  const fs::path file = entry();
  const std::string key = KernelCache::key(source, "k", options);
  const auto size = fs::file_size(file);
  ASSERT_TRUE(read_cache_entry(file, key).has_value());

  auto flip = [&](std::uintmax_t offset) {
    return [&file, offset] {
      std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(static_cast<std::streamoff>(offset));
      char c = 0;
      f.get(c);
      f.seekp(static_cast<std::streamoff>(offset));
      f.put(static_cast<char>(c ^ 0x10));
    };
  };
  SCOPED_TRACE("truncated");
  expect_rebuilt(
      file, key, [&] { fs::resize_file(file, size / 2); }, source, options);
  SCOPED_TRACE("payload byte flipped");
  expect_rebuilt(file, key, flip(size - 100), source, options);
  SCOPED_TRACE("magic flipped");
  expect_rebuilt(file, key, flip(3), source, options);
  SCOPED_TRACE("section length flipped");
  expect_rebuilt(file, key, flip(24), source, options);
  SCOPED_TRACE("empty file");
  expect_rebuilt(
      file, key, [&] { std::ofstream(file, std::ios::trunc); }, source, options);
  SCOPED_TRACE("another key's entry");
  expect_rebuilt(
      file, key, [&] { write_cache_entry(file, std::string(64, '0'), fake_kernel(source, "k", options)); },
      source, options);
}

TEST_F(CacheTest, EnvironmentSelectsTheDirectory) {
  EXPECT_EQ(cache_directory(), dir.path());
  {
    ScopedEnv off("TESSEL_CACHE", "0");
    EXPECT_FALSE(cache_directory().has_value());
    KernelCache cache(CountingCompiler{});
    cache.get_or_compile(source, "k", options);
    EXPECT_TRUE(fs::is_empty(dir.path()));
  }
  {
    ScopedEnv unset("TESSEL_CACHE_DIR", std::nullopt);
    ScopedEnv xdg("XDG_CACHE_HOME", (dir.path() / "xdg").string());
    EXPECT_EQ(cache_directory(), dir.path() / "xdg" / "tessel");
    ScopedEnv no_xdg("XDG_CACHE_HOME", std::nullopt);
    ScopedEnv home("HOME", (dir.path() / "home").string());
    EXPECT_EQ(cache_directory(), dir.path() / "home" / ".cache" / "tessel");
  }
  // A directory that does not exist yet is created on the first write.
  ScopedEnv nested("TESSEL_CACHE_DIR", (dir.path() / "a" / "b").string());
  KernelCache cache(CountingCompiler{});
  cache.get_or_compile(source, "k", options);
  EXPECT_TRUE(fs::exists(dir.path() / "a" / "b" / (KernelCache::key(source, "k", options) + ".tsk")));
}

TEST_F(CacheTest, UnwritableDirectoryStillCompiles) {
  const fs::path blocker = dir.path() / "file";
  std::ofstream(blocker) << "not a directory";
  ScopedEnv bad("TESSEL_CACHE_DIR", (blocker / "sub").string());
  KernelCache cache(CountingCompiler{});
  testing::internal::CaptureStderr();
  EXPECT_NO_THROW(cache.get_or_compile(source, "k", options));
  EXPECT_CONTAINS(testing::internal::GetCapturedStderr(),
                  "tessel: warning: the cache folder " + (blocker / "sub").string() +
                      " cannot be created (Not a directory); fix: set TESSEL_CACHE_DIR to a folder you can "
                      "write; running without the disk cache\n");
  EXPECT_TRUE(cache.get_or_compile(source, "k", options).resources.cache_hit);
}

// Writers of one key, each with different (but valid) contents, racing readers: a reader sees
// no entry or one whole entry, never a partial one.
bool hammer(const fs::path& file, const std::string& key, int writer, int rounds) {
  CompileOptions options;
  for (int r = 0; r < rounds; ++r) {
    const std::size_t bytes = 1000 + 97 * static_cast<std::size_t>((writer * rounds + r) % 50);
    if (!write_cache_entry(file, key, fake_kernel("src", "k", options, bytes))) return false;
    auto read = read_cache_entry(file, key, /*remove_if_bad=*/false);
    if (!read || read->lowered_name != "k" ||
        read->cubin != fake_kernel("src", "k", options, read->cubin.size()).cubin)
      return false;
  }
  return true;
}

TEST_F(CacheTest, ConcurrentThreadsWritingOneKey) {
  const fs::path file = dir.path() / "shared.tsk";
  const std::string key = std::string(64, 'a');
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      if (!hammer(file, key, t, 40)) ++failures;
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures, 0);
  EXPECT_TRUE(read_cache_entry(file, key).has_value());
  for (const auto& e : fs::directory_iterator(dir.path()))  // no temporary files left behind
    EXPECT_TRUE(e.path().filename() == "shared.tsk" || e.path().filename() == "secret") << e.path();
}

TEST_F(CacheTest, ConcurrentProcessesWritingOneKey) {
  const fs::path file = dir.path() / "shared.tsk";
  const std::string key = std::string(64, 'b');
  std::vector<pid_t> children;
  for (int p = 0; p < 8; ++p) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) _exit(hammer(file, key, p, 40) ? 0 : 1);  // no gtest in the child
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child " << pid;
  }
  EXPECT_TRUE(read_cache_entry(file, key).has_value());
}

TEST_F(CacheTest, ConcurrentGetOrCompile) {
  CountingCompiler compiler;
  KernelCache cache(compiler);
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        CompiledKernel k = cache.get_or_compile(source + std::to_string(i % 4), "k", options);
        if (k.cubin != fake_kernel("", "k", options).cubin) ++bad;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad, 0);
  const auto s = cache.stats();
  EXPECT_EQ(s.hits() + s.misses, 160u);
  EXPECT_GE(s.misses, 4u);
  EXPECT_EQ(static_cast<std::uint64_t>(*compiler.calls), s.misses);
}

// ---- safety (issue 18): the folder, the entry files, the MAC ------------------------------------

std::string file_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void put_bytes(const fs::path& file, const std::string& bytes) {
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
}

unsigned mode_of(const fs::path& p) {
  return static_cast<unsigned>(fs::status(p).permissions()) & 0777;
}

TEST_F(CacheTest, WorldWritableFolderIsRefusedWithOneWarning) {
  const fs::path open = dir.path() / "open";
  fs::create_directory(open);
  fs::permissions(open, fs::perms::all, fs::perm_options::replace);
  ScopedEnv env("TESSEL_CACHE_DIR", open.string());
  CountingCompiler compiler;
  testing::internal::CaptureStderr();
  for (int i = 0; i < 2; ++i) {  // two "processes": each compiles, neither reads or writes the folder
    KernelCache cache(compiler);
    CompiledKernel k = cache.get_or_compile(source, "k", options);
    EXPECT_FALSE(k.resources.cache_hit);
    EXPECT_EQ(k.cubin, fake_kernel(source, "k", options).cubin);
  }
  const std::string err = testing::internal::GetCapturedStderr();
  const std::string warning = "tessel: warning: the cache folder " + open.string() +
                              " is writable by others (mode 0777), so they could plant kernels in it; fix: "
                              "chmod 700 " +
                              open.string() + "; running without the disk cache\n";
  EXPECT_EQ(err, warning);  // once per folder and process
  EXPECT_EQ(*compiler.calls, 2);
  EXPECT_TRUE(fs::is_empty(open));  // no secret, no entry

  const fs::path group = dir.path() / "group";  // another folder: the warning is once per folder
  fs::create_directory(group);
  fs::permissions(group, fs::perms::owner_all | fs::perms::group_all, fs::perm_options::replace);
  ScopedEnv group_env("TESSEL_CACHE_DIR", group.string());
  testing::internal::CaptureStderr();
  KernelCache cache(compiler);
  cache.get_or_compile(source, "k", options);
  EXPECT_CONTAINS(testing::internal::GetCapturedStderr(),
                  "the cache folder " + group.string() + " is writable by its group (mode 0770)");
  EXPECT_TRUE(fs::is_empty(group));

  ScopedEnv open_env("TESSEL_CACHE_DIR", open.string());

  fs::permissions(open, fs::perms::owner_all, fs::perm_options::replace);  // the fix
  KernelCache fixed(compiler);
  fixed.get_or_compile(source, "k", options);
  EXPECT_TRUE(fs::exists(open / (KernelCache::key(source, "k", options) + ".tsk")));
}

TEST_F(CacheTest, CreatedFoldersAndFilesArePrivateUnderUmask000) {
  const mode_t old = ::umask(0);
  const fs::path nested = dir.path() / "new" / "cache";
  {
    ScopedEnv env("TESSEL_CACHE_DIR", nested.string());
    KernelCache cache(CountingCompiler{});
    cache.get_or_compile(source, "k", options);
  }
  ::umask(old);
  EXPECT_EQ(mode_of(dir.path() / "new"), 0700u);
  EXPECT_EQ(mode_of(nested), 0700u);
  EXPECT_EQ(mode_of(nested / "secret"), 0600u);
  EXPECT_EQ(fs::file_size(nested / "secret"), 32u);
  EXPECT_EQ(mode_of(nested / (KernelCache::key(source, "k", options) + ".tsk")), 0600u);
}

// What a fresh process sees when `file` holds something odd: run in a child that is killed after
// 20 s, so that a hang fails the test instead of stalling it, and an abort is reported.
test::ChildResult fresh_lookup(const std::string& source, const CompileOptions& options) {
  return test::run_in_child(20, [&] {
    CountingCompiler compiler;
    KernelCache fresh(compiler);
    CompiledKernel k = fresh.get_or_compile(source, "k", options);
    return std::string(k.resources.cache_hit ? "hit" : "miss") + ", compiled " +
           std::to_string(*compiler.calls);
  });
}

TEST_F(CacheTest, OddFilesInPlaceOfAnEntryAreMissesNotHangsOrAborts) {
  const fs::path file = entry();
  struct Case {
    std::string name, note;
    std::function<void()> plant;
  };
  const std::vector<Case> cases = {
      {"fifo", " is a FIFO, not a regular file; not used, compiling instead",
       [&] { ASSERT_EQ(::mkfifo(file.c_str(), 0600), 0); }},
      {"directory", " is a directory, not a regular file; not used, compiling instead",
       [&] { fs::create_directory(file); }},
      {"symlink", " is a symbolic link; not used, compiling instead",
       [&] {
         // To a valid entry: followed, it would be a hit.
         KernelCache(CountingCompiler{}).get_or_compile(source, "k", options);
         fs::rename(file, dir.path() / "elsewhere");
         fs::create_symlink(dir.path() / "elsewhere", file);
       }},
      {"3 GB sparse file", " is 3221225472 bytes, more than the 67108864 an entry may have; removed",
       [&] {
         const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT, 0600);
         ASSERT_GE(fd, 0);
         ASSERT_EQ(::ftruncate(fd, 3ll << 30), 0);
         ::close(fd);
       }},
      {"header announcing more than the file holds", " bytes, but its header announces ",
       [&] {
         KernelCache(CountingCompiler{}).get_or_compile(source, "k", options);
         std::string bytes = file_bytes(file);
         bytes[16 + 8 * 2 + 3] = 1;  // the cubin's length + 16 MB
         put_bytes(file, bytes);
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::error_code ec;
    fs::remove_all(file, ec);
    c.plant();
    const test::ChildResult r = fresh_lookup(source, options);
    EXPECT_FALSE(r.timed_out);
    EXPECT_EQ(r.result, "miss, compiled 1");
    EXPECT_CONTAINS(r.stderr_text, "tessel: note: kernel cache entry " + file.string());
    EXPECT_CONTAINS(r.stderr_text, c.note);
  }
}

TEST_F(CacheTest, ForgedEntriesAreNotLoaded) {
  const std::string other_source = "extern \"C\" __global__ void softmax_kernel() {}";
  KernelCache cache(CountingCompiler{});
  cache.get_or_compile(source, "k", options);
  cache.get_or_compile(other_source, "k", options);
  const fs::path file = entry();
  const fs::path other = dir.path() / (KernelCache::key(other_source, "k", options) + ".tsk");
  const std::string key = KernelCache::key(source, "k", options);

  // Issue 18's forgery: another kernel's entry filed under this key, its key section replaced and
  // the integrity field recomputed the way format 1 checked it (SHA-256 of the payload).
  const std::string theirs = file_bytes(other);
  const std::string payload = key + theirs.substr(128 + 64);
  put_bytes(file, theirs.substr(0, 64) + sha256_hex(payload) + payload);
  testing::internal::CaptureStderr();
  EXPECT_FALSE(read_cache_entry(file, key, /*remove_if_bad=*/false).has_value());
  EXPECT_CONTAINS(testing::internal::GetCapturedStderr(),
                  "tessel: note: kernel cache entry " + file.string() +
                      " fails its MAC check (damaged, written under another key or another secret, or "
                      "tampered with); not used\n");

  // Another kernel's entry copied in whole (its MAC is right, for its own key).
  put_bytes(file, theirs);
  testing::internal::CaptureStderr();
  EXPECT_FALSE(read_cache_entry(file, key, false).has_value());
  EXPECT_CONTAINS(testing::internal::GetCapturedStderr(), " fails its MAC check");

  // This kernel's own entry, from a folder with another secret (another user's, another machine's).
  TempDir elsewhere;
  ASSERT_TRUE(
      write_cache_entry(elsewhere.path() / file.filename(), key, fake_kernel(other_source, "k", options)));
  fs::copy_file(elsewhere.path() / file.filename(), file, fs::copy_options::overwrite_existing);
  testing::internal::CaptureStderr();
  EXPECT_FALSE(read_cache_entry(file, key, false).has_value());
  EXPECT_CONTAINS(testing::internal::GetCapturedStderr(), " fails its MAC check");

  // And the cache itself compiles instead, replacing the forgery with a real entry.
  CountingCompiler compiler;
  KernelCache fresh(compiler);
  testing::internal::CaptureStderr();
  CompiledKernel k = fresh.get_or_compile(source, "k", options);
  testing::internal::GetCapturedStderr();
  EXPECT_FALSE(k.resources.cache_hit);
  EXPECT_EQ(*compiler.calls, 1);
  EXPECT_EQ(fresh.stats().corrupt_entries, 1u);
  ASSERT_TRUE(read_cache_entry(file, key).has_value());
  EXPECT_EQ(read_cache_entry(file, key)->ptx, fake_kernel(source, "k", options).ptx);
}

TEST_F(CacheTest, TamperedSecretDisablesTheDiskCache) {
  KernelCache(CountingCompiler{}).get_or_compile(source, "k", options);
  fs::permissions(dir.path() / "secret", fs::perms::owner_read | fs::perms::group_read,
                  fs::perm_options::replace);
  testing::internal::CaptureStderr();
  CountingCompiler compiler;
  KernelCache fresh(compiler);
  EXPECT_FALSE(fresh.get_or_compile(source, "k", options).resources.cache_hit);
  EXPECT_CONTAINS(testing::internal::GetCapturedStderr(),
                  "tessel: warning: the cache secret " + (dir.path() / "secret").string() +
                      " is not a 32-byte file of yours readable by you alone (mode 0440); fix: remove it");
}

TEST(PtxasLog, ParsesResources) {
  const std::string log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function '_Z5otherPf' for 'sm_80'\n"
      "ptxas info    : Function properties for _Z5otherPf\n"
      "ptxas         .     8 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 8 registers, used 0 barriers, 360 bytes cmem[0]\n"
      "ptxas info    : Compiling entry function 'vadd' for 'sm_90a'\n"
      "ptxas info    : Function properties for vadd\n"
      "ptxas         .     16 bytes stack frame, 24 bytes spill stores, 20 bytes spill loads\n"
      "ptxas info    : Used 168 registers, used 2 barriers, 49152 bytes smem, 380 bytes cmem[0]\n";
  Resources r = parse_ptxas_log(log, "vadd");
  EXPECT_EQ(r.registers, 168);
  EXPECT_EQ(r.barriers, 2);
  EXPECT_EQ(r.static_smem_bytes, 49152);
  EXPECT_EQ(r.stack_frame_bytes, 16);
  EXPECT_EQ(r.spill_store_bytes, 24);
  EXPECT_EQ(r.spill_load_bytes, 20);
  EXPECT_EQ(r.arch, "sm_90a");
  Resources other = parse_ptxas_log(log, "_Z5otherPf");
  EXPECT_EQ(other.registers, 8);
  EXPECT_EQ(other.static_smem_bytes, 0);
  EXPECT_EQ(other.stack_frame_bytes, 8);
  EXPECT_EQ(parse_ptxas_log(log).registers, 8);  // no name: the first entry
  EXPECT_EQ(parse_ptxas_log("").registers, -1);
}

}  // namespace
}  // namespace tessel
