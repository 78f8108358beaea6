// The plan of tessel::store_global_vector_realigned (device/tessel/realign_plan.cuh) on a
// simulated warp: every valid byte of every active lane is written exactly once, with its own
// value, and no other byte is touched -- on contiguous runs at every misalignment, rows that end
// inside a vector (127 columns), rows with gaps between them, inactive lanes, and random layouts.
// The device function adds only the shuffles that bring lane i+1's address, valid count and
// vector to lane i; the 16-byte word it stores is realign_words(mine, right, 16 - sh), the same
// function the simulation calls (and the realigned loads' shift, checked byte by byte below).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "device/tessel/realign_plan.cuh"

namespace {

struct Lane {
  bool active = true;
  std::int64_t addr = 0;  // bytes, a multiple of the element size
  int valid = 0;          // elements
};

// Runs the warp's plan over a byte image; returns a failure message, or "" when every valid
// byte is written once with its value and nothing else is written.
std::string simulate(const std::vector<Lane>& lanes, int elem) {
  const int vec = 16 / elem;
  std::int64_t lo_addr = INT64_MAX, hi_addr = 0;
  for (const Lane& l : lanes) {
    lo_addr = std::min(lo_addr, l.addr - 16);
    hi_addr = std::max(hi_addr, l.addr + 48);
  }
  const std::size_t n = static_cast<std::size_t>(hi_addr - lo_addr);
  std::vector<int> writes(n, 0);
  std::vector<int> value(n, -1), expected(n, -1);
  // Byte b of lane i's vector has the value i * 64 + b (distinct per lane and byte).
  auto byte_of = [](int lane, int b) { return lane * 64 + b; };
  auto write = [&](std::int64_t a, int v) {
    writes[static_cast<std::size_t>(a - lo_addr)] += 1;
    value[static_cast<std::size_t>(a - lo_addr)] = v;
  };
  const int W = static_cast<int>(lanes.size());
  std::vector<bool> joins(W, false);
  for (int i = 0; i < W; ++i) {
    const Lane& l = lanes[i];
    if (!l.active) continue;
    for (int b = 0; b < std::min(std::max(l.valid, 0), vec) * elem; ++b)
      expected[static_cast<std::size_t>(l.addr + b - lo_addr)] = byte_of(i, b);
    const bool right_active = i + 1 < W && lanes[i + 1].active;
    const int bytes = std::min(std::max(l.valid, 0), vec) * elem;
    const int right_bytes = right_active ? std::min(std::max(lanes[i + 1].valid, 0), vec) * elem : 0;
    joins[i] = tessel::realigned_store_joins(static_cast<unsigned>(l.addr % 16), bytes,
                                             right_active && lanes[i + 1].addr == l.addr + 16, right_bytes);
  }
  for (int i = 0; i < W; ++i) {
    const Lane& l = lanes[i];
    if (!l.active) continue;
    const unsigned sh = static_cast<unsigned>(l.addr % 16);
    const int bytes = std::min(std::max(l.valid, 0), vec) * elem;
    const bool left_joins = i > 0 && lanes[i - 1].active && joins[i - 1];
    const tessel::RealignedStorePlan p = tessel::realigned_store_plan(sh, bytes, joins[i], left_joins);
    if (p.aligned) {
      if (sh != 0) return "lane " + std::to_string(i) + ": an aligned store at an unaligned address";
      for (int b = 0; b < 16; ++b) write(l.addr + b, byte_of(i, b));
    }
    if (p.word) {
      // What the device stores: realign_words over (mine, right) at 16 - sh, each byte's value
      // carried in the words (bytes of a lane's vector are byte_of(lane, b) % 256, distinct
      // enough: lanes i and i + 1 differ).
      unsigned x[8], w[4];
      for (int q = 0; q < 8; ++q) {
        unsigned v = 0;
        for (int b = 3; b >= 0; --b) {
          const int byte = 4 * q + b;
          v = (v << 8) | static_cast<unsigned>(byte < 16 ? byte_of(i, byte) & 0xff : byte_of(i + 1, byte - 16) & 0xff);
        }
        x[q] = v;
      }
      tessel::realign_words(x, (16u - sh) & 15u, w);
      const std::int64_t w1 = l.addr - sh + 16;
      for (int b = 0; b < 16; ++b) {
        const int k = static_cast<int>(16 - sh) + b;  // byte k of (mine, right): the intended value
        const int intended = k < 16 ? byte_of(i, k) : byte_of(i + 1, k - 16);
        const int got = static_cast<int>((w[b / 4] >> (8 * (b % 4))) & 0xff);
        if (got != (intended & 0xff))
          return "lane " + std::to_string(i) + ": realign_words put byte " + std::to_string(got) + " at " +
                 std::to_string(b) + " of the word, expected " + std::to_string(intended & 0xff);
        write(w1 + b, intended);
      }
    }
    if (p.lo % elem != 0 || p.hi % elem != 0)
      return "lane " + std::to_string(i) + ": element range cuts an element";
    for (int b = p.lo; b < p.hi; ++b) write(l.addr + b, byte_of(i, b));
  }
  for (std::size_t k = 0; k < n; ++k) {
    const std::int64_t a = static_cast<std::int64_t>(k) + lo_addr;
    if (expected[k] < 0 && writes[k] != 0) return "byte " + std::to_string(a) + " written but not valid";
    if (expected[k] >= 0 && writes[k] != 1)
      return "byte " + std::to_string(a) + " written " + std::to_string(writes[k]) + " times";
    if (expected[k] >= 0 && value[k] != expected[k])
      return "byte " + std::to_string(a) + " has " + std::to_string(value[k]) + ", expected " +
             std::to_string(expected[k]);
  }
  return "";
}

// realign_words: the 16 bytes at every even offset of 32 random bytes.
TEST(RealignedStorePlan, RealignWordsShiftsByEveryEvenOffset) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    unsigned char bytes[32];
    for (unsigned char& b : bytes) b = static_cast<unsigned char>(rng());
    unsigned x[8], w[4];
    for (int q = 0; q < 8; ++q)
      x[q] = bytes[4 * q] | bytes[4 * q + 1] << 8 | bytes[4 * q + 2] << 16 | static_cast<unsigned>(bytes[4 * q + 3]) << 24;
    for (unsigned sh = 0; sh < 16; sh += 2) {
      tessel::realign_words(x, sh, w);
      for (int b = 0; b < 16; ++b)
        ASSERT_EQ((w[b / 4] >> (8 * (b % 4))) & 0xff, bytes[sh + b]) << "sh " << sh << " byte " << b;
    }
  }
}

