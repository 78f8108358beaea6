// What the library kernels' default entry points get from the tuning cache: a planted entry is
// found for its own shape, dtype and device only; without an entry (or a GPU) the built-in
// default, and never an exception; an entry outside the space, or not made of ints, or not a
// regular file, is never used; a GEMM entry keeps the split-K it was tuned with.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "support/TestSupport.hpp"
#include "tessel/autotune/Autotune.hpp"
#include "tessel/runtime/Driver.hpp"

namespace at = tessel::autotune;
using tessel::DType;

namespace {

const at::DeviceKey kH200{"NVIDIA H200", 9, 0, 132, 13000, 13000};

void plant(const std::filesystem::path& dir, const at::KeyParts& parts, const at::Config& config) {
  ASSERT_TRUE(
      at::write_tuning_entry(dir, at::tuning_key(parts), at::StoredResult{config, 0.5, "halving", "test"}));
}

}  // namespace

TEST(TunedConfigs, PlantedGemmEntryIsFoundForItsShapeDtypeAndDeviceOnly) {
  tessel::test::TempDir dir;
  EXPECT_FALSE(at::find_tuned_matmul_config(2048, 2048, 2048, DType::f16, kH200, dir.path()));
  const at::Config tuned = {{"block_M", 64},   {"block_N", 256}, {"block_K", 64},
                            {"num_stages", 4}, {"threads", 128}, {"panel", 8}};
  plant(dir.path(), at::gemm_key_parts(2048, 2048, 2048, DType::f16, kH200), tuned);

  const auto found = at::find_tuned_matmul_config(2048, 2048, 2048, DType::f16, kH200, dir.path());
  ASSERT_TRUE(found);
  EXPECT_EQ(found->config.block_M, 64);
  EXPECT_EQ(found->config.block_N, 256);
  EXPECT_EQ(found->config.block_K, 64);
  EXPECT_EQ(found->config.num_stages, 4);
  EXPECT_EQ(found->config.threads, 128);
  EXPECT_TRUE(found->config.use_swizzle);
  EXPECT_EQ(found->config.panel_size, 8);
  EXPECT_EQ(found->config.dtype, DType::f16);
  EXPECT_EQ(found->split_k, 1);
  EXPECT_FALSE(found->split_searched) << "2048 rows: no split candidates to search";

  EXPECT_FALSE(at::find_tuned_matmul_config(2048, 2048, 4096, DType::f16, kH200, dir.path())) << "another K";
  EXPECT_FALSE(at::find_tuned_matmul_config(4096, 2048, 2048, DType::f16, kH200, dir.path())) << "another M";
  EXPECT_FALSE(at::find_tuned_matmul_config(2048, 2048, 2048, DType::bf16, kH200, dir.path()))
      << "another dtype";
  at::DeviceKey h100 = kH200;
  h100.name = "NVIDIA H100 80GB HBM3";
  EXPECT_FALSE(at::find_tuned_matmul_config(2048, 2048, 2048, DType::f16, h100, dir.path())) << "another GPU";
  at::DeviceKey a100 = kH200;
  a100.cc_major = 8;  // another arch: another gemm_space, so another key
  EXPECT_FALSE(at::find_tuned_matmul_config(2048, 2048, 2048, DType::f16, a100, dir.path()))
      << "another arch";
}

TEST(TunedConfigs, PlantedSoftmaxEntryIsFoundForItsShapeOnly) {
  tessel::test::TempDir dir;
  tessel::kernels::SoftmaxConfig c;
  c.variant = tessel::kernels::SoftmaxVariant::Rows;
  c.threads = 128;
  c.rows_per_block = 4;
  c.block_N = 1024;
  plant(dir.path(), at::softmax_key_parts(4096, 1000, DType::bf16, kH200), at::softmax_point(c));
  const auto found = at::find_tuned_softmax_config(4096, 1000, DType::bf16, kH200, dir.path());
  ASSERT_TRUE(found);
  EXPECT_EQ(found->describe(), "rows:t128:r4:bn1024");
  EXPECT_FALSE(at::find_tuned_softmax_config(4096, 1024, DType::bf16, kH200, dir.path())) << "another N";
  EXPECT_FALSE(at::find_tuned_softmax_config(8192, 1000, DType::bf16, kH200, dir.path())) << "another M";
  EXPECT_FALSE(at::find_tuned_softmax_config(4096, 1000, DType::f16, kH200, dir.path())) << "another dtype";
}

