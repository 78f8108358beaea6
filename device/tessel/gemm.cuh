// Block GEMM on the sm_80 path: acc += A_tile * B_tile from shared memory with ldmatrix and
// mma.sync.m16n8k16 (16-bit inputs, f32 accumulators held in registers).
//
// Shared tiles (row-major in the Layout's sense):
//   A: [BM][BK], or [BK][BM] when TransA (the global A is K-major)
//   B: [BK][BN], or [BN][BK] when TransB (the global B is K-major)
// A mma operand wants A "row" (K contiguous per thread pair) and B "col" (K contiguous);
// ldmatrix.trans produces those from the tiles where K is the row index (TransA, !TransB).
//
// Warps: warp w owns the kWarpM x kWarpN sub-tile at (warp_m, warp_n) with
//   warp_m = w % WarpsM, warp_n = w / WarpsM
// (an arbitrary choice as far as speed goes; it is fixed because the accumulator layout
// below depends on it).
//
// Accumulator layout (the epilogue and the compiler's fragment layouts depend on it): the
// warp's sub-tile is a grid of (kWarpM/16) x (kWarpN/8) m16n8 C fragments. For
//   i = (mi * (kWarpN/8) + ni) * 4 + e,   mi < kWarpM/16, ni < kWarpN/8, e < 4,
//   acc_row(i) = warp_m * kWarpM + mi * 16 + lane / 4 + (e / 2) * 8
//   acc_col(i) = warp_n * kWarpN + ni * 8 + (lane % 4) * 2 + e % 2
// so acc[i], acc[i + 1] (e even) are two horizontally adjacent elements.
#pragma once

#include "accumulator.cuh"
#include "mma.cuh"
#include "smem.cuh"
#include "types.cuh"

// 0 turns off BlockGemm's XOR form of the ldmatrix addresses (for A/B timing in the probe).
#ifndef TESSEL_GEMM_XOR_ADDRESSING
#define TESSEL_GEMM_XOR_ADDRESSING 1
#endif

namespace tessel {

// A tile coordinate: (row, col) in the shared tile's own indexing.
struct TileCoord {
  int row;
  int col;
};

// KChains (run() only): how many independent accumulator chains one run() spreads its k steps
// over (k step kk adds into chain kk % KChains; chain 0 is acc, the others start at zero and are
// added into acc at the end). A warp whose tile is one or two m16n8 blocks has nothing but the
// previous k step's mma to wait for, so with one chain its mmas run back to back at the tensor
// core's latency; the compiler (infer_layouts, src/ops/Gemm.cpp) asks for more chains then.
template <class TIn, int BM, int BN, int BK, int WarpsM, int WarpsN, bool TransA, bool TransB, class LayoutA,
          class LayoutB, int KChains = 1>
struct BlockGemm : AccumulatorLayout<BM, BN, WarpsM, WarpsN> {
  using Acc = AccumulatorLayout<BM, BN, WarpsM, WarpsN>;
  static_assert(is_mma_16bit<TIn>::value, "BlockGemm: TIn must be half_t or bfloat16_t");
  // WarpsM, WarpsN and the tile sizes are checked by AccumulatorLayout (accumulator.cuh).
  static_assert(BK % 16 == 0, "BlockGemm: BK must be a multiple of 16 (the mma k step)");
  static_assert(LayoutA::kRows == (TransA ? BK : BM) && LayoutA::kCols == (TransA ? BM : BK),
                "BlockGemm: LayoutA must describe the A tile, [BM][BK] or [BK][BM] if TransA");
  static_assert(LayoutB::kRows == (TransB ? BN : BK) && LayoutB::kCols == (TransB ? BK : BN),
                "BlockGemm: LayoutB must describe the B tile, [BK][BN] or [BN][BK] if TransB");
  static_assert((LayoutA::kCols * 2) % 16 == 0 && (LayoutB::kCols * 2) % 16 == 0,
                "BlockGemm: shared tile rows must be multiples of 16 bytes (ldmatrix rows)");

