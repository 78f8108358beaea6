// kernels::flash_attention on the GPU against float64 on sampled rows (O and LSE): batch, heads,
// GQA and MQA, Sq != Sk both ways, tails, causal and not, every head dimension the issue lists,
// BHSD strides, both dtypes; outputs poisoned with NaN first; a rerun bit-identical; the library
// entry point's errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <string>

#include "support/TestSupport.hpp"
#include "tessel/kernels/attention/AttentionReference.hpp"
#include "tessel/kernels/attention/FlashAttention.hpp"
#include "tessel/runtime/Driver.hpp"

namespace {

namespace T = tessel;
using T::DType;
using T::Tensor;

struct Case {
  std::int64_t B, H, Hkv, Sq, Sk, D;
  bool causal;
  bool bhsd = false;  // Q, K and V stored [B, H, S, D], passed as their [B, S, H, D] views
};

std::string describe(const Case& c, DType t) {
  return "B" + std::to_string(c.B) + " H" + std::to_string(c.H) + "/" + std::to_string(c.Hkv) + " Sq" +
         std::to_string(c.Sq) + " Sk" + std::to_string(c.Sk) + " D" + std::to_string(c.D) +
         (c.causal ? " causal" : "") + (c.bhsd ? " BHSD" : "") + " " + std::string(T::dtype_name(t));
}

Tensor random_input(std::int64_t B, std::int64_t S, std::int64_t H, std::int64_t D, DType t, bool bhsd,
                    std::uint64_t seed) {
  if (!bhsd) {
    Tensor x = Tensor::empty({B, S, H, D}, t);
    x.fill_random(seed, -2, 2);
    return x;
  }
  Tensor x = Tensor::empty({B, H, S, D}, t);
  x.fill_random(seed, -2, 2);
  return x.permute({0, 2, 1, 3});
}

void check(const Case& c, DType t, const T::JitOptions& jit = {},
           std::optional<T::kernels::AttentionConfig> config = std::nullopt) {
  SCOPED_TRACE(describe(c, t) + (config ? " config " + config->describe() : std::string()));
  std::mt19937_64 seeds(std::random_device{}());
  Tensor q = random_input(c.B, c.Sq, c.H, c.D, t, c.bhsd, seeds());
  Tensor k = random_input(c.B, c.Sk, c.Hkv, c.D, t, c.bhsd, seeds());
  Tensor v = random_input(c.B, c.Sk, c.Hkv, c.D, t, c.bhsd, seeds());
  T::kernels::AttentionOptions o;
  o.causal = c.causal;
  o.jit = jit;
  o.config = config;
  T::kernels::AttentionShape s;
  s.batch = c.B, s.heads = c.H, s.kv_heads = c.Hkv, s.seqlen_q = c.Sq, s.seqlen_k = c.Sk, s.dim = c.D;
  if (c.bhsd) {
    s.q_strides = q.strides();
    s.k_strides = k.strides();
    s.v_strides = v.strides();
  }
  T::JitKernel kernel = T::kernels::make_flash_attention(s, t, o);
  Tensor out = Tensor::empty({c.B, c.Sq, c.H, c.D}, t), lse = Tensor::empty({c.B, c.H, c.Sq}, DType::f32);
  out.fill(std::nan(""));
  lse.fill(std::nan(""));
  kernel.launch({q, k, v, out, lse});
  T::check_cu(T::driver().cuCtxSynchronize(), "cuCtxSynchronize");

  const std::vector<double> qh = q.to_host_f64(), kh = k.to_host_f64(), vh = v.to_host_f64();
  const std::vector<double> oh = out.to_host_f64(), lh = lse.to_host_f64();
  // Sampled rows: the first and last of every (batch, head) and a few between.
  const std::vector<T::kernels::AttentionSample> rows = T::kernels::choose_attention_samples(s, 64, 5);
  ASSERT_FALSE(rows.empty());
  const auto ref = T::kernels::attention_reference(qh, kh, vh, s, c.causal, 0.0, rows);
  T::kernels::AttentionRows got;
  for (const auto& r : rows) {
    for (std::int64_t d = 0; d < c.D; ++d)
      got.O.push_back(oh[static_cast<size_t>(((r.batch * c.Sq + r.row) * c.H + r.head) * c.D + d)]);
    got.LSE.push_back(lh[static_cast<size_t>((r.batch * c.H + r.head) * c.Sq + r.row)]);
  }
  const T::kernels::AttentionError err = T::kernels::attention_error(ref, got);
  EXPECT_LE(err.O, t == DType::f16 ? 5e-3 : 2e-2) << "O: relative error " << err.O;
  EXPECT_LE(err.LSE, 1e-3) << "LSE: relative error " << err.LSE;

  // Every element written (no NaN left from the poison) -- the sampled rows above aside.
  for (size_t i = 0; i < oh.size(); ++i)
    ASSERT_FALSE(std::isnan(oh[i])) << "O element " << i << " not written";
  for (size_t i = 0; i < lh.size(); ++i)
    ASSERT_FALSE(std::isnan(lh[i])) << "LSE element " << i << " not written";

  // The library entry point: the same kernel, bit-identical results.
  T::kernels::AttentionOutput again = T::kernels::flash_attention(q, k, v, o);
  T::check_cu(T::driver().cuCtxSynchronize(), "cuCtxSynchronize");
  std::vector<unsigned char> a(static_cast<size_t>(out.nbytes())), b2(static_cast<size_t>(out.nbytes()));
  out.copy_to_host(a.data());
  again.O.copy_to_host(b2.data());
  EXPECT_EQ(0, std::memcmp(a.data(), b2.data(), a.size())) << "a rerun is not bit-identical (O)";
  std::vector<float> l1(static_cast<size_t>(lse.numel())), l2(l1.size());
  lse.copy_to_host(l1.data());
  again.LSE.copy_to_host(l2.data());
  if (std::memcmp(l1.data(), l2.data(), l1.size() * sizeof(float)) != 0) {
    // Which rows, and whether the same kernel launched again differs too (a race) or only the
    // library entry's (another kernel).
    std::string rows;
    int shown = 0;
    for (size_t i = 0; i < l1.size() && shown < 6; ++i)
      if (std::memcmp(&l1[i], &l2[i], sizeof(float)) != 0) {
        rows += " [" + std::to_string(i) + "] " + std::to_string(l1[i]) + " vs " + std::to_string(l2[i]);
        ++shown;
      }
    Tensor out3 = Tensor::empty({c.B, c.Sq, c.H, c.D}, t), lse3 = Tensor::empty({c.B, c.H, c.Sq}, DType::f32);
    kernel.launch({q, k, v, out3, lse3});
    T::check_cu(T::driver().cuCtxSynchronize(), "cuCtxSynchronize");
    std::vector<float> l3(l1.size());
    lse3.copy_to_host(l3.data());
    ADD_FAILURE() << "a rerun is not bit-identical (LSE):" << rows << "; the same kernel launched again is "
                  << (std::memcmp(l1.data(), l3.data(), l1.size() * sizeof(float)) == 0 ? "identical" : "different too")
                  << "; kernel " << kernel.info().path;
  }
}

class FlashAttentionGpu : public ::testing::TestWithParam<std::tuple<int, bool, DType>> {};

TEST_P(FlashAttentionGpu, AgainstFloat64) {
  TESSEL_REQUIRE_GPU();
  auto [D, causal, t] = GetParam();
  const Case cases[] = {
      {1, 1, 1, 1, 1, D, causal},          {2, 8, 8, 128, 128, D, causal},
      {1, 8, 2, 17, 1000, D, causal},      {2, 8, 1, 1000, 17, D, causal},
      {1, 1, 1, 4096, 4096, D, causal},    {2, 8, 2, 1000, 1000, D, causal, true},
      {1, 8, 8, 1, 4096, D, causal, true}, {1, 1, 1, 4096, 128, D, causal},
  };
  for (const Case& c : cases) check(c, t);
}

INSTANTIATE_TEST_SUITE_P(HeadDims, FlashAttentionGpu,
                         ::testing::Combine(::testing::Values(64, 96, 128, 256), ::testing::Bool(),
                                            ::testing::Values(DType::f16, DType::bf16)),
                         [](const auto& info) {
                           return "D" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "_causal_" : "_") +
                                  std::string(T::dtype_name(std::get<2>(info.param)));
                         });

