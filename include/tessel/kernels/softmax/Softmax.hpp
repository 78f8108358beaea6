// Softmax over the last dimension of a 2-D tensor (batch dimensions flattened by the caller),
// written in Tessel: each element read once and written once (rows that fit in registers), math
// in f32, PyTorch's semantics for -inf and NaN. Exponentials by the hardware's ex2 (fast_exp2):
// an output below 2^-126 times its row's largest (an entry more than ~87 below the row's maximum)
// is 0, not subnormal -- except for aligned rows with a shared tail (64 K), which keep exp2.
#pragma once

#include <string>

#include "tessel/Frontend.hpp"
#include "tessel/Jit.hpp"

namespace tessel::kernels {

enum class SoftmaxVariant {
  Rows,    // several rows per block, a warp (or fewer lanes) per row: short rows
  Row,     // one row per block spread over all threads: rows up to ~128 K elements
  Online,  // one row per block in chunks: running max and sum, then a normalizing pass
};
const char* softmax_variant_name(SoftmaxVariant v);

struct SoftmaxConfig {
  SoftmaxVariant variant = SoftmaxVariant::Rows;
  int threads = 256;
  int rows_per_block = 8;  // Rows only
  int block_N = 0;         // columns per tile (0: derived from N and the variant)
  // Rows only: the last `shared_vectors` 16-byte vectors of each thread's part of a row stay in
  // shared memory (FragmentStorage::shared_tail), the rest in registers, both as loaded (16-bit
  // inputs two to a register); exp is evaluated again for the output. For rows too long for
  // registers alone: a 64 K f16 row over 512 threads holds 6 vectors in registers and 10 in
  // shared memory, two blocks per SM, each element read once.
  int shared_vectors = 0;
  // Rows only ("w"): rows that do not start 16-byte aligned move through windows from the
  // aligned word before each (copy_window: every vector one aligned word), which needs block_N
  // >= N + 16 / element size - 1. The default for such rows with a shared tail (50257 f16:
  // rows:t512:r1:bn53248:s11:w); measured slower than the span and realigned loads for rows in
  // registers alone (docs/perf-notes.md, session 18). The Online variant's chunks of such rows
  // always start at that word.
  bool window = false;
  // "rows:t256:r8:bn1024", "rows:t512:r1:bn65536:s10", "rows:t512:r1:bn53248:s11:w": what
  // parse_softmax_config reads back.
  std::string describe() const;
};

// Reads VARIANT:tTHREADS[:rROWS][:bnBLOCK_N][:sVECTORS][:w] (colons or spaces); throws std::invalid_argument
// naming the field and the accepted form.
SoftmaxConfig parse_softmax_config(const std::string& text);

// The config the dispatcher picks for an M x N softmax of `dtype` (a tuned entry takes its
// place: choose_softmax_config): Rows for rows that fit in registers (with a shared tail where
// two such blocks fit an SM: 64 K f16, and rows that start unaligned such as 50257), Online
// beyond. (Row, the
// row staged in shared memory, is for the autotuner and explicit configs: measured slower.)
SoftmaxConfig default_softmax_config(long long M, long long N, DType dtype);
// The threads the dispatcher spreads one row of N elements over when registers hold it (3 to 8
// 16-byte vectors a thread): a power of two, or any whole number of warps where every power of
// two pads the row by more than a tenth (8193 f16: 352); 0 when no such split exists.
long long softmax_row_lanes(long long N, DType dtype);

PrimFunc softmax_program(long long M, long long N, DType dtype, const SoftmaxConfig& c);
JitKernel make_softmax(long long M, long long N, DType dtype, const SoftmaxConfig& c,
                       const JitOptions& options = {});

// The config a default entry point compiles, and whether the tuning cache gave it.
struct SoftmaxChoice {
  SoftmaxConfig config{};
  bool tuned = false;
};
// The tuning cache's entry for this shape, dtype and GPU when `tessel tune softmax` stored one,
// else default_softmax_config. Never throws for want of a GPU or a cache.
SoftmaxChoice choose_softmax_config(long long M, long long N, DType dtype);
// make_softmax with choose_softmax_config's config: the library's entry point.
JitKernel make_softmax(long long M, long long N, DType dtype);

}  // namespace tessel::kernels
