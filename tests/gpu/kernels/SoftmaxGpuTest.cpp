// Softmax on the GPU against float64: every width the issue names, every dtype, -inf and NaN rows.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "support/SoftmaxReference.hpp"
#include "support/TestSupport.hpp"
#include "tessel/kernels/softmax/Softmax.hpp"
#include "tessel/runtime/Driver.hpp"

namespace {

using tessel::DType;
using tessel::Tensor;

// How a test's rows must move: as the compiler decides, staged through a shared span (asserted
// from the source), or element-wise (JitOptions::disable_row_staging).
enum class RowPath {
  any,
  staged,
  staged_loop,
  staged_realigned_reads,
  realigned_global_loads,
  unstaged
};

// Runs `config` (the dispatcher's when empty) on fresh random M x N data with a row of some -inf
// entries and an all -inf row, the output poisoned with NaN, and checks it against float64.
void check_softmax(long long N, DType t, const std::string& config = "", RowPath path = RowPath::any) {
  long long M = std::max<long long>(3, std::min<long long>(300, (1LL << 22) / N));
  tessel::JitOptions jo;
  jo.disable_row_staging = path == RowPath::unstaged;
  jo.disable_async_span_copy = path == RowPath::staged_loop;
  jo.realigned_span_reads = path == RowPath::staged_realigned_reads;
  jo.realigned_global_loads = path == RowPath::realigned_global_loads;
  // The staged paths' own load side (long rows take realigned global loads by default).
  jo.disable_realigned_global_loads = path == RowPath::staged || path == RowPath::staged_loop ||
                                      path == RowPath::staged_realigned_reads || path == RowPath::unstaged;
  const long long vec = 16 / tessel::dtype_bytes(t);
  auto used = !config.empty()        ? tessel::kernels::parse_softmax_config(config)
              : path == RowPath::any ? tessel::kernels::choose_softmax_config(M, N, t).config
                                     : tessel::kernels::default_softmax_config(M, N, t);
  if (config.empty() && path != RowPath::any && used.variant == tessel::kernels::SoftmaxVariant::Rows &&
      used.shared_vectors == 0) {
    // The row paths under test are those of a tile no wider than the rows need (the default
    // leaves room for copy_window's shift where rows start unaligned): the same lanes, the
    // narrowest tile.
    const long long step = std::max(1, used.threads / used.rows_per_block) * vec;  // lanes a row x vec
    used.block_N = static_cast<int>((N + step - 1) / step * step);
  }
  auto k = config.empty() && path == RowPath::any ? tessel::kernels::make_softmax(M, N, t)
                                                  : tessel::kernels::make_softmax(M, N, t, used, jo);
  // The rows variant with room for a row's window (or the online variant) at a width whose rows
  // do not all start 16-byte aligned: the rows go through windows from the aligned word before
  // each (whole-word moves), whatever the row-staging options say.
  const bool windowed = N % vec != 0 &&
                        (used.variant == tessel::kernels::SoftmaxVariant::Online ||
                          (used.variant == tessel::kernels::SoftmaxVariant::Rows && used.window &&
                          used.block_N >= N + vec - 1));
  if (windowed) {
    EXPECT_NE(k.source().find("tessel::load_row_window<"), std::string::npos) << used.describe();
    EXPECT_EQ(k.source().find("span"), std::string::npos) << used.describe();
  } else if (path != RowPath::any) {
    // M rows that are not a multiple of the rows per block: a ragged last block too.
    const bool direct = path == RowPath::realigned_global_loads;
    const bool staged = path != RowPath::unstaged && !direct;
    EXPECT_EQ(k.source().find("copy_span_to_shared") != std::string::npos, staged)
        << (staged ? "not staged" : "staged though disabled");
    EXPECT_EQ(k.source().find("load_global_words_realigned") != std::string::npos, direct);
    // The span's chunks by cp.async (the default) or by the load-then-store loop.
    EXPECT_EQ(k.source().find(std::to_string(k.info().threads) + ", true>(") != std::string::npos,
              path == RowPath::staged || path == RowPath::staged_realigned_reads);
    // 16-byte vectors read out of the scratch realigned (opt-in), or element-wise.
    EXPECT_EQ(k.source().find("load_shared_vector_realigned") != std::string::npos,
              path == RowPath::staged_realigned_reads);
  }
  std::mt19937_64 seeds(std::random_device{}());
  Tensor x = Tensor::empty({M, N}, t);
  x.fill_random(seeds(), -8, 8);
  std::vector<double> host = x.to_host_f64();
  // Row 1: some -inf entries (fine; a finite entry stays); row 2: all -inf (NaN row, as PyTorch).
  for (long long c = 1; c < N; c += 3) host[1 * N + c] = -std::numeric_limits<double>::infinity();
  for (long long c = 0; c < N; ++c) host[2 * N + c] = -std::numeric_limits<double>::infinity();
  std::vector<unsigned char> bytes(x.nbytes());
  for (long long i = 0; i < M * N; ++i)
    tessel::store_host_element(host[i], t, bytes.data() + i * tessel::dtype_bytes(t));
  x.copy_from_host(bytes.data());
  Tensor y = Tensor::empty({M, N}, t);
  y.fill(std::nan(""));
  k.launch({x, y});
  tessel::check_cu(tessel::driver().cuCtxSynchronize(), "cuCtxSynchronize");
  std::vector<double> out = y.to_host_f64(), ref = tessel::test::reference_softmax(host, M, N);
  for (long long c = 0; c < N; ++c)
    ASSERT_TRUE(std::isnan(out[2 * N + c])) << "all -inf row must be NaN at " << c;
  // Compare the finite rows.
  std::vector<double> o, r;
  for (long long i = 0; i < M * N; ++i)
    if (i / N != 2) {
      o.push_back(out[i]);
      r.push_back(ref[i]);
    }
  double err = tessel::test::rel_error(o, r);
  EXPECT_LE(err, t == DType::f32 ? 1e-3 : 1e-2) << "relative error " << err;
  for (long long row : {0LL, M - 1}) {
    double s = 0;
    for (long long c = 0; c < N; ++c) s += out[row * N + c];
    EXPECT_NEAR(s, 1.0, t == DType::f32 ? 1e-4 : 2e-2) << "row " << row << " sums to " << s;
  }
}

class SoftmaxWidths : public ::testing::TestWithParam<std::tuple<long long, DType>> {};

TEST_P(SoftmaxWidths, MatchesFloat64) {
  TESSEL_REQUIRE_GPU();
  auto [N, t] = GetParam();
  check_softmax(N, t);
}

INSTANTIATE_TEST_SUITE_P(IssueWidths, SoftmaxWidths,
                         // 33, 65, 257, 513: half the lanes, five vectors each; 12289 and 16385 (and
                         // 2049 f32): one row over a block of 7 or 13 warps (f32: 25, 26; 6) --
                         // session 19's defaults for widths that powers of two pad badly.
                         ::testing::Combine(::testing::Values(1, 2, 7, 31, 33, 65, 127, 129, 256, 257, 513, 999,
                                                              1000, 1023, 1024, 2049, 4097, 8191, 8193, 12289,
                                                              16384, 16385, 50257, 65536, 100003, 1048576),
                                            ::testing::Values(DType::f32, DType::f16, DType::bf16)),
                         [](const auto& info) {
                           return "N" + std::to_string(std::get<0>(info.param)) + "_" +
                                  std::string(tessel::dtype_name(std::get<1>(info.param)));
                         });

// Issue 17's odd widths through the shared span (the default: its chunks by cp.async), the span
// by a load-then-store loop (JitOptions::disable_async_span_copy), its vectors read out of the
// scratch realigned (opt-in: JitOptions::realigned_span_reads), loaded straight from global
// memory as realigned 16-byte words (opt-in: JitOptions::realigned_global_loads), and not staged
// at all (JitOptions::disable_row_staging).
class SoftmaxStagedRows : public ::testing::TestWithParam<std::tuple<long long, DType>> {};

TEST_P(SoftmaxStagedRows, MatchesFloat64) {
  TESSEL_REQUIRE_GPU();
  auto [N, t] = GetParam();
  check_softmax(N, t, "", RowPath::staged);
}

TEST_P(SoftmaxStagedRows, LoopSpanMatchesFloat64) {
  TESSEL_REQUIRE_GPU();
  auto [N, t] = GetParam();
  check_softmax(N, t, "", RowPath::staged_loop);
}

TEST_P(SoftmaxStagedRows, RealignedReadsMatchFloat64) {
  TESSEL_REQUIRE_GPU();
  auto [N, t] = GetParam();
  check_softmax(N, t, "", RowPath::staged_realigned_reads);
}

TEST_P(SoftmaxStagedRows, RealignedGlobalLoadsMatchFloat64) {
  TESSEL_REQUIRE_GPU();
  auto [N, t] = GetParam();
  check_softmax(N, t, "", RowPath::realigned_global_loads);
}

TEST_P(SoftmaxStagedRows, UnstagedMatchesFloat64) {
  TESSEL_REQUIRE_GPU();
  auto [N, t] = GetParam();
  check_softmax(N, t, "", RowPath::unstaged);
}

INSTANTIATE_TEST_SUITE_P(OddWidths, SoftmaxStagedRows,
                         ::testing::Combine(::testing::Values(7, 127, 129, 999, 1023, 8191, 8193),
                                            ::testing::Values(DType::f32, DType::f16, DType::bf16)),
                         [](const auto& info) {
                           return "N" + std::to_string(std::get<0>(info.param)) + "_" +
                                  std::string(tessel::dtype_name(std::get<1>(info.param)));
                         });

// Each variant explicitly (the dispatcher picks only some of them at the issue's widths), on
// widths that are not multiples of the chunk, and rows that are not 16-byte aligned.
class SoftmaxVariants : public ::testing::TestWithParam<std::tuple<std::string, long long, DType>> {};

// "rows_t256_r64_bn127_N127_f16": a (config, width, dtype) case's name.
std::string config_width_and_dtype(const ::testing::TestParamInfo<std::tuple<std::string, long long, DType>>& info) {
  std::string name = std::get<0>(info.param) + "_N" + std::to_string(std::get<1>(info.param)) + "_" +
                     std::string(tessel::dtype_name(std::get<2>(info.param)));
  for (char& ch : name)
    if (ch == ':') ch = '_';
  return name;
}

TEST_P(SoftmaxVariants, MatchesFloat64) {
  TESSEL_REQUIRE_GPU();
  auto [config, N, t] = GetParam();
  check_softmax(N, t, config);
}

INSTANTIATE_TEST_SUITE_P(Explicit, SoftmaxVariants,
                         ::testing::Values(std::make_tuple("row:t1024:bn16384", 65536LL, DType::f16),
                                           std::make_tuple("row:t1024:bn16384", 65536LL, DType::bf16),
                                           std::make_tuple("row:t1024:bn8192", 50001LL, DType::f16),
                                           std::make_tuple("row:t512:bn4096", 30000LL, DType::f32),
                                           std::make_tuple("row:t256:bn2048", 5000LL, DType::bf16),
                                           std::make_tuple("online:t256:bn4096", 65536LL, DType::f16),
                                           std::make_tuple("online:t512:bn8192", 100003LL, DType::f32),
                                           std::make_tuple("rows:t256:r1:bn16384", 16384LL, DType::f16),
                                           std::make_tuple("rows:t256:r8:bn1024", 1000LL, DType::f16),
                                           std::make_tuple("rows:t256:r8:bn1024", 999LL, DType::f16),
                                           // Rows with a shared tail: the dispatcher's 64 K form,
                                           // a ragged row (masked tail vectors), f32, 256 threads.
                                           std::make_tuple("rows:t512:r1:bn65536:s14", 65536LL, DType::bf16),
                                           std::make_tuple("rows:t512:r1:bn65536:s14", 65000LL, DType::f16),
                                           std::make_tuple("rows:t512:r1:bn32768:s14", 32768LL, DType::f32),
                                           std::make_tuple("rows:t256:r1:bn20480:s7", 20001LL, DType::f16),
                                           // Windows from the aligned word before each row with a
                                           // shared tail (cp.async for whole vectors, the row's
                                           // head and tail through registers).
                                           std::make_tuple("rows:t512:r1:bn53248:s11:w", 50257LL,
                                                           DType::bf16),
                                           std::make_tuple("rows:t512:r1:bn40960:s8:w", 40001LL, DType::f16),
                                           std::make_tuple("rows:t256:r8:bn1280:w", 1023LL, DType::bf16),
                                           std::make_tuple("rows:t256:r64:bn160:w", 127LL, DType::f16),
                                           std::make_tuple("rows:t256:r1:bn10240:w", 8191LL, DType::f32),
                                           // Windows on 11 warps (3 % padding): a register array's
                                           // words all loaded before the first unpack.
                                           std::make_tuple("rows:t352:r1:bn8448:w", 8191LL, DType::f16),
                                           std::make_tuple("rows:t352:r1:bn8448:w", 8193LL, DType::bf16),
                                           std::make_tuple("rows:t352:r1:bn8448:w", 8191LL, DType::f32)),
                         config_width_and_dtype);

// Tiles exactly as wide as an odd row: the flat-rows layout (the block's rows as the run they are
// in memory, whole 16-byte words, reduce_flat_rows). M = 300 rows leaves every case a ragged
// last block whose run ends inside a word (the masked words); 9 columns put several rows in a
// thread's run; 2051 columns leave most warps without a row boundary.
INSTANTIATE_TEST_SUITE_P(FlatRows, SoftmaxVariants,
                         ::testing::Values(std::make_tuple("rows:t256:r64:bn127", 127LL, DType::f16),
                                           std::make_tuple("rows:t256:r64:bn127", 127LL, DType::bf16),
                                           std::make_tuple("rows:t256:r32:bn127", 127LL, DType::f32),
                                           std::make_tuple("rows:t256:r64:bn129", 129LL, DType::f16),
                                           std::make_tuple("rows:t128:r32:bn129", 129LL, DType::bf16),
                                           std::make_tuple("rows:t256:r8:bn1023", 1023LL, DType::f16),
                                           std::make_tuple("rows:t256:r4:bn1023", 1023LL, DType::f32),
                                           std::make_tuple("rows:t256:r8:bn1025", 1025LL, DType::bf16),
                                           std::make_tuple("rows:t256:r224:bn9", 9LL, DType::f16),
                                           std::make_tuple("rows:t512:r240:bn17", 17LL, DType::bf16),
                                           // Rows longer than a warp's runs: most warps take the
                                           // nests' and the reduction's forms without selects.
                                           std::make_tuple("rows:t512:r8:bn2051", 2051LL, DType::f16),
                                           std::make_tuple("rows:t1024:r8:bn2051", 2051LL, DType::f32)),
                         config_width_and_dtype);

// Flat-rows tiles on fewer rows than a block takes: one row (its run ends inside a word), 7, 65
// (one whole block and one row), each against float64 with the output poisoned.
TEST(SoftmaxFlatRows, FewerRowsThanABlock) {
  TESSEL_REQUIRE_GPU();
  for (long long M : {1LL, 7LL, 65LL})
    for (DType t : {DType::f16, DType::f32}) {
      const char* config = t == DType::f32 ? "rows:t256:r32:bn127" : "rows:t256:r64:bn127";
      SCOPED_TRACE(std::to_string(M) + " rows, " + config);
      auto k = tessel::kernels::make_softmax(M, 127, t, tessel::kernels::parse_softmax_config(config));
      ASSERT_NE(k.source().find("tessel::reduce_flat_rows<"), std::string::npos);
      Tensor x = Tensor::empty({M, 127}, t);
      x.fill_random(std::random_device{}(), -8, 8);
      Tensor y = Tensor::empty({M, 127}, t);
      y.fill(std::nan(""));
      k.launch({x, y});
      tessel::check_cu(tessel::driver().cuCtxSynchronize(), "cuCtxSynchronize");
      const std::vector<double> out = y.to_host_f64(), ref = tessel::test::reference_softmax(x.to_host_f64(), M, 127);
      const double err = tessel::test::rel_error(out, ref);
      EXPECT_LE(err, t == DType::f32 ? 1e-3 : 1e-2) << "relative error " << err;
    }
}

TEST(SoftmaxNaN, PropagatesThroughTheRow) {
  TESSEL_REQUIRE_GPU();
  for (long long N : {256LL, 4097LL, 100003LL, 32768LL}) {
    // 32768 f32 through a shared tail: the NaN sits in the tail's slots.
    auto k = N == 32768
                 ? tessel::kernels::make_softmax(
                       4, N, DType::f32, tessel::kernels::parse_softmax_config("rows:t512:r1:bn32768:s14"))
                 : tessel::kernels::make_softmax(4, N, DType::f32);
    std::vector<float> h(4 * N, 0.5f);
    h[1 * N + N / 2] = std::nanf("");
    Tensor x = Tensor::from_host(h, {4, N}, DType::f32);
    Tensor y = k(x);
    auto out = y.to_host_f64();
    for (long long c = 0; c < N; ++c) ASSERT_TRUE(std::isnan(out[N + c])) << "N=" << N << " col " << c;
    EXPECT_NEAR(out[0], 1.0 / N, 1e-6);
  }
}

}  // namespace