TEST(FlashAttentionGpuErrors, ArgumentsByMessage) {
  TESSEL_REQUIRE_GPU();
  auto expect_error = [](auto&& f, const std::string& needle) {
    try {
      f();
      ADD_FAILURE() << "no error; expected one containing: " << needle;
    } catch (const T::Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  Tensor q = Tensor::empty({1, 64, 4, 64}, DType::f16), k = Tensor::empty({1, 64, 3, 64}, DType::f16);
  expect_error([&] { T::kernels::flash_attention(q, k, k); }, "H must be a multiple of H_kv");
  Tensor kb = Tensor::empty({1, 64, 2, 64}, DType::bf16);
  expect_error([&] { T::kernels::flash_attention(q, kb, kb); }, "all three must have one dtype");
  Tensor k3 = Tensor::empty({64, 2, 64}, DType::f16);
  expect_error([&] { T::kernels::flash_attention(q, k3, k3); }, "Q, K and V are 4-D");
  Tensor kd = Tensor::empty({1, 64, 2, 32}, DType::f16);
  expect_error([&] { T::kernels::flash_attention(q, kd, kd); },
               "agree in B (dimension 0) and D (dimension 3)");
  Tensor qt = Tensor::empty({1, 64, 64, 4}, DType::f16).permute({0, 1, 3, 2});
  Tensor k2 = Tensor::empty({1, 64, 2, 64}, DType::f16);
  expect_error([&] { T::kernels::flash_attention(qt, k2, k2); }, "the head dimension must be contiguous");
}

}  // namespace

namespace {

// Small cases for compute-sanitizer (scripts/gpu-check.sh runs racecheck and synccheck on them):
// the TMA ring, the producer warpgroup and the consumers' named barriers, causal and not.
TEST(FlashAttentionGpuSmall, RingsAndRoles) {
  TESSEL_REQUIRE_GPU();
  check({2, 4, 2, 200, 300, 64, true}, DType::f16);
  check({1, 2, 1, 130, 129, 128, false, true}, DType::bf16);
  check({1, 3, 1, 333, 1000, 128, true}, DType::bf16);
}

// The same programs with the Hopper pipeline's pieces switched off one by one: the cp.async
// schedule (async_pipeline), the warpgroups unscheduled (pingpong), and mma.sync (wgmma).
TEST(FlashAttentionGpuSmall, SwitchesGiveTheSameResults) {
  TESSEL_REQUIRE_GPU();
  T::JitOptions no_pipeline, no_pingpong, no_wgmma, uniform_roles;
  no_pipeline.disable_async_pipeline = true;
  no_pingpong.disable_pingpong = true;
  no_wgmma.disable_wgmma = true;
  uniform_roles.uniform_roles = true;  // roles and warpgroup indices broadcast from lane 0
  for (const T::JitOptions& jo : {no_pipeline, no_pingpong, no_wgmma, uniform_roles}) {
    check({2, 4, 2, 200, 300, 64, true}, DType::f16, jo);
    check({1, 2, 1, 130, 1029, 128, false, true}, DType::bf16, jo);
  }
}

}  // namespace

namespace {

// The ring schedules at both head dimensions, with the asynchronous wgmma passes on and off:
// gemms issued asynchronously with their waits placed (P V of a block retired in the next
// iteration, its V stage released one iteration late), the opt-in rotation (the loop split where
// the mask turns on, each part rotated), 128x192 tiles at
// D = 64 with three stages, and every gemm waiting for itself; tails in both lengths, causal and
// not, several blocks of keys per CTA.
TEST(FlashAttentionGpuSmall, AsyncGemmSchedules) {
  TESSEL_REQUIRE_GPU();
  using Schedule = T::kernels::AttentionConfig::Schedule;
  T::JitOptions sync_gemms, rotated;
  sync_gemms.disable_async_gemm = true;
  rotated.rotate_gemm_loops = true;  // split at the mask, each part rotated (opt-in)
  for (const T::JitOptions& jo : {T::JitOptions{}, rotated, sync_gemms})
    for (Schedule sc : {Schedule::ring_pingpong, Schedule::ring})
      for (bool causal : {false, true}) {
        SCOPED_TRACE(std::string(jo.rotate_gemm_loops ? "rotated" : jo.disable_async_gemm ? "sync gemms" : "default") +
                     (causal ? ", causal" : ""));
        T::kernels::AttentionConfig c128{128, 128, 256, 2, sc}, c192{128, 192, 256, 3, sc};
        check({2, 4, 2, 300, 1000, 128, causal}, DType::bf16, jo, c128);
        check({1, 4, 4, 257, 777, 64, causal}, DType::f16, jo, c128);
        check({1, 4, 1, 500, 1300, 64, causal}, DType::bf16, jo, c192);
      }
}

// Under gemm_from_passes, attention on the ring is persistent: few blocks (1, 3, 5) loop over
// the (query block, head, batch) tiles, Q loaded per tile by the producer into two slots
// (plan_tile_loads; and, once, by the consumers behind their barriers: disable_tile_loads), the
// warpgroups' turns (ping-pong) inside each tile. Causal tiles see different numbers of key
// blocks, so the ring's position is carried from tile to tile (ring_base): Sq > Sk (the first
// query blocks see no key: tiles of no ring iteration, O = 0 and LSE = -inf), Sq < Sk, long rows,
// three stages. Tails in both lengths, GQA, both ring schedules. (racecheck/synccheck:
// scripts/gpu-passes.sh)
TEST(FlashAttentionGpuSmall, PersistentFromThePasses) {
  TESSEL_REQUIRE_GPU();
  if (T::current_device().arch() != "sm_90a") GTEST_SKIP() << "SKIPPED: not an sm_90a GPU";
  using Schedule = T::kernels::AttentionConfig::Schedule;
  for (int ctas : {1, 3, 5}) {
    T::JitOptions jo;
    jo.persistent_rings = true;
    jo.max_persistent_ctas = ctas;
    for (Schedule sc : {Schedule::ring_pingpong, Schedule::ring}) {
      T::kernels::AttentionConfig c128{128, 128, 256, 2, sc};
      check({2, 4, 2, 300, 1000, 128, false}, DType::bf16, jo, c128);
      check({1, 3, 1, 333, 1000, 128, true}, DType::f16, jo, c128);
      check({2, 2, 1, 1000, 300, 64, true}, DType::bf16, jo, c128);
      check({1, 2, 2, 4096, 4096, 128, true}, DType::bf16, jo, c128);
      check({1, 3, 1, 700, 2000, 64, true}, DType::f16, jo, T::kernels::AttentionConfig{128, 192, 256, 3, sc});
    }
  }
  T::JitOptions consumers_load;
  consumers_load.persistent_rings = true;
  consumers_load.max_persistent_ctas = 3;
  consumers_load.disable_tile_loads = true;
  check({1, 3, 1, 333, 1000, 128, true}, DType::f16, consumers_load,
        T::kernels::AttentionConfig{128, 128, 256, 2, Schedule::ring_pingpong});
  check({2, 2, 1, 1000, 300, 64, true}, DType::bf16, consumers_load,
        T::kernels::AttentionConfig{128, 128, 256, 2, Schedule::ring});
}

// The library's own choices for long loops (sessions 17 and 19): D = 64 on 192 query rows over
// the ring where a query row sees 4096 keys or more on average, not causal (128 keys a step, two
// stages, the second gemm rotated, persistent where 128 divides Sk -- since session 24 -- else 160
// keys in one stage; causal loops take 64-row tiles since
// session 20), D = 128 non-causal persistent; tails in both lengths, GQA, Sq != Sk.
TEST(FlashAttentionGpuSmall, DefaultConfigsOfLongLoops) {
  TESSEL_REQUIRE_GPU();
  if (T::current_device().arch() != "sm_90a") GTEST_SKIP() << "SKIPPED: not an sm_90a GPU";
  for (const Case& c : {Case{1, 2, 1, 4200, 4200, 64, false}, Case{1, 2, 2, 8300, 8300, 64, true},
                        Case{2, 2, 1, 700, 5000, 64, false}, Case{1, 3, 1, 1100, 4500, 128, false},
                        Case{1, 2, 1, 1000, 4096, 64, false}}) {
    T::kernels::AttentionShape s;
    s.batch = c.B, s.heads = c.H, s.kv_heads = c.Hkv, s.seqlen_q = c.Sq, s.seqlen_k = c.Sk, s.dim = c.D;
    const auto d = T::kernels::default_attention_config(s, DType::bf16, c.causal, "sm_90a");
    EXPECT_EQ(d.describe(), c.D == 128        ? "128x128 s2 t256 ring+pingpong persistent"
                            : c.causal        ? "64x128 s1 t128 ring lazy-rescale"
                            : c.Sk % 128 == 0 ? "192x128 s2 t384 ring persistent"
                                              : "192x160 s1 t384 ring persistent");
    check(c, DType::bf16);
  }
}

// Session 20's defaults: D = 64 with more than 64 query rows, causal or below 4096 keys a row on
// average, on 64-row ring tiles of one consumer warpgroup; D = 128 causal with ping-pong, persistent, one stage of 256
// keys past 768 keys a row (two of 128 up to it); lazy rescaling on the 64-row tiles and the
// 256-key ones (session 32). Tails in both lengths, GQA and MQA, Sq != Sk
// both ways (rows that see no key included), both dtypes.
TEST(FlashAttentionGpuSmall, DefaultConfigsOfShortLoopsAndCausal) {
  TESSEL_REQUIRE_GPU();
  if (T::current_device().arch() != "sm_90a") GTEST_SKIP() << "SKIPPED: not an sm_90a GPU";
  using Schedule = T::kernels::AttentionConfig::Schedule;
  struct Want {
    Case c;
    DType t;
    const char* config;
  };
  for (const Want& w : {Want{{2, 4, 2, 1000, 1000, 64, false}, DType::bf16, "64x128 s1 t128 ring lazy-rescale"},
                        Want{{1, 3, 1, 777, 900, 64, true}, DType::f16, "64x128 s1 t128 ring lazy-rescale"},
                        Want{{1, 2, 2, 1300, 1100, 64, true}, DType::bf16, "64x128 s1 t128 ring lazy-rescale"},
                        Want{{1, 2, 1, 4500, 4700, 64, true}, DType::f16, "64x128 s1 t128 ring lazy-rescale"},
                        Want{{1, 2, 2, 100, 3000, 64, false}, DType::bf16, "64x128 s1 t128 ring lazy-rescale"},
                        Want{{2, 4, 2, 1500, 1500, 128, true}, DType::bf16, "128x128 s2 t256 ring+pingpong persistent"},
                        Want{{1, 4, 1, 3000, 3300, 128, true}, DType::f16, "128x256 s1 t256 ring+pingpong persistent lazy-rescale"},
                        Want{{1, 2, 2, 2100, 1800, 128, true}, DType::bf16, "128x256 s1 t256 ring+pingpong persistent lazy-rescale"},
                        Want{{2, 3, 3, 2049, 2049, 128, true}, DType::bf16, "128x256 s1 t256 ring+pingpong persistent lazy-rescale"}}) {
    T::kernels::AttentionShape s;
    s.batch = w.c.B, s.heads = w.c.H, s.kv_heads = w.c.Hkv, s.seqlen_q = w.c.Sq, s.seqlen_k = w.c.Sk, s.dim = w.c.D;
    const auto d = T::kernels::choose_attention_config(s, w.t, w.c.causal, "sm_90a").config;
    SCOPED_TRACE(s.describe() + (w.c.causal ? " causal" : ""));
    EXPECT_EQ(d.describe(), w.config);
    EXPECT_NE(d.schedule, Schedule::cp_async);
    check(w.c, w.t);
  }
}

// Session 20's tiles on small instances, for compute-sanitizer (scripts/gpu-check.sh's
// sanitizers step): 64 rows on one consumer warpgroup and a producer warp, one stage; the
// warpgroups taking turns, persistent, on 256 keys in one stage and on 128 in two -- causal with
// Sq > Sk, so that tiles whose rows see no key (a ring loop of no steps) sit between full ones.
TEST(FlashAttentionGpuSmall, SessionTwentyTilesSmall) {
  TESSEL_REQUIRE_GPU();
  if (T::current_device().arch() != "sm_90a") GTEST_SKIP() << "SKIPPED: not an sm_90a GPU";
  using Schedule = T::kernels::AttentionConfig::Schedule;
  const T::JitOptions jo;
  for (bool causal : {false, true})
    check({1, 2, 1, 200, 300, 64, causal}, DType::bf16, jo, T::kernels::AttentionConfig{64, 128, 128, 1, Schedule::ring});
  check({1, 2, 2, 700, 300, 128, true}, DType::f16, jo,
        T::kernels::AttentionConfig{128, 256, 256, 1, Schedule::ring_pingpong, true});
  check({1, 2, 1, 500, 330, 128, true}, DType::bf16, jo,
        T::kernels::AttentionConfig{128, 128, 256, 2, Schedule::ring_pingpong, true});
}

// Key blocks that are multiples of 16 but not of 32 (wgmma m64n176 / n144 / n80): FlashAttention
// 3's 128x176 at D = 128 with and without turns, persistent, Sk not a multiple of 176 (the last
// block masked); a causal 128x80 ring with Sq != Sk and GQA; against float64, reruns bit-identical.
TEST(FlashAttentionGpuSmall, KeyBlocksOfSixteens) {
  TESSEL_REQUIRE_GPU();
  if (T::current_device().arch() != "sm_90a") GTEST_SKIP() << "SKIPPED: not an sm_90a GPU";
  using Schedule = T::kernels::AttentionConfig::Schedule;
  const T::JitOptions jo;
  check({2, 4, 4, 1000, 1000, 128, false}, DType::bf16, jo,
        T::kernels::AttentionConfig{128, 176, 256, 2, Schedule::ring_pingpong, true});
  check({1, 4, 2, 700, 1234, 128, false}, DType::f16, jo,
        T::kernels::AttentionConfig{128, 176, 256, 2, Schedule::ring, true});
  check({1, 2, 2, 300, 500, 128, false}, DType::bf16, jo,
        T::kernels::AttentionConfig{128, 144, 256, 2, Schedule::ring_pingpong, true});
  check({1, 4, 1, 333, 900, 128, true}, DType::bf16, jo, T::kernels::AttentionConfig{128, 80, 256, 2, Schedule::ring});
}

// Head dimensions between the fast ones (any multiple of 8 up to 256 is legal): each pads to the
// next tile width (56 -> 64, 120 -> 128) and takes that width's default -- the TMA ring where the
// padded width has one (the columns past D zero-filled by the copy), cp.async elsewhere. Causal
// and not, tails in both lengths, GQA.
TEST(FlashAttentionGpuSmall, DefaultConfigsOfPaddedHeadDims) {
  TESSEL_REQUIRE_GPU();
  for (std::int64_t D : {8, 40, 56, 72, 120, 136, 200, 248})
    for (bool causal : {false, true}) {
      check({1, 4, 2, 333, 1100, D, causal}, D % 16 == 8 ? DType::bf16 : DType::f16);
      check({2, 2, 1, 1500, 1300, D, causal}, DType::bf16);
    }
}

// AttentionConfig::kv_interleave (opt-in, session 19): GQA's query heads taken K/V head by K/V
// head across blockIdx.y -- on the ring, causal and not, persistent, MQA, and MHA (no change).
TEST(FlashAttentionGpuSmall, KvInterleavedHeads) {
  TESSEL_REQUIRE_GPU();
  if (T::current_device().arch() != "sm_90a") GTEST_SKIP() << "SKIPPED: not an sm_90a GPU";
  using Schedule = T::kernels::AttentionConfig::Schedule;
  const T::JitOptions jo;
  const T::kernels::AttentionConfig ring{128, 128, 256, 2, Schedule::ring, false, true};
  const T::kernels::AttentionConfig persistent{128, 128, 256, 2, Schedule::ring_pingpong, true, true};
  check({2, 8, 2, 300, 1000, 128, true}, DType::bf16, jo, ring);
  check({1, 6, 3, 333, 333, 64, false}, DType::f16, jo, ring);
  check({2, 8, 1, 257, 700, 128, false}, DType::bf16, jo, persistent);
  check({1, 4, 4, 200, 200, 128, true}, DType::f16, jo, ring);
}

// AttentionConfig::persistent (the config's own switch, the tuning space's knob): the default
// jit options, persistence asked by the config alone, 2 and 7 blocks (TESSEL_MAX_PERSISTENT_CTAS's
// option) and the GPU's own count; causal and not, tails, GQA, both ring schedules.
TEST(FlashAttentionGpuSmall, PersistentConfig) {
  TESSEL_REQUIRE_GPU();
  if (T::current_device().arch() != "sm_90a") GTEST_SKIP() << "SKIPPED: not an sm_90a GPU";
  using Schedule = T::kernels::AttentionConfig::Schedule;
  for (int ctas : {2, 7, 0}) {
    T::JitOptions jo;
    jo.max_persistent_ctas = ctas;
    for (Schedule sc : {Schedule::ring_pingpong, Schedule::ring}) {
      const T::kernels::AttentionConfig c{128, 128, 256, 2, sc, true};
      check({2, 4, 2, 300, 1000, 128, false}, DType::bf16, jo, c);
      check({1, 3, 1, 333, 1000, 128, true}, DType::f16, jo, c);
      check({2, 3, 3, 1111, 555, 64, false}, DType::f16, jo, c);
    }
  }
}

}  // namespace

namespace {

// Three consumer warpgroups over 192 query rows (FlashAttention 3's tile at D = 64; in the tuning
// space since session 16): the ring (its producer a fourth warpgroup, setmaxnreg 160 / 24) and
// cp.async, 128 and 192 keys a block, causal and not, tails in both lengths, GQA; the ring also
// persistent under persistent_rings on 3 blocks.
TEST(FlashAttentionGpuSmall, ThreeConsumerWarpgroups) {
  TESSEL_REQUIRE_GPU();
  using Schedule = T::kernels::AttentionConfig::Schedule;
  T::JitOptions persistent;
  persistent.persistent_rings = true;
  persistent.max_persistent_ctas = 3;
  for (bool causal : {false, true}) {
    for (Schedule sc : {Schedule::ring, Schedule::cp_async}) {
      check({2, 4, 2, 500, 777, 64, causal}, DType::bf16, {}, T::kernels::AttentionConfig{192, 128, 384, 2, sc});
      check({1, 3, 3, 700, 450, 64, causal}, DType::f16, {}, T::kernels::AttentionConfig{192, 192, 384, 2, sc});
      if (T::current_device().arch() == "sm_90a")  // 176 KB of shared memory at D = 128
        check({1, 2, 1, 400, 1000, 128, causal}, DType::bf16, {}, T::kernels::AttentionConfig{192, 128, 384, 2, sc});
    }
    if (T::current_device().arch() == "sm_90a")
      check({2, 4, 2, 1000, 1200, 64, causal}, DType::bf16, persistent,
            T::kernels::AttentionConfig{192, 128, 384, 2, Schedule::ring});
  }
}

}  // namespace

namespace {

// One consumer warpgroup over 64 query rows, a producer warp beside it (decode-like shapes: one
// query row or a few against many keys; scripts/gpu-attention-ab.sh times them): the ring at two
// and three stages, 64 and 128 keys a block, causal (bottom-right: the one row sees every key)
// and not, GQA.
TEST(FlashAttentionGpuSmall, OneConsumerWarpgroupDecode) {
  TESSEL_REQUIRE_GPU();
  using Schedule = T::kernels::AttentionConfig::Schedule;
  for (bool causal : {true, false})
    for (T::kernels::AttentionConfig c : {T::kernels::AttentionConfig{64, 64, 128, 2, Schedule::ring},
                                          T::kernels::AttentionConfig{64, 64, 128, 3, Schedule::ring},
                                          T::kernels::AttentionConfig{64, 128, 128, 2, Schedule::ring}}) {
      check({2, 8, 2, 1, 1000, 128, causal}, DType::bf16, {}, c);
      check({1, 4, 4, 7, 3000, 64, causal}, DType::f16, {}, c);
    }
}

}  // namespace

namespace {

// O and LSE's bytes from one launch of the kernel `o` picks for these inputs.
std::pair<std::vector<unsigned char>, std::vector<unsigned char>> attention_bytes(
    const T::kernels::AttentionShape& s, DType t, const T::kernels::AttentionOptions& o, const Tensor& q,
    const Tensor& k, const Tensor& v) {
  T::JitKernel kernel = T::kernels::make_flash_attention(s, t, o);
  Tensor out = Tensor::empty({s.batch, s.seqlen_q, s.heads, s.dim}, t);
  Tensor lse = Tensor::empty({s.batch, s.heads, s.seqlen_q}, DType::f32);
  out.fill(std::nan(""));
  lse.fill(std::nan(""));
  kernel.launch({q, k, v, out, lse});
  T::check_cu(T::driver().cuCtxSynchronize(), "cuCtxSynchronize");
  std::vector<unsigned char> ob(static_cast<size_t>(out.nbytes())), lb(static_cast<size_t>(lse.nbytes()));
  out.copy_to_host(ob.data());
  lse.copy_to_host(lb.data());
  return {ob, lb};
}

// AttentionConfig::lazy_rescale (a row's max kept until a key block passes it by 8 exponent
// units) on every schedule against float64 -- tails in both lengths, causal and not, GQA, the
// persistent rings -- and skip_unit_scales changing no bit: the same config compiled with
// JitOptions::unit_scale_skips and with JitOptions::disable_unit_scale_skips gives bit-identical
// O and LSE (the default configs at D = 64 and 128, lazy where causal or on the 64-row ring, a
// lazy 192-row one and an eager one, causal and not).
TEST(FlashAttentionGpuSmall, LazyRescaleAndUnitScaleSkips) {
  TESSEL_REQUIRE_GPU();
  using Schedule = T::kernels::AttentionConfig::Schedule;
  using Config = T::kernels::AttentionConfig;
  const bool hopper = T::current_device().arch() == "sm_90a";
  T::JitOptions persistent;
  persistent.persistent_rings = true;
  persistent.max_persistent_ctas = 3;
  auto lazy = [](Config c) {
    c.lazy_rescale = true;
    return c;
  };
  for (bool causal : {false, true}) {
    check({2, 4, 2, 300, 1000, 64, causal}, DType::bf16, {}, lazy(Config{64, 128, 128, 1, Schedule::ring}));
    check({1, 2, 1, 130, 1029, 64, causal}, DType::f16, {},
          lazy(Config{128, 64, 256, 2, Schedule::cp_async}));
    check({1, 4, 4, 257, 777, 128, causal}, DType::bf16, {},
          lazy(Config{128, 128, 256, 2, Schedule::ring_pingpong}));
    if (hopper) {
      check({1, 4, 4, 257, 777, 128, causal}, DType::f16, persistent,
            lazy(Config{128, 128, 256, 2, Schedule::ring_pingpong}));
      check({2, 4, 2, 1000, 1200, 64, causal}, DType::bf16, persistent,
            lazy(Config{192, 128, 384, 2, Schedule::ring}));
    }
  }
  std::mt19937_64 seeds(std::random_device{}());
  const std::pair<std::optional<Config>, int> cases[] = {
      {std::nullopt, 128},
      {std::nullopt, 64},
      {lazy(Config{192, 128, 384, 2, Schedule::ring}), 64},
      {Config{128, 128, 256, 2, Schedule::ring_pingpong}, 64}};
  for (bool causal : {false, true})
    for (const auto& [c, dim] : cases) {
      T::kernels::AttentionShape s;
      s.batch = 2, s.heads = 4, s.kv_heads = 2, s.seqlen_q = 700, s.seqlen_k = 1500, s.dim = dim;
      SCOPED_TRACE(std::string(causal ? "causal " : "") + "D = " + std::to_string(dim) + " " +
                   (c ? c->describe() : std::string("default config")));
      const DType t = DType::bf16;
      Tensor q = random_input(s.batch, s.seqlen_q, s.heads, s.dim, t, false, seeds());
      Tensor k = random_input(s.batch, s.seqlen_k, s.kv_heads, s.dim, t, false, seeds());
      Tensor v = random_input(s.batch, s.seqlen_k, s.kv_heads, s.dim, t, false, seeds());
      T::kernels::AttentionOptions with, without;
      with.causal = without.causal = causal;
      with.config = without.config = c;
      with.jit.unit_scale_skips = true;
      without.jit.disable_unit_scale_skips = true;
      const auto a = attention_bytes(s, t, with, q, k, v), b = attention_bytes(s, t, without, q, k, v);
      EXPECT_TRUE(a.first == b.first) << "O differs with and without skip_unit_scales";
      EXPECT_TRUE(a.second == b.second) << "LSE differs with and without skip_unit_scales";
    }
}

}  // namespace
