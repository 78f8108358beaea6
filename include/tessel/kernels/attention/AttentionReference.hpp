// Attention in float64 on sampled rows: the reference that multi-head attention kernels (Tessel's
// FlashAttention, cuDNN's SDPA) are checked against, by the bench, the tests and the tutorial.
//
// Same meaning as tessel/kernels/attention/FlashAttention.hpp: O = softmax(scale * Q K^T) V per (batch,
// head), head h reading K/V head h / (H / H_kv); causal: query i sees keys j <= i + Sk - Sq; a row
// that sees no key has O = 0 and LSE = -inf; LSE is the natural log of the row's sum of
// exp(scaled score). Rows are sampled because a full reference at the benchmarks' sizes (16 K x
// 16 K per head) would take hours on the host.
#pragma once

#include <cstdint>
#include <vector>

#include "tessel/kernels/attention/FlashAttention.hpp"

namespace tessel::kernels {

// One query row of one (batch, head).
struct AttentionSample {
  std::int64_t batch = 0, head = 0, row = 0;
  bool operator==(const AttentionSample&) const = default;
};

// Rows spread over every (batch, head): (b, h) pairs evenly spread over all B * H of them (all
// of them when there are at most max_pairs; always the first and the last), and in each, the first
// and last query rows, rows evenly between, and one row that moves from pair to pair (so that
// rows between the even ones are seen too). rows_per_pair counts the first, last and even ones.
std::vector<AttentionSample> choose_attention_samples(const AttentionShape& s, int max_pairs = 16,
                                                      int rows_per_pair = 4);

// O rows and LSE of the samples, in sample order.
struct AttentionRows {
  std::vector<double> O{};    // [samples, D]
  std::vector<double> LSE{};  // [samples]
};

// The float64 reference. q is [B, Sq, H, D], k and v [B, Sk, H_kv, D], all logical row-major
// (whatever the device strides were); s's strides are ignored. scale: 0 means 1/sqrt(D).
// Throws std::invalid_argument when the sizes do not match the shape or H_kv does not divide H.
AttentionRows attention_reference(const std::vector<double>& q, const std::vector<double>& k,
                                  const std::vector<double>& v, const AttentionShape& s, bool causal,
                                  double scale, const std::vector<AttentionSample>& samples);

struct AttentionError {
  double O = 0;    // ||O - O_ref||_F / ||O_ref||_F over the sampled rows
  double LSE = 0;  // the same over the LSE values; -inf where the reference is -inf counts as equal
};

// The relative Frobenius errors of `got` against `ref` (same samples, same order). Infinity when
// `got` holds a NaN or an infinity (other than an LSE of -inf where the reference has -inf), or
// when the reference is all zeros and `got` is not. Throws std::invalid_argument on size mismatch.
AttentionError attention_error(const AttentionRows& ref, const AttentionRows& got);

}  // namespace tessel::kernels
