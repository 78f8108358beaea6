// The kernel cache with a stand-in compiler (no NVRTC needed): levels, damage detection,
// environment selection, and concurrent writers (threads and forked processes).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
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
  EXPECT_NO_THROW(cache.get_or_compile(source, "k", options));
  EXPECT_EQ(cache.stats().write_failures, 1u);
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
    EXPECT_EQ(e.path().filename(), "shared.tsk");
}

TEST_F(CacheTest, ConcurrentProcessesWritingOneKey) {
  const fs::path file = dir.path() / "shared.tsk";
  const std::string key = std::string(64, 'b');
  std::vector<pid_t> children;
  for (int p = 0; p < 6; ++p) {
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
