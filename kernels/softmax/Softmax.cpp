#include "tessel/kernels/softmax/Softmax.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "tessel/autotune/Autotune.hpp"

namespace tessel::kernels {

namespace T = tessel;

namespace {

constexpr double kLog2e = 1.4426950408889634;

long long round_up(long long x, long long m) {
  return (x + m - 1) / m * m;
}
// Threads per row for the Rows variant beyond N = 1024: a power of two up to 1024 giving each
// thread 3 to 8 vectors, scored by padding (vectors past N), distance from four vectors, and
// more than 8 warps (cross-warp reductions); 0 when no such split exists (rows too long).
// Where every power of two pads the row by more than a tenth (8193 f16: 1025 vectors on 256
// lanes x 5 = 1280 slots), any whole number of warps is a candidate too (352 lanes x 3 = 1056):
// the odd-width kernels are bound by instruction issue (ncu, session 19: 0.68-0.80 warps issued
// per scheduler cycle against 0.30 for the aligned 8192), and padded slots cost instructions.
long long rows_lanes(long long N, long long vec) {
  const long long vectors = (N + vec - 1) / vec;
  long long best = 0;
  double best_score = 1e9, best_padding = 1e9;
  auto consider = [&](long long lanes) {
    const long long v = (vectors + lanes - 1) / lanes;
    // The row's floats plus ~24 registers of addressing and reductions within the register file
    // share of a thread of a `lanes`-thread block (64 K registers per SM, at most 255 each).
    const long long regs = std::min<long long>(255, 65536 / std::max<long long>(128, lanes));
    if (v < 3 || v > 8 || v * vec + 24 > regs) return;
    const double padding = static_cast<double>(lanes * v - vectors) / static_cast<double>(vectors);
    const double score = padding + 0.02 * static_cast<double>(v > 4 ? v - 4 : 4 - v) + (lanes > 256 ? 0.03 : 0.0);
    if (score < best_score) best_score = score, best = lanes, best_padding = padding;
  };
  for (long long lanes = 32; lanes <= 1024; lanes *= 2) consider(lanes);
  if (best_padding > 0.1)
    for (long long lanes = 160; lanes <= 1024; lanes += 32)  // a whole block a row: more than 128
      if (lanes & (lanes - 1)) consider(lanes);
  return best;
}
// Vectors per thread kept in shared memory when one row is spread over 512 threads with 2 of
// each thread's vectors in registers, if two such blocks fit in an SM's shared memory (228 KB on
// sm_90; on sm_80's 164 KB the same config runs one block per SM); 0 otherwise.
long long split_row_tail(long long N, long long vec) {
  const long long vectors = (N + 512 * vec - 1) / (512 * vec);
  const long long tail = vectors - 2;
  if (tail < 1) return 0;
  const long long bytes = 512 * tail * 16 + 256 + 1024;  // slots, reduction scratch, reserved
  return 2 * bytes <= 233472 ? tail : 0;
}
long long next_pow2(long long x) {
  long long p = 1;
  while (p < x) p *= 2;
  return p;
}

// Whether the rows variant reads each row through a window that starts at the aligned word at
// or before it (softmax_program, copy_window): rows whose starts are not all 16-byte aligned, a
// tile with room for the shift, and a shared tail -- where it was measured to pay (H200, session
// 18: 10000x50257 f16 66.3 % of copy against 35 % online). Rows held in registers alone keep the
// span or realigned loads, which beat the window there (127 f16: 76.0 % against 27.5 %; 1023:
// 78.9 % against 63.0 %; 8191: 77.0 % against 65.6 %; docs/perf-notes.md).
bool row_window(const SoftmaxConfig& c, long long N, long long BN, DType dtype) {
  const long long vec = 16 / dtype_bytes(dtype);
  return c.variant == SoftmaxVariant::Rows && c.window && N % vec != 0 && BN >= N + vec - 1;
}

// exp(x - m) as exp2(x * log2 e - m * log2 e): one FFMA per element (m * log2 e is the row's,
// computed once) and the fast exp2 unit. The (x - m) * log2 e form costs an FADD and an FMUL:
// 93.6 % against 89.6 % of copy at N = 16384 (bench/results/2026-12-03-softmax-s5-harness-h200.txt).
// fast_exp2 is one MUFU.EX2 where exp2 adds a compare and two multiplies to keep results below
// 2^-126 subnormal; those flush to 0 (as FlashAttention's probabilities do): 2^-126 of a row's
// largest entry, below every output dtype's resolution of the result (f16's smallest step is
// 2^-24; the row's sum is at least 1). The odd widths are bound by instruction issue (ncu,
// session 19): three instructions of ~30 an element. Aligned rows with a shared tail keep exp2:
// that kernel runs at 64 registers a thread (two blocks of 512 an SM), is memory-bound (97 % of
// copy at 64 K), and with fast_exp2 ptxas's schedule spilled 8 bytes there (f16); its windowed
// form (unaligned rows, 50257) takes fast_exp2 with no spill (f16, bf16).
Expr exp_minus(Expr x, Expr m, bool fast = true) {
  const Expr e = x * float(kLog2e) - m * float(kLog2e);
  return fast ? T::fast_exp2(e) : T::exp2(e);
}

// NaN-propagating max (PyTorch): a NaN anywhere in a row makes the row NaN.
Expr max_nan(Expr a, Expr b) {
  return T::select(a != a || a > b, a, b);
}

}  // namespace

const char* softmax_variant_name(SoftmaxVariant v) {
  switch (v) {
    case SoftmaxVariant::Rows:
      return "rows";
    case SoftmaxVariant::Row:
      return "row";
    case SoftmaxVariant::Online:
      return "online";
  }
  return "?";
}

std::string SoftmaxConfig::describe() const {
  std::string s = std::string(softmax_variant_name(variant)) + ":t" + std::to_string(threads);
  if (variant == SoftmaxVariant::Rows) s += ":r" + std::to_string(rows_per_block);
  if (block_N) s += ":bn" + std::to_string(block_N);
  if (shared_vectors) s += ":s" + std::to_string(shared_vectors);
  if (window) s += ":w";
  return s;
}

SoftmaxConfig parse_softmax_config(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return std::invalid_argument("softmax config '" + text + "': " + why +
                                 " (expected VARIANT:tTHREADS[:rROWS][:bnBLOCK_N][:sVECTORS][:w], VARIANT one of rows, "
                                 "row, online; e.g. rows:t256:r8:bn1024 or rows:t512:r1:bn65536:s10)");
  };
  std::vector<std::string> parts;
  std::string cur;
  for (char ch : text) {
    if (ch == ':' || ch == ' ') {
      if (!cur.empty()) parts.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  if (!cur.empty()) parts.push_back(cur);
  if (parts.empty()) throw bad("empty");
  SoftmaxConfig c;
  if (parts[0] == "rows")
    c.variant = SoftmaxVariant::Rows;
  else if (parts[0] == "row")
    c.variant = SoftmaxVariant::Row;
  else if (parts[0] == "online")
    c.variant = SoftmaxVariant::Online;
  else
    throw bad("unknown variant '" + parts[0] + "'");
  c.rows_per_block = c.variant == SoftmaxVariant::Rows ? 8 : 1;
  bool have_threads = false;
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string& p = parts[i];
    if (p == "w") {
      if (c.variant != SoftmaxVariant::Rows) throw bad("w (row windows) applies to the rows variant only");
      c.window = true;
      continue;
    }
    size_t digits = p.find_first_of("0123456789");
    if (digits == std::string::npos || digits == 0) throw bad("field '" + p + "' has no prefix or no number");
    const std::string key = p.substr(0, digits);
    int value = 0;
    try {
      size_t used = 0;
      value = std::stoi(p.substr(digits), &used);
      if (digits + used != p.size()) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      throw bad("field '" + p + "' is not a number");
    }
    if (value <= 0) throw bad("field '" + p + "' must be positive");
    if (key == "t") {
      c.threads = value;
      have_threads = true;
    } else if (key == "r") {
      if (c.variant != SoftmaxVariant::Rows) throw bad("rROWS applies to the rows variant only");
      c.rows_per_block = value;
    } else if (key == "bn") {
      c.block_N = value;
    } else if (key == "s") {
      if (c.variant != SoftmaxVariant::Rows) throw bad("sVECTORS applies to the rows variant only");
      c.shared_vectors = value;
    } else {
      throw bad("unknown field '" + p + "'");
    }
  }
  if (!have_threads) throw bad("tTHREADS is required");
  return c;
}

long long softmax_row_lanes(long long N, DType dtype) {
  return rows_lanes(N, 16 / dtype_bytes(dtype));
}

SoftmaxConfig default_softmax_config(long long /*M*/, long long N, DType dtype) {
  const long long vec = 16 / dtype_bytes(dtype);
  SoftmaxConfig c;
  if (N <= 1024) {
    // Four vectors of a row per thread where the row is long enough (fewer shuffle steps per
    // element), at most a warp per row; enough rows that every thread has four 16-byte loads
    // in flight. infer_layouts makes the same choice of lanes for this tile.
    // Rows that do not all start 16-byte aligned keep a tile no wider than the row needs (the
    // span or realigned loads): windows (copy_window) measured slower here, H200 session 18 --
    // 127 f16 27.5 % of copy against 76.0 %, 1023 63.0 % against 78.9 % (docs/perf-notes.md).
    long long lanes = std::min<long long>(32, next_pow2((N + 4 * vec - 1) / (4 * vec)));
    long long bn = round_up(N, lanes * vec);
    // Half the lanes where that pads the row by 5 points less and needs at most five vectors a
    // thread: 129 f16 on 4 lanes x 5 vectors (20 % padding) rather than 8 x 3 (33 %). The odd
    // widths are bound by instruction issue, padded slots included (ncu, session 19): 129 f16 ran
    // 95.5 % of the copy against 75.2 % on an H100 (same call, rows:t256:r64:bn160 against
    // rows:t256:r32:bn192).
    if (const long long half = lanes / 2, bn_half = round_up(N, std::max<long long>(half, 1) * vec);
        half >= 1 && bn_half / (half * vec) <= 5 &&
        static_cast<double>(bn - bn_half) / static_cast<double>(N) > 0.05)
      lanes = half, bn = bn_half;
    long long chunks = bn / (lanes * vec);
    c.variant = SoftmaxVariant::Rows;
    c.threads = 256;
    long long rows_per_pass = c.threads / lanes;
    c.rows_per_block = static_cast<int>(rows_per_pass * std::max<long long>(1, 4 / chunks));
    c.block_N = static_cast<int>(bn);
  } else if (long long cols = N % vec ? N + vec - 1 : N, tail = split_row_tail(cols, vec), lanes = rows_lanes(cols, vec);
             tail > 0 && (N % (512 * vec) == 0 || N % vec != 0) &&
             (lanes == 0 || (lanes > 512 && dtype_bytes(dtype) == 2))) {
    // Rows that registers alone hold only in one block per SM (1024 lanes), or not at all: one
    // row per block of 512 threads, each thread's share as loaded, 2 vectors in registers and
    // the rest in shared memory, so that two blocks fit on an SM and one's loads overlap the
    // other's math. Measured (bench/results/2026-12-03-softmax-s5-runO-*-h200.json, f16): 65536
    // 97.1 % of copy (online 64.6 %), 32768 98.1 % (1024 lanes in registers 78.6 %); at 20480 the
    // registers alone (512 lanes) stay ahead, 98.4 % against 94.8 %. (f32 rows that need 1024
    // lanes keep them: not measured against the shared tail yet.)
    // Rows the tile divides, or rows that start unaligned (a window from the aligned word
    // before each, copy_window: whole words or the head and tail selected, no masked path): a
    // ragged row of aligned starts keeps its masked path beside the fast one, and the two
    // together spill at 64 registers (860 B at N = 65000).
    c.variant = SoftmaxVariant::Rows;
    c.threads = 512;
    c.rows_per_block = 1;
    c.block_N = static_cast<int>(round_up(cols, 512 * vec));
    c.shared_vectors = static_cast<int>(tail);
    c.window = N % vec != 0;
  } else if (long long lanes = rows_lanes(N, vec)) {
    // One row over `lanes` threads, 3 to 8 16-byte vectors each (all a thread's loads in flight
    // at once, registers low enough for several blocks per SM), the fewest padded vectors first.
    // Measured (bench/results/2026-12-02-softmax-s2-run2-h200.json, f16): N = 5000 on 128 lanes
    // x 5 vectors 99.5 % of copy against 86.1 % on 256 lanes x 3 (143 of 768 vectors padding);
    // N = 4096 on 128 x 4 98-99 %; N = 16384 on 512 x 4 89 %, 256 x 8 83-91 %.
    c.variant = SoftmaxVariant::Rows;
    c.threads = static_cast<int>(std::max<long long>(128, lanes));
    c.rows_per_block = static_cast<int>(c.threads / lanes);
    c.block_N = static_cast<int>(round_up(N, lanes * vec));
    // Rows that do not all start 16-byte aligned: through windows from the aligned word before
    // each row (copy_window: every vector one aligned word in and out, no span, no block
    // barrier before the store) on the lanes the windowed row needs, one row a block of at least
    // 128 lanes (the class measured; shorter rows keep the realigned loads), where that pads at
    // most 5 % more than the realigned loads' tile. Measured (H100, session 23, same process): 8191 f16
    // on 352 lanes x 3 99.3 % of copy against 98.4 % for 256 x 4 realigned; 8193 99.5 % against
    // 95.8 % (352 x 3 both). Session 18's windows lost on the H200 (8191: 65.6 % against 77.0 %)
    // on a tile that padded 25 % (256 x 5) and selected every element of the row's edges in
    // every warp; both are gone (docs/perf-notes.md, sessions 18 and 23).
    if (const long long cols = N + vec - 1, lanes_w = N % vec ? rows_lanes(cols, vec) : 0; lanes_w > 0) {
      const long long bn = round_up(cols, lanes_w * vec);
      if (lanes_w >= 128 && static_cast<double>(bn) <= 1.05 * static_cast<double>(c.block_N)) {
        c.threads = static_cast<int>(std::max<long long>(128, lanes_w));
        c.rows_per_block = static_cast<int>(c.threads / lanes_w);
        c.block_N = static_cast<int>(bn);
        c.window = true;
      }
    }
  } else {
    // Rows too long for registers: two passes over global memory (the second read mostly from
    // L2), the next chunk's loads in flight during the current chunk's reductions. Measured at
    // 65536 f16 (bench/results/2026-12-02-softmax-s2-run2-h200.json): t256 x 4096-element chunks
    // 64.9 % of copy, the best of the online and shared-memory Row configs tried (Row, one block
    // per SM with the row in shared memory, 35-55 %: its load, reduce and store phases do not
    // overlap).
    c.variant = SoftmaxVariant::Online;
    c.threads = 256;
    c.block_N = static_cast<int>(c.threads * vec * 2);
  }
  return c;
}

PrimFunc softmax_program(long long M, long long N, DType dtype, const SoftmaxConfig& c) {
  const long long vec = 16 / dtype_bytes(dtype);
  const int BN = c.block_N ? c.block_N : static_cast<int>(round_up(N, c.threads * vec));
  // The rows variant holds whole rows in one tile; a narrower tile would leave columns unread.
  if (c.variant == SoftmaxVariant::Rows && BN < N)
    throw std::invalid_argument("softmax config '" + c.describe() + "': block_N = " + std::to_string(BN) +
                                " is narrower than the row (N = " + std::to_string(N) +
                                "); the rows variant needs block_N >= N (or no bn field), or use the row or "
                                "online variant for rows this long");
  // Row windows shift a row by up to vec - 1 columns: the tile needs that much room.
  if (const long long vec_w = 16 / dtype_bytes(dtype); c.window && N % vec_w != 0 && BN < N + vec_w - 1)
    throw std::invalid_argument("softmax config '" + c.describe() + "': block_N = " + std::to_string(BN) +
                                " leaves no room for row windows (w) at N = " + std::to_string(N) +
                                "; they need block_N >= N + " + std::to_string(vec_w - 1) + " = " +
                                std::to_string(N + vec_w - 1) + " for " + std::string(dtype_name(dtype)) +
                                " (or drop w)");
  T::PrimFunc f("softmax");
  auto X = f.tensor("X", {Expr(M), Expr(N)}, dtype);
  auto Y = f.tensor("Y", {Expr(M), Expr(N)}, dtype);
  if (c.variant == SoftmaxVariant::Row) {
    // One row per block, read from global memory once into shared memory (all of it in flight at
    // once), then two passes over it in register chunks of BN: running max and sum, then
    // normalize and write. For rows too long for registers that still fit in shared memory.
    const long long chunks = (N + BN - 1) / BN;
    f.body([&] {
      T::Kernel(Expr(M), c.threads, [&](T::Var bx) {
        auto row = T::alloc_shared({1, static_cast<int>(chunks * BN)}, dtype);
        auto x = T::alloc_fragment({1, BN}, T::f32);
        auto m = T::alloc_fragment({1}, T::f32);
        auto s = T::alloc_fragment({1}, T::f32);
        auto chunk_max = T::alloc_fragment({1}, T::f32);
        auto chunk_sum = T::alloc_fragment({1}, T::f32);
        T::copy(X(bx, 0), row);  // columns past N read as zero
        // A chunk in registers; columns past N as -inf (only a ragged last chunk has them).
        auto load_chunk = [&](T::Var k) {
          T::copy(row(0, k * BN), x);
          if (N % BN != 0)
            T::Parallel(1, BN, [&](T::Var i, T::Var j) {
              x(i, j) = T::select(k * BN + j < Expr(N), x(i, j), -T::infinity(T::f32));
            });
        };
        T::fill(m, -T::infinity(T::f32));
        T::clear(s);
        T::Serial(chunks, [&](T::Var k) {
          load_chunk(k);
          T::reduce_max(x, chunk_max, 1);
          T::Parallel(1, [&](T::Var i) { chunk_max(i) = max_nan(chunk_max(i), m(i)); });
          T::Parallel(1, BN, [&](T::Var i, T::Var j) { x(i, j) = exp_minus(x(i, j), chunk_max(i)); });
          T::reduce_sum(x, chunk_sum, 1);
          T::Parallel(1, [&](T::Var i) {
            Expr scale = T::select(m(i) == chunk_max(i), 1.0f, exp_minus(m(i), chunk_max(i)));
            s(i) = s(i) * scale + chunk_sum(i);
            m(i) = chunk_max(i);
          });
        });
        T::Parallel(1, [&](T::Var i) { s(i) = 1.0f / s(i); });
        T::Serial(chunks, [&](T::Var k) {
          load_chunk(k);
          T::Parallel(1, BN, [&](T::Var i, T::Var j) { x(i, j) = exp_minus(x(i, j), m(i)) * s(i); });
          T::copy(x, Y(bx, k * BN));
        });
      });
    });
    return f;
  }
  if (c.variant == SoftmaxVariant::Rows && c.shared_vectors > 0) {
    // The rows as loaded (`raw`, in the input dtype), the last shared_vectors vectors of each
    // thread's share in shared memory: nothing is read twice even when a row is larger than the
    // registers. `x` is only ever a reduction's operand (each element dies as it is combined);
    // exp is evaluated again, on the same operands, for the output.
    const int R = c.rows_per_block;
    f.body([&] {
      T::Kernel(T::ceildiv(Expr(M), R), c.threads, [&](T::Var bx) {
        auto raw = T::alloc_fragment({R, BN}, dtype, T::FragmentStorage{c.shared_vectors});
        auto x = T::alloc_fragment({R, BN}, T::f32);
        auto row_max = T::alloc_fragment({R}, T::f32);
        auto row_sum = T::alloc_fragment({R}, T::f32);
        const bool window = row_window(c, N, BN, dtype);  // as in the variant below
        if (window)
          T::copy_window(X(bx * R, 0), raw, -T::infinity(dtype));
        else
          T::copy_padded(X(bx * R, 0), raw, -T::infinity(dtype));
        T::Parallel(R, BN, [&](T::Var i, T::Var j) { x(i, j) = T::cast(T::f32, raw(i, j)); });
        T::reduce_max(x, row_max, 1);
        T::Parallel(R, BN, [&](T::Var i, T::Var j) { x(i, j) = exp_minus(T::cast(T::f32, raw(i, j)), row_max(i), window); });
        T::reduce_sum(x, row_sum, 1);
        T::Parallel(R, [&](T::Var i) { row_sum(i) = 1.0f / row_sum(i); });
        T::Parallel(R, BN, [&](T::Var i, T::Var j) {
          raw(i, j) = T::cast(dtype, exp_minus(T::cast(T::f32, raw(i, j)), row_max(i), window) * row_sum(i));
        });
        if (window)
          T::copy_window(raw, Y(bx * R, 0));
        else
          T::copy(raw, Y(bx * R, 0));
      });
    });
    return f;
  }
  if (c.variant != SoftmaxVariant::Online) {
    const int R = c.variant == SoftmaxVariant::Rows ? c.rows_per_block : 1;
    f.body([&] {
      T::Kernel(T::ceildiv(Expr(M), R), c.threads, [&](T::Var bx) {
        auto x = T::alloc_fragment({R, BN}, T::f32);
        auto row_max = T::alloc_fragment({R}, T::f32);
        auto row_sum = T::alloc_fragment({R}, T::f32);
        // With the config's w, rows whose starts are not all multiples of 16 bytes (N % vec != 0)
        // go through windows: each row's tile starts at the aligned word at or before the row's
        // first element (copy_window), so that every vector is one aligned word in and out; the
        // columns before the row's start and past its end are padding (-inf in, not stored),
        // which softmax does not see.
        const bool window = row_window(c, N, BN, dtype);
        if (window)
          T::copy_window(X(bx * R, 0), x, -T::infinity(T::f32));
        else
          T::copy_padded(X(bx * R, 0), x, -T::infinity(T::f32));
        T::reduce_max(x, row_max, 1);
        T::Parallel(R, BN, [&](T::Var i, T::Var j) { x(i, j) = exp_minus(x(i, j), row_max(i)); });
        T::reduce_sum(x, row_sum, 1);
        T::Parallel(R, [&](T::Var i) { row_sum(i) = 1.0f / row_sum(i); });
        T::Parallel(R, BN, [&](T::Var i, T::Var j) { x(i, j) = x(i, j) * row_sum(i); });
        if (window)
          T::copy_window(x, Y(bx * R, 0));
        else
          T::copy(x, Y(bx * R, 0));
      });
    });
    return f;
  }
  // Online: pass 1 keeps a running max m and a running sum s of exp(x - m), rescaling s when
  // m grows; pass 2 reads the row again (mostly from L2) and writes exp(x - m) / s.
  // The chunks are software-pipelined by hand: `raw` holds the next chunk's bits as loaded (no
  // conversion, so nothing waits for them), issued before the current chunk's reductions, so a
  // chunk's loads are in flight while the block reduces the previous one. Pass 1's last prefetch
  // wraps around to chunk 0, which is what pass 2 reads first.
  f.body([&] {
    T::Kernel(Expr(M), c.threads, [&](T::Var bx) {
      auto raw = T::alloc_fragment({1, BN}, dtype);
      auto x = T::alloc_fragment({1, BN}, T::f32);
      auto m = T::alloc_fragment({1}, T::f32);
      auto s = T::alloc_fragment({1}, T::f32);
      auto chunk_max = T::alloc_fragment({1}, T::f32);
      auto chunk_sum = T::alloc_fragment({1}, T::f32);
      // Rows whose starts are not all 16-byte aligned go in chunks from the aligned word at or
      // before the row's start (see the rows variant): every vector one aligned word in and out.
      const bool window = N % vec != 0;
      const Expr col0 = window ? -((T::cast(T::i64, bx) * N) % vec) : Expr(0);
      const Expr chunks = T::ceildiv(Expr(window ? N + vec - 1 : N), BN);
      T::fill(m, -T::infinity(T::f32));
      T::clear(s);
      T::copy_padded(X(bx, col0), raw, -T::infinity(dtype));
      T::Serial(chunks, [&](T::Var k) {
        T::Parallel(1, BN, [&](T::Var i, T::Var j) { x(i, j) = T::cast(T::f32, raw(i, j)); });
        T::copy_padded(X(bx, col0 + ((k + 1) % chunks) * BN), raw, -T::infinity(dtype));
        T::reduce_max(x, chunk_max, 1);
        T::Parallel(1, [&](T::Var i) { chunk_max(i) = max_nan(chunk_max(i), m(i)); });
        T::Parallel(1, BN, [&](T::Var i, T::Var j) { x(i, j) = exp_minus(x(i, j), chunk_max(i)); });
        T::reduce_sum(x, chunk_sum, 1);
        T::Parallel(1, [&](T::Var i) {
          // exp(m - new m); equal maxima (both -inf included) scale by exactly 1.
          Expr scale = T::select(m(i) == chunk_max(i), 1.0f, exp_minus(m(i), chunk_max(i)));
          s(i) = s(i) * scale + chunk_sum(i);
          m(i) = chunk_max(i);
        });
      });
      T::Parallel(1, [&](T::Var i) { s(i) = 1.0f / s(i); });
      T::Serial(chunks, [&](T::Var k) {
        T::Parallel(
            1, BN, [&](T::Var i, T::Var j) { x(i, j) = exp_minus(T::cast(T::f32, raw(i, j)), m(i)) * s(i); });
        T::copy_padded(X(bx, col0 + (k + 1) * BN), raw, -T::infinity(dtype));
        T::copy(x, Y(bx, col0 + k * BN));
      });
    });
  });
  return f;
}

JitKernel make_softmax(long long M, long long N, DType dtype, const SoftmaxConfig& c,
                       const JitOptions& options) {
  JitOptions o = options;
  if (o.out_idx.empty()) o.out_idx = {-1};
  return jit(softmax_program(M, N, dtype, c), o);
}

SoftmaxChoice choose_softmax_config(long long M, long long N, DType dtype) {
  if (auto tuned = autotune::tuned_softmax_config(M, N, dtype)) return {*tuned, true};
  return {default_softmax_config(M, N, dtype), false};
}

JitKernel make_softmax(long long M, long long N, DType dtype) {
  return make_softmax(M, N, dtype, choose_softmax_config(M, N, dtype).config);
}

}  // namespace tessel::kernels