  static constexpr int kBK = BK;
  using Acc::kAccPerThread;
  using Acc::kMmaM;
  using Acc::kMmaN;
  using Acc::kWarpM;
  using Acc::kWarpN;
  using Acc::warp_m;
  using Acc::warp_n;
  static constexpr int kKSteps = BK / 16;
  static_assert(KChains >= 1 && KChains <= kKSteps,
                "BlockGemm: KChains must be between 1 and the K tile's k steps (BK / 16)");

  // ---- ldmatrix addressing ----------------------------------------------------------------
  // The tile coordinate whose address `lane` gives to ldmatrix (thread t addresses row t % 8
  // of matrix t / 8). Public and constexpr so tests can check them against the PTX fragment
  // definitions without a GPU.
  //
  // A, x4 at (mi, kk): matrices j = 0..3 are a[j] of the mma: (m 0-7 | m 8-15) x (k 0-7 | k
  // 8-15), m fastest. Non-trans reads rows of A ([m][k]); .trans reads rows of A^T ([k][m]).
  __host__ __device__ static constexpr TileCoord a_load_coord(int lane, int warp_m, int mi, int kk) {
    const int m0 = warp_m * kWarpM + mi * 16;
    const int k0 = kk * 16;
    if (!TransA) return TileCoord{m0 + lane % 16, k0 + (lane / 16) * 8};
    return TileCoord{k0 + (lane / 16) * 8 + lane % 8, m0 + (lane / 8 % 2) * 8};
  }
  // B, x4 covering n8 fragments ni and ni + 1 at kk: matrices j = 0..3 are b[ni][0],
  // b[ni][1], b[ni+1][0], b[ni+1][1], i.e. (k 0-7 | k 8-15) x (n 0-7 | n 8-15), k fastest.
  // For an x2 (one n8 fragment) only lanes 0-15 matter; pass lane % 16.
  __host__ __device__ static constexpr TileCoord b_load_coord(int lane, int warp_n, int ni, int kk) {
    const int n0 = warp_n * kWarpN + ni * 8;
    const int k0 = kk * 16;
    if (!TransB) return TileCoord{k0 + lane % 16, n0 + (lane / 16) * 8};
    return TileCoord{n0 + (lane / 16) * 8 + lane % 8, k0 + (lane / 8 % 2) * 8};
  }

  struct Fragments {
    unsigned a[kMmaM][4];
    unsigned b[kMmaN][2];
  };

