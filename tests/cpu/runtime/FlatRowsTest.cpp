// The flat-rows layout's index arithmetic (device/tessel/flat_rows.cuh) on the host, and the
// three phases of reduce_flat_rows (device/tessel/reduce.cuh) emulated with it thread by thread:
// every element lands in exactly one part of its own row, and each thread receives its rows'
// results, for many shapes, runs and block sizes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "device/tessel/flat_rows.cuh"

namespace {

struct Shape {
  int rows, cols, run, threads;
};

// Rows whose run of rows * cols elements is split into runs of `run` elements, one a thread:
// what infer_layouts' flat_rows accepts (cols > vec, run <= cols + 1, runs cover the tile).
std::vector<Shape> shapes() {
  std::vector<Shape> out;
  for (int vec : {2, 4, 8, 16})
    for (int cols : {vec + 1, 9, 17, 31, 127, 129, 255, 1023, 1025})
      for (int threads : {32, 128, 256, 512})
        for (int words = 1; words <= 8; ++words) {
          if (cols <= vec || cols % vec == 0) continue;
          const int run = words * vec;
          if (run > cols + 1) continue;
          for (int rows = 1; rows <= 1024; ++rows) {
            if ((rows * cols) % vec != 0) continue;
            const int runs = (rows * cols + run - 1) / run;
            if ((runs + threads - 1) / threads != 1) continue;  // one run a thread
            if (rows % 7 == 0 || rows == 1 || runs > threads - run) out.push_back({rows, cols, run, threads});
          }
        }
  return out;
}

TEST(FlatRows, EveryElementIsInOnePartOfItsOwnRow) {
  int checked = 0;
  for (const Shape& s : shapes()) {
    const int total = s.rows * s.cols, runs = (total + s.run - 1) / s.run;
    // Which part (2 per run) each element goes to, by the run's head.
    std::vector<int> part_of(static_cast<size_t>(total));
    for (int w = 0; w < runs; ++w) {
      const int head = tessel::flat_word_head(w, s.run, s.cols);
      ASSERT_GE(head, 1);
      for (int e = 0; e < s.run && w * s.run + e < total; ++e) {
        const int f = w * s.run + e;
        part_of[static_cast<size_t>(f)] = 2 * w + (e < head ? 0 : 1);
        // The head is exactly the elements in the row of the run's first element.
        ASSERT_EQ(e < head, f / s.cols == (w * s.run) / s.cols) << "rows " << s.rows << " cols " << s.cols;
      }
    }
    // Each row's parts, by flat_row_part over its runs, are exactly its elements' parts.
    for (int r = 0; r < s.rows; ++r) {
      std::vector<int> expect, got;
      for (int c = 0; c < s.cols; ++c) expect.push_back(part_of[static_cast<size_t>(r * s.cols + c)]);
      std::sort(expect.begin(), expect.end());
      expect.erase(std::unique(expect.begin(), expect.end()), expect.end());
      for (int w = tessel::flat_row_first_word(r, s.run, s.cols); w <= tessel::flat_row_last_word(r, s.run, s.cols);
           ++w)
        got.push_back(tessel::flat_row_part(r, w, s.run, s.cols));
      ASSERT_EQ(got, expect) << "row " << r << " of " << s.rows << "x" << s.cols << ", runs of " << s.run;
    }
    ++checked;
  }
  EXPECT_GT(checked, 300);
}

// reduce_flat_rows' three phases for max and sum, each thread in turn (phases are separated by
// block barriers, so any order within a phase is the device's): random values with -inf and NaN.
TEST(FlatRows, ThePhasesOfTheReductionGiveEveryThreadItsRows) {
  std::mt19937 rng(20261205);
  std::uniform_real_distribution<float> u(-8.0f, 8.0f);
  const float inf = std::numeric_limits<float>::infinity();
  auto max_nan = [](float a, float b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); };
  int checked = 0;
  for (const Shape& s : shapes()) {
    if (++checked % 3) continue;  // a third of the shapes keeps this well under a second
    const int total = s.rows * s.cols;
    std::vector<float> x(static_cast<size_t>(s.threads * s.run), -inf);  // runs past the tile: padding
    for (int f = 0; f < total; ++f) x[static_cast<size_t>(f)] = u(rng);
    x[static_cast<size_t>(rng() % total)] = -inf;
    if (s.rows > 2) x[static_cast<size_t>(s.cols + rng() % s.cols)] = NAN;  // row 1
    for (int op = 0; op < 2; ++op) {
      auto combine = [&](float a, float b) { return op == 0 ? max_nan(a, b) : a + b; };
      const float id = op == 0 ? -inf : 0.0f;
      std::vector<float> part(static_cast<size_t>(2 * s.threads), std::nanf("1")), result(s.rows, std::nanf("2"));
      const int runs = (total + s.run - 1) / s.run;
      for (int t = 0; t < s.threads; ++t) {  // phase 1
        const int head = tessel::flat_word_head(t, s.run, s.cols);
        float a = id, b = id;
        for (int e = 0; e < s.run; ++e) {
          a = combine(a, e < head ? x[static_cast<size_t>(t * s.run + e)] : id);
          b = combine(b, e < head ? id : x[static_cast<size_t>(t * s.run + e)]);
        }
        if (t < runs) part[2 * t] = a, part[2 * t + 1] = b;
      }
      const int lanes = tessel::flat_row_lanes(s.rows, s.threads), groups = s.threads / lanes;
      for (int r0 = 0; r0 < s.rows; r0 += groups)  // phase 2: each group's lanes, then combined
        for (int g = 0; g < groups && r0 + g < s.rows; ++g) {
          const int r = r0 + g;
          float v = id;
          for (int lane = 0; lane < lanes; ++lane)
            for (int w = tessel::flat_row_first_word(r, s.run, s.cols) + lane;
                 w <= tessel::flat_row_last_word(r, s.run, s.cols); w += lanes)
              v = combine(v, part[static_cast<size_t>(tessel::flat_row_part(r, w, s.run, s.cols))]);
          result[static_cast<size_t>(r)] = v;
        }
      for (int r = 0; r < s.rows; ++r) {  // against each row directly
        float want = id;
        for (int c = 0; c < s.cols; ++c) want = combine(want, x[static_cast<size_t>(r * s.cols + c)]);
        const float got = result[static_cast<size_t>(r)];
        if (std::isnan(want)) {
          ASSERT_TRUE(std::isnan(got)) << "row " << r;
        } else if (op == 0 || std::isinf(want)) {
          ASSERT_EQ(got, want) << "max of row " << r << " of " << s.rows << "x" << s.cols;
        } else {
          ASSERT_NEAR(got, want, 1e-4 * s.cols * 8) << "sum of row " << r;
        }
      }
      for (int t = 0; t < s.threads; ++t) {  // phase 3: the rows of each run's first and last elements
        const int row = t * s.run / s.cols;
        const int first = std::min(row, s.rows - 1), second = std::min(row + 1, s.rows - 1);
        if (t * s.run >= total) continue;
        const int last = std::min(t * s.run + s.run, total) - 1;
        ASSERT_EQ(first, (t * s.run) / s.cols);
        if (last / s.cols != first) {
          ASSERT_EQ(second, last / s.cols) << "a run over more than two rows";
        }
      }
    }
  }
}

}  // namespace
