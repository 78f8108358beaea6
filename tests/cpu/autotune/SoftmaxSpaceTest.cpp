// The softmax's tuning space without a GPU: what it enumerates for short, medium and long rows,
// and every point it keeps run on the reference interpreter against float64.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "support/SoftmaxReference.hpp"
#include "support/TestSupport.hpp"
#include "tessel/autotune/Autotune.hpp"
#include "tessel/interp/Interpreter.hpp"

namespace at = tessel::autotune;
using tessel::DType;
using tessel::kernels::SoftmaxVariant;

namespace {

int count_variant(const std::vector<at::Config>& configs, SoftmaxVariant v) {
  int n = 0;
  for (const auto& c : configs) n += at::get(c, "variant") == static_cast<int>(v);
  return n;
}

}  // namespace

TEST(AutotuneSoftmaxSpace, KeepsTheDefaultAndTheVariantsThatFitTheRow) {
  constexpr long long kSmem = 232448;  // the H200's shared memory per block
  const std::set<std::string> reasons = {
      "constraint the rows variant's tile holds the whole row (block_N >= N)",
      "constraint at most 64 f32 values and 4096 / threads 16-byte vectors per thread",
      "constraint the compiler lays the tile out over the threads"};
  for (DType t : {DType::f16, DType::bf16, DType::f32}) {
    for (long long N : {1LL, 7LL, 256LL, 1000LL, 4096LL, 5000LL, 16384LL, 65536LL, 100003LL}) {
      const long long M = 4096;
      SCOPED_TRACE("N=" + std::to_string(N) + " " + std::string(tessel::dtype_name(t)));
      const auto space = at::softmax_space("sm_90a", M, N, t);
      const auto e = space.enumerate({.smem_per_block = kSmem, .threads_per_block = 1024});
      EXPECT_EQ(e.kept.size() + e.pruned.size(), e.total);
      EXPECT_GE(e.kept.size(), 5u);
      EXPECT_LE(e.kept.size(), 40u);
      const at::Config def = at::softmax_point(tessel::kernels::default_softmax_config(M, N, t));
      EXPECT_EQ(std::count(e.kept.begin(), e.kept.end(), def), 1)
          << "the dispatcher's default is a candidate";
      for (const auto& p : e.pruned)
        EXPECT_TRUE(reasons.count(p.reason) || p.reason.rfind("shared memory ", 0) == 0) << p.reason;
      const long long vec = 16 / tessel::dtype_bytes(t);
      for (const auto& c : e.kept) {
        const auto s = at::softmax_config(c);
        const long long bn = s.block_N;
        EXPECT_GT(bn, 0) << s.describe();
        if (s.variant == SoftmaxVariant::Rows) {
          EXPECT_GE(bn, N) << s.describe();
        }
        if (s.variant == SoftmaxVariant::Online) {
          EXPECT_LT(bn, N) << s.describe();
        }
        if (s.variant == SoftmaxVariant::Row) {  // the whole row staged in shared memory
          EXPECT_GE(((N + bn - 1) / bn) * bn * tessel::dtype_bytes(t), N * tessel::dtype_bytes(t))
              << s.describe();
          EXPECT_LE(N * tessel::dtype_bytes(t), kSmem) << s.describe();
        }
        // Register-resident elements (a shared tail is not in registers).
        const long long elements = s.rows_per_block * bn - 1LL * s.shared_vectors * vec * s.threads;
        if (s.shared_vectors) {
          EXPECT_EQ(s.variant, SoftmaxVariant::Rows) << s.describe();
          EXPECT_EQ(s.rows_per_block, 1) << s.describe();
          EXPECT_GT(elements, 0) << s.describe();
        }
        EXPECT_LE(elements, 64LL * s.threads) << s.describe();
        EXPECT_LE(elements / vec, 4096) << s.describe();
        EXPECT_EQ(at::softmax_point(s), c) << "point -> config -> point is the identity";
      }
      // Short rows: several rows per block. Rows past what 1024 threads hold in registers: one
      // row per block, read twice (online) or staged in shared memory while it fits (row).
      const int rows = count_variant(e.kept, SoftmaxVariant::Rows),
                row = count_variant(e.kept, SoftmaxVariant::Row),
                online = count_variant(e.kept, SoftmaxVariant::Online);
      if (N <= 1024) {
        EXPECT_GT(rows, 0);
      }
      if (N > 64 * 1024) {  // only rows with a shared tail, where shared memory holds the rest
        for (const auto& c : e.kept)
          if (at::get(c, "variant") == static_cast<int>(SoftmaxVariant::Rows)) {
            EXPECT_GT(at::get(c, "shared_vectors"), 0);
          }
      }
      if (N > 4096 && N * tessel::dtype_bytes(t) < kSmem) {  // a long row can keep a shared tail
        EXPECT_GT(std::count_if(e.kept.begin(), e.kept.end(), [](const auto& c) { return at::get(c, "shared_vectors") > 0; }),
                  0);
      }
      EXPECT_EQ(online > 0, N > 256 * vec) << online << " online candidates";
      if (N > 64 * 1024) {
        EXPECT_EQ(row > 0, N * tessel::dtype_bytes(t) < kSmem) << row << " row candidates";
      }
    }
  }
}

