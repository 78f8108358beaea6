// Block GEMM on the sm_90a path: C[M][N] = A[M][K] * B[K][N] (row-major, 16-bit inputs, f32
// accumulation), TMA loads into a Stages-deep shared-memory ring, wgmma from shared memory,
// warp specialization with setmaxnreg, and a persistent tile loop.
//
// Block = 1 producer warpgroup + ConsumerWGs consumer warpgroups (128 threads each):
//   warpgroup 0 (threads 0..127): producer. Gives registers back (setmaxnreg.dec) and one
//     thread issues, per K tile, the TMA loads of A [BM][BK] and B [BK][BN] into stage s,
//     after waiting for empty[s]; the loads complete on full[s] (expect_tx).
//   warpgroup 1 + c: consumer c. Takes registers (setmaxnreg.inc), owns rows
//     [c * kWgRows, (c + 1) * kWgRows) of the block tile, waits for full[s], issues its
//     wgmmas on stage s, and releases stage s (one arrive per warp on empty[s]) once
//     wgmma_wait says the wgmmas that read it are complete. One group stays in flight, so
//     the tensor core always has the next K tile queued.
// The compiler model-checks this barrier protocol for every plan it emits
// (src/passes/VerifyHopperPipeline.cpp): a change to how produce / consume / reduce_split_k /
// store_tile_tma wait and arrive must be made in that model too.
// Tiles are handed out persistently: block b computes linear tiles b, b + gridDim.x, ...,
// remapped by rasterize(panel) (block.cuh) for L2 reuse. The ring's stage/phase counters
// run on across tiles, so the producer prefetches the next tile during the epilogue.
//
// Split-K (SplitK = 2): for grids of few tiles. The kernel is launched in clusters of two
// CTAs (__cluster_dims__(2, 1, 1), the grid a multiple of 2); both CTAs of a cluster take the
// same tiles, rank 0 the first half of the K tiles and rank 1 the rest, each with its own
// producer and ring. Rank 1 then writes its f32 accumulators into rank 0's reduction buffer
// (BM * BN * 4 bytes, after the barriers; st.shared::cluster, thread-private 16-byte slots)
// and arrives on rank 0's red_full barrier (release, cluster scope); rank 0 waits on it
// (acquire), adds the partial sums to its own, gives the buffer back on rank 1's red_empty
// barrier and stores the tile. The sum is always rank 0's half + rank 1's half: repeated runs
// are bit-identical. Twice the CTAs per tile, half the K loop each.
//
// TMA-store epilogue (TmaStore = 1, 16-bit C, cooperative, no split-K): each consumer
// warpgroup writes its rows of the tile into its own staging tile (kStagingBytes in all,
// after the ring) and one of its threads stores it with TMA through a C tensor map (box
// {64, kWgRows}, 128-byte swizzle), so the warpgroup starts its next tile while the stores
// drain. The kernel then takes the map as run()'s last argument.
//
// Multicast clusters (ClusterM = 2 or ClusterN = 2, no split-K): the kernel is launched in
// clusters of two CTAs that take two adjacent tiles sharing an operand. ClusterM: vertically
// adjacent tiles share B; each CTA loads half of B's 64-column panels and multicasts them to
// both. ClusterN: horizontally adjacent tiles share A; each CTA loads BM / 2 rows of every A
// panel (the A tensor map's box is {64, BM / 2}) and multicasts them. Either way a stage of
// each CTA is filled by both producers, so every consumer warp releases it in both CTAs (the
// empty barriers count 2x the consumer warps) and a producer refills a stage only when the
// consumers of both CTAs are done with it. A cluster whose second tile lies past the matrix
// edge still runs it (its loads are zero-filled, its stores masked or clipped).
//
// Ping-pong (PingPong = 1, 2 consumers): consumer c takes every other tile of the CTA and
// all BM rows of it, so its epilogue overlaps the other consumer's mainloop.
//
// Shared tiles: A stage = WgmmaSwizzleLayout<BM, BK, 2, SA> (K-major, wgmma TransA = 0) with
// SA = 128 (bytes) for BK >= 64 and SA = 64 for BK = 32; B stage = WgmmaSwizzle128Layout<BK,
// BN, 2> (N-major: the tutorial's B is N-contiguous, wgmma TransB = 1). Both are exactly
// what TMA writes with the tensor maps below (tma.cuh).
//
// Accumulator layout (consumer threads; the compiler's Parallel epilogues address it):
// consumer c = threadIdx.x / 128 - 1, warp w = (threadIdx.x / 32) % 4, lane l, and
//   i = mb * (BN / 2) + j,   mb < kMBlocks (64-row blocks of the warpgroup), j < BN / 2:
//   acc_row(i) = c0 + mb * 64 + 16 w + l / 4 + 8 ((j / 2) % 2)   (c0 = c * kWgRows;
//                                                                 0 for ping-pong)
//   acc_col(i) = 8 (j / 4) + 2 (l % 4) + j % 2
// so acc[i], acc[i + 1] (i even) are horizontally adjacent (one packed 16-bit pair).
//
// Host, per launch (see tools/probes/wgmma_probe.cu): tensor maps (tma.cuh) of
//   A [M][K]: box {BK >= 64 ? 64 : BK, BM / ClusterN}, swizzle BK >= 64 ? SWIZZLE_128B : SWIZZLE_64B
//             (BK = 32: box {32, BM / ClusterN}, CU_TENSOR_MAP_SWIZZLE_64B);
//   B [K][N]: box {64, BK}, CU_TENSOR_MAP_SWIZZLE_128B (any BK);
// dynamic shared memory kSmemBytes = 1024 + Stages * (BM * BK + BK * BN) * 2 + 16 * Stages
// (raise the limit with cudaFuncSetAttribute), kThreads = 128 * (ConsumerWGs + 1) threads,
// grid = min(tiles, SM count) (or tiles), whole clusters of kCluster CTAs
// (__cluster_dims__(kCluster, 1, 1) when kCluster > 1).
#pragma once

