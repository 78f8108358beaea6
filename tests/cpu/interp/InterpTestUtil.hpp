// Helpers for the interpreter's tests: fresh seeds, a float64 GEMM reference, and running a
// statement to get the text of the RuntimeError it must raise.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "tessel/Error.hpp"
#include "tessel/interp/Interpreter.hpp"

// The test fails (showing the whole text) unless `text` contains `part`.
#define EXPECT_CONTAINS(text, part)                                                \
  do {                                                                             \
    const std::string tessel_text_ = (text), tessel_part_ = (part);                \
    EXPECT_NE(tessel_text_.find(tessel_part_), std::string::npos)                  \
        << "expected to find:\n  " << tessel_part_ << "\nin:\n  " << tessel_text_; \
  } while (0)

namespace tessel::interp::test {

// A new seed per call (tests use fresh random data); put it in a SCOPED_TRACE to reproduce.
inline std::uint64_t fresh_seed() {
  static std::random_device rd;
  return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
}

// op(A) * op(B) in float64 over the values as stored. A is M x K (K x M transposed), B K x N.
inline std::vector<double> matmul_reference(const HostTensor& A, const HostTensor& B, bool ta = false,
                                            bool tb = false) {
  const std::int64_t M = ta ? A.shape[1] : A.shape[0], K = ta ? A.shape[0] : A.shape[1];
  const std::int64_t N = tb ? B.shape[0] : B.shape[1];
  const std::vector<double> a = A.to_values(), b = B.to_values();
  std::vector<double> c(static_cast<size_t>(M * N), 0.0);
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t k = 0; k < K; ++k) {
      const double av = ta ? a[static_cast<size_t>(k * M + i)] : a[static_cast<size_t>(i * K + k)];
      for (std::int64_t j = 0; j < N; ++j)
        c[static_cast<size_t>(i * N + j)] +=
            av * (tb ? b[static_cast<size_t>(j * K + k)] : b[static_cast<size_t>(k * N + j)]);
    }
  return c;
}

// The message of the tessel::RuntimeError that fn throws; a test failure if it throws nothing.
inline std::string runtime_error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const RuntimeError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a tessel::RuntimeError, none was thrown";
  return "";
}

// "InterpreterErrorsTest.cpp:42", the form errors use for the author's line.
inline std::string here(std::source_location loc = std::source_location::current()) {
  return format_location(loc);
}

}  // namespace tessel::interp::test
