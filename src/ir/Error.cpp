#include "tessel/Error.hpp"

#include <filesystem>

namespace tessel {

std::string format_location(const std::source_location& loc) {
  if (loc.line() == 0) return "<unknown location>";
  return std::filesystem::path(loc.file_name()).filename().string() + ":" + std::to_string(loc.line());
}

CompileError::CompileError(const std::string& op, const std::string& message,
                           const std::source_location& where)
    : Error(format_location(where) + ": error in " + op + ": " + message),
      op_(op),
      message_(message),
      where_(where) {}

InternalError::InternalError(const std::string& message, const std::source_location& where)
    : Error("internal error (a Tessel bug, please report it) at " + format_location(where) + ": " + message) {
}

void throw_compile_error(const std::string& op, const std::string& message,
                         const std::source_location& where) {
  throw CompileError(op, message, where);
}

void throw_internal_error(const std::string& message, const std::source_location& where) {
  throw InternalError(message, where);
}

}  // namespace tessel