#include "accumulator.cuh"
#include "block.cuh"
#include "hopper_layout.cuh"
#include "mbarrier.cuh"
#include "smem.cuh"
#include "tma.cuh"
#include "types.cuh"
#include "wgmma.cuh"

namespace tessel {

template <class TIn, int BM, int BN, int BK, int Stages, int ConsumerWGs = 2, int ProducerRegs = 40,
          int ConsumerRegs = 232, int ClusterM = 1, int PingPong = 0, int WideStores = 1, int SplitK = 1,
          int TmaStore = 0, int ClusterN = 1>
struct HopperGemm {
  static_assert(is_mma_16bit<TIn>::value, "HopperGemm: TIn must be half_t or bfloat16_t");
  static_assert(ConsumerWGs == 1 || ConsumerWGs == 2, "HopperGemm: 1 or 2 consumer warpgroups");
  static_assert(PingPong == 0 || ConsumerWGs == 2, "HopperGemm: ping-pong needs 2 consumer warpgroups");
  static constexpr bool kPingPong = PingPong != 0;
  // Rows of the block tile one consumer warpgroup computes.
  static constexpr int kWgRows = kPingPong ? BM : BM / ConsumerWGs;
  static_assert(kWgRows % 64 == 0 && BM % kWgRows == 0,
                "HopperGemm: BM must be a multiple of 64 * ConsumerWGs (wgmma is m64)");
  static_assert(BM <= 256, "HopperGemm: BM <= 256 (a TMA box extent is at most 256)");
  static_assert(BN % 64 == 0 && BN <= 256,
                "HopperGemm: BN must be a multiple of 64 (one 128-byte swizzle panel) <= 256");
  static_assert(BK == 32 || (BK % 64 == 0 && BK <= 256),
                "HopperGemm: BK must be 32 (64-byte swizzle) or a multiple of 64 up to 256");
  static_assert(Stages >= 2, "HopperGemm: the ring needs at least 2 stages");
  static_assert(ClusterM == 1 || ClusterM == 2, "HopperGemm: ClusterM is 1 or 2");
  static_assert(ClusterN == 1 || ClusterN == 2, "HopperGemm: ClusterN is 1 or 2");
  static_assert(ClusterM == 1 || ClusterN == 1, "HopperGemm: a multicast cluster shares A or B, not both");
  static_assert(ClusterN == 1 || (BM / ClusterN) % 8 == 0,
                "HopperGemm: each CTA of a ClusterN pair loads a whole number of 8-row swizzle atoms of A");
  static_assert((BN / 64) % ClusterM == 0,
                "HopperGemm: the B tile's 64-column panels must split evenly over the cluster");
  static_assert(SplitK == 1 || SplitK == 2, "HopperGemm: SplitK is 1 or 2");
  static_assert(SplitK == 1 || (ClusterM == 1 && ClusterN == 1 && PingPong == 0),
                "HopperGemm: split-K takes the cluster; no ClusterM, ClusterN or ping-pong with it");
  static_assert(TmaStore == 0 || (SplitK == 1 && PingPong == 0),
                "HopperGemm: the TMA-store epilogue is for the cooperative kernel without split-K");
  static_assert(ProducerRegs * 128 + ConsumerRegs * 128 * ConsumerWGs <= 65536,
                "HopperGemm: setmaxnreg budgets exceed the 64K registers of an SM");

