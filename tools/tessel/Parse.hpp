// The numbers of the command line, read strictly: one module every command uses for sizes,
// counts, shapes and targets, so that junk ("12x", "12x5abc", "1e3x10"), overflow
// ("4294967297") and out-of-range values ("--repeats 0") are refused with one line that names
// the flag and what is legal, instead of being wrapped, truncated or half-read.
//
// The validators run on the option's text before CLI11 converts it; CLI11 prints their message
// as "--m: must be an integer from 1 to 2147483647, not '4294967297'" and the command exits 2.
#pragma once

#include <climits>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

namespace tessel::cli {

// The largest extent of one dimension a kernel takes: tensor sizes and grids are ints.
inline constexpr long long kMaxDimension = INT_MAX;
// The most timed or warm-up runs a command takes (--repeats, --warmup).
inline constexpr long long kMaxRepeats = 1000000;

// A decimal integer and nothing else: an optional '-', then digits (no '+', spaces, exponent,
// fraction or suffix). nullopt for anything else, and when it does not fit a long long.
std::optional<long long> parse_integer(std::string_view text);

// parse_integer within [min, max], or std::invalid_argument("<flag>: must be an integer from
// <min> to <max>, not '<text>'").
long long parse_integer_in(std::string_view text, long long min, long long max, const std::string& flag);

// Exactly `dims` integers from 1 to `max` joined by 'x' (parse_integer each), or nullopt.
std::optional<std::vector<long long>> shape_values(std::string_view text, int dims,
                                                   long long max = kMaxDimension);

// "MxNxK" (dims = 3) or "MxN" (dims = 2): exactly `dims` integers from 1 to `max` joined by 'x'.
// Throws std::invalid_argument("<flag>: '<text>' is not <form> ..., e.g. <example>").
std::vector<long long> parse_shape(std::string_view text, int dims, const std::string& flag,
                                   const std::string& form, const std::string& example,
                                   long long max = kMaxDimension);

// --split-k (bench gemm, dump gemm): "auto" is 0 (kernels::plan_matmul's model), else a share
// count of 1 or more (1: off); plan_matmul checks the count against each shape's K. Throws
// std::invalid_argument("--split-k takes auto or a share count of 1 or more (1: off), not '<text>'").
int parse_split_k(const std::string& text);
// The text parse_split_k reads back: "auto" for 0, else the count (the flags' default shown).
std::string split_k_text(int split_k);

// Validators for CLI11 options.
// An integer from `min` to `max`.
CLI::Validator integer_in(long long min, long long max);
// A dimension: an integer from 1 to `max`.
CLI::Validator dimension(long long max = kMaxDimension);
// One shape (of a comma-separated list) as parse_shape reads it.
CLI::Validator shape(int dims, const std::string& form, const std::string& example);
// A seed: an integer from 0 to 2^63 - 1.
CLI::Validator seed();
// A non-negative decimal number (seconds, fractions): no junk after it, not NaN or infinite, at
// most `max`.
CLI::Validator number_in(double min, double max);
// Any finite decimal number (a sign and an exponent allowed; no NaN, infinity or junk after it).
CLI::Validator finite_number();
// An NVRTC target Tessel compiles for here (tessel_archs()).
CLI::Validator arch();

// The options every `tessel bench` command that times kernels takes, with the same names, help
// and checks: --repeats (1 to kMaxRepeats), --warmup (0 to kMaxRepeats), --seed and --json.
void add_timing_options(CLI::App& app, int& repeats, int& warmup, std::uint64_t& seed,
                        std::string& json_file);

}  // namespace tessel::cli