TEST(AutotuneSoftmaxSpace, SharedMemoryIsWhatTheCompilerPlans) {
  // A Row candidate stages its whole row, padded to whole chunks, in shared memory: 100003 f32
  // values never fit in the H200's 227 KB; 100003 f16 values do in small chunks, not in chunks
  // of 32768 (131072 padded values, 256 KB).
  for (DType t : {DType::f16, DType::f32}) {
    const auto e = at::softmax_space("sm_90a", 64, 100003, t)
                       .enumerate({.smem_per_block = 232448, .threads_per_block = 1024});
    int row = 0, smem = 0;
    for (const auto& c : e.kept) row += at::get(c, "variant") == static_cast<int>(SoftmaxVariant::Row);
    for (const auto& p : e.pruned) {
      const bool over = p.reason.rfind("shared memory ", 0) == 0;
      smem += over;
      if (over) {  // a whole row staged (Row) or a shared tail too large (Rows)
        const bool staged = at::get(p.config, "variant") == static_cast<int>(SoftmaxVariant::Row);
        EXPECT_TRUE(staged || at::get(p.config, "shared_vectors") > 0) << p.reason;
      }
    }
    EXPECT_EQ(row > 0, t == DType::f16) << tessel::dtype_name(t);
    EXPECT_GT(smem, 0) << tessel::dtype_name(t);
  }
}

TEST(AutotuneSoftmaxSpace, LayoutConstraintPrunesTilesTheCompilerRejects) {
  // N = 1000 f16: 125 vectors, odd, so an unpadded 1000-column tile cannot spread a row over
  // lanes; its rows must fill whole passes of the block, which the other constraints allow only
  // with few threads. Padded to 1024 it lays out.
  const auto e = at::softmax_space("sm_90a", 64, 1000, DType::f16).enumerate();
  int layout = 0;
  for (const auto& p : e.pruned)
    layout += p.reason == "constraint the compiler lays the tile out over the threads";
  EXPECT_GT(layout, 0);
  for (const auto& c : e.kept) EXPECT_NE(at::get(c, "block_N"), 1000) << at::describe(c);
}

// Rows that are not whole vectors: tiles exactly as wide as the row (the flat-rows layout) are
// among the kept candidates, each with rows x columns a whole number of vectors.
TEST(AutotuneSoftmaxSpace, OddWidthsAlsoTryFlatRowsTiles) {
  for (auto [N, t] : {std::pair{127LL, DType::f16}, std::pair{129LL, DType::f16}, std::pair{1023LL, DType::bf16},
                      std::pair{127LL, DType::f32}}) {
    SCOPED_TRACE("N=" + std::to_string(N) + " " + std::string(tessel::dtype_name(t)));
    const auto e = at::softmax_space("sm_90a", 4096, N, t).enumerate({.smem_per_block = 232448, .threads_per_block = 1024});
    int flat = 0;
    for (const auto& c : e.kept) {
      const auto s = at::softmax_config(c);
      if (s.variant != SoftmaxVariant::Rows || s.block_N != N) continue;
      ++flat;
      EXPECT_EQ(s.rows_per_block * N % (16 / tessel::dtype_bytes(t)), 0) << s.describe();
    }
    EXPECT_GE(flat, 3);
  }
}

TEST(AutotuneSoftmaxSpace, EveryKeptPointIsRightOnTheInterpreter) {
  std::mt19937_64 seeds(7);
  // M = 5: blocks of many rows run past the last row (padded loads, masked stores).
  for (auto [N, t] :
       {std::pair{7LL, DType::f32}, std::pair{1000LL, DType::f16}, std::pair{3000LL, DType::bf16},
        std::pair{127LL, DType::f16}}) {
    const long long M = 5;
    const auto e =
        at::softmax_space("sm_90a", M, N, t).enumerate({.smem_per_block = 0, .threads_per_block = 1024});
    auto x = tessel::interp::HostTensor::random(t, {M, N}, seeds(), -4, 4);
    const auto ref = tessel::test::reference_softmax(x.to_values(), M, N);
    for (const auto& c : e.kept) {
      const auto s = at::softmax_config(c);
      SCOPED_TRACE("N=" + std::to_string(N) + " " + std::string(tessel::dtype_name(t)) + " " + s.describe());
      auto y = tessel::interp::run_on_cpu(tessel::kernels::softmax_program(M, N, t, s), {x}, {-1});
      const double err = tessel::test::rel_error(y[0].to_values(), ref);
      EXPECT_LE(err, t == DType::f32 ? 1e-5 : 1e-2) << "relative error " << err;
    }
  }
}
