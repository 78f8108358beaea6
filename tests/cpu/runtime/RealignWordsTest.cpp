// realign_words and realign_words_branched (device/tessel/realign.cuh), the shifts of the
// realigned loads, on the host: the 16 bytes at every even offset of 32 random bytes, byte by byte.
#include <gtest/gtest.h>

#include <random>

#include "device/tessel/realign.cuh"

namespace {

// realign_words: the 16 bytes at every even offset of 32 random bytes.
TEST(RealignWords, ShiftsByEveryEvenOffset) {
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
      // The branched form (the realigned global loads'): the same bytes.
      unsigned v[4] = {0u, 0u, 0u, 0u};
      tessel::realign_words_branched(x, sh, v);
      for (int b = 0; b < 16; ++b)
        ASSERT_EQ((v[b / 4] >> (8 * (b % 4))) & 0xff, bytes[sh + b]) << "branched, sh " << sh << " byte " << b;
    }
  }
}

}  // namespace