  static constexpr int kConsumerWGs = ConsumerWGs;
  static constexpr int kClusterM = ClusterM;
  static constexpr int kSplitK = SplitK;
  static constexpr int kClusterN = ClusterN;
  static constexpr int kMulticast = ClusterM * ClusterN;  // CTAs whose producers fill each stage
  static constexpr int kCluster = kMulticast * SplitK;    // CTAs per cluster
  static constexpr int kARowsPerCta = BM / ClusterN;      // rows of each A panel one CTA loads
  static constexpr int kThreads = 128 * (ConsumerWGs + 1);
  static constexpr int kMBlocks = kWgRows / 64;
  static constexpr int kAccPerMBlock = BN / 2;
  static constexpr int kAccPerThread = kMBlocks * kAccPerMBlock;
  static constexpr int kKSteps = BK / 16;
  static_assert(kAccPerThread <= 192,
                "HopperGemm: more than 192 f32 accumulators per consumer thread would spill");

  // A rows are BK * 2 bytes: the 128-byte swizzle for BK >= 64, the 64-byte one for BK = 32.
  static constexpr int kSwizzleA = BK >= 64 ? 128 : 64;
  using LayoutA = WgmmaSwizzleLayout<BM, BK, 2, kSwizzleA>;
  using LayoutB = WgmmaSwizzle128Layout<BK, BN, 2>;
  static constexpr int kStageBytes = LayoutA::kBytes + LayoutB::kBytes;
  // Split-K: the partial accumulators rank 1 hands to rank 0, and the two barriers of the
  // hand-off (red_full in rank 0, red_empty in rank 1).
  static constexpr int kRedBytes = SplitK > 1 ? BM* BN * 4 : 0;
  static constexpr int kRedThreads = 128 * ConsumerWGs;
  // TMA-store epilogue: each consumer warpgroup's kWgRows x BN output tile, as BN / 64 panels
  // of kWgRows rows x 128 bytes in the 128-byte swizzle (what the C tensor map's box
  // {64, kWgRows} reads).
  static constexpr int kStagingBytes = TmaStore ? BM * BN * 2 : 0;
  static constexpr int kWgStagingBytes = kWgRows * BN * 2;
  // Operand ring, (TMA store) the output staging, 2 * Stages mbarriers, then (split-K) 2
  // mbarriers and the reduction buffer; +1024 so the ring can be aligned by hand.
  static constexpr int kSmemBytes =
      1024 + Stages * kStageBytes + kStagingBytes + 2 * Stages * 8 + (SplitK > 1 ? 16 + kRedBytes : 0);

  // ---- accumulator layout (file comment) --------------------------------------------------
  __host__ __device__ static constexpr int acc_row_in_wg(int i, int t) {
    return (i / kAccPerMBlock) * 64 + 16 * ((t / 32) % 4) + (t % 32) / 4 +
           8 * (((i % kAccPerMBlock) / 2) % 2);
  }
  __host__ __device__ static constexpr int acc_col_in_wg(int i, int t) {
    return 8 * ((i % kAccPerMBlock) / 4) + 2 * (t % 4) + i % 2;
  }
  __device__ static int consumer_index() { return static_cast<int>(threadIdx.x) / 128 - 1; }
  // Row of the block tile (of the tile this consumer is computing, for ping-pong).
  __device__ static int acc_row(int i) {
    return (kPingPong ? 0 : consumer_index() * kWgRows) + acc_row_in_wg(i, threadIdx.x % 128);
  }
  __device__ static int acc_col(int i) { return acc_col_in_wg(i, threadIdx.x % 128); }

  // Where linear tile `t` of a tiles_n x tiles_m grid lands (x indexes N tiles).
  __device__ static void tile_coords(int t, int tiles_n, int tiles_m, int panel, int& tn, int& tm) {
    rasterize(panel, t % tiles_n, t / tiles_n, tiles_n, tiles_m, tn, tm);
  }