  // ---- cheap per-lane addressing ----------------------------------------------------------
  // Element offset of the row address `lane` gives to the A (IsA) or B ldmatrix number i
  // (mi, or the even ni of an x4 pair) of k step kk, for warp w (warp_m or warp_n).
  template <bool IsA>
  __host__ __device__ static constexpr int lane_offset(int lane, int w, int i, int kk) {
    if constexpr (IsA) {
      const TileCoord c = a_load_coord(lane, w, i, kk);
      return LayoutA::offset(c.row, c.col);
    } else {
      const TileCoord c = b_load_coord(lane, w, i, kk);
      return LayoutB::offset(c.row, c.col);
    }
  }
  static constexpr int kIStepA = 1;  // A loads step over mi
  static constexpr int kIStepB = 2;  // B x4 loads step over ni pairs
  template <bool IsA>
  static constexpr int kLoads = IsA ? kMmaM : kMmaN / 2;
  // The swizzle is an XOR of chunk bits with row bits, and m16/k16 steps move either whole
  // swizzle periods of rows (an addition) or chunk columns (an XOR). So every row address
  // is offset(lane, w, 0, 0), computed once, XOR a constant plus a constant:
  //   plan 1: XOR depends on kk, addition on i;  plan 2: the other way round.
  // Which plan holds (if any; 0 = compute each offset) is checked here for every lane and
  // warp at compile time, so a layout without that structure just takes the slow path.
  template <bool IsA>
  __host__ __device__ static constexpr int xor_part(int plan, int i, int kk) {
    const int o = lane_offset<IsA>(0, 0, 0, 0);
    return plan == 1 ? (lane_offset<IsA>(0, 0, 0, kk) ^ o) : (lane_offset<IsA>(0, 0, i, 0) ^ o);
  }
  template <bool IsA>
  __host__ __device__ static constexpr int add_part(int plan, int i, int kk) {
    const int o = lane_offset<IsA>(0, 0, 0, 0);
    return plan == 1 ? lane_offset<IsA>(0, 0, i, 0) - o : lane_offset<IsA>(0, 0, 0, kk) - o;
  }
  template <bool IsA>
  __host__ __device__ static constexpr int address_plan() {
    constexpr int kW = IsA ? WarpsM : WarpsN;
    constexpr int kStep = IsA ? kIStepA : kIStepB;
    for (int plan = 1; plan <= 2; ++plan) {
      bool ok = true;
      for (int w = 0; w < kW && ok; ++w)
        for (int lane = 0; lane < 32 && ok; ++lane)
          for (int j = 0; j < kLoads<IsA> && ok; ++j)
            for (int kk = 0; kk < kKSteps && ok; ++kk)
              ok = lane_offset<IsA>(lane, w, j * kStep, kk) ==
                   ((lane_offset<IsA>(lane, w, 0, 0) ^ xor_part<IsA>(plan, j * kStep, kk)) +
                    add_part<IsA>(plan, j * kStep, kk));
      if (ok) return plan;
    }
    return 0;
  }
  static constexpr int kPlanA = TESSEL_GEMM_XOR_ADDRESSING ? address_plan<true>() : 0;
  static constexpr int kPlanB = TESSEL_GEMM_XOR_ADDRESSING ? address_plan<false>() : 0;

  // Shared-window byte address of A load mi / B load ni at step kk; a0 / b0 are
  // lane_offset<..>(lane, w, 0, 0). Xor = false: the plain offset computation (measured
  // faster for run() with two k steps, where the XOR form cost 10% on an H200; the XOR form
  // was 1-3.5% faster everywhere else, and cuts 15-25 registers in run_pipelined).
  template <bool Xor>
  __device__ static unsigned a_address(unsigned a_base, int a0, int lane, int wm, int mi, int kk) {
    if constexpr (Xor && kPlanA != 0) {
      return a_base + ((a0 ^ xor_part<true>(kPlanA, mi, kk)) + add_part<true>(kPlanA, mi, kk)) *
                          static_cast<int>(sizeof(TIn));
    } else {
      return a_base + lane_offset<true>(lane, wm, mi, kk) * static_cast<int>(sizeof(TIn));
    }
  }
  template <bool Xor>
  __device__ static unsigned b_address(unsigned b_base, int b0, int lane, int wn, int ni, int kk) {
    if constexpr (Xor && kPlanB != 0) {
      return b_base + ((b0 ^ xor_part<false>(kPlanB, ni, kk)) + add_part<false>(kPlanB, ni, kk)) *
                          static_cast<int>(sizeof(TIn));
    } else {
      return b_base + lane_offset<false>(lane, wn, ni, kk) * static_cast<int>(sizeof(TIn));
    }
  }

  // a_base, b_base: shared-window addresses of the tiles (smem_address).
  template <bool Xor = true>
  __device__ static void load_fragments(Fragments& f, unsigned a_base, unsigned b_base, int kk, int lane,
                                        int wm, int wn) {
    const int a0 = lane_offset<true>(lane, wm, 0, 0);
    const int b0 = lane_offset<false>(lane, wn, 0, 0);
#pragma unroll
    for (int mi = 0; mi < kMmaM; ++mi) {
      const unsigned p = a_address<Xor>(a_base, a0, lane, wm, mi, kk);
      if constexpr (TransA) {
        ldmatrix_x4_trans(f.a[mi], p);
      } else {
        ldmatrix_x4(f.a[mi], p);
      }
    }
    load_b<Xor>(f.b, b_base, b0, kk, lane, wn);
  }

