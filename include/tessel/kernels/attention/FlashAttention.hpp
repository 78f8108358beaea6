// FlashAttention's forward pass, written in Tessel: O, LSE = attention(Q, K, V).
//
//   Q [B, Sq, H, D], K and V [B, Sk, H_kv, D] (H_kv divides H: multi-head, grouped-query and
//   multi-query attention), f16 or bf16, any element strides in the batch, sequence and head
//   dimensions (BSHD and BHSD are two stride orders of one logical tensor) with the head
//   dimension contiguous; O [B, Sq, H, D] in the inputs' dtype, row-major; LSE [B, H, Sq] f32:
//   each row's log-sum-exp of the scaled scores (natural log), what a backward pass needs.
//   O = softmax(scale * Q K^T) V per (batch, head), head h reading K/V head h / (H / H_kv).
//   Causal: query i sees keys j <= i + Sk - Sq (the mask aligned to the bottom-right corner,
//   as FlashAttention 2 does when Sq != Sk). A query row that sees no key gives O = 0 and
//   LSE = -inf.
//
// The program (attention_program) is the online-softmax loop over blocks of block_N keys for
// one block of block_M queries of one (batch, head): S = Q K^T, masked (sequence tail, causal
// diagonal blocks), m = max(m, rowmax(S)), P = exp(S - m), l = l * exp(m_old - m) + rowsum(P),
// O = O * exp(m_old - m) + P V; at the end O / l and LSE = m + log(l). Causal blocks above the
// diagonal are skipped by the loop's bound, not masked.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessel/Frontend.hpp"
#include "tessel/Jit.hpp"
#include "tessel/runtime/Tensor.hpp"

