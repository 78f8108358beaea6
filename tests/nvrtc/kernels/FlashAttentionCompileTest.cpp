// kernels::make_flash_attention compiles for sm_90a and sm_80 with the default configs at every
// head dimension the issue lists (64, 96, 128, 256) and a padded one (40), causal and not, GQA
// and BHSD strides: no spills; wgmma on sm_90a, mma.sync on sm_80.
#include <gtest/gtest.h>

#include "tessel/kernels/attention/FlashAttention.hpp"
#include "tessel/kernels/gemm/Matmul.hpp"

namespace {

namespace T = tessel;

class FlashAttentionCompile : public ::testing::TestWithParam<std::tuple<int, bool, std::string>> {};

TEST_P(FlashAttentionCompile, NoSpillsAndTheMeantInstructions) {
  auto [D, causal, arch] = GetParam();
  T::kernels::AttentionShape s;
  s.batch = 2, s.heads = 8, s.kv_heads = 2, s.seqlen_q = 1000, s.seqlen_k = 4097, s.dim = D;
  if (causal) s.q_strides = T::kernels::bhsd_strides(s.batch, s.seqlen_q, s.heads, D);
  T::kernels::AttentionOptions o;
  o.causal = causal;
  o.jit.arch = arch;
  for (T::DType t : {T::DType::f16, T::DType::bf16}) {
    auto k = T::kernels::make_flash_attention(s, t, o);
    SCOPED_TRACE(std::string(T::dtype_name(t)) + " registers " + std::to_string(k.resources().registers));
    // On sm_80 ptxas caps the padded D = 40 kernel at 128 registers and spills one 8-byte
    // value; the head dimensions meant to be fast (and every sm_90a kernel) spill nothing.
    const int allowed = arch == "sm_80" && D % 32 != 0 ? 16 : 0;
    EXPECT_LE(k.resources().spill_store_bytes, allowed) << k.compile_log();
    EXPECT_LE(k.resources().spill_load_bytes, allowed) << k.compile_log();
    const std::string& ptx = k.ptx();
    if (arch == "sm_90a" && D % 32 == 0) {
      EXPECT_NE(ptx.find("wgmma.mma_async"), std::string::npos) << "no wgmma";
    } else {
      EXPECT_NE(ptx.find("mma.sync"), std::string::npos) << "no mma.sync";
    }
    // fast_exp2: every exponential one ex2.approx.ftz (exp2f's ex2.approx.f32 came with a range
    // check and two multiplies each); O / l as a reciprocal a row, no division an element.
    EXPECT_NE(ptx.find("ex2.approx.ftz.f32"), std::string::npos) << "the softmax's exp2 is not ex2.approx.ftz";
    EXPECT_EQ(ptx.find("ex2.approx.f32"), std::string::npos) << "an exp2f left";
    EXPECT_EQ(ptx.find("div.rn.f32"), std::string::npos) << "a division an element left";
  }
}

// The default sm_90a kernels keep their occupancy: D <= 64 (the cp.async schedule, 80 KB of
// shared memory) within 128 registers a thread, so two 256-thread CTAs share an SM -- one's
// softmax runs while the other's gemms do (the scale folded into the exponents took it to 130-142,
// one CTA an SM: the program keeps the scale-first form there); D = 128 (ring, setmaxnreg 240)
// within its 168.
// The cp.async kernels ask ptxas for two blocks an SM (__launch_bounds__(256, 2)): left to
// itself it took 129 registers for the non-causal S = 1024 kernel once fold_proven_branches had
// dropped its never-taken mask branch (0.56x cuDNN on an H100 against 0.82x, session 19); capped,
// it keeps 8 bytes a thread in local memory. The 192-row ring (D = 64, long loops) issues P V of
// the previous block behind S (rotate_async_gemms) where its ring has two stages: its source
// waits with one group pending.
TEST(FlashAttentionCompileOccupancy, DefaultKernelsKeepTheirRegisters) {
  for (std::int64_t S : {1024, 4096})
    for (bool causal : {false, true})
      for (std::int64_t D : {64, 128}) {
        T::kernels::AttentionShape s;
        s.batch = 2 * 16384 / S, s.heads = 2048 / D, s.kv_heads = s.heads, s.seqlen_q = s.seqlen_k = S, s.dim = D;
        T::kernels::AttentionOptions o;
        o.causal = causal;
        o.jit.arch = "sm_90a";
        const auto config = T::kernels::choose_attention_config(s, T::DType::bf16, causal, "sm_90a").config;
        for (T::DType t : {T::DType::f16, T::DType::bf16}) {
          auto k = T::kernels::make_flash_attention(s, t, o);
          SCOPED_TRACE("S" + std::to_string(S) + " D" + std::to_string(D) + (causal ? " causal " : " ") +
                       std::string(T::dtype_name(t)) + " " + config.describe());
          EXPECT_LE(k.resources().registers, D <= 64 ? 128 : 168) << k.compile_log();
          const bool cp_async = config.schedule == T::kernels::AttentionConfig::Schedule::cp_async;
          EXPECT_LE(k.resources().spill_store_bytes + k.resources().spill_load_bytes, cp_async ? 16 : 0);
          if (cp_async) {
            EXPECT_NE(k.source().find("__launch_bounds__(256, 2)"), std::string::npos);
          }
          if (config.block_M == 192 && config.num_stages >= 2) {
            EXPECT_NE(k.source().find("tessel::wgmma_wait<1>();"), std::string::npos) << "not rotated";
          }
        }
      }
}

INSTANTIATE_TEST_SUITE_P(HeadDims, FlashAttentionCompile,
                         ::testing::Combine(::testing::Values(40, 64, 96, 128, 256), ::testing::Bool(),
                                            ::testing::Values(std::string("sm_90a"), std::string("sm_80"))),
                         [](const auto& info) {
                           return "D" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "_causal_" : "_") + std::get<2>(info.param);
                         });

}  // namespace

