// Helpers shared by every test tier: skipping loudly without a GPU, numeric comparison against
// float64 references, and scratch directories / environment overrides for cache tests.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tessel/runtime/Driver.hpp"

// GPU tests start with this: without a GPU they are reported SKIPPED with the reason.
#define TESSEL_REQUIRE_GPU()                                                     \
  do {                                                                           \
    if (!::tessel::gpu_available())                                              \
      GTEST_SKIP() << "SKIPPED: no GPU: " << ::tessel::gpu_unavailable_reason(); \
  } while (0)

// `text` (a std::string) holds `needle`; on failure both are printed.
#define EXPECT_CONTAINS(text, needle)                                   \
  do {                                                                  \
    const std::string tessel_text_ = (text), tessel_needle_ = (needle); \
    EXPECT_NE(tessel_text_.find(tessel_needle_), std::string::npos)     \
        << "'" << tessel_needle_ << "' missing from:\n"                 \
        << tessel_text_;                                                \
  } while (0)

namespace tessel::test {

// ||out - ref||_F / ||ref||_F; +inf when `out` holds a NaN or an infinity (a poisoned or
// overflowed output must never pass), or when the sizes differ. With ref == 0 everywhere it
// is the absolute norm of out.
double rel_error(const std::vector<double>& out, const std::vector<double>& ref);

// C = op(A) * op(B) in float64, row-major. A is M x K (K x M when transpose_a), B is K x N
// (N x K when transpose_b); C is M x N.
std::vector<double> reference_gemm(const std::vector<double>& a, const std::vector<double>& b, int m, int n,
                                   int k, bool transpose_a = false, bool transpose_b = false);

// A fresh directory under the system temp dir, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Runs `fn` in a forked child with its stderr captured, and kills it when it has not finished
// after `seconds`: for tests of things that must neither hang nor abort. `result` is what fn
// returned ("threw: ..." for an exception, "killed by signal 6" for an abort).
struct ChildResult {
  bool timed_out = false;
  std::string result;
  std::string stderr_text;
};
ChildResult run_in_child(double seconds, const std::function<std::string()>& fn);

// Sets (or, with nullopt, unsets) an environment variable for the scope, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, std::optional<std::string> value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace tessel::test
