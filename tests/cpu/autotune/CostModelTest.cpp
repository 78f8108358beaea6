// The GEMM ranking model against the exhaustive H200 tunes stored in bench/results: the measured
// best of each must rank in the model's top quarter (what the default search keeps), the
// model must order the obvious cases (deeper pipelines and wgmma tiles ahead) the right way, and
// split-K candidates rank as kernels::plan_matmul's model has them.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "tessel/autotune/CostModel.hpp"
#include "tessel/kernels/gemm/Matmul.hpp"

namespace {

namespace at = tessel::autotune;

struct Measured {
  at::Config config;
  double ms;
};

std::vector<Measured> load_table(const std::string& name, long long* M, long long* N, long long* K) {
  std::ifstream in(std::filesystem::path(TESSEL_SOURCE_DIR) / "bench/results" / name);
  EXPECT_TRUE(in) << name;
  nlohmann::json j = nlohmann::json::parse(in);
  *M = j["M"], *N = j["N"], *K = j["K"];
  std::vector<Measured> out;
  for (const auto& r : j["table"])
    if (r["status"] == "ok" && r["ms"].is_number())
      out.push_back({r["config"].get<at::Config>(), r["ms"].get<double>()});
  return out;
}

class CostModelOnMeasuredTunes : public ::testing::TestWithParam<std::string> {};

TEST_P(CostModelOnMeasuredTunes, BestMeasuredRanksInTheTopQuarter) {
  long long M = 0, N = 0, K = 0;
  std::vector<Measured> rows = load_table(GetParam(), &M, &N, &K);
  ASSERT_GE(rows.size(), 100u);
  auto model = at::gemm_cost_model(M, N, K, "sm_90a", 132);
  const auto best = std::min_element(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.ms < b.ms; });
  const double best_estimate = model(best->config);
  // Rank = how many configs the model puts strictly ahead of the measured best.
  const auto ahead = std::count_if(rows.begin(), rows.end(),
                                   [&](const Measured& r) { return model(r.config) < best_estimate; });
  EXPECT_LT(static_cast<double>(ahead), 0.25 * static_cast<double>(rows.size()))
      << "measured best " << at::describe(best->config) << " ranks " << ahead << " of " << rows.size();
}

INSTANTIATE_TEST_SUITE_P(H200, CostModelOnMeasuredTunes,
                         ::testing::Values("2026-12-02-tune-1024x1024x1024-h200.json",
                                           "2026-12-02-tune-128x8192x8192-h200.json"),
                         [](const auto& info) {
                           return info.param.substr(16, info.param.find("-h200") - 16);
                         });

TEST(CostModel, OrdersPipelineDepthAndInstructionPath) {
  at::Config shallow{
      {"block_M", 128}, {"block_N", 128}, {"block_K", 64}, {"num_stages", 2}, {"threads", 128}};
  at::Config deep = shallow;
  deep["num_stages"] = 5;
  EXPECT_LT(at::gemm_estimated_cycles(1024, 1024, 1024, deep, "sm_90a", 132),
            at::gemm_estimated_cycles(1024, 1024, 1024, shallow, "sm_90a", 132));
  // The same tile is a wgmma tile on sm_90a and an mma.sync tile on sm_80.
  at::Config big{{"block_M", 128}, {"block_N", 256}, {"block_K", 64}, {"num_stages", 4}, {"threads", 256}};
  EXPECT_LT(at::gemm_estimated_cycles(8192, 8192, 8192, big, "sm_90a", 132),
            at::gemm_estimated_cycles(8192, 8192, 8192, big, "sm_80", 132));
  // More tiles than SMs: twice the work, about twice the estimate.
  const double one = at::gemm_estimated_cycles(4096, 4096, 4096, big, "sm_90a", 132);
  const double two = at::gemm_estimated_cycles(8192, 4096, 4096, big, "sm_90a", 132);
  EXPECT_GT(two / one, 1.7);
  EXPECT_LT(two / one, 2.3);
}

