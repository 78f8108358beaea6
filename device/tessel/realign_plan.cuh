// Who stores which bytes when a warp writes 16-byte vectors that start unaligned
// (store_global_vector_realigned in reduce.cuh), and the byte shift both realigned paths use
// (realign_words: the loads' vector out of two aligned words, the stores' aligned word out of two
// vectors). Plain integer logic, compiled for the device and, by
// tests/cpu/runtime/RealignedStorePlanTest.cpp, for the host, where a simulated warp checks that
// every valid byte is written exactly once, with its own value, and nothing else is.
//
// Lane i holds a vector of 16 bytes at address a_i (any multiple of the element size), of which
// the first b_i are valid (0..16). Write sh = a_i % 16. When sh != 0, the vector straddles two
// aligned words: W0 = a_i - sh (its first 16 - sh bytes) and W1 = W0 + 16 (its last sh bytes).
// Lane i "joins right" when its vector and lane i+1's are both whole and lane i+1's starts where
// lane i's ends: then W1 is made of lane i's last sh bytes and lane i+1's first 16 - sh, and
// lane i stores it with one aligned 16-byte store. Every byte no joined word covers -- the first
// 16 - sh bytes of a vector whose left neighbour did not join it, the last sh of one that does
// not join right, every valid byte of a partial vector -- its own lane stores element by element.
// An aligned whole vector (sh == 0, b_i == 16) is one 16-byte store at a_i.
#pragma once

#if defined(__CUDACC__)
#define TESSEL_HOST_DEVICE __host__ __device__
#else
#define TESSEL_HOST_DEVICE
#endif

namespace tessel {

// The low 32 bits of (hi:lo) >> (bits % 32): one SHF.R.W on the device.
TESSEL_HOST_DEVICE inline unsigned funnel_shift_right(unsigned lo, unsigned hi, unsigned bits) {
#if defined(__CUDA_ARCH__)
  return __funnelshift_r(lo, hi, bits);
#else
  return static_cast<unsigned>(((static_cast<unsigned long long>(hi) << 32) | lo) >> (bits & 31u));
#endif
}

// The 16 bytes that start `sh` bytes (a multiple of 2, below 16) into the 32 bytes x[0..8)
// (little-endian 32-bit words): register selects for the whole words, a funnel shift for a half
// word; no branch on sh.
TESSEL_HOST_DEVICE inline void realign_words(const unsigned (&x)[8], unsigned sh, unsigned (&out)[4]) {
  const unsigned q = sh >> 2, bits = (sh & 3u) * 8u;  // whole words, then 0 or 16 bits
  unsigned r[5];
#if defined(__CUDACC__)
#pragma unroll
#endif
  for (int k = 0; k < 5; ++k) {
    unsigned v = x[k];
    v = q == 1u ? x[k + 1] : v;
    v = q == 2u ? x[k + 2] : v;
    v = q == 3u ? x[k + 3] : v;
    r[k] = v;
  }
#if defined(__CUDACC__)
#pragma unroll
#endif
  for (int k = 0; k < 4; ++k) out[k] = funnel_shift_right(r[k], r[k + 1], bits);
}

struct RealignedStorePlan {
  bool aligned = false;  // one 16-byte store of the vector at its own (aligned) address
  bool word = false;     // one 16-byte store of W1 (this vector's last sh bytes, the next one's first)
  int lo = 0, hi = 0;    // bytes [lo, hi) of the vector stored element by element
};

// Whether lane i joins right (see above): sh = a_i % 16; bytes, right_bytes: the valid bytes
// of the two vectors; right_next: lane i+1 is active and a_{i+1} == a_i + 16.
TESSEL_HOST_DEVICE inline bool realigned_store_joins(unsigned sh, int bytes, bool right_next, int right_bytes) {
  return sh != 0u && bytes >= 16 && right_next && right_bytes >= 16;
}

// Lane i's share: joins_right as above; joins_left: lane i-1 joins right (so this vector's
// first 16 - sh bytes are stored by it).
TESSEL_HOST_DEVICE inline RealignedStorePlan realigned_store_plan(unsigned sh, int bytes, bool joins_right,
                                                                  bool joins_left) {
  RealignedStorePlan p;
  const int valid = bytes < 0 ? 0 : bytes > 16 ? 16 : bytes;
  p.aligned = sh == 0u && valid == 16;
  p.word = joins_right;
  if (p.aligned) return p;
  p.lo = joins_left ? 16 - static_cast<int>(sh) : 0;
  p.hi = joins_right ? 16 - static_cast<int>(sh) : valid;
  if (p.hi < p.lo) p.hi = p.lo;
  return p;
}

}  // namespace tessel