  // The B fragments of k step kk (b0 = lane_offset<false>(lane, wn, 0, 0)).
  template <bool Xor = true>
  __device__ static void load_b(unsigned (&b)[kMmaN][2], unsigned b_base, int b0, int kk, int lane, int wn) {
    constexpr unsigned kBytes = sizeof(TIn);
#pragma unroll
    for (int ni = 0; ni + 1 < kMmaN; ni += 2) {
      const unsigned p = b_address<Xor>(b_base, b0, lane, wn, ni, kk);
      unsigned r[4];
      if constexpr (TransB) {
        ldmatrix_x4(r, p);
      } else {
        ldmatrix_x4_trans(r, p);
      }
      b[ni][0] = r[0];
      b[ni][1] = r[1];
      b[ni + 1][0] = r[2];
      b[ni + 1][1] = r[3];
    }
    if constexpr (kMmaN % 2 != 0) {
      const TileCoord c = b_load_coord(lane % 16, wn, kMmaN - 1, kk);
      const unsigned p = b_base + LayoutB::offset(c.row, c.col) * kBytes;
      if constexpr (TransB) {
        ldmatrix_x2(b[kMmaN - 1], p);
      } else {
        ldmatrix_x2_trans(b[kMmaN - 1], p);
      }
    }
  }

  // acc += A_tile * B_tile. All threads of the block call it (ldmatrix and mma are
  // warp-collective); the caller barriers so that the tiles are complete.
  // The fragments of k step kk + 1 are loaded before the mmas of step kk so that shared
  // memory latency overlaps tensor-core work within the warp.
  // With KChains > 1 every k step's fragments are loaded first (the warp tile is small: a few
  // registers a step), then the mmas of the chains interleave.
  static constexpr bool kRunXor = kKSteps >= 4;
  __device__ static void run(const TIn* sA, const TIn* sB, float (&acc)[kAccPerThread]) {
    const int lane = threadIdx.x % 32;
    const int wm = warp_m();
    const int wn = warp_n();
    const unsigned a_base = smem_address(sA);
    const unsigned b_base = smem_address(sB);
    if constexpr (KChains == 1) {
      Fragments frag[2];
      load_fragments<kRunXor>(frag[0], a_base, b_base, 0, lane, wm, wn);
#pragma unroll
      for (int kk = 0; kk < kKSteps; ++kk) {
        if (kk + 1 < kKSteps)
          load_fragments<kRunXor>(frag[(kk + 1) % 2], a_base, b_base, kk + 1, lane, wm, wn);
        mma_all(frag[kk % 2], acc);
      }
    } else {
      Fragments frag[kKSteps];
#pragma unroll
      for (int kk = 0; kk < kKSteps; ++kk)
        load_fragments<kRunXor>(frag[kk], a_base, b_base, kk, lane, wm, wn);
      float part[KChains - 1][kAccPerThread] = {};
#pragma unroll
      for (int kk = 0; kk < kKSteps; ++kk)
        mma_all(frag[kk], kk % KChains == 0 ? acc : part[kk % KChains - 1]);
#pragma unroll
      for (int i = 0; i < kAccPerThread; ++i) {
        float sum = part[0][i];
#pragma unroll
        for (int c = 1; c < KChains - 1; ++c) sum += part[c][i];
        acc[i] += sum;
      }
    }
  }