namespace tessel::kernels {

struct AttentionShape {
  std::int64_t batch = 1, heads = 1, kv_heads = 1;
  std::int64_t seqlen_q = 1, seqlen_k = 1;
  std::int64_t dim = 64;
  // Element strides of Q, K and V over [B, S, H, D]; empty: row-major [B, S, H, D] (BSHD).
  // The last stride must be 1.
  std::vector<std::int64_t> q_strides{}, k_strides{}, v_strides{};
  std::string describe() const;  // "B2 H16/16 Sq1024 Sk1024 D128"
};

// The strides of a [B, S, H, D] tensor stored as [B, H, S, D] (BHSD).
std::vector<std::int64_t> bhsd_strides(std::int64_t B, std::int64_t S, std::int64_t H, std::int64_t D);

struct AttentionConfig {
  int block_M = 128;  // query rows per block (64 per consumer warpgroup on sm_90a)
  int block_N = 128;  // keys per step of the loop
  int threads = 256;
  int num_stages = 2;  // of the K/V ring
  // How the loop over K/V blocks runs on sm_90a: a TMA ring that a producer warp(group) fills
  // (the compiler's Hopper pipeline), with the two consumer warpgroups taking turns for their
  // gemms (ping-pong) or not; or the cp.async schedule (every thread loads, block barriers).
  // Elsewhere it is always the cp.async schedule.
  enum class Schedule { ring_pingpong, ring, cp_async };
  Schedule schedule = Schedule::ring_pingpong;
  // One block per SM looping over the (query block, head, batch) tiles, its K/V ring carried
  // from tile to tile and O stored by TMA (JitOptions::persistent_rings for this kernel): the
  // ring schedules only -- a cp.async config that asks for it is an error; ignored off sm_90a,
  // where there are no rings.
  bool persistent = false;
  // GQA: blockIdx.y walks the query heads K/V head by K/V head -- y = 0, 1, 2, ... take query
  // heads 0, group, 2 group, ... (one of each K/V head) -- instead of head by head, so that the
  // blocks in flight at once share each K/V head's tiles among fewer of them. Opt-in, not yet
  // measured (the hypothesis behind it: GQA causal 0.82x cuDNN against 0.91x for the same kernel
  // and work without GQA, session 19); no effect without GQA.
  bool kv_interleave = false;
  // 0: every score's exponential is one MUFU.EX2 (fast_exp2). N (2 .. 16): in every N groups of
  // 8 key columns, the last group's exponentials are computed on the FMA pipe instead
  // (poly_exp2: relative error below 8.6e-5, far below P's 16-bit rounding), taking 1/N of the
  // exponentials off the MUFU unit, whose 16 a clock an SM take as long as the tensor cores'
  // work per key block at D = 64. Which registers hold such a group is known at compile time in
  // every accumulator layout (a thread's columns come in pairs inside one group of 8). Opt-in:
  // on an H100 at D = 64 every share measured slower (1/16 -1 to -4 %, 1/4 -10 to -13 %; the loop
  // is bound by instruction issue, docs/perf-notes.md session 30), so no default takes it.
  int poly_exp_one_in = 0;
  // Lazy rescaling (FlashAttention 4's): a row keeps the running max it has while the key block's
  // max exceeds it by at most 8 in the exponents' base-2 units, so that its exponentials are at
  // most 2^8 (P, l and O hold them easily: f16's largest is 65504) and its rescale factor is
  // exactly 1 -- and make_flash_attention compiles it with the compiler's skip_unit_scales
  // (JitOptions::unit_scale_skips; JitOptions::disable_unit_scale_skips keeps it off), which then
  // skips the rescale of O. O and LSE are the same mathematically (O / l and m + log l do not
  // depend on the max used); the rounding differs. default_attention_config takes it on the two
  // kernels where it measured ahead on an H100 (sessions 31-32: the 64-row one-consumer-warpgroup
  // ring at D = 64, +0.4 to +3.5 % causal; D = 128 causal's 256-key tile, +1 to +2 %); on the
  // 192-row and 128x128 ping-pong kernels it lost up to 3.5 % at 16384 keys.
  bool lazy_rescale = false;
  std::string describe() const;  // "128x128 s2 t256 ring+pingpong", " persistent" when it is, ...
  bool operator==(const AttentionConfig&) const = default;
};
// "ring+pingpong", "ring", "cp.async"
const char* schedule_name(AttentionConfig::Schedule s);
// Whether `arch` has the ring schedules: the compiler's TMA + mbarrier pipeline targets sm_90a
// (and wgmma); elsewhere every schedule runs as cp.async.
bool has_ring_schedules(const std::string& arch);

struct AttentionOptions {
  bool causal = false;
  // The softmax scale; 0 means 1/sqrt(D).
  float scale = 0.0f;
  // A config; unset: choose_attention_config's (a tuned one, else the built-in choice for the
  // shape class, D, causal, dtype and GPU).
  std::optional<AttentionConfig> config{};
  JitOptions jit{};
};

// Throws CompileError naming the tensor, the values and what is legal when the shape, dtype or
// strides cannot be run (H % H_kv, D not a multiple of 8 or over 256, a non-unit last stride).
void check_attention(const AttentionShape& s, DType dtype);

// The built-in config (a tuned entry takes its place: choose_attention_config). Off sm_90a the
// schedule is always cp.async.
AttentionConfig default_attention_config(const AttentionShape& s, DType dtype, bool causal,
                                         const std::string& arch);

// The config a default entry point compiles, and whether the tuning cache gave it.
struct AttentionChoice {
  AttentionConfig config;
  bool tuned = false;
};
// The tuning cache's entry for this shape (its strides' class included), causal, dtype and GPU
// when `tessel tune attention` stored one and `arch` is the GPU's own, else
// default_attention_config. Never throws for want of a GPU or a cache.
AttentionChoice choose_attention_config(const AttentionShape& s, DType dtype, bool causal,
                                        const std::string& arch);

// The forward pass's FLOPs: 4 B H Sq Sk D (two gemms, a multiply-add of length D per (query,
// key) pair each), halved when causal with Sq = Sk; causal with Sq != Sk counts the visible pairs
// exactly (query i sees min(max(i + Sk - Sq + 1, 0), Sk) keys).
double attention_flops(const AttentionShape& s, bool causal);

// The program, for the tuner and `tessel dump`: parameters Q, K, V, O, LSE in that order.
PrimFunc attention_program(const AttentionShape& s, DType dtype, bool causal, float scale,
                           const AttentionConfig& c);
// The options make_flash_attention compiles config `c` with: `base` (the caller's; its arch, or
// the GPU's, or sm_90a) with what the config implies on top -- its schedule's switches,
// persistence, the lazy config's skip_unit_scales, the occupancy of the cp.async kernel at D = 64,
// the rotated loop of the 192-row ring. The tuning space lowers its candidates with the same.
JitOptions attention_jit_options(const AttentionShape& s, const AttentionConfig& c, const JitOptions& base);
// The compiled program (outputs O and LSE allocated by call()); without o.config, with
// choose_attention_config's for o.jit.arch (the GPU's, or sm_90a without one).
JitKernel make_flash_attention(const AttentionShape& s, DType dtype, const AttentionOptions& o = {});

struct AttentionOutput {
  Tensor O{};    // [B, Sq, H, D], the inputs' dtype
  Tensor LSE{};  // [B, H, Sq], f32
};
// The library entry point: checks the tensors (ranks, dtypes, matching B and D, H % H_kv,
// strides), compiles (cached per shape, strides, causal, scale, dtype and config: without a
// config, the choice made at the first call stands for the process) and runs.
AttentionOutput flash_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                const AttentionOptions& o = {}, CUstream stream = nullptr);

}  // namespace tessel::kernels