namespace {

// The ring schedules on sm_90a: place_gemm_waits issues both gemms asynchronously, and
// rotate_async_gemms issues O += P V of block j - 1 behind S = Q K^T of block j, so the source
// waits with one group pending (S retired while P V still runs) before the softmax; ptxas keeps
// the wgmmas asynchronous (no serialization warning) and spills nothing. With async_gemm off
// every gemm waits for itself.
class FlashAttentionAsyncGemms : public ::testing::TestWithParam<std::tuple<int, bool, bool>> {};

TEST_P(FlashAttentionAsyncGemms, OverlapTheSoftmaxWithTheSecondGemm) {
  auto [D, pingpong, async] = GetParam();
  T::kernels::AttentionShape s;
  s.batch = 2, s.heads = 4, s.seqlen_q = 1000, s.seqlen_k = 1000, s.dim = D;
  T::kernels::AttentionOptions o;
  o.jit.arch = "sm_90a";
  o.jit.disable_async_gemm = !async;
  o.jit.rotate_gemm_loops = true;  // opt-in: split at the mask and rotated without turns
  // 128 x 128 tiles on two stages (the defaults at this shape are the persistent ring at D = 128
  // and, since session 20, one stage of 64-row tiles at D = 64), one block per tile:
  // rotate_async_gemms rotates neither the persistent ring (its tile loop around the ring loop)
  // nor a one-stage ring.
  T::kernels::AttentionConfig c{128, 128, 256, 2,
                                pingpong ? T::kernels::AttentionConfig::Schedule::ring_pingpong
                                         : T::kernels::AttentionConfig::Schedule::ring};
  o.config = c;
  for (bool causal : {false, true}) {
    o.causal = causal;
    auto k = T::kernels::make_flash_attention(s, T::DType::bf16, o);
    SCOPED_TRACE("causal " + std::to_string(causal) + " config " + c.describe());
    const std::string& src = k.source();
    EXPECT_EQ(k.resources().spill_store_bytes, 0) << k.compile_log();
    // ptxas's report is in the log (so the next check has something to read), without the
    // "wgmma ... serialized" performance warning.
    EXPECT_NE(k.compile_log().find("ptxas"), std::string::npos) << k.compile_log();
    EXPECT_EQ(k.compile_log().find("serialized"), std::string::npos) << k.compile_log();
    if (async) {
      EXPECT_NE(src.find("::run_async("), std::string::npos);
      EXPECT_NE(src.find("::run_rs_async("), std::string::npos);
      // Rotated (no turns): S retired while P V of the previous block still runs.
      EXPECT_EQ(src.find("tessel::wgmma_wait<1>();") != std::string::npos, !pingpong) << src;
    } else {
      EXPECT_EQ(src.find("_async("), std::string::npos);
      EXPECT_EQ(src.find("wgmma_wait<"), std::string::npos);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Schedules, FlashAttentionAsyncGemms,
                         ::testing::Combine(::testing::Values(64, 128), ::testing::Bool(), ::testing::Bool()),
                         [](const auto& info) {
                           return "D" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "_pingpong" : "_ring") +
                                  (std::get<2>(info.param) ? "_async" : "_sync");
                         });

}  // namespace

namespace {

// Causal attention under persistent_rings is persistent (issue 15): each role carries the ring's
// position from tile to tile in one register (ring_base), the rest of the kernel as before --
// no spills, the ring kernels' 168 registers, no wgmma serialization, at both head dimensions
// and both ring schedules.
TEST(FlashAttentionCompilePersistent, CausalKernelsCarryTheRingPosition) {
  using Schedule = T::kernels::AttentionConfig::Schedule;
  for (std::int64_t D : {64, 128})
    for (Schedule sc : {Schedule::ring, Schedule::ring_pingpong}) {
      T::kernels::AttentionShape s;
      s.batch = 2, s.heads = 2048 / D, s.kv_heads = s.heads, s.seqlen_q = s.seqlen_k = 4096, s.dim = D;
      T::kernels::AttentionOptions o;
      o.causal = true;
      o.jit.arch = "sm_90a";
      o.jit.persistent_rings = true;
      o.config = T::kernels::AttentionConfig{128, 128, 256, 2, sc};
      auto k = T::kernels::make_flash_attention(s, T::DType::bf16, o);
      SCOPED_TRACE("D" + std::to_string(D) + " " + o.config->describe());
      EXPECT_NE(k.info().path.find("persistent"), std::string::npos) << k.info().path;
      EXPECT_NE(k.source().find("ring_base[0] = (ring_base[0] + "), std::string::npos);
      EXPECT_LE(k.resources().registers, 168) << k.compile_log();
      EXPECT_EQ(k.resources().spill_store_bytes + k.resources().spill_load_bytes, 0) << k.compile_log();
      EXPECT_EQ(k.compile_log().find("serialized"), std::string::npos) << k.compile_log();
    }
}

// AttentionConfig::persistent asks for the persistent ring with the default jit options (the
// same kernel as under TESSEL_ENABLE=persistent_rings: a tile loop, O stored by TMA); without it
// the grid is one block per tile; on the cp.async schedule it is an error naming the config, and
// on sm_80 (no rings) it changes nothing.
TEST(FlashAttentionCompilePersistent, TheConfigAsksForIt) {
  using Schedule = T::kernels::AttentionConfig::Schedule;
  T::kernels::AttentionShape s;
  s.batch = 2, s.heads = 16, s.kv_heads = 16, s.seqlen_q = s.seqlen_k = 4096, s.dim = 128;
  T::kernels::AttentionOptions o;
  o.jit.arch = "sm_90a";
  o.config = T::kernels::AttentionConfig{128, 128, 256, 2, Schedule::ring_pingpong, true};
  auto k = T::kernels::make_flash_attention(s, T::DType::bf16, o);
  EXPECT_NE(k.info().path.find("persistent"), std::string::npos) << k.info().path;
  EXPECT_EQ(k.resources().spill_store_bytes + k.resources().spill_load_bytes, 0) << k.compile_log();
  T::kernels::AttentionOptions env_o = o;
  env_o.config->persistent = false;
  env_o.jit.persistent_rings = true;
  EXPECT_EQ(T::kernels::make_flash_attention(s, T::DType::bf16, env_o).source(), k.source());
  env_o.jit.persistent_rings = false;
  auto plain = T::kernels::make_flash_attention(s, T::DType::bf16, env_o);
  EXPECT_EQ(plain.info().path.find("persistent"), std::string::npos) << plain.info().path;
  T::kernels::AttentionOptions bad = o;
  bad.config = T::kernels::AttentionConfig{128, 64, 256, 2, Schedule::cp_async, true};
  try {
    T::kernels::make_flash_attention(s, T::DType::bf16, bad);
    ADD_FAILURE() << "a persistent cp.async config compiled";
  } catch (const T::CompileError& e) {
    EXPECT_NE(std::string(e.what()).find("config 128x64 s2 t256 cp.async persistent is persistent on the cp.async "
                                         "schedule; persistence is for the ring schedules"),
              std::string::npos)
        << e.what();
  }
  T::kernels::AttentionOptions ampere = o;
  ampere.jit.arch = "sm_80";
  ampere.config = T::kernels::AttentionConfig{128, 64, 256, 2, Schedule::ring, true};
  T::kernels::AttentionOptions ampere_plain = ampere;
  ampere_plain.config->persistent = false;
  EXPECT_EQ(T::kernels::make_flash_attention(s, T::DType::bf16, ampere).source(),
            T::kernels::make_flash_attention(s, T::DType::bf16, ampere_plain).source());
}

}  // namespace

namespace {

// 192 query rows on three consumer warpgroups (in the tuning space since session 16): on sm_90a
// the ring gives the producer a fourth warpgroup and the consumers 160 registers each
// (setmaxnreg: 512 threads launch at 128), cp.async keeps 384 threads; sm_80 builds it on
// mma.sync at D = 64. No spills at D = 64 or 128.
TEST(FlashAttentionCompileThreeWarpgroups, RegisterBudgetsAndNoSpills) {
  using Schedule = T::kernels::AttentionConfig::Schedule;
  for (std::int64_t D : {64, 128})
    for (const char* arch : {"sm_90a", "sm_80"})
      for (Schedule sc : {Schedule::ring, Schedule::cp_async}) {
        // sm_80: cp.async only, and D = 128's 176 KB are past its 163 KB.
        if (std::string(arch) == "sm_80" && (sc != Schedule::cp_async || D > 64)) continue;
        T::kernels::AttentionShape s;
        s.batch = 2, s.heads = 4, s.kv_heads = 2, s.seqlen_q = 1000, s.seqlen_k = 1200, s.dim = D;
        T::kernels::AttentionOptions o;
        o.causal = true;
        o.jit.arch = arch;
        o.config = T::kernels::AttentionConfig{192, 128, 384, 2, sc};
        auto k = T::kernels::make_flash_attention(s, T::DType::bf16, o);
        SCOPED_TRACE("D" + std::to_string(D) + " " + arch + " " + o.config->describe());
        EXPECT_EQ(k.resources().spill_store_bytes + k.resources().spill_load_bytes, 0) << k.compile_log();
        if (std::string(arch) == "sm_90a" && sc == Schedule::ring) {
          EXPECT_EQ(k.info().threads, 512);
          EXPECT_NE(k.ptx().find("setmaxnreg.inc.sync.aligned.u32 160"), std::string::npos);
        } else {
          EXPECT_EQ(k.info().threads, 384);
        }
      }
}

}  // namespace

namespace {

// Key blocks of any multiple of 16 from 64 to 256 take wgmma (wgmma.cuh's shapes; 176 is
// FlashAttention 3's choice at D = 128 without a mask): 128x176 and 128x144 at D = 128 on the
// ring, with and without turns, and a causal 128x80 with K and V tails, compile to m64n176 /
// m64n144 / m64n80 wgmma with no spills; the key block's tail past Sk is masked as with any other.
TEST(FlashAttentionCompileKeyBlocks, MultiplesOf16TakeWgmma) {
  using Schedule = T::kernels::AttentionConfig::Schedule;
  struct Case {
    int bn;
    Schedule schedule;
    bool causal;
    std::int64_t seqlen;
  };
  for (const Case& c : {Case{176, Schedule::ring_pingpong, false, 4096}, Case{176, Schedule::ring, false, 1000},
                        Case{144, Schedule::ring_pingpong, false, 4096}, Case{80, Schedule::ring, true, 1000}}) {
    T::kernels::AttentionShape s;
    s.batch = 2, s.heads = 16, s.kv_heads = 16, s.seqlen_q = s.seqlen_k = c.seqlen, s.dim = 128;
    T::kernels::AttentionOptions o;
    o.causal = c.causal;
    o.jit.arch = "sm_90a";
    o.config = T::kernels::AttentionConfig{128, c.bn, 256, 2, c.schedule, !c.causal};
    auto k = T::kernels::make_flash_attention(s, T::DType::bf16, o);
    SCOPED_TRACE(o.config->describe());
    EXPECT_EQ(k.resources().spill_store_bytes + k.resources().spill_load_bytes, 0) << k.compile_log();
    EXPECT_NE(k.info().path.find("TMA + mbarrier ring"), std::string::npos) << k.info().path;
    EXPECT_NE(k.ptx().find("wgmma.mma_async.sync.aligned.m64n" + std::to_string(c.bn) + "k16.f32.bf16.bf16"),
              std::string::npos);
  }
}

}  // namespace

namespace {

// plan_tile_loads as KernelInfo reports it: the persistent D = 128 kernel over 8 key blocks a
// tile takes Q by the producer's TMA (tile_loads), over 128 it keeps the consumers' copy and says
// why (declined); both compile without spills.
TEST(TileLoads, KernelInfoSaysWhereQComesFrom) {
  T::kernels::AttentionOptions o;
  o.jit.arch = "sm_90a";
  T::kernels::AttentionShape s;
  s.batch = 2, s.heads = 4, s.kv_heads = 4, s.seqlen_q = s.seqlen_k = 1024, s.dim = 128;
  auto short_loop = T::kernels::make_flash_attention(s, T::DType::bf16, o);
  EXPECT_EQ(short_loop.info().tile_loads, (std::vector<std::string>{"Q -> shared_0"}))
      << short_loop.info().path;
  EXPECT_NE(short_loop.ptx().find("cp.async.bulk.tensor.4d"), std::string::npos);
  EXPECT_EQ(short_loop.resources().spill_store_bytes + short_loop.resources().spill_load_bytes, 0);
  s.seqlen_q = s.seqlen_k = 16384;
  auto long_loop = T::kernels::make_flash_attention(s, T::DType::bf16, o);
  EXPECT_TRUE(long_loop.info().tile_loads.empty());
  bool said = false;
  for (const std::string& d : long_loop.info().declined)
    said = said ||
           d == "tile loads: Q -> shared_0 stays the consumers' copy: the ring loop runs 128 iterations a "
                "tile (from 64 on, measured slower)";
  EXPECT_TRUE(said) << long_loop.info().path;
  EXPECT_EQ(long_loop.resources().spill_store_bytes + long_loop.resources().spill_load_bytes, 0);
}

// Role tests on the warp index broadcast from lane 0, on the default attention kernels (D = 64 and
// 128, causal and not, key tails) and the tutorial GEMM from the passes: they compile without
// spills. By default only kernels of one consumer warpgroup test their role that way; under
// JitOptions::uniform_roles every one does, and those of several also broadcast their warpgroup
// index (TESSEL_UNIFORM_WARPGROUP).
TEST(UniformRoles, CompileWithoutSpills) {
  const std::string role_test = "if (tessel::warp_uniform(static_cast<int>(threadIdx.x / 32)) >= ";
  int several = 0, one = 0;
  for (bool uniform : {false, true})
    for (std::int64_t D : {64, 128})
      for (bool causal : {false, true}) {
        T::kernels::AttentionShape s;
        s.batch = 2, s.heads = 8, s.kv_heads = 2, s.seqlen_q = 1000, s.seqlen_k = 4097, s.dim = D;
        T::kernels::AttentionOptions o;
        o.causal = causal;
        o.jit.arch = "sm_90a";
        o.jit.uniform_roles = uniform;
        auto k = T::kernels::make_flash_attention(s, T::DType::bf16, o);
        const std::string& src = k.source();
        const size_t at = src.find("#define TESSEL_CONSUMER_THREADS ");
        ASSERT_NE(at, std::string::npos) << src;
        const int consumers = std::stoi(src.substr(at + 31));
        SCOPED_TRACE("D" + std::to_string(D) + (causal ? " causal " : " ") +
                     (uniform ? "uniform_roles " : "") + std::to_string(consumers) + " consumer threads, " +
                     k.info().path);
        (consumers > 128 ? several : one) += 1;
        const bool uniform_test = uniform || consumers <= 128;
        EXPECT_EQ(src.find(role_test) != std::string::npos, uniform_test) << src;
        EXPECT_EQ(src.find("#define TESSEL_UNIFORM_WARPGROUP 1") != std::string::npos,
                  uniform && consumers > 128);
        if (uniform_test) {
          EXPECT_NE(k.ptx().find("shfl.sync.idx"), std::string::npos);
        }
        EXPECT_EQ(k.resources().spill_store_bytes + k.resources().spill_load_bytes, 0) << k.compile_log();
      }
  EXPECT_GT(several, 0);  // both kinds of kernel were among the defaults
  EXPECT_GT(one, 0);
  T::JitOptions jo;
  jo.arch = "sm_90a";
  T::JitOptions g = jo;
  g.gemm_from_passes = true;
  T::kernels::MatmulConfig cfg;  // issue 5's 1024^3 tile: one consumer warpgroup and a producer warp
  cfg.block_M = 64, cfg.block_N = 128, cfg.block_K = 64, cfg.num_stages = 6, cfg.threads = 128;
  auto gemm = T::kernels::make_matmul(1024, 1024, 1024, cfg, g);
  EXPECT_NE(gemm.source().find("tessel::warp_uniform("), std::string::npos) << gemm.source();
  EXPECT_EQ(gemm.resources().spill_store_bytes + gemm.resources().spill_load_bytes, 0) << gemm.compile_log();
}

}  // namespace

namespace {

// JitOptions::min_blocks_per_sm: __launch_bounds__'s second argument, capped at what shared
// memory allows; a request that leaves ptxas too few registers is the author's error, named.
TEST(MinBlocksPerSm, CappedBySharedMemoryAndRefusedWhenRegistersRunOut) {
  T::kernels::AttentionShape s;
  s.batch = 1, s.heads = 2, s.kv_heads = 2, s.seqlen_q = s.seqlen_k = 1000, s.dim = 64;
  T::kernels::AttentionOptions o;
  o.jit.arch = "sm_90a";
  // 128x128 cp.async at D = 64: 83 KB of shared memory, two blocks fit (the library asks for
  // them itself); four asked for, two given.
  o.config = T::kernels::AttentionConfig{128, 128, 256, 2, T::kernels::AttentionConfig::Schedule::cp_async, false};
  o.jit.min_blocks_per_sm = 4;
  auto k = T::kernels::make_flash_attention(s, T::DType::f16, o);
  EXPECT_NE(k.source().find("__launch_bounds__(256, 2)"), std::string::npos);
  // 192x128 on 384 threads, two blocks asked for: 85 registers a thread, too few for its wgmma.
  o.config = T::kernels::AttentionConfig{192, 128, 384, 2, T::kernels::AttentionConfig::Schedule::cp_async, false};
  o.jit.min_blocks_per_sm = 2;
  try {
    (void)T::kernels::make_flash_attention(s, T::DType::f16, o);
    ADD_FAILURE() << "expected a CompileError";
  } catch (const T::CompileError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("min_blocks_per_sm = 2 caps flash_attention's 384-thread blocks at 85 registers"),
              std::string::npos)
        << m;
  }
}

}  // namespace