TEST(TunedConfigs, WithoutAnEntryTheKernelsUseTheirDefaults) {
  // An empty tuning cache; on a machine without a GPU there is no device to key on at all.
  tessel::test::TempDir dir;
  tessel::test::ScopedEnv env("TESSEL_CACHE_DIR", dir.path().string());
  const auto gemm = tessel::kernels::choose_matmul_config(2048, 2048, 2048, DType::f16);
  EXPECT_FALSE(gemm.tuned);
  const bool gpu = tessel::gpu_available();
  const auto expected = tessel::kernels::default_matmul_config(
      2048, 2048, 2048, DType::f16, gpu ? tessel::current_device().arch() : "sm_90a",
      gpu ? tessel::current_device().sm_count : 132);
  EXPECT_EQ(gemm.config.describe(), expected.describe());
  EXPECT_EQ(gemm.config.panel_size, expected.panel_size);
  const auto softmax = tessel::kernels::choose_softmax_config(4096, 1000, DType::f16);
  EXPECT_FALSE(softmax.tuned);
  EXPECT_EQ(softmax.config.describe(),
            tessel::kernels::default_softmax_config(4096, 1000, DType::f16).describe());
  if (!gpu) {
    EXPECT_FALSE(at::current_device_key());
    EXPECT_FALSE(at::tuned_matmul_config(2048, 2048, 2048, DType::f16));
  }
  // With the disk cache off there is no tuning cache either: still the default, no exception.
  tessel::test::ScopedEnv off("TESSEL_CACHE", "0");
  EXPECT_FALSE(at::tuned_softmax_config(4096, 1000, DType::f16));
  EXPECT_FALSE(tessel::kernels::choose_softmax_config(4096, 1000, DType::f16).tuned);
}

// ---- validated and safely read entries (issue 18) ------------------------------------------------

namespace {

const at::Config kGoodGemm = {{"block_M", 64},   {"block_N", 256}, {"block_K", 64},
                              {"num_stages", 4}, {"threads", 128}, {"panel", 8}};

std::filesystem::path gemm_entry(const std::filesystem::path& dir) {
  return dir / (at::tuning_key(at::gemm_key_parts(2048, 2048, 2048, DType::f16, kH200)) + ".json");
}

// Writes the entry file by hand, with `config_json` as its config.
void plant_raw(const std::filesystem::path& dir, const std::string& config_json) {
  const std::string key = at::tuning_key(at::gemm_key_parts(2048, 2048, 2048, DType::f16, kH200));
  std::ofstream(gemm_entry(dir)) << "{\"format\": 1, \"key\": \"" << key << "\", \"config\": " << config_json
                                 << ", \"ms\": 0.5, \"strategy\": \"halving\", \"space\": \"test\"}";
}

// Looks the 2048^3 f16 GEMM up; returns the note on stderr, and checks that nothing was found and
// the entry was removed.
std::string rejected_note(const std::filesystem::path& dir, const at::HardwareLimits& limits = {}) {
  testing::internal::CaptureStderr();
  const auto found = at::find_tuned_matmul_config(2048, 2048, 2048, DType::f16, kH200, dir, limits);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(found) << err;
  EXPECT_FALSE(std::filesystem::exists(gemm_entry(dir))) << "a rejected entry is removed";
  return err;
}

}  // namespace