  // acc += A * B_tile with A from registers: `a` holds this thread's elements of the [BM][BK]
  // A tile in AccumulatorLayout<BM, BK, WarpsM, 1> (see pack_a_operand), B comes from shared
  // memory as in run(). Each warp needs whole rows of A, which only it holds, so the warps
  // split M alone (WarpsN = 1). All threads of the block call it.
  static constexpr int kARegs = kMmaM * kKSteps * 8;
  __device__ static void run_rs(const TIn (&a)[kARegs], const TIn* sB, float (&acc)[kAccPerThread]) {
    static_assert(WarpsN == 1, "BlockGemm::run_rs: A from registers needs WarpsN == 1 (warps split M only)");
    static_assert(!TransA, "BlockGemm::run_rs: an A operand in registers is [BM][BK], never transposed");
    const int lane = threadIdx.x % 32;
    const unsigned b_base = smem_address(sB);
    const int b0 = lane_offset<false>(lane, 0, 0, 0);
    unsigned b[2][kMmaN][2];
    load_b<kRunXor>(b[0], b_base, b0, 0, lane, 0);
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      if (kk + 1 < kKSteps) load_b<kRunXor>(b[(kk + 1) % 2], b_base, b0, kk + 1, lane, 0);
#pragma unroll
      for (int mi = 0; mi < kMmaM; ++mi) {
        unsigned a_regs[4];
        pack_a_operand<TIn, kKSteps>(a, mi, kk, a_regs);
#pragma unroll
        for (int ni = 0; ni < kMmaN; ++ni) {
          float(&d)[4] = *reinterpret_cast<float(*)[4]>(&acc[(mi * kMmaN + ni) * 4]);
          mma_m16n8k16<TIn>(d, a_regs, b[kk % 2][ni]);
        }
      }
    }
  }

  // ---- software-pipelined main loop --------------------------------------------------------
  // run() starts each K tile cold: after the caller's barrier every warp waits for its first
  // ldmatrix before its first mma, and all warps of the block wait together. The pipelined
  // form carries k step 0's fragments of the next tile across the tile boundary in
  // registers, so that the barrier and those loads overlap the last k step's mmas. The
  // caller's loop becomes (S stages; see tools/probes/gemm_probe.cu, Mode::kPipelined):
  //
  //   prologue: issue tiles 0 .. S-2, one cp_async_commit() each (as before)
  //   cp_async_wait<S-2>(); __syncthreads();
  //   Gemm::Fragments frag[2];
  //   Gemm::load_first(frag, sA(stage 0), sB(stage 0));
  //   for kt:
  //     Gemm::run_pipelined(frag, sA(kt % S), sB(kt % S), sA((kt+1) % S), sB((kt+1) % S), acc,
  //         [&] { cp_async_wait<S-2>(); __syncthreads(); },              // sync_next
  //         [&] { if (kt+S-1 < n) copies of tile kt+S-1 into stage (kt+S-1) % S;
  //               cp_async_commit(); });                                  // issue
  //   cp_async_wait<0>(); __syncthreads();
  //
  // Why one barrier per tile still suffices: the copies of tile kt+S-1 overwrite the stage of
  // tile kt-1, whose last ldmatrix came before the barrier inside tile kt-1's run (sync_next),
  // and they are issued after that barrier. sync_next makes tile kt+1 visible (its group is
  // S-2 groups older than the newest). On the last tile the next-stage loads read a stage
  // that holds stale data; the fragments are never used.

  // Loads k step 0 of the tile at (sA, sB) into frag[0]. After the barrier that makes it
  // visible.
  __device__ static void load_first(Fragments (&frag)[2], const TIn* sA, const TIn* sB) {
    load_fragments(frag[0], smem_address(sA), smem_address(sB), 0, threadIdx.x % 32, warp_m(), warp_n());
  }

