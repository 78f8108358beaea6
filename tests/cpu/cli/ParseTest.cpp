// The CLI's number module (tools/tessel/Parse.hpp) called directly, without the tessel executable
// (CliTest.cpp runs that): strict integers, shapes, split-K counts, and the CLI11 validators and
// options built on them, with the messages a user sees, edge by edge.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "tools/tessel/Parse.hpp"

namespace {

namespace cli = tessel::cli;

// What a validator says of `text` ("" when it accepts it).
std::string says(const CLI::Validator& v, std::string text) {
  return v(text);
}

// The message of the std::invalid_argument `f` throws, or "<no error>".
template <typename F>
std::string thrown(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(CliParse, IntegersAreDecimalDigitsWithAnOptionalMinusAndNothingElse) {
  EXPECT_EQ(cli::parse_integer("0"), 0);
  EXPECT_EQ(cli::parse_integer("-64"), -64);
  EXPECT_EQ(cli::parse_integer("9223372036854775807"), LLONG_MAX);
  EXPECT_EQ(cli::parse_integer("-9223372036854775808"), LLONG_MIN);
  for (const char* junk : {"", " 1", "1 ", "+1", "1e3", "64.0", "12x", "0x10", "abc", "9223372036854775808",
                           "-9223372036854775809", "99999999999999999999", "-", "1-"}) {
    EXPECT_EQ(cli::parse_integer(junk), std::nullopt) << "'" << junk << "'";
  }
}

TEST(CliParse, IntegersInARangeNameTheFlag) {
  EXPECT_EQ(cli::parse_integer_in("7", 1, 7, "--x"), 7);
  EXPECT_EQ(thrown([] { cli::parse_integer_in("8", 1, 7, "--x"); }),
            "--x: must be an integer from 1 to 7, not '8'");
  EXPECT_EQ(thrown([] { cli::parse_integer_in("0", 1, 7, "--x"); }),
            "--x: must be an integer from 1 to 7, not '0'");
  EXPECT_EQ(thrown([] { cli::parse_integer_in("1.5", 1, 7, "--x"); }),
            "--x: must be an integer from 1 to 7, not '1.5'");
}

TEST(CliParse, ShapesAreExactlyDimsIntegersJoinedByX) {
  EXPECT_EQ(cli::parse_shape("17x33x65", 3, "--shapes", "MxNxK", "4096x4096x4096"),
            (std::vector<long long>{17, 33, 65}));
  EXPECT_EQ(cli::parse_shape("1x2147483647", 2, "--shapes", "MxN", "65536x4096"),
            (std::vector<long long>{1, 2147483647}));
  const std::string mxn = " is not MxN (2 integers from 1 to 2147483647 joined by 'x', e.g. 65536x4096)";
  for (const char* bad : {"12x", "x12", "12x5abc", "1e3x10", "10x2147483648", "10x10x10", "10", "0x10",
                          "10x-1", "10xx10", "", "x", "10x+10"}) {
    EXPECT_EQ(thrown([&] { cli::parse_shape(bad, 2, "--shapes", "MxN", "65536x4096"); }),
              "--shapes: '" + std::string(bad) + "'" + mxn)
        << "'" << bad << "'";
  }
  // The values alone, without a message (bench attention's --cases reads its six sizes so).
  EXPECT_EQ(cli::shape_values("2x16x16x1024x1024x128", 6),
            (std::vector<long long>{2, 16, 16, 1024, 1024, 128}));
  EXPECT_EQ(cli::shape_values("2x16x16x1024x1024", 6), std::nullopt);
  EXPECT_EQ(cli::shape_values("2x16x16x1024x1024x128x7", 6), std::nullopt);
  EXPECT_EQ(cli::shape_values("5x3", 2, 4), std::nullopt);
  // A smaller bound of one's own.
  EXPECT_EQ(thrown([] { cli::parse_shape("4x5", 2, "--tile", "AxB", "2x2", 4); }),
            "--tile: '4x5' is not AxB (2 integers from 1 to 4 joined by 'x', e.g. 2x2)");
}

TEST(CliParse, SplitKIsAutoOrACountOfOneOrMore) {
  EXPECT_EQ(cli::parse_split_k("auto"), 0);
  EXPECT_EQ(cli::parse_split_k("1"), 1);
  EXPECT_EQ(cli::parse_split_k("16"), 16);
  EXPECT_EQ(cli::split_k_text(0), "auto");
  EXPECT_EQ(cli::split_k_text(4), "4");
  for (const char* bad : {"0", "-2", "Auto", "", "2147483648", "4x"}) {
    EXPECT_EQ(thrown([&] { cli::parse_split_k(bad); }),
              "--split-k takes auto or a share count of 1 or more (1: off), not '" + std::string(bad) + "'")
        << "'" << bad << "'";
  }
}

TEST(CliParse, ValidatorsSayWhatIsLegal) {
  EXPECT_EQ(says(cli::integer_in(0, 10), "10"), "");
  EXPECT_EQ(says(cli::integer_in(0, 10), "11"), "must be an integer from 0 to 10, not '11'");
  EXPECT_EQ(says(cli::dimension(), "4294967297"),
            "must be an integer from 1 to 2147483647, not '4294967297'");
  EXPECT_EQ(says(cli::dimension(256), "264"), "must be an integer from 1 to 256, not '264'");
  EXPECT_EQ(says(cli::seed(), "-1"), "must be an integer from 0 to 9223372036854775807, not '-1'");
  EXPECT_EQ(says(cli::seed(), "9223372036854775807"), "");
  EXPECT_EQ(says(cli::shape(3, "MxNxK", "4096x4096x4096"), "1x2x3"), "");
  EXPECT_EQ(says(cli::shape(3, "MxNxK", "4096x4096x4096"), "1x2"),
            "'1x2' is not MxNxK (3 integers from 1 to 2147483647 joined by 'x', e.g. 4096x4096x4096)");
  EXPECT_EQ(says(cli::number_in(0, 1), "0.25"), "");
  for (const char* bad : {"1.5", "-0.1", "nan", "inf", "0.5s", "", "1e400"}) {
    EXPECT_EQ(says(cli::number_in(0, 1), bad), "must be a number from 0 to 1, not '" + std::string(bad) + "'")
        << "'" << bad << "'";
  }
  for (const char* good : {"0", "-0.125", "1e-3", "-2.5E+2", "340282346638528859811704183484516925440"}) {
    EXPECT_EQ(says(cli::finite_number(), good), "") << good;
  }
  for (const char* bad : {"inf", "-inf", "nan", "1e400", "abc", "0.5x", "", " 1"}) {
    EXPECT_EQ(says(cli::finite_number(), bad), "must be a finite number, not '" + std::string(bad) + "'")
        << "'" << bad << "'";
  }
  EXPECT_EQ(says(cli::arch(), "sm_90a"), "");
  EXPECT_EQ(says(cli::arch(), "sm_80"), "");
  EXPECT_NE(says(cli::arch(), "sm_75"), "");
  EXPECT_NE(says(cli::arch(), "compute_90a"), "");
}

// --repeats, --warmup, --seed and --json as the bench commands register them, parsed by CLI11.
TEST(CliParse, TimingOptionsParseAndRefuseLikeEveryBenchCommand) {
  struct Options {
    int repeats = 20, warmup = 3;
    std::uint64_t seed = 1;
    std::string json;
  };
  auto parse = [](std::vector<std::string> args, Options& o) -> std::string {
    CLI::App app("bench");
    cli::add_timing_options(app, o.repeats, o.warmup, o.seed, o.json);
    std::reverse(args.begin(), args.end());  // CLI11 takes them last first
    try {
      app.parse(args);
    } catch (const CLI::ParseError& e) {
      return e.what();
    }
    return "";
  };
  Options o;
  EXPECT_EQ(
      parse({"--repeats", "5", "--warmup", "0", "--seed", "9223372036854775807", "--json", "r.json"}, o), "");
  EXPECT_EQ(o.repeats, 5);
  EXPECT_EQ(o.warmup, 0);
  EXPECT_EQ(o.seed, 9223372036854775807ULL);
  EXPECT_EQ(o.json, "r.json");
  for (const auto& [args, message] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--repeats", "0"}, "--repeats: must be an integer from 1 to 1000000, not '0'"},
           {{"--repeats", "1.5"}, "--repeats: must be an integer from 1 to 1000000, not '1.5'"},
           {{"--warmup", "-5"}, "--warmup: must be an integer from 0 to 1000000, not '-5'"},
           {{"--warmup", "1000001"}, "--warmup: must be an integer from 0 to 1000000, not '1000001'"},
           {{"--seed", "-1"}, "--seed: must be an integer from 0 to 9223372036854775807, not '-1'"},
       }) {
    Options fresh;
    EXPECT_EQ(parse(args, fresh), message) << args[0] << " " << args[1];
  }
}

}  // namespace