TEST(TunedConfigs, EntriesOutsideTheSpaceAreRemovedWithANote) {
  tessel::test::TempDir dir;
  const std::string space = "the space 'gemm sm_90a f16'";
  const std::string note = "tessel: note: tuning cache entry " + gemm_entry(dir.path()).string() + " holds ";
  const auto key_parts = at::gemm_key_parts(2048, 2048, 2048, DType::f16, kH200);

  // Issue 18's entry: every later make_matmul for the shape would have thrown.
  plant(dir.path(), key_parts, {{"block_M", 7}, {"num_stages", -3}, {"threads", 5000}});
  EXPECT_CONTAINS(rejected_note(dir.path()),
                  note + "block_M=7 num_stages=-3 threads=5000, which lacks the knob block_K of " + space +
                      "; removed\n");

  // A legal config the space does not hold (6 stages of 128x128x32 is off its grid on sm_90a).
  at::Config off_grid = kGoodGemm;
  off_grid["num_stages"] = 6;
  plant(dir.path(), key_parts, off_grid);
  EXPECT_CONTAINS(rejected_note(dir.path()),
                  "num_stages=6 panel=8 threads=128, which is not a point of " + space);

  // A missing knob is not defaulted.
  at::Config missing = kGoodGemm;
  missing.erase("panel");
  plant(dir.path(), key_parts, missing);
  EXPECT_CONTAINS(rejected_note(dir.path()), "which lacks the knob panel of " + space);

  at::Config extra = kGoodGemm;
  extra["unroll"] = 2;
  plant(dir.path(), key_parts, extra);
  EXPECT_CONTAINS(rejected_note(dir.path()),
                  "which has a knob unroll the space 'gemm sm_90a f16' does not have");

  // A point the space prunes: by a constraint, and by this GPU's shared memory.
  at::Config too_many = kGoodGemm;
  too_many["block_M"] = 256;
  too_many["block_N"] = 256;
  plant(dir.path(), key_parts, too_many);
  EXPECT_CONTAINS(rejected_note(dir.path()),
                  "which is pruned from " + space + " by constraint at most 256 f32 accumulators per thread");
  plant(dir.path(), key_parts, kGoodGemm);
  EXPECT_CONTAINS(rejected_note(dir.path(), at::HardwareLimits{48 * 1024, 1024}),
                  "which is pruned from " + space + " by shared memory ");

  // The good one is used.
  plant(dir.path(), key_parts, kGoodGemm);
  EXPECT_TRUE(at::find_tuned_matmul_config(2048, 2048, 2048, DType::f16, kH200, dir.path()));
}

TEST(TunedConfigs, KnobsThatAreNotIntsAreRejectedNotWrapped) {
  tessel::test::TempDir dir;
  const std::pair<const char*, const char*> cases[] = {
      {"1e20", "knob block_M is 1e+20, not an integer that fits an int"},
      {"12.5", "knob block_M is 12.5, not an integer that fits an int"},
      {"2147483648", "knob block_M is 2147483648, not an integer that fits an int"},
      {"-2147483649", "knob block_M is -2147483649, not an integer that fits an int"},
      {"\"64\"", "knob block_M is \"64\", not an integer that fits an int"},
  };
  for (const auto& [value, why] : cases) {
    SCOPED_TRACE(value);
    plant_raw(dir.path(), std::string("{\"block_M\": ") + value +
                              ", \"block_N\": 256, \"block_K\": 64, \"num_stages\": 4, \"threads\": 128, "
                              "\"panel\": 8}");
    EXPECT_CONTAINS(rejected_note(dir.path()), std::string(" is damaged (") + why + "); removed\n");
  }
  plant_raw(dir.path(), "[64, 256]");
  EXPECT_CONTAINS(rejected_note(dir.path()), " is damaged (the config is not a JSON object); removed\n");
}

TEST(TunedConfigs, OddFilesInPlaceOfAnEntryNeitherHangNorAbort) {
  tessel::test::TempDir dir;
  const auto file = gemm_entry(dir.path());
  ASSERT_EQ(::mkfifo(file.c_str(), 0600), 0);
  auto lookup = [&] {
    return std::string(
        at::find_tuned_matmul_config(2048, 2048, 2048, DType::f16, kH200, dir.path()) ? "found" : "none");
  };
  tessel::test::ChildResult r = tessel::test::run_in_child(20, lookup);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.result, "none");
  EXPECT_CONTAINS(r.stderr_text,
                  "tuning cache entry " + file.string() + " is a FIFO, not a regular file; not used");

  std::filesystem::remove(file);
  std::filesystem::create_directory(file);
  r = tessel::test::run_in_child(20, lookup);
  EXPECT_EQ(r.result, "none");
  EXPECT_CONTAINS(r.stderr_text, " is a directory, not a regular file; not used");

  std::filesystem::remove(file);
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 3ll << 30), 0);
  ::close(fd);
  r = tessel::test::run_in_child(20, lookup);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.result, "none");
  EXPECT_CONTAINS(r.stderr_text, " is 3221225472 bytes, more than the 1048576 an entry may have; removed");
  EXPECT_FALSE(std::filesystem::exists(file));
}