  // The whole kernel body. smem_raw: kSmemBytes of dynamic shared memory. Every thread of
  // the block calls it; there is no block-wide barrier after the role split. `epi`, unless
  // NoEpilogue, is an element-wise epilogue: each accumulator (i, j) of output tile (tile_m,
  // tile_n) becomes epi(value, tile_n, tile_m, i, j) before it is stored (after the split-K
  // sum); like a Parallel nest over the tile, it runs for the tile's elements past the matrix
  // edge too (their results are not stored), so its reads must be guarded as the author's are.
  template <class TOut, class Epi = NoEpilogue>
  __device__ static void run(const TmaDescriptor* tmap_a, const TmaDescriptor* tmap_b, TOut* C, int M, int N,
                             int K, int panel, unsigned char* smem_raw, const TmaDescriptor* tmap_c = nullptr,
                             Epi epi = Epi{}) {
    const unsigned base = (smem_address(smem_raw) + 1023u) & ~1023u;
    const unsigned ring_a = base;                             // Stages x A tiles
    const unsigned ring_b = base + Stages * LayoutA::kBytes;  // Stages x B tiles
    const unsigned staging = base + Stages * kStageBytes;     // TMA store: the output tiles
    const unsigned full = staging + kStagingBytes;            // Stages mbarriers
    const unsigned empty = full + Stages * 8;                 // Stages mbarriers
    const unsigned red_bars = empty + Stages * 8;             // split-K: red_full, red_empty
    const int wg = static_cast<int>(threadIdx.x) / 128;
    const int rank = kCluster > 1 ? static_cast<int>(cluster_ctarank()) : 0;

    if (threadIdx.x == 0) {
      tma_prefetch_descriptor(tmap_a);
      tma_prefetch_descriptor(tmap_b);
      if constexpr (TmaStore != 0) tma_prefetch_descriptor(tmap_c);
      for (int s = 0; s < Stages; ++s) {
        mbarrier_init(full + 8 * s, 1);  // the producer's expect_tx
        // One arrive per consumer warp that reads the stage, in every CTA whose data this
        // CTA's producer writes (ping-pong: one warpgroup reads each stage).
        mbarrier_init(empty + 8 * s, 4 * (kPingPong ? 1 : ConsumerWGs) * kMulticast);
      }
      if constexpr (SplitK > 1) {
        mbarrier_init(red_bars, kRedThreads);      // red_full: every rank-1 consumer thread
        mbarrier_init(red_bars + 8, kRedThreads);  // red_empty: every rank-0 consumer thread
      }
      mbarrier_init_fence();
    }
    if constexpr (kCluster > 1) {
      cluster_sync();  // the peers' barriers exist before anyone arrives on or fills them
    } else {
      __syncthreads();
    }

    const int tiles_m = (M + BM - 1) / BM;
    const int tiles_n = (N + BN - 1) / BN;
    // Clusters take ClusterM vertically adjacent tiles (same B columns, B multicast) or
    // ClusterN horizontally adjacent ones (same A rows, A multicast): a grid of cluster tiles.
    const int tiles_mc = (tiles_m + ClusterM - 1) / ClusterM;
    const int tiles_nc = (tiles_n + ClusterN - 1) / ClusterN;
    const int tiles = tiles_mc * tiles_nc;
    const int cluster_id = static_cast<int>(blockIdx.x) / kCluster;
    const int clusters = static_cast<int>(gridDim.x) / kCluster;
    const int k_tiles = (K + BK - 1) / BK;
    // This CTA's K tiles [kt_begin, kt_end): all of them, or its rank's share under split-K.
    const int k_rank = SplitK > 1 ? rank : 0;
    const int kt_begin = k_tiles * k_rank / SplitK, kt_end = k_tiles * (k_rank + 1) / SplitK;
    const int m_rank = ClusterM > 1 ? rank : 0;
    const int n_rank = ClusterN > 1 ? rank : 0;

    if (wg == 0) {
      setmaxnreg_dec<ProducerRegs>();
      if (threadIdx.x == 0)
        produce(tmap_a, tmap_b, ring_a, ring_b, full, empty, m_rank, n_rank, cluster_id, clusters, tiles,
                tiles_nc, tiles_mc, kt_begin, kt_end, panel);
    } else {
      setmaxnreg_inc<ConsumerRegs>();
      consume<TOut>(C, M, N, ring_a, ring_b, full, empty, red_bars, wg - 1, m_rank, n_rank, k_rank,
                    cluster_id, clusters, tiles, tiles_nc, tiles_mc, kt_begin, kt_end, panel, tmap_c,
                    staging + (wg - 1) * kWgStagingBytes, epi);
    }
    // A CTA stays resident until its peers stopped arriving on its barriers and writing
    // into its shared memory.
    if constexpr (kCluster > 1) cluster_sync();
  }

