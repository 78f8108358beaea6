// The fuzzer's CI tier (docs/fuzzing.md): a fixed-seed batch of generated programs, each run on
// the interpreter against float64, a deterministic subset of them also compiled for sm_80 and
// sm_90a through NVRTC; every regression case under tests/fuzz/regressions/; and the fuzzer's own
// pieces (the case text format, the generator's determinism).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "fuzz/FuzzCase.hpp"
#include "fuzz/Regressions.hpp"
#include "fuzz/Runner.hpp"
#include "support/TestSupport.hpp"

namespace tessel::fuzz {
namespace {

// Under the sanitizers (a Debug build, several times slower) the batch is smaller.
#if defined(__SANITIZE_ADDRESS__)
constexpr int kPrograms = 60, kCompileEvery = 30;
#else
constexpr int kPrograms = 300, kCompileEvery = 4;
#endif
constexpr std::uint64_t kSeed = 20261204;

std::string failures_text(const BatchReport& r) {
  std::string s;
  for (const auto& [c, res] : r.failures)
    s += res.signature() + ": " + c.summary() + "\n  " + res.detail.substr(0, 600) +
         "\n  reproduce: tessel_fuzz --replay FILE with FILE holding:\n" + c.to_text() + "\n";
  return s;
}

TEST(FuzzBatch, FixedSeedProgramsMatchFloat64AndCompile) {
  // Every compile a real one: no disk cache from an earlier run.
  test::ScopedEnv no_cache("TESSEL_CACHE", "0");
  BatchOptions o;
  o.seed = kSeed;
  o.count = kPrograms;
  o.compile_every = kCompileEvery;
  o.jobs = 2;
  const BatchReport r = run_batch(o);
  std::printf(
      "[ fuzz     ] seed %llu: %d programs (%d compiled for sm_80, %d for sm_90a): %d passed, %d rejected, "
      "%d failed in %.1f s\n",
      static_cast<unsigned long long>(kSeed), r.programs,
      r.compiled.count("sm_80") ? r.compiled.at("sm_80") : 0,
      r.compiled.count("sm_90a") ? r.compiled.at("sm_90a") : 0, r.passed, r.rejected, r.failed, r.seconds);
  for (const auto& [why, n] : r.rejections) std::printf("[ fuzz     ]   rejected %dx: %s\n", n, why.c_str());
  EXPECT_EQ(r.programs, kPrograms);
  EXPECT_EQ(r.failed, 0) << failures_text(r);
  // The generator keeps to the documented rules: few programs are refused, and the subset did
  // reach NVRTC.
  EXPECT_LE(r.rejected, kPrograms / 10);
  EXPECT_GE(r.compiled.count("sm_90a") ? r.compiled.at("sm_90a") : 0, kPrograms / kCompileEvery / 2);
}

TEST(FuzzRegressions, EveryCaseThatEverFailedPasses) {
  test::ScopedEnv no_cache("TESSEL_CACHE", "0");
  const std::vector<Regression> cases = load_regressions();
  EXPECT_FALSE(cases.empty()) << "no .case files under " << TESSEL_FUZZ_REGRESSION_DIR;
  for (const Regression& reg : cases) {
    SCOPED_TRACE(reg.file.filename().string() + ": " + reg.c.summary());
    const CaseResult r = run_case(reg.c, RunOptions{});
    if (reg.known_failing) {
      EXPECT_EQ(r.outcome, Outcome::Fail) << "marked known-failing but passes now: remove the mark";
    } else {
      EXPECT_EQ(r.outcome, Outcome::Pass) << r.signature() << ": " << r.detail;
    }
  }
}

// The same cases with the generic passes' persistence on for every ring (TESSEL_ENABLE=persistent_rings, at
// most 3 blocks): compiled for sm_90a here, run on the device by the gpu tier's twin
// (gemm-k-by-block-swizzle-persistent.case was an InternalError of the pipeline verifier there).
TEST(FuzzRegressions, EveryCaseThatEverFailedPassesWithPersistentRings) {
  test::ScopedEnv no_cache("TESSEL_CACHE", "0");
  test::ScopedEnv enable("TESSEL_ENABLE", "persistent_rings");
  test::ScopedEnv blocks("TESSEL_MAX_PERSISTENT_CTAS", "3");
  for (const Regression& reg : load_regressions()) {
    SCOPED_TRACE(reg.file.filename().string() + ": " + reg.c.summary());
    RunOptions o;
    o.archs = {"sm_90a"};
    const CaseResult r = run_case(reg.c, o);
    if (!reg.known_failing) {
      EXPECT_EQ(r.outcome, Outcome::Pass) << r.signature() << ": " << r.detail;
    }
  }
}

// A planted failure (a transposed-B gemm with K past 20 and a bias) shrinks to its essentials:
// the knobs that do not matter off, the sizes at their smallest, the expression gone.
TEST(FuzzMinimizer, ShrinksAPlantedFailureToItsEssentials) {
  FuzzCase c;
  c.family = Family::Gemm;
  c.M = 150, c.N = 97, c.K = 77;
  c.BM = 64, c.BN = 64, c.BK = 32, c.threads = 128, c.stages = 3;
  c.trans_a = true, c.trans_b = true, c.swizzle = true, c.bias = true, c.epilogue = true;
  c.expr = parse_expr("(add (mul x 0.5) (expc (neg x)))");
  auto fails = [](const FuzzCase& d) { return d.family == Family::Gemm && d.trans_b && d.K > 20 && d.bias; };
  ASSERT_TRUE(fails(c));
  const FuzzCase m = shrink(c, fails, 1000);
  EXPECT_TRUE(fails(m));
  EXPECT_TRUE(m.trans_b && m.bias);
  EXPECT_FALSE(m.trans_a || m.swizzle || m.epilogue) << m.to_text();
  EXPECT_EQ(m.M, 1);
  EXPECT_EQ(m.N, 1);
  EXPECT_LE(m.K, 32) << m.to_text();  // one less, half, or a tile: 21..32 all shrink no further
  EXPECT_EQ(m.stages, 0);
  EXPECT_EQ(m.expr.to_text(), "x");
}

TEST(FuzzCaseText, EveryGeneratedCaseRoundTrips) {
  for (int i = 0; i < 500; ++i) {
    const FuzzCase c = generate_case(case_seed(kSeed, i));
    const std::string text = c.to_text();
    EXPECT_EQ(parse_case(text).to_text(), text);
  }
}

TEST(FuzzCaseText, GenerationIsDeterministicAndCoversEveryFamily) {
  int families[4] = {0, 0, 0, 0}, flat_rows = 0;
  for (int i = 0; i < 200; ++i) {
    const FuzzCase c = generate_case(case_seed(kSeed, i));
    EXPECT_EQ(generate_case(case_seed(kSeed, i)).to_text(), c.to_text());
    ++families[static_cast<int>(c.family)];
    // Softmax tiles exactly as wide as rows that are not whole 16-byte vectors (flat rows).
    if (c.family == Family::Softmax && c.BN == c.N && c.N % (16 / dtype_bytes(c.dtype)) != 0) ++flat_rows;
  }
  for (int f = 0; f < 4; ++f) EXPECT_GT(families[f], 10) << family_name(static_cast<Family>(f));
  EXPECT_GE(flat_rows, 2);
}

TEST(FuzzCaseText, ErrorsNameTheLineAndTheProblem) {
  auto error_of = [](const std::string& text) -> std::string {
    try {
      parse_case(text);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_CONTAINS(error_of("family gemm\n"), "no 'tessel-fuzz 1' header line");
  EXPECT_CONTAINS(error_of("tessel-fuzz 1\nfamily conv\n"), "line 2: unknown family 'conv'");
  EXPECT_CONTAINS(error_of("tessel-fuzz 1\nBM 6x\n"), "line 2: BM: '6x' is not an integer");
  EXPECT_CONTAINS(error_of("tessel-fuzz 1\nexpr (add x)\n"),
                  "line 2: expression '(add x)': 'add' takes 2 operands, got 1");
  EXPECT_CONTAINS(error_of("tessel-fuzz 1\nexpr (neg x x)\n"), "expected ')' after the 1 operands of 'neg'");
  EXPECT_CONTAINS(error_of("tessel-fuzz 1\nexpr (pow x 2)\n"), "unknown operator 'pow'");
  EXPECT_CONTAINS(error_of("tessel-fuzz 1\nblock 4\n"), "line 2: unknown key 'block'");
}

}  // namespace
}  // namespace tessel::fuzz
