// The sm_90a GEMM's shared-memory sizes and its split-K rule, in one place: select_hopper_gemm
// decides with them and the autotuner's cost model (src/autotune/CostModel.cpp) predicts with
// them. The byte counts match HopperGemm::kSmemBytes (device/tessel/hopper_gemm.cuh).
#pragma once

#include <algorithm>
#include <cstdint>

namespace tessel::passes {

// The operand ring of 16-bit tiles, its 2 * stages mbarriers and the 1024 bytes of alignment slack.
inline std::int64_t hopper_ring_smem(std::int64_t bm, std::int64_t bn, std::int64_t bk, std::int64_t stages) {
  return 1024 + stages * (bm * bk + bk * bn) * 2 + 16 * stages;
}
// Split-K's extra: its two hand-off mbarriers and the f32 reduction buffer.
inline std::int64_t hopper_split_k_smem(std::int64_t bm, std::int64_t bn) {
  return 16 + bm * bn * 4;
}
// The TMA-store epilogue's extra: the 16-bit staging tile.
inline std::int64_t hopper_staging_smem(std::int64_t bm, std::int64_t bn) {
  return bm * bn * 2;
}

// Whether each tile's K loop is split over a 2-CTA cluster: the tiles fill at most half the SMs
// and each CTA keeps a long K loop (K >= 4096: 2048 each), with the reduction buffer fitting
// beside the ring. Measured on the H200 (bench/results/2026-12-03-gemm-splitk-h200.json):
// 128x8192x8192 0.88 -> 0.92 of cuBLAS; 1024^3 with 128x128 tiles 0.78 -> 0.71 (too short a
// K loop for the hand-off), hence the bound on K.
// The first two conditions alone are when a split pays for its hand-off; the generic kernels'
// split (split_k_clusters) reuses the drained ring for the partial sums and needs no more room.
inline bool hopper_split_k_pays(std::int64_t tiles, std::int64_t K, int sm_count) {
  return tiles * 2 <= sm_count && K >= 4096;
}
// How many clusters of `ctas` CTAs (2, 4 or 8) are sure to run at once on a Hopper of `sm_count`
// SMs, whatever its die: a cluster runs within one GPC, a GPC has at most 9 TPCs of 2 SMs (8 GPCs),
// and a die may lack any TPCs -- at worst each GPC idles ctas / 2 - 1 TPCs that make no whole
// cluster: 66 TPCs hold 66 clusters of 2, at least 29 of 4 (116 CTAs) and 10 of 8 (80 CTAs).
// Measured (H100, session 28, bench/results/2026-12-06-gemm-compare-passes-fewtiles-s28-h100.json):
// 32 clusters of 4 ran at 0.74-0.88x the same tiles' 32 clusters of 2 -- some of them waited for a
// second wave -- while 8 clusters of 8 ran at 1.71x.
inline std::int64_t hopper_resident_clusters(int sm_count, int ctas) {
  constexpr std::int64_t kGpcs = 8;
  const std::int64_t tpcs = sm_count / 2, per = ctas / 2;
  return std::max<std::int64_t>(0, (tpcs - kGpcs * (per - 1)) / per);
}
// The generic kernels' split (split_k_clusters): the most CTAs a cluster -- 2, 4 or 8, the
// portable cluster sizes -- over which each tile's K loop is split while the tiles' clusters all
// run at once (hopper_resident_clusters) and each CTA keeps a K loop of at least 2048 (the rule
// above for 2; 1: no split).
inline int split_k_cluster_ranks(std::int64_t tiles, std::int64_t K, int sm_count) {
  int ranks = 1;
  for (int r = 2; r <= 8; r *= 2)
    if (tiles <= hopper_resident_clusters(sm_count, r) && K >= 2048 * r) ranks = r;
  return ranks;
}
inline bool hopper_split_k(std::int64_t tiles, std::int64_t K, std::int64_t ring_smem, std::int64_t bm,
                           std::int64_t bn, int sm_count, std::int64_t smem_cap) {
  return hopper_split_k_pays(tiles, K, sm_count) && ring_smem + hopper_split_k_smem(bm, bn) <= smem_cap;
}

}  // namespace tessel::passes