  // acc += A_tile * B_tile for the tile at (sA, sB), whose k step 0 is already in frag[0].
  // Calls issue() once, after the mmas of k step 0 are issued (the caller's copies of a
  // later tile), and sync_next() before the last k step (the caller's wait + barrier for
  // the tile at (sA_next, sB_next)), then loads that tile's k step 0 into frag[0].
  // All threads of the block call it, with the same arguments.
  // Schedule knobs (tools/probes/gemm_probe.cu times them): IssueStep = the k step after
  // whose mmas issue() runs (-1: before the first mma; never the last step, see below);
  // SplitLast = issue half of the last k step's mmas before sync_next(). The default was
  // the fastest on an H200 (2026-12-02): after step 1 with BK >= 64, first with BK = 32.
  static constexpr int kDefaultIssueStep = kKSteps >= 4 ? 1 : -1;
  template <int IssueStep = kDefaultIssueStep, bool SplitLast = false, class SyncNext, class Issue>
  __device__ __forceinline__ static void run_pipelined(Fragments (&frag)[2], const TIn* sA, const TIn* sB,
                                                       const TIn* sA_next, const TIn* sB_next,
                                                       float (&acc)[kAccPerThread], SyncNext&& sync_next,
                                                       Issue&& issue) {
    const int lane = threadIdx.x % 32;
    const int wm = warp_m();
    const int wn = warp_n();
    const unsigned a_base = smem_address(sA);
    const unsigned b_base = smem_address(sB);
    // With an even number of k steps the last one computes from frag[1], so the next tile's
    // step 0 can land in frag[0] while it runs; with an odd number (frag[0] busy), the loads
    // follow the mmas.
    constexpr bool kOverlapNext = kKSteps % 2 == 0;
    constexpr int kSplit = SplitLast && kOverlapNext ? kMmaM / 2 : 0;
    // issue() commits a cp.async group; it must come before sync_next() so that sync_next's
    // wait<S-2> covers the next tile. With one k step it therefore runs first.
    static_assert(IssueStep < kKSteps - 1 || (IssueStep == 0 && kKSteps == 1),
                  "run_pipelined: IssueStep must name a k step before the last one");
    constexpr int kIssueAt = kKSteps == 1 ? -1 : IssueStep;
    if constexpr (kIssueAt < 0) issue();
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      const bool last = kk + 1 == kKSteps;
      if (last) {
        if constexpr (kSplit > 0) mma_rows<0, kSplit>(frag[kk % 2], acc);
        sync_next();
        if constexpr (kOverlapNext)
          load_fragments(frag[0], smem_address(sA_next), smem_address(sB_next), 0, lane, wm, wn);
        mma_rows<kSplit, kMmaM>(frag[kk % 2], acc);
      } else {
        load_fragments(frag[(kk + 1) % 2], a_base, b_base, kk + 1, lane, wm, wn);
        mma_rows<0, kMmaM>(frag[kk % 2], acc);
      }
      if (kk == kIssueAt) issue();
      if constexpr (!kOverlapNext) {
        if (last) load_fragments(frag[0], smem_address(sA_next), smem_address(sB_next), 0, lane, wm, wn);
      }
    }
  }

  // The mmas of m16 rows [MiBegin, MiEnd) of one k step.
  template <int MiBegin, int MiEnd>
  __device__ static void mma_rows(const Fragments& f, float (&acc)[kAccPerThread]) {
#pragma unroll
    for (int mi = MiBegin; mi < MiEnd; ++mi) {
#pragma unroll
      for (int n = 0; n < kMmaN; ++n) {
        // Serpentine over n: consecutive mmas share an operand register set.
        const int ni = (mi % 2 == 0) ? n : kMmaN - 1 - n;
        float(&d)[4] = *reinterpret_cast<float(*)[4]>(&acc[(mi * kMmaN + ni) * 4]);
        mma_m16n8k16<TIn>(d, f.a[mi], f.b[ni]);
      }
    }
  }

  // The kMmaM x kMmaN mmas of one k step.
  __device__ static void mma_all(const Fragments& f, float (&acc)[kAccPerThread]) {
    mma_rows<0, kMmaM>(f, acc);
  }
};

}  // namespace tessel