  __device__ static void produce(const TmaDescriptor* tmap_a, const TmaDescriptor* tmap_b, unsigned ring_a,
                                 unsigned ring_b, unsigned full, unsigned empty, int rank, int n_rank,
                                 int cluster_id, int clusters, int tiles, int tiles_nc, int tiles_mc,
                                 int kt_begin, int kt_end, int panel) {
    constexpr int kBPanelsPerCta = LayoutB::kPanels / ClusterM;
    constexpr unsigned kMask = (1u << kMulticast) - 1;  // the cluster's CTAs
    int stage = 0;
    unsigned phase = 0;
    for (int t = cluster_id; t < tiles; t += clusters) {
      int tnc, tmc;
      tile_coords(t, tiles_nc, tiles_mc, panel, tnc, tmc);
      const int tm = tmc * ClusterM + rank, tn = tnc * ClusterN + n_rank;
      for (int kt = kt_begin; kt < kt_end; ++kt) {
        mbarrier_wait_parity(empty + 8 * stage, phase ^ 1);
        const unsigned bar = full + 8 * stage;
        mbarrier_arrive_expect_tx(bar, kStageBytes);
        const unsigned a_dst = ring_a + stage * LayoutA::kBytes;
        const unsigned b_dst = ring_b + stage * LayoutB::kBytes;
#pragma unroll
        for (int p = 0; p < LayoutA::kPanels; ++p) {
          if constexpr (ClusterN > 1) {  // this CTA's half of the rows, into both CTAs
            tma_load_2d_multicast(a_dst + p * LayoutA::kPanelBytes + n_rank * kARowsPerCta * kSwizzleA,
                                  tmap_a, bar, kt * BK + p * LayoutA::kPanelCols,
                                  tm * BM + n_rank * kARowsPerCta, kMask);
          } else {
            tma_load_2d(a_dst + p * LayoutA::kPanelBytes, tmap_a, bar, kt * BK + p * LayoutA::kPanelCols,
                        tm * BM);
          }
        }
#pragma unroll
        for (int q = 0; q < kBPanelsPerCta; ++q) {
          const int p = rank * kBPanelsPerCta + q;
          if constexpr (ClusterM > 1) {
            tma_load_2d_multicast(b_dst + p * LayoutB::kPanelBytes, tmap_b, bar, tn * BN + p * 64, kt * BK,
                                  kMask);
          } else {
            tma_load_2d(b_dst + p * LayoutB::kPanelBytes, tmap_b, bar, tn * BN + p * 64, kt * BK);
          }
        }
        if (++stage == Stages) {
          stage = 0;
          phase ^= 1;
        }
      }
    }
  }

