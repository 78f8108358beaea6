#include "support/TestSupport.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>

namespace tessel::test {

double rel_error(const std::vector<double>& out, const std::vector<double>& ref) {
  if (out.size() != ref.size()) return std::numeric_limits<double>::infinity();
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) return std::numeric_limits<double>::infinity();
    diff += (out[i] - ref[i]) * (out[i] - ref[i]);
    norm += ref[i] * ref[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

std::vector<double> reference_gemm(const std::vector<double>& a, const std::vector<double>& b, int m, int n,
                                   int k, bool transpose_a, bool transpose_b) {
  std::vector<double> c(static_cast<std::size_t>(m) * n, 0.0);
  for (int i = 0; i < m; ++i)
    for (int p = 0; p < k; ++p) {
      const double av =
          transpose_a ? a[static_cast<std::size_t>(p) * m + i] : a[static_cast<std::size_t>(i) * k + p];
      for (int j = 0; j < n; ++j) {
        const double bv =
            transpose_b ? b[static_cast<std::size_t>(j) * k + p] : b[static_cast<std::size_t>(p) * n + j];
        c[static_cast<std::size_t>(i) * n + j] += av * bv;
      }
    }
  return c;
}

TempDir::TempDir() {
  std::random_device rd;
  for (int attempt = 0;; ++attempt) {
    auto candidate = std::filesystem::temp_directory_path() /
                     ("tessel-test-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
    if (std::filesystem::create_directory(candidate)) {
      path_ = candidate;
      return;
    }
    if (attempt > 100) throw std::runtime_error("TempDir: cannot create a temporary directory");
  }
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

ScopedEnv::ScopedEnv(std::string name, std::optional<std::string> value) : name_(std::move(name)) {
  if (const char* old = std::getenv(name_.c_str())) old_ = old;
  if (value)
    ::setenv(name_.c_str(), value->c_str(), 1);
  else
    ::unsetenv(name_.c_str());
}

ScopedEnv::~ScopedEnv() {
  if (old_)
    ::setenv(name_.c_str(), old_->c_str(), 1);
  else
    ::unsetenv(name_.c_str());
}

}  // namespace tessel::test
