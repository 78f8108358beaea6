// Row copies whose column start may be negative (src/ops/Copy.cpp, window_copy): the
// interpreter's semantics (columns before 0 padded on the way in, left alone on the way out) and
// what the lowering makes of the two windows of tests/support/RowWindowProgram.hpp.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "support/LoweringSupport.hpp"
#include "support/RowWindowProgram.hpp"
#include "tessel/interp/Interpreter.hpp"

namespace {

using tessel::DType;
using tessel::interp::HostTensor;

TEST(RowWindowInterpreter, PadsBeforeTheRowAndStoresOnlyItsColumns) {
  std::mt19937_64 seeds(std::random_device{}());
  for (DType t : {DType::f16, DType::bf16, DType::f32})
    for (long long N : {1LL, 7LL, 1000LL, 1023LL, 4099LL})
      for (bool aligned : {true, false}) {
        SCOPED_TRACE(std::string(tessel::dtype_name(t)) + " N=" + std::to_string(N) +
                     (aligned ? " aligned window" : " col0=-3"));
        const long long M = 6;
        auto f = tessel::test::row_window_program(M, N, t, aligned);
        // Small integers: 2x - 1 is exact in every dtype.
        HostTensor x = HostTensor::random(t, {M, N}, seeds(), -8, 8);
        for (std::int64_t i = 0; i < x.numel(); ++i) x.set(i, std::round(x.get(i)));
        HostTensor y(t, {M, N});
        y.fill(std::nan(""));
        tessel::interp::interpret(f.ir(), {&x, &y});
        for (long long r = 0; r < M; ++r)
          for (long long c = 0; c < N; ++c) {
            const double got = y.get(r * N + c);
            if (r == 0 || r == M - 1) {
              ASSERT_TRUE(std::isnan(got)) << "row " << r << " (no block's) written at column " << c;
            } else {
              ASSERT_EQ(got, 2 * x.get(r * N + c) - 1) << "Y[" << r << ", " << c << "]";
            }
          }
      }
}

// Tiles and fills that start before row 0 and column 0 (the interpreter: those parts neither
// read nor written), and the lowering's two-sided edge tests where a start may be negative.
TEST(NegativeStarts, TilesBeforeRowAndColumnZero) {
  std::mt19937_64 seeds(std::random_device{}());
  for (DType t : {DType::f16, DType::f32})
    for (long long M : {1LL, 6LL, 13LL}) {
      const long long N = 50;
      auto f = tessel::test::shifted_tile_program(M, N, t);
      HostTensor x = HostTensor::random(t, {M, N}, seeds(), -8, 8);
      for (std::int64_t i = 0; i < x.numel(); ++i) x.set(i, std::round(x.get(i)));
      HostTensor y(t, {M, N});
      y.fill(std::nan(""));
      tessel::interp::interpret(f.ir(), {&x, &y});
      for (std::int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(y.get(i), 2 * x.get(i) - 1) << "element " << i;
    }
  // A fill of such regions: only the tensor's elements written.
  for (long long M : {1LL, 6LL}) {
    HostTensor y(DType::f32, {M, 50});
    y.fill(std::nan(""));
    tessel::interp::interpret(tessel::test::shifted_fill_program(M, 50, DType::f32).ir(), {&y});
    for (std::int64_t i = 0; i < y.numel(); ++i) ASSERT_EQ(y.get(i), 7.0) << "element " << i;
  }
  const std::string fill =
      tessel::lower(tessel::test::shifted_fill_program(6, 50, DType::f32).ir(), tessel::test::sm90(), true)
          .stages.back()
          .second;
  EXPECT_NE(fill.find(">= 0)"), std::string::npos) << fill;
  auto lowered = tessel::lower(tessel::test::shifted_tile_program(13, 50, DType::f16).ir(), tessel::test::sm90(), true);
  const std::string text = lowered.stages.back().second;
  // The global -> shared copy element by element with both edges tested, not the tiled
  // copy_global_to_shared (which tests only the far one).
  EXPECT_EQ(text.find("copy_global_to_shared"), std::string::npos) << text;
  EXPECT_NE(text.find(">= 0)"), std::string::npos) << text;
}

// The window at the aligned word before each row: its start provably a multiple of the vector,
// so whole words in (all of a thread's loads first, then the row's head and tail selected in
// registers; element-wise only in a warp with a word that may lie outside the tensor: none here) and whole
// words out where a warp holds no row edge. The fixed window at column -3 is not aligned: element by element
// both ways.
TEST(RowWindowLowering, WholeWordsOnlyWhereTheStartIsProvablyAligned) {
  for (DType t : {DType::f16, DType::f32}) {
    const std::string ty = t == DType::f16 ? "tessel::half_t, 8" : "float, 4";
    auto aligned = tessel::lower(tessel::test::row_window_program(64, 1023, t, true).ir(), tessel::test::sm90(), true);
    const std::string a = aligned.stages.back().second;
    // A register array: the words of every vector first (one predicated load each), then the
    // unpacks, which select the head's and tail's padding only in a warp that holds one.
    const std::string words = "tessel::load_global_words_window<" + ty + ">";
    const std::string unpack = "tessel::unpack_row_window<" + ty + ", float>";
    ASSERT_NE(a.find(words), std::string::npos) << a;
    ASSERT_NE(a.find(unpack), std::string::npos) << a;
    EXPECT_LT(a.rfind(words), a.find(unpack)) << a;
    EXPECT_EQ(a.find("tessel::load_row_window<" + ty + ", float, true>"), std::string::npos) << a;
    // No warp's word can pass the tensor's ends here (rows 0 and M - 1 are no block's): the
    // element-wise load is proven dead and left out.
    EXPECT_EQ(a.find("tessel::load_row_window<" + ty + ", float, false>"), std::string::npos) << a;
    EXPECT_NE(a.find("tessel::store_row_vector_whole<" + ty + ", float>"), std::string::npos) << a;
    EXPECT_NE(a.find("tessel::store_row_window<" + ty + ", float>"), std::string::npos) << a;
    EXPECT_NE(a.find("tessel::warp_all("), std::string::npos) << a;
    auto fixed = tessel::lower(tessel::test::row_window_program(64, 1023, t, false).ir(), tessel::test::sm90(), true);
    const std::string b = fixed.stages.back().second;
    EXPECT_NE(b.find("tessel::load_row_window<" + ty + ", float, false>"), std::string::npos) << b;
    EXPECT_EQ(b.find("load_row_window<" + ty + ", float, true>"), std::string::npos) << b;
    EXPECT_EQ(b.find("store_row_vector_whole"), std::string::npos) << b;
    EXPECT_NE(b.find("tessel::store_row_window<" + ty + ", float>"), std::string::npos) << b;
    // Neither takes the unaligned rows' other paths (they assume a start at column >= 0).
    for (const std::string& s : {a, b}) {
      EXPECT_EQ(s.find("span"), std::string::npos);
      EXPECT_EQ(s.find("realigned"), std::string::npos);
    }
  }
}

// copy_window moves rows between a global tensor and a fragment: other pairs are an error naming
// the op and what it takes.
TEST(RowWindowErrors, OnlyGlobalRowsAndAFragment) {
  namespace T = tessel;
  T::PrimFunc f("bad_window");
  auto X = f.tensor("X", {64, 100}, DType::f16);
  auto Y = f.tensor("Y", {64, 100}, DType::f16);
  f.body([&] {
    T::Kernel(T::Expr(64), 128, [&](T::Var bx) {
      auto s = T::alloc_shared({1, 128}, DType::f16);
      T::copy_window(X(bx, 0), s);
      T::copy(s, Y(bx, 0));
    });
  });
  const std::string e = tessel::test::compile_error_of([&] { tessel::lower(f.ir(), tessel::test::sm90()); });
  EXPECT_NE(e.find("copy_window"), std::string::npos) << e;
  EXPECT_NE(e.find("; copy_window moves rows between a global tensor and a fragment"), std::string::npos) << e;
}

}  // namespace
