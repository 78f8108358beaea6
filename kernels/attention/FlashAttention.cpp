#include "tessel/kernels/attention/FlashAttention.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <sstream>

#include "Lower.hpp"
#include "tessel/autotune/Autotune.hpp"
#include "tessel/runtime/Driver.hpp"

namespace tessel::kernels {

namespace T = tessel;

namespace {

std::vector<std::int64_t> row_major(const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> s(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) s[d] = s[d + 1] * shape[d + 1];
  return s;
}

std::string list_text(const std::vector<std::int64_t>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

std::vector<Expr> exprs(const std::vector<std::int64_t>& v) {
  std::vector<Expr> out;
  for (std::int64_t x : v) out.emplace_back(static_cast<long long>(x));
  return out;
}

// The columns the head dimension occupies in the tiles: the gemms step K by 16, so D rounds up
// to a multiple of 16; the copies zero-fill the extra columns (past the tensors' last dimension).
std::int64_t padded_dim(std::int64_t D) {
  return (D + 15) / 16 * 16;
}

constexpr double kLog2e = 1.4426950408889634;

}  // namespace

std::string AttentionShape::describe() const {
  std::ostringstream s;
  s << "B" << batch << " H" << heads << "/" << kv_heads << " Sq" << seqlen_q << " Sk" << seqlen_k << " D"
    << dim;
  return s.str();
}

std::vector<std::int64_t> bhsd_strides(std::int64_t B, std::int64_t S, std::int64_t H, std::int64_t D) {
  (void)B;
  return {H * S * D, D, S * D, 1};
}

const char* schedule_name(AttentionConfig::Schedule s) {
  switch (s) {
    case AttentionConfig::Schedule::ring_pingpong:
      return "ring+pingpong";
    case AttentionConfig::Schedule::ring:
      return "ring";
    case AttentionConfig::Schedule::cp_async:
      return "cp.async";
  }
  return "?";
}

bool has_ring_schedules(const std::string& arch) {
  return arch.rfind("sm_90", 0) == 0;
}

std::string AttentionConfig::describe() const {
  return std::to_string(block_M) + "x" + std::to_string(block_N) + " s" + std::to_string(num_stages) + " t" +
         std::to_string(threads) + " " + schedule_name(schedule) + (persistent ? " persistent" : "") +
         (kv_interleave ? " kv-interleaved" : "") +
         (poly_exp_one_in ? " poly-exp 1/" + std::to_string(poly_exp_one_in) : "") +
         (lazy_rescale ? " lazy-rescale" : "");
}

void check_attention(const AttentionShape& s, DType dtype) {
  const auto where = std::source_location::current();
  const char* op = "flash_attention";
  if (dtype != DType::f16 && dtype != DType::bf16)
    TESSEL_USER_ERROR(op, where, "Q, K and V are " << dtype_name(dtype) << "; legal: f16 or bf16");
  auto positive = [&](const char* what, std::int64_t v) {
    if (v < 1 || v > (std::int64_t(1) << 31) - 1)
      TESSEL_USER_ERROR(op, where, what << " is " << v << "; legal: 1 .. 2^31 - 1");
  };
  positive("the batch size B", s.batch);
  positive("the number of query heads H", s.heads);
  positive("the number of key/value heads H_kv", s.kv_heads);
  positive("the query length Sq", s.seqlen_q);
  positive("the key length Sk", s.seqlen_k);
  if (s.heads % s.kv_heads != 0)
    TESSEL_USER_ERROR(op, where,
                      "Q has H = " << s.heads << " heads and K/V have H_kv = " << s.kv_heads
                                   << "; H must be a multiple of H_kv (MHA: equal, GQA: a divisor, MQA: 1)");
  if (s.dim < 8 || s.dim > 256 || s.dim % 8 != 0)
    TESSEL_USER_ERROR(op, where,
                      "the head dimension D is " << s.dim << "; legal: a multiple of 8 from 8 to 256");
  if (s.seqlen_q > 65535 * std::int64_t(128) && s.heads > 65535)
    TESSEL_USER_ERROR(op, where, "H = " << s.heads << " heads; the grid takes at most 65535");
  if (s.heads > 65535 || s.batch > 65535)
    TESSEL_USER_ERROR(
        op, where,
        "B = " << s.batch << ", H = " << s.heads << "; the launch grid takes at most 65535 of each");
  auto check_strides = [&](const char* name, const std::vector<std::int64_t>& st) {
    if (st.empty()) return;
    if (st.size() != 4)
      TESSEL_USER_ERROR(
          op, where,
          name << " has " << st.size() << " strides; give 4, over [B, S, H, D] (or none: row-major)");
    if (st[3] != 1)
      TESSEL_USER_ERROR(
          op, where,
          name << " has stride " << st[3] << " along D; the head dimension must be contiguous (stride 1)");
    for (int d = 0; d < 3; ++d)
      if (st[d] < 1 || st[d] % 8 != 0)
        TESSEL_USER_ERROR(op, where,
                          name << " has strides " << list_text(st)
                               << "; strides along B, S and H must be positive multiples of 8 elements "
                                  "(16 bytes), so that rows start 16-byte aligned");
  };
  check_strides("Q", s.q_strides);
  check_strides("K", s.k_strides);
  check_strides("V", s.v_strides);
}

AttentionConfig default_attention_config(const AttentionShape& s, DType, bool causal,
                                         const std::string& arch) {
  // Every choice below was timed beside cuDNN in the same process; docs/perf-notes.md has the
  // figures under the session named (bench/results/ the JSON).
  using Schedule = AttentionConfig::Schedule;
  const std::int64_t dp = padded_dim(s.dim);
  // The keys a query row sees on average, the mask counted: how long a tile's loop runs.
  const double visible = s.batch > 0 && s.heads > 0 && s.seqlen_q > 0 && s.dim > 0
                             ? attention_flops(s, causal) / (4.0 * double(s.batch) * double(s.heads) *
                                                              double(s.seqlen_q) * double(s.dim))
                             : 0.0;
  // The base: 128 query rows over two warpgroups (one m64 wgmma each on sm_90a), two stages of
  // K and V; the key block shrinks as D grows so that S, P and O fit the registers together (and,
  // with less shared memory than Hopper's 227 KB, so that Q and the stages fit); cp.async copies
  // -- the one schedule off sm_90a, and at padded D <= 48 on it (no TMA ring: their rows take no
  // 128-byte swizzle).
  AttentionConfig c;
  c.block_M = 128;
  c.threads = 256;
  const bool hopper_smem = arch.rfind("sm_90", 0) == 0 || arch.rfind("sm_100", 0) == 0;
  c.block_N = dp <= 128 ? 128 : hopper_smem ? 64 : 32;
  c.num_stages = 2;
  c.schedule = Schedule::cp_async;
  if (!has_ring_schedules(arch) || dp < 64) return c;

  if (dp == 64) {
    // One 128-row block of queries (decode-like) or no visible key: the base.
    if (s.seqlen_q <= 64 || visible <= 0) return c;
    if (!causal && s.seqlen_q > 128 && visible >= 4096) {
      // Long non-causal loops: 192 query rows on three consumer warpgroups over the TMA ring
      // (FlashAttention 3's tile), persistent. Where 128 divides Sk, 128 keys a step in two stages
      // -- so that O += P V of block j - 1 is issued behind S = Q K^T of block j
      // (rotate_async_gemms): on an H100 in session 24, each beside cuDNN, 0.931 / 0.967x at S =
      // 4096 / 16384 against 0.897 / 0.949x for 160 keys in one stage. With a key tail the rotated
      // loop is split where the mask turns on and both parts rotate, which spills at the three
      // warpgroups' 160 registers (20-36 B, Sk = 4097 / 5000): there 160 keys in one stage, not
      // rotated (the tuner's pick of session 19; 0.89 / 0.94x cuDNN on the H200 in session 20).
      c.block_M = 192, c.threads = 384;
      if (s.seqlen_k % 128 == 0) {
        c.block_N = 128, c.num_stages = 2;
      } else {
        c.block_N = 160, c.num_stages = 1;
      }
      c.schedule = Schedule::ring;
      c.persistent = true;
      return c;
    }
    // Causal at every length, and shorter non-causal loops: one consumer warpgroup of 64 rows on
    // the ring, 128 keys a step in one stage -- session 20, the tuner's pick on an H100 (same
    // process as cuDNN: 1024 0.81 -> 0.94x, causal 1024 0.87 -> 0.97x, causal 4096 0.90 -> 1.01x,
    // causal 16384 0.98 -> 1.04x): four times the CTAs of the 128-row tile, each with a producer
    // warp, so short loops' prologues and epilogues overlap across CTAs and the mask's unequal
    // tiles balance in smaller pieces.
    c.block_M = 64, c.threads = 128, c.block_N = 128, c.num_stages = 1;
    c.schedule = Schedule::ring;
    // Lazy rescaling (with its skips of the O rescale): ahead of the exact max in three runs on an
    // H100 in sessions 31-32, each in one process with cuDNN -- causal 1024 +0.4 %, 4096 +1.3 %,
    // 16384 +3.5 %, non-causal 1024 a tie. With one consumer warpgroup nothing else issues while
    // its warps multiply O; the kernels with two or three lost up to 3.5 % at 16384 keys.
    c.lazy_rescale = true;
    return c;
  }

  // Wider heads on the TMA ring (padded D = 80-112 has none -- no 128-byte swizzle of V's rows --
  // so that request compiles as the cp.async kernel).
  if (!causal) {
    // The two warpgroups take turns (ping-pong: session 8, 534 against 497 TFLOP/s without on the
    // H200), persistent at D = 128 (one block per SM over the tiles, O stored by TMA: 1.04-1.10x
    // on the H200, session 14). D = 256's tiles leave no room for O's staging tile: not persistent.
    c.schedule = Schedule::ring_pingpong;
    c.persistent = dp == 128;
    return c;
  }
  if (dp == 128 && s.seqlen_q > c.block_M) {
    // Causal, more than one query block: turns and persistence again, and over long loops (more
    // than 768 keys a row) 256 keys a step in one stage -- session 20, the tuner's pick on an
    // H100 (same process as cuDNN: S = 1024 0.80 -> 0.92x, 4096 0.91 -> 1.00x, 16384 0.98 ->
    // 1.05x, GQA 0.82 -> 1.01x). Not causal the 256-key tile lost (0.79-0.85x): it pays only
    // where the mask leaves the loops short.
    c.schedule = Schedule::ring_pingpong;
    c.persistent = true;
    // With 256-key blocks lazy rescaling too (with its skips): +1 % at 4096 and +2 % at 16384 in
    // three runs on an H100 (sessions 31-32); at 128 keys a block it tied or lost.
    if (visible > 768) c.block_N = 256, c.num_stages = 1, c.lazy_rescale = true;
    return c;
  }
  // Causal otherwise (one query block at D = 128, or other widths): the ring without turns, which
  // cost more than they overlap when CTAs run few, unequal loops (session 8); persistent at
  // D = 128 over short loops (<= 768 keys a row: 1.06-1.10x, sessions 16 and 18).
  c.schedule = Schedule::ring;
  c.persistent = dp == 128 && visible > 0 && visible <= 768;
  return c;
}

AttentionChoice choose_attention_config(const AttentionShape& s, DType dtype, bool causal,
                                        const std::string& arch) {
  // A tuned entry holds a point of the space of the GPU's arch: it says nothing about kernels
  // compiled for another one.
  const bool gpu_arch = gpu_available() && current_device().arch() == arch;
  if (gpu_arch)
    if (auto tuned = autotune::tuned_attention_config(s, dtype, causal)) return {*tuned, true};
  return {default_attention_config(s, dtype, causal, arch), false};
}

double attention_flops(const AttentionShape& s, bool causal) {
  const double per_pair = 4.0 * double(s.batch) * double(s.heads) * double(s.dim);
  if (!causal) return per_pair * double(s.seqlen_q) * double(s.seqlen_k);
  if (s.seqlen_q == s.seqlen_k) return per_pair * double(s.seqlen_q) * double(s.seqlen_k) / 2;
  double pairs = 0;
  for (std::int64_t i = 0; i < s.seqlen_q; ++i)
    pairs += double(std::clamp<std::int64_t>(i + s.seqlen_k - s.seqlen_q + 1, 0, s.seqlen_k));
  return per_pair * pairs;
}

PrimFunc attention_program(const AttentionShape& s, DType dtype, bool causal, float scale,
                           const AttentionConfig& c) {
  check_attention(s, dtype);
  const std::int64_t B = s.batch, H = s.heads, HKV = s.kv_heads, SQ = s.seqlen_q, SK = s.seqlen_k, D = s.dim;
  const int DP = static_cast<int>(padded_dim(D));
  const int BM = c.block_M, BN = c.block_N;
  if (!std::isfinite(scale))
    TESSEL_USER_ERROR("flash_attention", std::source_location::current(),
                      "the softmax scale is " << scale << "; legal: a finite value, or 0 for 1/sqrt(D)");
  if (scale == 0.0f) scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  if (c.poly_exp_one_in != 0 && (c.poly_exp_one_in < 2 || c.poly_exp_one_in > 16))
    TESSEL_USER_ERROR(
        "flash_attention", std::source_location::current(),
        "config " << c.describe() << " has poly_exp_one_in = " << c.poly_exp_one_in
                  << "; legal: 0 (every exponential on the MUFU unit) or 2 .. 16 (one group of 8 "
                     "key columns in that many on the FMA pipe)");
  auto strides = [&](const std::vector<std::int64_t>& st, std::int64_t S, std::int64_t heads) {
    return exprs(st.empty() ? row_major({B, S, heads, D}) : st);
  };
  // Exponentials in base 2: exp(x * scale) = exp2(x * scale * log2 e). With a positive scale the
  // running max is taken over the raw scores (scaling keeps their order) and the scale is folded
  // into each exponent, exp2(S * scale_log2 - m * scale_log2): one fused multiply-add and one
  // MUFU.EX2 per score (fast_exp2: results below 2^-126 are 0, probabilities that small do not
  // change a row whose largest is 1), where scaling the scores first costs a multiply more. A
  // negative scale reverses the order: its scores are scaled first and the max taken after. So
  // does the cp.async schedule: there ptxas hoists the fused multiply-adds ahead of the
  // exponentials at a cost of 4-14 registers (D = 64: 126 -> 130, causal 128 -> 142), past the
  // 128 a thread that let two 256-thread CTAs share an SM; the ring schedules' consumers have 240.
  const float scale_log2 = static_cast<float>(scale * kLog2e);
  const bool fold_scale = scale > 0.0f && c.schedule != AttentionConfig::Schedule::cp_async;
  const float unit = fold_scale ? scale_log2 : 1.0f;  // m to the exponents' (log2) units
  // AttentionConfig::lazy_rescale's slack, 8 in the exponents' units, in m's units (capped where
  // a tiny scale would make it overflow: a difference of m of 1e30 is then still at most 8 in
  // the exponents' units, since unit * 1e30 < 8).
  const float lazy_slack = static_cast<float>(std::min(8.0 / static_cast<double>(unit), 1e30));
  const Expr group = static_cast<int>(H / HKV);

  // Dimensions are i32 (check_attention keeps each below 2^31); element offsets are 64-bit.
  auto dim = [](std::int64_t v) { return Expr(static_cast<int>(v)); };
  T::PrimFunc f("flash_attention");
  auto Q = f.tensor("Q", {dim(B), dim(SQ), dim(H), dim(D)}, dtype, strides(s.q_strides, SQ, H));
  auto K = f.tensor("K", {dim(B), dim(SK), dim(HKV), dim(D)}, dtype, strides(s.k_strides, SK, HKV));
  auto V = f.tensor("V", {dim(B), dim(SK), dim(HKV), dim(D)}, dtype, strides(s.v_strides, SK, HKV));
  auto O = f.tensor("O", {dim(B), dim(SQ), dim(H), dim(D)}, dtype);
  auto LSE = f.tensor("LSE", {dim(B), dim(H), dim(SQ)}, T::f32);
  f.body([&] {
    T::Kernel(
        T::ceildiv(Expr(static_cast<int>(SQ)), BM), Expr(static_cast<int>(H)), Expr(static_cast<int>(B)),
        c.threads, [&](T::Var bx, T::Var hy, T::Var b) {
          auto Q_shared = T::alloc_shared({BM, DP}, dtype);
          auto K_shared = T::alloc_shared({BN, DP}, dtype);
          auto V_shared = T::alloc_shared({BN, DP}, dtype);
          auto S = T::alloc_fragment({BM, BN}, T::f32);
          auto P = T::alloc_fragment({BM, BN}, dtype);
          auto O_acc = T::alloc_fragment({BM, DP}, T::f32);
          auto m = T::alloc_fragment({BM}, T::f32);       // running row max (raw scores, or scaled ones)
          auto m_prev = T::alloc_fragment({BM}, T::f32);  // its value before this block of keys
          auto l = T::alloc_fragment({BM}, T::f32);       // running row sum of exp2(S - m)
          auto row_sum = T::alloc_fragment({BM}, T::f32);
          auto rescale = T::alloc_fragment({BM}, T::f32);
          auto m_exp = T::alloc_fragment({BM}, T::f32);   // m in the exponents' units, 0 for -inf
          auto inv_l = T::alloc_fragment({BM}, T::f32);
          auto lse = T::alloc_fragment({BM}, T::f32);
          // Causal: the query blocks in reverse order, so that a (batch, head)'s longest blocks
          // (the last rows see the most keys) are dispatched first and the grid's last wave is
          // its shortest work, not its longest (FlashAttention 2's order).
          const Expr q_block = causal ? T::ceildiv(Expr(static_cast<int>(SQ)), BM) - 1 - bx : Expr(bx);
          const Expr q0 = q_block * BM;
          // The query head of blockIdx.y, and its K/V head. Interleaved (GQA, config
          // kv_interleave): consecutive y take consecutive K/V heads, so that the blocks running
          // at once read H_kv-fold fewer copies of one K/V head's tiles each -- a hypothesis
          // about L2 (docs/perf-notes.md, session 19), opt-in until measured.
          const bool interleave = c.kv_interleave && HKV < H;
          const Expr h = interleave ? (hy % static_cast<int>(HKV)) * group + hy / static_cast<int>(HKV) : Expr(hy);
          const Expr hk = interleave ? hy % static_cast<int>(HKV) : h / group;
          const Expr sq = static_cast<int>(SQ), sk = static_cast<int>(SK);
          T::copy(T::region(Q, {b, q0, h, 0}, {1, BM, 1, DP}), Q_shared);
          T::clear(O_acc);
          T::fill(m, -T::infinity(T::f32));
          T::clear(l);
          // Query row i sees keys j <= i + SK - SQ (bottom-right aligned). The blocks of keys past
          // what the block's last row sees are skipped; the blocks whose last key is past what its
          // first row sees, or past SK, are masked.
          const Expr key_blocks = T::ceildiv(sk, BN);
          const Expr last_visible = q0 + (BM - 1) + (sk - sq);  // of the block's last row
          const Expr blocks =
              causal ? T::max(T::min(T::ceildiv(last_visible + 1, BN), key_blocks), 0) : key_blocks;
          T::Pipelined(blocks, c.num_stages, [&](T::Var j) {
            T::copy(T::region(K, {b, j * BN, hk, 0}, {1, BN, 1, DP}), K_shared);
            T::copy(T::region(V, {b, j * BN, hk, 0}, {1, BN, 1, DP}), V_shared);
            T::clear(S);
            T::gemm(Q_shared, K_shared, S, /*transpose_A=*/false, /*transpose_B=*/true);
            const Expr block_end = (j + 1) * BN;  // one past the block's last key
            Expr masked = block_end > sk;
            if (causal) masked = masked || block_end - 1 > q0 + (sk - sq);
            T::If(masked, [&] {
              T::Parallel(BM, BN, [&](T::Var r, T::Var q) {
                const Expr key = j * BN + q;
                Expr visible = key < sk;
                if (causal) visible = visible && key <= q0 + r + (sk - sq);
                S(r, q) = T::if_then_else(visible, fold_scale ? Expr(S(r, q)) : S(r, q) * scale_log2,
                                          -T::infinity(T::f32));
              });
            });
            if (!fold_scale)
              T::If(!masked,
                    [&] { T::Parallel(BM, BN, [&](T::Var r, T::Var q) { S(r, q) = S(r, q) * scale_log2; }); });
            T::copy(m, m_prev);
            T::reduce_max(S, m, 1, /*clear=*/false);
            // Lazy rescaling: the previous max stays unless the new one passes it by more than
            // lazy_slack (2^8 in the exponentials). A row that had seen no key (m_prev = -inf,
            // and -inf + lazy_slack = -inf) takes any finite max.
            if (c.lazy_rescale)
              T::Parallel(BM, [&](T::Var r) {
                m(r) = T::if_then_else(m(r) > m_prev(r) + lazy_slack, m(r), m_prev(r));
              });
            // A row that has seen no key yet keeps m = -inf; it subtracts 0 instead (its scores are
            // all -inf, so its exponentials are 0), and its rescale is 1 (l and O are still 0).
            T::Parallel(BM, [&](T::Var r) {
              rescale(r) = T::if_then_else(m(r) == -T::infinity(T::f32), 1.0f,
                                           T::fast_exp2((m_prev(r) - m(r)) * unit));
              m_exp(r) = T::if_then_else(m(r) == -T::infinity(T::f32), 0.0f, m(r) * unit);
            });
            T::Parallel(BM, BN, [&](T::Var r, T::Var q) {
              const Expr x = fold_scale ? S(r, q) * scale_log2 - m_exp(r) : S(r, q) - m_exp(r);
              if (c.poly_exp_one_in == 0)
                S(r, q) = T::fast_exp2(x);
              else  // one group of 8 key columns in poly_exp_one_in on the FMA pipe
                S(r, q) = T::if_then_else(q / 8 % c.poly_exp_one_in == c.poly_exp_one_in - 1, T::poly_exp2(x),
                                          T::fast_exp2(x));
            });
            T::reduce_sum(S, row_sum, 1);
            T::Parallel(BM, [&](T::Var r) { l(r) = l(r) * rescale(r) + row_sum(r); });
            T::Parallel(BM, DP, [&](T::Var r, T::Var d) { O_acc(r, d) = O_acc(r, d) * rescale(r); });
            T::copy(S, P);
            T::gemm(P, V_shared, O_acc);
          });
          // Rows that saw no key (l = 0): O = 0, LSE = -inf. One reciprocal a row, a multiply an
          // element (a division an element took a range check and a slow path each).
          T::Parallel(BM, [&](T::Var r) { inv_l(r) = T::if_then_else(l(r) > 0.0f, 1.0f / l(r), 0.0f); });
          T::Parallel(BM, DP, [&](T::Var r, T::Var d) { O_acc(r, d) = O_acc(r, d) * inv_l(r); });
          T::Parallel(BM, [&](T::Var r) {
            lse(r) = T::if_then_else(l(r) > 0.0f, (m(r) * unit + T::log2(l(r))) * static_cast<float>(1.0 / kLog2e),
                                     -T::infinity(T::f32));
          });
          T::copy(O_acc, T::region(O, {b, q0, h, 0}, {1, BM, 1, DP}));
          T::copy(lse, T::region(LSE, {b, h, q0}, {1, 1, BM}));
        });
  });
  return f;
}

namespace {

// The arch a JitOptions::arch compiles for: as jit() reads it, the GPU's when empty (sm_90a
// without one).
std::string target_arch(const std::string& asked) {
  return !asked.empty() ? asked : gpu_available() ? current_device().arch() : "sm_90a";
}

}  // namespace

JitKernel make_flash_attention(const AttentionShape& s, DType dtype, const AttentionOptions& o) {
  const std::string arch = target_arch(o.jit.arch);
  const AttentionConfig c = o.config ? *o.config : choose_attention_config(s, dtype, o.causal, arch).config;
  if (c.persistent && c.schedule == AttentionConfig::Schedule::cp_async)
    TESSEL_USER_ERROR("flash_attention", std::source_location::current(),
                      "config " << c.describe()
                                << " is persistent on the cp.async schedule; persistence is for the ring schedules "
                                   "(ring or ring+pingpong)");
  JitOptions jo = o.jit;
  jo.arch = arch;
  return jit(attention_program(s, dtype, o.causal, o.scale, c), attention_jit_options(s, c, jo));
}

JitOptions attention_jit_options(const AttentionShape& s, const AttentionConfig& c, const JitOptions& base) {
  JitOptions jo = base;
  const std::string arch = target_arch(base.arch);
  jo.persistent_rings = jo.persistent_rings || (c.persistent && has_ring_schedules(arch));
  // Lazy rescaling leaves most rescale factors exactly 1; skipping the multiplies by them is what
  // it pays through (alone it measured within the run-to-run spread: perf-notes, session 31).
  // jo.disable_unit_scale_skips still wins.
  jo.unit_scale_skips = jo.unit_scale_skips || c.lazy_rescale;
  jo.out_idx = {3, 4};
  jo.disable_async_pipeline = jo.disable_async_pipeline || c.schedule == AttentionConfig::Schedule::cp_async;
  jo.disable_pingpong = jo.disable_pingpong || c.schedule != AttentionConfig::Schedule::ring_pingpong;
  // The cp.async schedule at D <= 64 runs two 256-thread CTAs an SM (83 KB of shared memory
  // each): only under 128 registers. ptxas is told so rather than trusted to land there (it
  // moved from 126 to 129 registers when fold_proven_branches dropped a branch: one CTA an SM,
  // 0.56x cuDNN instead of 0.82x at 32x32x1024^2, H100, session 19).
  // (Only for blocks of up to 256 threads: at 384 the cap would be 85 registers, too few for a
  // wgmma of 192x128.)
  // Padded D = 64 only: at D = 40 (48 padded) the cap spills 36 bytes a thread, unmeasured.
  if (c.schedule == AttentionConfig::Schedule::cp_async && padded_dim(s.dim) == 64 && c.threads <= 256 &&
      jo.min_blocks_per_sm == 0)
    jo.min_blocks_per_sm = 2;
  // Three consumer warpgroups on the plain ring (192 query rows): P V of block j - 1 runs on the
  // tensor cores while the softmax of block j runs (rotate_async_gemms, FA3's intra-warpgroup
  // overlap), where the registers allow it. Measured (H100, session 19, bf16, cuDNN in the same
  // process): D = 64 S = 4096 0.86x against 0.84x, S = 16384 0.92x against 0.88x, causal 16384
  // unchanged; on the 128-row ring at D = 128 it lost (0.80x against 0.84x), so only here.
  if (c.schedule == AttentionConfig::Schedule::ring && c.block_M == 192) jo.rotate_gemm_loops = true;
  return jo;
}

AttentionOutput flash_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o,
                                CUstream stream) {
  const auto where = std::source_location::current();
  const char* op = "flash_attention";
  const std::pair<const char*, const Tensor*> args[] = {{"Q", &q}, {"K", &k}, {"V", &v}};
  for (const auto& [name, t] : args) {
    if (!t->defined()) TESSEL_USER_ERROR(op, where, name << " is an undefined tensor");
    if (t->dim() != 4)
      TESSEL_USER_ERROR(op, where,
                        name << " is " << t->describe()
                             << "; Q, K and V are 4-D: [B, S, H, D] (a BHSD tensor "
                             << "passes as its permute({0, 2, 1, 3}) view)");
  }
  if (k.dtype() != q.dtype() || v.dtype() != q.dtype())
    TESSEL_USER_ERROR(op, where,
                      "Q is " << dtype_name(q.dtype()) << ", K " << dtype_name(k.dtype()) << ", V "
                              << dtype_name(v.dtype()) << "; all three must have one dtype (f16 or bf16)");
  if (k.shape() != v.shape())
    TESSEL_USER_ERROR(op, where,
                      "K is " << k.describe() << " but V is " << v.describe() << "; they must match");
  if (k.size(0) != q.size(0) || k.size(3) != q.size(3))
    TESSEL_USER_ERROR(op, where,
                      "Q is " << q.describe() << " and K " << k.describe()
                              << "; they must agree in B (dimension 0) and D (dimension 3)");
  AttentionShape s;
  s.batch = q.size(0);
  s.seqlen_q = q.size(1);
  s.heads = q.size(2);
  s.dim = q.size(3);
  s.seqlen_k = k.size(1);
  s.kv_heads = k.size(2);
  // Strides of dimensions of size 1 do not matter: normalize them so that equal views share a
  // kernel.
  auto strides_of = [](const Tensor& t) {
    std::vector<std::int64_t> st = t.strides();
    const std::vector<std::int64_t> rm = Tensor::row_major_strides(t.shape());
    if (t.is_contiguous()) return std::vector<std::int64_t>{};
    for (int d = 0; d < 4; ++d)
      if (t.size(d) == 1) st[d] = rm[d];
    return st;
  };
  s.q_strides = strides_of(q);
  s.k_strides = strides_of(k);
  s.v_strides = strides_of(v);
  for (const auto& [name, t] : args)
    if (t->device_ptr() % 16 != 0)
      TESSEL_USER_ERROR(op, where, name << " starts at a device address that is not 16-byte aligned");
  check_attention(s, q.dtype());

  // One compiled kernel per (shape, strides, dtype, options): a repeated call costs a map lookup.
  std::ostringstream key;
  key << s.describe() << " q" << list_text(s.q_strides) << " k" << list_text(s.k_strides) << " v"
      << list_text(s.v_strides) << " " << dtype_name(q.dtype()) << (o.causal ? " causal" : "") << " scale "
      << o.scale << " config " << (o.config ? o.config->describe() : "default") << " arch " << o.jit.arch
      << " smem_cap " << o.jit.smem_cap_bytes
      // Every switch the options and the environment set (a kernel built under others -- async
      // gemms off, the loop rotated, persistence -- is another kernel; the key once held only
      // four of them, and a call with rotate_gemm_loops got the default's kernel).
      << " " << switches_text(jit_switches(o.jit));
  static std::mutex mutex;
  static std::map<std::string, JitKernel> kernels;
  JitKernel kernel;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = kernels.find(key.str());
    if (it != kernels.end()) kernel = it->second;
  }
  if (!kernel.defined()) {
    kernel = make_flash_attention(s, q.dtype(), o);
    std::lock_guard<std::mutex> lock(mutex);
    kernels.emplace(key.str(), kernel);
  }
  AttentionOutput out;
  out.O = Tensor::empty({s.batch, s.seqlen_q, s.heads, s.dim}, q.dtype());
  out.LSE = Tensor::empty({s.batch, s.heads, s.seqlen_q}, DType::f32);
  kernel.launch({q, k, v, out.O, out.LSE}, stream);
  return out;
}

}  // namespace tessel::kernels