TEST(TunedConfigs, TheTuningFolderIsPrivateUnderUmask000AndAnOpenOneIsRefused) {
  tessel::test::TempDir dir;
  tessel::test::ScopedEnv env("TESSEL_CACHE_DIR", (dir.path() / "cache").string());
  const mode_t old = ::umask(0);
  const auto tune = at::tuning_cache_directory();
  ASSERT_TRUE(tune);
  plant(*tune, at::gemm_key_parts(2048, 2048, 2048, DType::f16, kH200), kGoodGemm);
  ::umask(old);
  auto mode = [](const std::filesystem::path& p) {
    return static_cast<unsigned>(std::filesystem::status(p).permissions()) & 0777;
  };
  EXPECT_EQ(mode(dir.path() / "cache"), 0700u);
  EXPECT_EQ(mode(*tune), 0700u);
  EXPECT_EQ(mode(gemm_entry(*tune)), 0600u);

  std::filesystem::permissions(*tune, std::filesystem::perms::all, std::filesystem::perm_options::replace);
  testing::internal::CaptureStderr();
  EXPECT_FALSE(at::find_tuned_matmul_config(2048, 2048, 2048, DType::f16, kH200, *tune));
  EXPECT_CONTAINS(
      testing::internal::GetCapturedStderr(),
      "tessel: warning: the cache folder " + tune->string() +
          " is writable by others (mode 0777), so they could plant kernels in it; fix: chmod 700 " +
          tune->string() + "; running without the disk cache\n");
}

// ---- split-K entries (issue 17) --------------------------------------------------------------------

namespace {

// The tuner's split-K point for 16 rows: the partial GEMM's tiles over `shares` of K.
at::Config split_point(int shares) {
  return {{"block_K", 64}, {"block_M", 16},     {"block_N", 256}, {"num_stages", 4},
          {"panel", 0},    {"split_k", shares}, {"threads", 128}};
}

}  // namespace

TEST(TunedConfigs, SplitKWinnerRoundTripsWithItsSplit) {
  tessel::test::TempDir dir;
  const auto parts = at::gemm_split_k_key_parts(16, 4096, 4096, DType::f16, kH200);
  plant(dir.path(), parts, split_point(5));
  const auto stored = at::read_tuning_entry(dir.path(), at::tuning_key(parts));
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->config, split_point(5)) << "the knob is written and read back";

  const auto found = at::find_tuned_matmul_config(16, 4096, 4096, DType::f16, kH200, dir.path());
  ASSERT_TRUE(found);
  EXPECT_EQ(found->split_k, 5);
  EXPECT_TRUE(found->split_searched);
  EXPECT_EQ(found->config.describe(), "16x256x64 s4 t128");
  EXPECT_FALSE(found->config.use_swizzle);
  EXPECT_EQ(found->config.dtype, DType::f16);

  // The same tune won by one kernel: split 1, and still a tune that timed the splits.
  plant(dir.path(), parts, kGoodGemm);
  const auto one = at::find_tuned_matmul_config(16, 4096, 4096, DType::f16, kH200, dir.path());
  ASSERT_TRUE(one);
  EXPECT_EQ(one->split_k, 1);
  EXPECT_TRUE(one->split_searched);
  EXPECT_EQ(one->config.describe(), "64x256x64 s4 t128 swz");
  EXPECT_FALSE(at::find_tuned_matmul_config(16, 4096, 4096, DType::bf16, kH200, dir.path()))
      << "another dtype";
}

