// The GEMM ranking model (see include/tessel/autotune/CostModel.hpp for what it is and is not).
#include "tessel/autotune/CostModel.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "passes/HopperPolicy.hpp"

namespace tessel::autotune {

namespace {

// Whether select_hopper_gemm (src/passes/SelectHopperGemm.cpp) would take the tile: 1 or 2
// consumer warpgroups, block_M a multiple of 64 per consumer up to 256, block_N a multiple of 64
// up to 256, block_K 32 or a multiple of 64, at most 192 accumulators per consumer thread.
// (The model only ranks; a config it misjudges still compiles and is timed if it ranks high.)
bool wgmma_tile(int bm, int bn, int bk, int threads) {
  if (threads % 128 != 0) return false;
  const int consumers = threads / 128;
  if (consumers < 1 || consumers > 2) return false;
  if (bm % (64 * consumers) != 0 || bm > 256) return false;
  if (bn % 64 != 0 || bn > 256) return false;
  if (!(bk == 32 || bk % 64 == 0)) return false;
  return (bm / consumers / 64) * (bn / 2) <= 192;
}

// kernels::Matmul's split-K over `splits` shares: plan_matmul's bandwidth model (fitted to the
// H200's skinny GEMMs, which this model's per-step maxima do not describe) as a ratio to its
// estimate for the default one-kernel config, times this model's cycles for that config -- so
// that the two models' units never mix and a split ranks against the grid by the model that
// knows it.
double split_k_estimated_cycles(long long M, long long N, long long K, int splits, const std::string& arch,
                                int sm_count) {
  kernels::MatmulPlan plan;
  try {
    plan = kernels::plan_matmul(M, N, K, DType::f16, arch, kernels::MatmulStaging::never, splits, sm_count);
  } catch (const std::invalid_argument&) {
    return std::numeric_limits<double>::infinity();  // not a split of this shape: ranks last
  }
  const kernels::MatmulConfig d = kernels::default_matmul_config(M, N, K, DType::f16, arch, sm_count);
  const Config one_kernel{{"block_M", d.block_M}, {"block_N", d.block_N},
                          {"block_K", d.block_K}, {"num_stages", d.num_stages},
                          {"threads", d.threads}, {"panel", d.use_swizzle ? d.panel_size : 0}};
  return gemm_estimated_cycles(M, N, K, one_kernel, arch, sm_count) * plan.estimate_split_us /
         plan.estimate_unsplit_us;
}

}  // namespace

double gemm_estimated_cycles(long long M, long long N, long long K, const Config& c, const std::string& arch,
                             int sm_count) {
  if (gemm_split_k(c) > 1) return split_k_estimated_cycles(M, N, K, gemm_split_k(c), arch, sm_count);
  const int bm = get(c, "block_M", 128), bn = get(c, "block_N", 128), bk = get(c, "block_K", 32);
  const int stages = std::max(1, get(c, "num_stages", 3)), threads = get(c, "threads", 128);
  const bool hopper =
      arch.rfind("sm_90", 0) == 0 && K % 8 == 0 && N % 8 == 0 && wgmma_tile(bm, bn, bk, threads);
  const long long tiles_m = (M + bm - 1) / bm, tiles_n = (N + bn - 1) / bn, tiles = tiles_m * tiles_n;
  const long long sms = std::max(1, sm_count);
  const long long waves = (tiles + sms - 1) / sms;
  const long long k_steps = (K + bk - 1) / bk;
  // Dense f16 FLOP per cycle per SM is 4096 on sm_90; the fractions are what each path reaches.
  const double rate = 4096.0 * (hopper ? (threads == 256 ? 0.8 : 0.75) : 0.4);
  const double compute = 2.0 * bm * bn * bk / rate;
  const double latency = 2000.0 / std::max(1, stages - 1);         // ~1 us to L2/HBM and back
  const double l2 = (1.0 * bm * bk + 1.0 * bk * bn) * 2.0 / 40.0;  // ~40 B/cycle into one SM
  // The operands' unique bytes of one K step, over the whole GPU's ~1670 B/cycle of HBM.
  const double hbm =
      (1.0 * std::min<long long>(M, tiles_m * bm) * bk + 1.0 * bk * std::min<long long>(N, tiles_n * bn)) *
      2.0 / 1670.0;
  // Split-K over clusters as split_k_clusters decides it (passes/HopperPolicy.hpp): each of a
  // cluster's R CTAs runs 1/R of the K steps, all R streaming at once, and the f32 partial tiles
  // meet in rank 0 over log2(R) rounds through distributed shared memory. A multicast cluster
  // (use_cluster) takes the cluster instead: no split.
  const bool multicast = get(c, "cluster_x", 1) * get(c, "cluster_y", 1) > 1;
  const int ranks = hopper && !multicast ? passes::split_k_cluster_ranks(tiles, K, static_cast<int>(sms)) : 1;
  if (ranks > 1) {
    const double per_step = std::max({compute, latency, l2, ranks * hbm});
    const double rounds = std::log2(static_cast<double>(ranks));
    const double epilogue = 1.0 * bm * bn * 2.0 / 32.0 + rounds * (1.0 * bm * bn * 4.0 / 32.0);
    return static_cast<double>((k_steps + ranks - 1) / ranks) * per_step + 1500.0 + epilogue;
  }
  const double per_step = std::max({compute, latency, l2, hbm});
  const double epilogue = 1.0 * bm * bn * 2.0 / 32.0;
  return static_cast<double>(waves) * (static_cast<double>(k_steps) * per_step + 1500.0 + epilogue);
}

std::function<double(const Config&)> gemm_cost_model(long long M, long long N, long long K, std::string arch,
                                                     int sm_count) {
  return [=](const Config& c) { return gemm_estimated_cycles(M, N, K, c, arch, sm_count); };
}

}  // namespace tessel::autotune
