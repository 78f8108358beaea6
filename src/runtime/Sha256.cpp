// SHA-256 (FIPS 180-4), for cache keys, and HMAC-SHA256 (RFC 2104), for the MAC of cache entries. Written out
// here rather than taken from OpenSSL so that the library has no dependency beyond NVRTC; speed is not
// critical (generated sources are tens of KB, cubins hundreds).
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>

#include "tessel/runtime/Cache.hpp"
#include "tessel/runtime/CacheFolder.hpp"

namespace tessel {

namespace {

constexpr std::uint32_t kRoundConstants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

constexpr std::uint32_t rotr(std::uint32_t x, int n) {
  return (x >> n) | (x << (32 - n));
}

class Sha256 {
 public:
  void update(const unsigned char* data, std::size_t size) {
    total_bytes_ += size;
    while (size > 0) {
      const std::size_t take = std::min(size, sizeof(block_) - block_used_);
      std::memcpy(block_ + block_used_, data, take);
      block_used_ += take;
      data += take;
      size -= take;
      if (block_used_ == sizeof(block_)) {
        compress(block_);
        block_used_ = 0;
      }
    }
  }

  std::array<unsigned char, 32> finish() {
    const std::uint64_t bit_length = total_bytes_ * 8;
    const unsigned char pad = 0x80;
    update(&pad, 1);
    const unsigned char zero = 0;
    while (block_used_ != 56) update(&zero, 1);
    unsigned char length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(bit_length >> (56 - 8 * i));
    update(length, 8);
    std::array<unsigned char, 32> digest{};
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < 4; ++j) digest[4 * i + j] = static_cast<unsigned char>(state_[i] >> (24 - 8 * j));
    return digest;
  }

 private:
  void compress(const unsigned char* block) {
    std::uint32_t w[64];
    for (int i = 0; i < 16; ++i)
      w[i] = (std::uint32_t{block[4 * i]} << 24) | (std::uint32_t{block[4 * i + 1]} << 16) |
             (std::uint32_t{block[4 * i + 2]} << 8) | std::uint32_t{block[4 * i + 3]};
    for (int i = 16; i < 64; ++i) {
      const std::uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      const std::uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    std::uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3];
    std::uint32_t e = state_[4], f = state_[5], g = state_[6], h = state_[7];
    for (int i = 0; i < 64; ++i) {
      const std::uint32_t s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
      const std::uint32_t choose = (e & f) ^ (~e & g);
      const std::uint32_t t1 = h + s1 + choose + kRoundConstants[i] + w[i];
      const std::uint32_t s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
      const std::uint32_t majority = (a & b) ^ (a & c) ^ (b & c);
      const std::uint32_t t2 = s0 + majority;
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    state_[0] += a, state_[1] += b, state_[2] += c, state_[3] += d;
    state_[4] += e, state_[5] += f, state_[6] += g, state_[7] += h;
  }

  std::uint32_t state_[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                             0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  unsigned char block_[64] = {};
  std::size_t block_used_ = 0;
  std::uint64_t total_bytes_ = 0;
};

std::string to_hex(const std::array<unsigned char, 32>& digest) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(64, '0');
  for (int i = 0; i < 32; ++i) {
    out[2 * i] = kHex[digest[i] >> 4];
    out[2 * i + 1] = kHex[digest[i] & 0xf];
  }
  return out;
}

std::array<unsigned char, 32> sha256(std::string_view data) {
  Sha256 hasher;
  hasher.update(reinterpret_cast<const unsigned char*>(data.data()), data.size());
  return hasher.finish();
}

}  // namespace

std::string sha256_hex(std::string_view data) {
  return to_hex(sha256(data));
}

std::string hmac_sha256_hex(std::string_view key, std::string_view data) {
  constexpr std::size_t kBlock = 64;
  unsigned char block_key[kBlock] = {};
  if (key.size() > kBlock) {
    const auto digest = sha256(key);
    std::memcpy(block_key, digest.data(), digest.size());
  } else {
    std::memcpy(block_key, key.data(), key.size());
  }
  unsigned char pad[kBlock];
  for (std::size_t i = 0; i < kBlock; ++i) pad[i] = block_key[i] ^ 0x36;
  Sha256 inner;
  inner.update(pad, kBlock);
  inner.update(reinterpret_cast<const unsigned char*>(data.data()), data.size());
  const auto inner_digest = inner.finish();
  for (std::size_t i = 0; i < kBlock; ++i) pad[i] = block_key[i] ^ 0x5c;
  Sha256 outer;
  outer.update(pad, kBlock);
  outer.update(inner_digest.data(), inner_digest.size());
  return to_hex(outer.finish());
}

}  // namespace tessel
