#include "tools/tessel/Parse.hpp"

#include <charconv>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "tessel/runtime/Nvrtc.hpp"

namespace tessel::cli {

namespace {

std::string number_text(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

std::string range_text(long long min, long long max) {
  return "must be an integer from " + std::to_string(min) + " to " + std::to_string(max);
}

// The message of a value outside [min, max] (or not an integer), without the flag.
std::string integer_error(std::string_view text, long long min, long long max) {
  return range_text(min, max) + ", not '" + std::string(text) + "'";
}

std::optional<std::string> shape_error(std::string_view text, int dims, const std::string& form,
                                       const std::string& example, long long max) {
  if (shape_values(text, dims, max)) return std::nullopt;
  return "'" + std::string(text) + "' is not " + form + " (" + std::to_string(dims) + " integers from 1 to " +
         std::to_string(max) + " joined by 'x', e.g. " + example + ")";
}

// A decimal number (from_chars' general form: a sign, digits, a fraction, an exponent) and
// nothing after it, finite; nullopt otherwise (also for values past double's range).
std::optional<double> parse_finite_number(std::string_view text) {
  double v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace

std::optional<long long> parse_integer(std::string_view text) {
  if (text.empty()) return std::nullopt;
  long long v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return v;
}

long long parse_integer_in(std::string_view text, long long min, long long max, const std::string& flag) {
  const auto v = parse_integer(text);
  if (!v || *v < min || *v > max) throw std::invalid_argument(flag + ": " + integer_error(text, min, max));
  return *v;
}

std::optional<std::vector<long long>> shape_values(std::string_view text, int dims, long long max) {
  std::vector<long long> out;
  for (std::size_t begin = 0;;) {
    const std::size_t end = text.find('x', begin);
    const auto v = parse_integer(text.substr(begin, end == std::string_view::npos ? end : end - begin));
    if (!v || *v < 1 || *v > max || static_cast<int>(out.size()) == dims) return std::nullopt;
    out.push_back(*v);
    if (end == std::string_view::npos) break;
    begin = end + 1;
  }
  if (static_cast<int>(out.size()) != dims) return std::nullopt;
  return out;
}

std::vector<long long> parse_shape(std::string_view text, int dims, const std::string& flag,
                                   const std::string& form, const std::string& example, long long max) {
  if (auto why = shape_error(text, dims, form, example, max)) throw std::invalid_argument(flag + ": " + *why);
  return *shape_values(text, dims, max);
}

CLI::Validator integer_in(long long min, long long max) {
  return CLI::Validator(
      [min, max](std::string& text) {
        const auto v = parse_integer(text);
        return v && *v >= min && *v <= max ? std::string() : integer_error(text, min, max);
      },
      "INT in [" + std::to_string(min) + " - " + std::to_string(max) + "]");
}

CLI::Validator dimension(long long max) {
  return integer_in(1, max);
}

CLI::Validator shape(int dims, const std::string& form, const std::string& example) {
  return CLI::Validator(
      [=](std::string& text) { return shape_error(text, dims, form, example, kMaxDimension).value_or(""); },
      form);
}

CLI::Validator seed() {
  return integer_in(0, LLONG_MAX);
}

CLI::Validator number_in(double min, double max) {
  return CLI::Validator(
      [min, max](std::string& text) {
        const std::optional<double> v = parse_finite_number(text);
        if (!v || *v < min || *v > max)
          return "must be a number from " + number_text(min) + " to " + number_text(max) + ", not '" + text +
                 "'";
        return std::string();
      },
      "NUMBER");
}

CLI::Validator finite_number() {
  return CLI::Validator(
      [](std::string& text) {
        return parse_finite_number(text) ? std::string() : "must be a finite number, not '" + text + "'";
      },
      "NUMBER");
}

int parse_split_k(const std::string& text) {
  if (text == "auto") return 0;
  const std::optional<long long> n = parse_integer(text);
  if (!n || *n < 1 || *n > INT_MAX)
    throw std::invalid_argument("--split-k takes auto or a share count of 1 or more (1: off), not '" + text +
                                "'");
  return static_cast<int>(*n);
}

std::string split_k_text(int split_k) {
  return split_k == 0 ? "auto" : std::to_string(split_k);
}

CLI::Validator arch() {
  return CLI::Validator([](std::string& text) { return why_not_arch(text).value_or(""); }, "ARCH");
}

void add_timing_options(CLI::App& app, int& repeats, int& warmup, std::uint64_t& seed,
                        std::string& json_file) {
  app.add_option("--repeats", repeats, "Timed runs of each side (median reported)")
      ->capture_default_str()
      ->check(integer_in(1, kMaxRepeats));
  app.add_option("--warmup", warmup, "Untimed runs of each side first")
      ->capture_default_str()
      ->check(integer_in(0, kMaxRepeats));
  app.add_option("--seed", seed, "Seed of the random inputs")
      ->capture_default_str()
      ->check(tessel::cli::seed());
  app.add_option("--json", json_file,
                 "Also write the results, with date, device, command and commit, to FILE")
      ->type_name("FILE");
}

}  // namespace tessel::cli
