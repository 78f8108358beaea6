// Tessel's error channels. Kernel authors' mistakes are CompileError (raised while building or
// lowering a program) or RuntimeError (bad arguments at call time, GPU unavailable, launch
// failures); the compiler's own broken invariants are InternalError. Every message names the
// op, the values and what is legal; CompileError also carries the user's source line.
#pragma once

#include <source_location>
#include <sstream>
#include <stdexcept>
#include <string>

namespace tessel {

// "file.cpp:42" — the location of the user's frontend call.
std::string format_location(const std::source_location& loc);

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class CompileError : public Error {
 public:
  CompileError(const std::string& op, const std::string& message, const std::source_location& where);
  const std::string& op() const { return op_; }
  const std::string& message() const { return message_; }
  const std::source_location& where() const { return where_; }

 private:
  std::string op_;
  std::string message_;
  std::source_location where_;
};

class RuntimeError : public Error {
 public:
  using Error::Error;
};

class InternalError : public Error {
 public:
  InternalError(const std::string& message, const std::source_location& where);
};

// Builds a message with operator<< and throws on destruction-free call of raise().
class ErrorBuilder {
 public:
  template <class V>
  ErrorBuilder& operator<<(const V& v) {
    os_ << v;
    return *this;
  }
  std::string str() const { return os_.str(); }

 private:
  std::ostringstream os_;
};

[[noreturn]] void throw_compile_error(const std::string& op, const std::string& message,
                                      const std::source_location& where);
[[noreturn]] void throw_internal_error(const std::string& message,
                                       const std::source_location& where = std::source_location::current());

}  // namespace tessel

// user_error: the kernel author's mistake, at the author's line.
#define TESSEL_USER_ERROR(op, where, msg) \
  ::tessel::throw_compile_error((op), (::tessel::ErrorBuilder() << msg).str(), (where))
// internal_check: an invariant of the compiler itself.
#define TESSEL_INTERNAL_CHECK(cond, msg)                                            \
  do {                                                                              \
    if (!(cond))                                                                    \
      ::tessel::throw_internal_error(                                               \
          (::tessel::ErrorBuilder() << "check '" #cond "' failed: " << msg).str()); \
  } while (0)