// Entries without the knob -- stored before it, or by tessel.tune in Python under the one-kernel
// key -- still load, as one kernel that was never timed against a split (so kernels::Matmul's
// automatic split-K keeps following its model); a split-K tune's entry takes their place.
TEST(TunedConfigs, OneKernelEntriesWithoutTheKnobStillLoad) {
  tessel::test::TempDir dir;
  plant(dir.path(), at::gemm_key_parts(16, 4096, 4096, DType::f16, kH200), kGoodGemm);
  const auto old = at::find_tuned_matmul_config(16, 4096, 4096, DType::f16, kH200, dir.path());
  ASSERT_TRUE(old);
  EXPECT_EQ(old->split_k, 1);
  EXPECT_FALSE(old->split_searched);
  EXPECT_EQ(old->config.describe(), "64x256x64 s4 t128 swz");

  plant(dir.path(), at::gemm_split_k_key_parts(16, 4096, 4096, DType::f16, kH200), split_point(8));
  const auto tuned = at::find_tuned_matmul_config(16, 4096, 4096, DType::f16, kH200, dir.path());
  ASSERT_TRUE(tuned);
  EXPECT_EQ(tuned->split_k, 8);
  EXPECT_TRUE(tuned->split_searched);
}

TEST(TunedConfigs, IllegalSplitEntriesAreRemovedWithANote) {
  tessel::test::TempDir dir;
  // Plants `config` under what `tessel tune gemm` would store for the problem, looks it up and
  // returns the note; checks that nothing was found and the entry is gone.
  auto rejected = [&](long long M, long long K, DType dtype, const at::DeviceKey& device,
                      const at::Config& config) {
    const auto parts = at::gemm_split_k_key_parts(M, 4096, K, dtype, device);
    const auto file = dir.path() / (at::tuning_key(parts) + ".json");
    plant(dir.path(), parts, config);
    testing::internal::CaptureStderr();
    const auto found = at::find_tuned_matmul_config(M, 4096, K, dtype, device, dir.path());
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_FALSE(found) << at::describe(config) << ": " << err;
    EXPECT_FALSE(std::filesystem::exists(file)) << "a rejected entry is removed";
    return err;
  };
  const std::string not_a_point = ", which is not a point of the space 'gemm sm_90a f16'; removed\n";
  // No shares, negative shares, split_k 1 spelled out (one kernel has no knob), more shares than
  // the space's 16 or than K's 64 tiles.
  for (int bad : {0, -3, 1, 17, 65}) {
    SCOPED_TRACE(bad);
    EXPECT_CONTAINS(rejected(16, 4096, DType::f16, kH200, split_point(bad)),
                    "holds " + at::describe(split_point(bad)) + not_a_point);
  }
  // 16 K tiles allow 2 to 4 shares of 4 tiles.
  EXPECT_CONTAINS(rejected(16, 1024, DType::f16, kH200, split_point(5)),
                  "split_k=5 threads=128" + not_a_point);
  // Tiles other than the partial GEMM's.
  at::Config wide = split_point(5);
  wide["block_M"] = 64;
  EXPECT_CONTAINS(rejected(16, 4096, DType::f16, kH200, wide),
                  "block_M=64 block_N=256 num_stages=4 panel=0 split_k=5 threads=128" + not_a_point);
  // A split where nothing splits: M > 64, an arch without the model, f32.
  EXPECT_CONTAINS(rejected(4096, 4096, DType::f16, kH200, split_point(5)),
                  "which has a knob split_k the space 'gemm sm_90a f16' does not have; removed\n");
  at::DeviceKey a100 = kH200;
  a100.name = "NVIDIA A100-SXM4-80GB";
  a100.cc_major = 8;
  EXPECT_CONTAINS(rejected(16, 4096, DType::f16, a100, split_point(5)),
                  "which has a knob split_k the space 'gemm sm_80 f16' does not have; removed\n");
  EXPECT_CONTAINS(rejected(16, 4096, DType::f32, kH200, split_point(5)),
                  "which has a knob split_k the space 'gemm sm_90a f32' does not have; removed\n");
  // A legal one is used.
  plant(dir.path(), at::gemm_split_k_key_parts(16, 4096, 1024, DType::f16, kH200), split_point(4));
  EXPECT_TRUE(at::find_tuned_matmul_config(16, 4096, 1024, DType::f16, kH200, dir.path()));
}
