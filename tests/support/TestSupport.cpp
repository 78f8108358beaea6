#include "support/TestSupport.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <random>
#include <stdexcept>

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
      // Private whatever the umask: the caches refuse folders others can write.
      std::filesystem::permissions(candidate, std::filesystem::perms::owner_all,
                                   std::filesystem::perm_options::replace);
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

ChildResult run_in_child(double seconds, const std::function<std::string()>& fn) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error("run_in_child: pipe failed");
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("run_in_child: fork failed");
  if (pid == 0) {
    ::close(fds[0]);
    ::dup2(fds[1], STDERR_FILENO);
    std::string result;
    try {
      result = fn();
    } catch (const std::exception& e) {
      result = std::string("threw: ") + e.what();
    } catch (...) {
      result = "threw a non-std exception";
    }
    std::cerr << "\n@@result@@" << result << std::flush;
    ::_exit(0);  // no gtest, no static destructors in the child
  }
  ::close(fds[1]);
  ChildResult out;
  std::string all;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  // Read until the child's end of the pipe closes (it has exited) or the deadline passes.
  for (bool eof = false; !eof;) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      out.timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    char buffer[4096];
    const ssize_t n = ::read(fds[0], buffer, sizeof(buffer));
    if (n > 0)
      all.append(buffer, static_cast<std::size_t>(n));
    else if (n == 0 || errno != EINTR)
      eof = true;
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::close(fds[0]);
  if (!out.timed_out && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
    out.result = WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                                     : "exited with status " + std::to_string(WEXITSTATUS(status));
  const std::string marker_text = "\n@@result@@";
  const auto marker = all.rfind(marker_text);
  if (marker != std::string::npos) {
    out.result = all.substr(marker + marker_text.size());
    all.resize(marker);
  }
  out.stderr_text = all;
  return out;
}

}  // namespace tessel::test