  // Consumer warpgroup c: the mainloop and the epilogue of its tiles. Cooperative: every
  // tile of this CTA, rows [c * kWgRows, +kWgRows). Ping-pong: every other tile of this CTA
  // (c = 0 the even ones), all BM rows, so one warpgroup's epilogue runs while the other's
  // wgmmas keep the tensor core busy; the ring hands out the tiles' K tiles in order, so
  // a warpgroup skips the other's k_tiles ring slots.
  template <class TOut, class Epi>
  __device__ static void consume(TOut* C, int M, int N, unsigned ring_a, unsigned ring_b, unsigned full,
                                 unsigned empty, unsigned red_bars, int c, int rank, int n_rank, int k_rank,
                                 int cluster_id, int clusters, int tiles, int tiles_nc, int tiles_mc,
                                 int kt_begin, int kt_end, int panel, const TmaDescriptor* tmap_c,
                                 unsigned staging, const Epi& epi) {
    const int k_tiles = kt_end - kt_begin;  // this CTA's share
    const bool warp_leader = threadIdx.x % 32 == 0;
    // Descriptors of stage 0; a stage/k-step/row offset is added to the address field (its
    // 14 bits hold any shared address >> 4, so the addition never carries out of it).
    const unsigned long long desc_a0 =
        wgmma_desc_kmajor(ring_a + (kPingPong ? 0 : c * kWgRows * kSwizzleA), kSwizzleA);
    const unsigned long long desc_b0 = wgmma_desc_mnmajor_sw128(ring_b, LayoutB::kPanelBytes);
    constexpr int kStep = kPingPong ? 2 : 1;  // tiles between two of this warpgroup's tiles
    float acc[kAccPerThread];
    unsigned it = kPingPong ? static_cast<unsigned>(c * k_tiles) : 0u;  // ring position
    [[maybe_unused]] unsigned reductions = 0;                           // split-K tiles so far
    for (int t = cluster_id + (kPingPong ? c * clusters : 0); t < tiles; t += kStep * clusters) {
      int tnc, tmc;
      tile_coords(t, tiles_nc, tiles_mc, panel, tnc, tmc);
      // May be past M or N: loads zero-fill, stores are masked (TMA: clipped).
      const int tm = tmc * ClusterM + rank, tn = tnc * ClusterN + n_rank;
#pragma unroll
      for (int i = 0; i < kAccPerThread; ++i) acc[i] = 0.0f;
      // Ping-pong: the mainloops take turns (named barrier 1 + c: "c's turn"). Besides keeping
      // the tensor core to one warpgroup, this is what makes the parity waits below sound: a
      // warpgroup waits on ring position `it` only after every earlier position was waited
      // for, so the full barrier's pending phase is exactly it / Stages.
      if (kPingPong && t != cluster_id) named_barrier_sync(1 + c, 256);
      int prev_stage = -1;
      for (int kt = 0; kt < k_tiles; ++kt, ++it) {  // ring positions, not K offsets
        const int stage = static_cast<int>(it % Stages);
        mbarrier_wait_parity(full + 8 * stage, (it / Stages) & 1);
        wgmma_fence_operand(acc);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kKSteps; ++kk) {
          const unsigned a_off =
              stage * LayoutA::kBytes + (kk * 32 / kSwizzleA) * LayoutA::kPanelBytes + (kk * 32) % kSwizzleA;
          const unsigned b_off = stage * LayoutB::kBytes + kk * 16 * 128;
#pragma unroll
          for (int mb = 0; mb < kMBlocks; ++mb) {
            float(&d)[kAccPerMBlock] = *reinterpret_cast<float(*)[kAccPerMBlock]>(&acc[mb * kAccPerMBlock]);
            wgmma_ss<TIn, BN, 0, 1>(d, desc_a0 + ((a_off + mb * 64 * kSwizzleA) >> 4), desc_b0 + (b_off >> 4),
                                    1);
          }
        }
        wgmma_commit();
        wgmma_fence_operand(acc);
        // The group of K tile kt-1 is complete now: its stage may be refilled.
        wgmma_wait<1>();
        if (prev_stage >= 0 && warp_leader) release(empty + 8 * prev_stage);
        prev_stage = stage;
      }
      // The other warpgroup's tile (the next one of this CTA) may start its mainloop.
      if (kPingPong && t + clusters < tiles) named_barrier_arrive(2 - c, 256);
      wgmma_wait<0>();
      wgmma_fence_operand(acc);
      if (prev_stage >= 0 && warp_leader) release(empty + 8 * prev_stage);
      if constexpr (SplitK > 1) {
        const bool last = reduce_split_k(acc, red_bars, k_rank, reductions++);
        if (!last) continue;  // rank 1: rank 0 stores the tile
      }
      if constexpr (!is_no_epilogue<Epi>::value) apply_epilogue(acc, epi, tm, tn);
      if constexpr (TmaStore != 0) {
        store_tile_tma<TOut>(acc, tmap_c, staging, c, tm * BM + c * kWgRows, tn * BN);
        continue;
      }
      store_tile<TOut>(acc, C, N, tm * BM, tn * BN, M - tm * BM, N - tn * BN);
      if constexpr (kPingPong) it += k_tiles;  // the other warpgroup's tile
    }
    // The last tile's stores read the staging buffer until they complete.
    if constexpr (TmaStore != 0)
      if (threadIdx.x % 128 == 0) tma_store_wait<0>();
  }

  // The element-wise epilogue (run()'s comment) on this thread's accumulators of tile (tm, tn):
  // every element of the tile, no branch, so that the function's loads are all in flight at
  // once (the stores drop what lies past the matrix).
  template <class Epi>
  __device__ __forceinline__ static void apply_epilogue(float (&acc)[kAccPerThread], const Epi& epi, int tm,
                                                        int tn) {
#pragma unroll
    for (int i = 0; i < kAccPerThread; ++i) acc[i] = epi(acc[i], tn, tm, acc_row(i), acc_col(i));
  }