TEST(RealignedStorePlan, ContiguousRunAtEveryMisalignment) {
  for (int elem : {2, 4, 8})
    for (int sh = 0; sh < 16; sh += elem) {
      std::vector<Lane> lanes(32);
      for (int i = 0; i < 32; ++i) lanes[i] = {true, 1024 + sh + 16 * i, 16 / elem};
      EXPECT_EQ(simulate(lanes, elem), "") << "elem " << elem << " sh " << sh;
      // The run ends inside the last lane's vector, and inside a middle one.
      lanes[31].valid = 1;
      EXPECT_EQ(simulate(lanes, elem), "") << "elem " << elem << " sh " << sh;
      lanes[13].valid = 0;
      EXPECT_EQ(simulate(lanes, elem), "") << "elem " << elem << " sh " << sh;
    }
}

// A softmax over 127 f16 columns: 16 lanes a row, rows back to back in memory, lane 15 of each
// row 7 elements; a 128-column tile over a 127-column row.
TEST(RealignedStorePlan, RowsEndingInsideAVector) {
  for (int row_len : {127, 129, 121, 9, 7, 1}) {
    const int lanes_per_row = (row_len + 7) / 8 > 16 ? 32 : 16;
    std::vector<Lane> lanes(32);
    for (int i = 0; i < 32; ++i) {
      const int row = i / lanes_per_row, col = 8 * (i % lanes_per_row);
      lanes[i] = {true, 2 * (static_cast<std::int64_t>(row + 5) * row_len + col), std::max(0, row_len - col)};
    }
    EXPECT_EQ(simulate(lanes, 2), "") << row_len;
  }
}

TEST(RealignedStorePlan, RowsWithGapsAndInactiveLanes) {
  std::vector<Lane> lanes(32);
  for (int i = 0; i < 32; ++i) {
    const int row = i / 8, col = 8 * (i % 8);
    lanes[i] = {true, 2 * (static_cast<std::int64_t>(row) * 77 + 3 + col), 60 - col};  // ld 77, 60 columns
  }
  EXPECT_EQ(simulate(lanes, 2), "");
  for (int i : {0, 5, 6, 17, 31}) lanes[i].active = false;
  EXPECT_EQ(simulate(lanes, 2), "");
}

TEST(RealignedStorePlan, RandomLayouts) {
  std::mt19937 rng(20261205);
  for (int trial = 0; trial < 20000; ++trial) {
    const int elem = 2 << (rng() % 3);
    const int vec = 16 / elem;
    std::vector<Lane> lanes(32);
    std::int64_t next = 4096 + elem * static_cast<std::int64_t>(rng() % 64);
    for (int i = 0; i < 32; ++i) {
      Lane& l = lanes[i];
      l.active = rng() % 8 != 0;
      const int r = static_cast<int>(rng() % 10);
      l.valid = r < 7 ? vec : static_cast<int>(rng() % (vec + 1));
      // Mostly the previous lane's end; sometimes right after its valid part (a new row that
      // starts inside the last vector's footprint), sometimes a jump.
      const int how = static_cast<int>(rng() % 10);
      if (i > 0 && how == 0) next = lanes[i - 1].addr + std::max(lanes[i - 1].valid, 0) * elem;
      if (how == 1) next += elem * static_cast<std::int64_t>(1 + rng() % 100);
      l.addr = next;
      next += 16;
    }
    const std::string failure = simulate(lanes, elem);
    ASSERT_EQ(failure, "") << "trial " << trial << " elem " << elem;
  }
}

}  // namespace