// Few tiles over a long K: split_k_clusters splits each tile over R CTAs (16 tiles of 128x256,
// K = 8192: R = 4), a quarter of the K steps each, which the model counts; a multicast cluster
// (use_cluster) takes the cluster instead and runs every K step itself.
TEST(CostModel, CountsTheSplitOverClustersAndNotForMulticast) {
  at::Config tile{{"block_M", 128}, {"block_N", 256}, {"block_K", 64}, {"num_stages", 3}, {"threads", 256}};
  at::Config multicast = tile;
  multicast["cluster_y"] = 2;
  multicast["cluster_x"] = 1;
  const double split = at::gemm_estimated_cycles(512, 1024, 8192, tile, "sm_90a", 132);
  const double whole = at::gemm_estimated_cycles(512, 1024, 8192, multicast, "sm_90a", 132);
  EXPECT_GT(whole / split, 3.0);
  EXPECT_LT(whole / split, 4.5);
  // Without the split (many tiles), the cluster changes nothing the model sees.
  EXPECT_EQ(at::gemm_estimated_cycles(8192, 8192, 8192, tile, "sm_90a", 132),
            at::gemm_estimated_cycles(8192, 8192, 8192, multicast, "sm_90a", 132));
}

// Split-K (split_k = n): plan_matmul's bandwidth model, as a ratio to its estimate for the
// default one kernel, times this model's cycles for that kernel. On issue 17's skinny shapes the
// split the plan's model picks is the one this model ranks first among the splits, ahead of the
// default kernel it beat by 1.46-1.60x on the H200, and inside the quarter of the space that the
// default search compiles.
TEST(CostModel, RanksSplitKByTheMatmulPlanModel) {
  struct Shape {
    long long M, N, K;
  };
  for (const Shape& p : {Shape{1, 2048, 8192}, Shape{16, 3072, 4096}, Shape{32, 4096, 14336}}) {
    SCOPED_TRACE(std::to_string(p.M) + "x" + std::to_string(p.N) + "x" + std::to_string(p.K));
    const auto model = at::gemm_cost_model(p.M, p.N, p.K, "sm_90a", 132);
    const auto chosen = tessel::kernels::plan_matmul(p.M, p.N, p.K, tessel::DType::f16, "sm_90a");
    ASSERT_TRUE(chosen.split()) << chosen.why;
    const auto d = tessel::kernels::default_matmul_config(p.M, p.N, p.K, tessel::DType::f16, "sm_90a", 132);
    const at::Config one_kernel{{"block_M", d.block_M}, {"block_N", d.block_N},
                                {"block_K", d.block_K}, {"num_stages", d.num_stages},
                                {"threads", d.threads}, {"panel", d.panel_size}};
    const auto space = at::gemm_space("sm_90a", tessel::DType::f16, p.M, p.N, p.K).enumerate({232448, 1024});
    double best_split = std::numeric_limits<double>::infinity();
    int best_shares = 0;
    for (const at::Config& c : space.kept) {
      if (at::gemm_split_k(c) == 1) continue;
      const auto plan =
          tessel::kernels::plan_matmul(p.M, p.N, p.K, tessel::DType::f16, "sm_90a",
                                       tessel::kernels::MatmulStaging::never, at::gemm_split_k(c));
      EXPECT_NEAR(model(c) / model(one_kernel), plan.estimate_split_us / plan.estimate_unsplit_us, 1e-9);
      if (model(c) < best_split) best_split = model(c), best_shares = at::gemm_split_k(c);
    }
    EXPECT_EQ(best_shares, chosen.split_k);
    EXPECT_LT(best_split, model(one_kernel));
    const auto ahead = std::count_if(space.kept.begin(), space.kept.end(),
                                     [&](const at::Config& c) { return model(c) < best_split; });
    EXPECT_LT(static_cast<double>(ahead), 0.25 * static_cast<double>(space.kept.size()));
  }
  // A split the shape cannot take (64 K tiles) ranks last rather than throwing.
  at::Config too_many{{"block_M", 16},  {"block_N", 256}, {"block_K", 64}, {"num_stages", 4},
                      {"threads", 128}, {"panel", 0},     {"split_k", 65}};
  EXPECT_EQ(at::gemm_estimated_cycles(16, 4096, 4096, too_many, "sm_90a", 132),
            std::numeric_limits<double>::infinity());
}

}  // namespace