  // TMA-store epilogue of consumer warpgroup c: its kWgRows x BN accumulators go to its
  // staging tile (16-bit, 128-byte swizzle: stmatrix, each 8x8 matrix's rows in 8 different
  // 16-byte chunks, conflict-free), then one thread issues a TMA store per 64-column panel and the
  // warpgroup goes on to its next tile's mainloop while the stores drain; TMA clips the
  // matrix edges. Before the next tile's writes, that thread waits until the previous
  // stores have read the staging tile (named barrier 3 + c orders the warpgroup around it).
  template <class TOut>
  __device__ static void store_tile_tma(const float (&acc)[kAccPerThread], const TmaDescriptor* tmap_c,
                                        unsigned staging, int c, int m0, int n0) {
    static_assert(is_mma_16bit<TOut>::value, "HopperGemm: the TMA-store epilogue writes 16-bit outputs");
    const int t = threadIdx.x % 128;
    if (t == 0) tma_store_wait_read<0>();
    named_barrier_sync(3 + c, 128);
    // stmatrix: the accumulators of 8 rows x 8 columns (column block g8, row half h of an
    // m-block) are one m8n8 matrix in exactly the layout stmatrix takes; x4 stores 4 of them
    // (g8 = 2 g16 + m / 2, h = m % 2) with lane L giving row L % 8 of matrix L / 8. (Against
    // the quad transpose of store_tile: 2 xor shuffles less per 4 words; H200: +1.5-5 % on
    // the issue-5 shapes with many tiles per CTA, docs/perf-notes.md.)
    const int l = t % 32, m = l / 8;
#pragma unroll
    for (int mb = 0; mb < kMBlocks; ++mb)
#pragma unroll
      for (int g16 = 0; g16 < BN / 16; ++g16) {
        unsigned w[4];
#pragma unroll
        for (int v = 0; v < 4; ++v) {
          const int i = mb * kAccPerMBlock + 4 * (2 * g16 + v / 2) + 2 * (v % 2);
          w[v] = pack2<TOut>(acc[i], acc[i + 1]);
        }
        const int r = mb * 64 + 16 * (t / 32) + 8 * (m % 2) + l % 8;
        const int g8 = 2 * g16 + m / 2, chunk = g8 % 8, p = g8 / 8;  // 16-byte chunk, 64-column panel
        const unsigned addr = staging + p * (kWgRows * 128) + r * 128 + ((chunk ^ (r % 8)) * 16);
        asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr),
                     "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3])
                     : "memory");
      }
    fence_proxy_async_shared();
    named_barrier_sync(3 + c, 128);
    if (t == 0) {
#pragma unroll
      for (int p = 0; p < BN / 64; ++p) tma_store_2d(tmap_c, staging + p * (kWgRows * 128), n0 + 64 * p, m0);
      tma_store_commit();
    }
  }

  // The 4 lanes of a quad hold one row's 32 columns (block g of 32, row half h of m-block mb)
  // as a 4x4 matrix of packed column pairs; two xor shuffles transpose it, so that lane q
  // ends with columns 8 (4 g + q) .. + 7 in w[0..3].
  template <class TOut>
  __device__ __forceinline__ static void transpose_quad(const float (&acc)[kAccPerThread], int mb, int h,
                                                        int g, int q, unsigned (&w)[4]) {
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      const int i = mb * kAccPerMBlock + (4 * g + b) * 4 + 2 * h;
      w[b] = pack2<TOut>(acc[i], acc[i + 1]);
    }
    transpose_quad_pairs(w, q);
  }

  // Split-K hand-off of one tile (file comment); `n` counts this CTA's tiles so far, whose
  // parity the barriers' phases follow. True for rank 0, whose acc then holds the sum.
  __device__ static bool reduce_split_k(float (&acc)[kAccPerThread], unsigned red_bars, int k_rank,
                                        unsigned n) {
    const unsigned red_full = red_bars, red_empty = red_bars + 8;
    const unsigned buffer = red_bars + 16;
    const unsigned slot = buffer + (threadIdx.x - 128) * 16;  // + q * kRedThreads * 16
    if (k_rank != 0) {
      // Rank 0 has read the previous tile's partial sums (passes at once the first time).
      mbarrier_wait_parity_cluster(red_empty, (n & 1) ^ 1);
      const unsigned remote = cluster_map_shared(slot, 0);
#pragma unroll
      for (int q = 0; q < kAccPerThread / 4; ++q)
        st_shared_cluster_v4(remote + q * kRedThreads * 16, acc[4 * q], acc[4 * q + 1], acc[4 * q + 2],
                             acc[4 * q + 3]);
      mbarrier_arrive_release_cluster(red_full, 0);
      return false;
    }
    mbarrier_wait_parity_cluster(red_full, n & 1);
#pragma unroll
    for (int q = 0; q < kAccPerThread / 4; ++q) {
      float a, b, c, d;
      asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
                   : "=f"(a), "=f"(b), "=f"(c), "=f"(d)
                   : "r"(slot + q * kRedThreads * 16)
                   : "memory");
      acc[4 * q] += a;
      acc[4 * q + 1] += b;
      acc[4 * q + 2] += c;
      acc[4 * q + 3] += d;
    }
    mbarrier_arrive_release_cluster(red_empty, 1);
    return true;
  }

  // A consumer warp hands a stage back to every producer that writes into it.
  __device__ static void release(unsigned empty_bar) {
    if constexpr (kMulticast > 1) {
#pragma unroll
      for (int r = 0; r < kMulticast; ++r) mbarrier_arrive_cluster(empty_bar, r);
    } else {
      mbarrier_arrive(empty_bar);
    }
  }

  // Epilogue: converts and stores this consumer thread's accumulators straight to global,
  // bounds-masked (element (r, c) of the block tile is written iff r < rows && c < cols).
  // 16-bit outputs (WideStores): the 4 lanes of a quad hold one row's 32 columns as a 4x4
  // matrix of column pairs; two xor shuffles transpose it so that each lane stores 8
  // consecutive columns with one 16-byte store (when ldc % 8 == 0 and all 8 are in range).
  // Otherwise column pairs go out as one 4-byte store when ldc is even, else per element.
  template <class TOut>
  __device__ static void store_tile(const float (&acc)[kAccPerThread], TOut* C, int ldc, int m0, int n0,
                                    int rows, int cols) {
    TOut* tile =
        C + static_cast<long long>(m0) * ldc + n0 + (kPingPong ? 0 : consumer_index() * kWgRows) * ldc;
    if (!kPingPong) rows -= consumer_index() * kWgRows;
    const int t = threadIdx.x % 128;
    if constexpr (is_mma_16bit<TOut>::value && WideStores != 0) {
      const int q = t % 4;
      const bool vec = ldc % 8 == 0;
#pragma unroll
      for (int mb = 0; mb < kMBlocks; ++mb)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int g = 0; g < BN / 32; ++g) {
            unsigned w[4];
            transpose_quad<TOut>(acc, mb, h, g, q, w);
            const int r = acc_row_in_wg(mb * kAccPerMBlock + 2 * h, t);
            const int col = 8 * (4 * g + q);
            if (r >= rows) continue;
            TOut* p = tile + static_cast<long long>(r) * ldc + col;
            if (vec && col + 8 <= cols) {
              *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
              continue;
            }
#pragma unroll
            for (int e = 0; e < 8; ++e) {
              if (col + e >= cols) break;
              const unsigned short bits = static_cast<unsigned short>(w[e / 2] >> (16 * (e % 2)));
              *reinterpret_cast<unsigned short*>(p + e) = bits;
            }
          }
    } else {
      const bool pairs = (ldc % 2) == 0;
#pragma unroll
      for (int i = 0; i < kAccPerThread; i += 2) {
        const int r = acc_row_in_wg(i, t);
        const int col = acc_col_in_wg(i, t);
        if (r >= rows) continue;
        TOut* p = tile + static_cast<long long>(r) * ldc + col;
        if constexpr (is_mma_16bit<TOut>::value) {
          if (pairs && col + 1 < cols) {
            *reinterpret_cast<unsigned*>(p) = pack2<TOut>(acc[i], acc[i + 1]);
            continue;
          }
        }
        if (col < cols) p[0] = from_float<TOut>(acc[i]);
        if (col + 1 < cols) p[1] = from_float<TOut>(acc[i + 1]);
      }
    }
  }
};

// The kernel the probe launches (generated code emits its own, calling Gemm::run the same
// way). Tensor maps by value in the parameter space (__grid_constant__).
template <class Gemm, class TOut>
__global__ void __launch_bounds__(Gemm::kThreads, 1)
    hopper_gemm_kernel(const __grid_constant__ TmaDescriptor tmap_a,
                       const __grid_constant__ TmaDescriptor tmap_b, TOut* C, int M, int N, int K,
                       int panel) {
  extern __shared__ __align__(1024) unsigned char hopper_gemm_smem[];
  Gemm::template run<TOut>(&tmap_a, &tmap_b, C, M, N, K, panel, hopper_gemm_smem);
}

}  // namespace tessel
