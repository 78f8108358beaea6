// The byte shift of the realigned loads (unpack_global_words_realigned and
// load_shared_vector_realigned in reduce.cuh): the 16 bytes at an even offset of two aligned
// 16-byte words. Plain integer logic, compiled for the device and, by
// tests/cpu/runtime/RealignWordsTest.cpp, for the host, where it is checked byte by byte.
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

// The same bytes by a branch on the whole-word shift (sh / 4) instead of the select network:
// each branch moves fixed registers, so a thread pays only the funnel shifts -- when the warp's
// threads share the shift (a long row's vectors: one row a warp), the branch costs a compare
// and a jump where the selects cost fifteen instructions; threads of one warp with different
// shifts run their branches one after another (still correct).
TESSEL_HOST_DEVICE inline void realign_words_branched(const unsigned (&x)[8], unsigned sh, unsigned (&out)[4]) {
  const unsigned bits = (sh & 3u) * 8u;  // 0 or 16 bits past the whole words
  switch (sh >> 2) {
    case 0:
      for (int k = 0; k < 4; ++k) out[k] = funnel_shift_right(x[k], x[k + 1], bits);
      break;
    case 1:
      for (int k = 0; k < 4; ++k) out[k] = funnel_shift_right(x[k + 1], x[k + 2], bits);
      break;
    case 2:
      for (int k = 0; k < 4; ++k) out[k] = funnel_shift_right(x[k + 2], x[k + 3], bits);
      break;
    default:
      for (int k = 0; k < 4; ++k) out[k] = funnel_shift_right(x[k + 3], x[k + 4], bits);
      break;
  }
}

}  // namespace tessel
