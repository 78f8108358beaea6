// gemm with A in registers through NVRTC and ptxas: on sm_90a both gemms of the chain (S = Q K^T,
// O += f16(S) V) are wgmma — the second with its A operand in registers — with the async-proxy
// fence before the barriers; on sm_80, and with disable_wgmma, the same program is mma.sync.
// No spills anywhere.
#include <gtest/gtest.h>

#include <regex>

#include "support/RegisterGemmPrograms.hpp"
#include "support/TestSupport.hpp"

namespace {

namespace T = tessel;

struct ChainCase {
  tessel::test::ChainShape shape;
  T::DType dtype;
  std::string arch;
  bool disable_wgmma;
};

std::string chain_name(const ::testing::TestParamInfo<ChainCase>& info) {
  const ChainCase& c = info.param;
  return "BM" + std::to_string(c.shape.BM) + "_BN" + std::to_string(c.shape.BN) + "_D" +
         std::to_string(c.shape.D) + "_t" + std::to_string(c.shape.threads) + "_" +
         std::string(T::dtype_name(c.dtype)) + "_" + c.arch + (c.disable_wgmma ? "_nowgmma" : "");
}

class RegisterGemmChain : public ::testing::TestWithParam<ChainCase> {};

TEST_P(RegisterGemmChain, CompilesToTheChosenInstructionsWithoutSpills) {
  const ChainCase& c = GetParam();
  T::JitOptions o;
  o.arch = c.arch;
  o.disable_wgmma = c.disable_wgmma;
  auto k = T::jit(tessel::test::gemm_chain_program(c.shape, c.dtype, 0.125f), o);
  const std::string& ptx = k.ptx();
  const bool wgmma = c.arch == "sm_90a" && !c.disable_wgmma;
  if (wgmma) {
    // Two consumer warpgroups (256 threads) also take turns for their gemms.
    EXPECT_EQ(k.info().path, std::string("sm90 wgmma block gemm (generic kernel), TMA + mbarrier ring, warp-specialized") +
                                 (c.shape.threads == 256 ? ", ping-pong" : ""));
    EXPECT_NE(ptx.find("cp.async.bulk.tensor.2d"), std::string::npos) << "no TMA loads";
    // Two consumer warpgroups (384 threads launched, 168 registers each) rebalance registers
    // with setmaxnreg; one (256 launched, 248 each) has enough without.
    if (c.shape.threads >= 256) {
      EXPECT_NE(ptx.find("setmaxnreg.inc.sync.aligned.u32 240"), std::string::npos) << "no register budget";
      EXPECT_EQ(k.resources().registers, 168);
    } else {
      EXPECT_EQ(ptx.find("setmaxnreg"), std::string::npos);
    }
    const std::string ty = c.dtype == T::DType::f16 ? "f16" : "bf16";
    const std::string n1 = std::to_string(c.shape.BN), n2 = std::to_string(c.shape.D);
    // S = Q K^T: both operands by descriptor (two 64-bit registers after the accumulators).
    EXPECT_TRUE(
        std::regex_search(ptx, std::regex("wgmma\\.mma_async\\.sync\\.aligned\\.m64n" + n1 + "k16\\.f32\\." +
                                          ty + "\\." + ty + " \\{[^}]*\\}, %rd[0-9]+, %rd[0-9]+")))
        << "no wgmma with A and B in shared memory";
    // O += P V: A as four 32-bit registers.
    EXPECT_TRUE(std::regex_search(
        ptx, std::regex("wgmma\\.mma_async\\.sync\\.aligned\\.m64n" + n2 + "k16\\.f32\\." + ty + "\\." + ty +
                        " \\{[^}]*\\}, \\{%r[0-9]+, %r[0-9]+, %r[0-9]+, %r[0-9]+\\}, %rd")))
        << "no wgmma with A from registers";
    EXPECT_NE(ptx.find("fence.proxy.async.shared::cta"), std::string::npos);
    EXPECT_EQ(ptx.find("mma.sync"), std::string::npos);
  } else {
    EXPECT_EQ(k.info().path, "mma.sync");
    EXPECT_NE(ptx.find("mma.sync.aligned.m16n8k16"), std::string::npos);
    EXPECT_EQ(ptx.find("wgmma"), std::string::npos);
  }
  EXPECT_EQ(k.resources().spill_store_bytes, 0) << k.compile_log();
  EXPECT_EQ(k.resources().spill_load_bytes, 0) << k.compile_log();
}

const tessel::test::ChainShape kSmall{200, 300, 64, 64, 64, 128};
const tessel::test::ChainShape kWide{256, 256, 128, 128, 64, 256};
const tessel::test::ChainShape kLongRow{256, 512, 64, 64, 128, 128};

INSTANTIATE_TEST_SUITE_P(Shapes, RegisterGemmChain,
                         ::testing::Values(ChainCase{kSmall, T::DType::f16, "sm_90a", false},
                                           ChainCase{kSmall, T::DType::bf16, "sm_90a", false},
                                           ChainCase{kWide, T::DType::f16, "sm_90a", false},
                                           ChainCase{kLongRow, T::DType::bf16, "sm_90a", false},
                                           ChainCase{kSmall, T::DType::f16, "sm_90a", true},
                                           ChainCase{kWide, T::DType::bf16, "sm_80", false},
                                           ChainCase{kSmall, T::DType::f16, "sm_80", false}),
                         chain_name);

TEST(RegisterGemm, PlainRegisterAGemmCompilesOnBothPaths) {
  for (const std::string arch : {"sm_80", "sm_90a"}) {
    T::JitOptions o;
    o.arch = arch;
    tessel::test::RegisterGemmShape s{1000, 1000, 1000, 64, 128, 32, 128, 3};
    auto k = T::jit(tessel::test::register_a_gemm_program(s, T::DType::f16), o);
    EXPECT_NE(k.ptx().find(arch == "sm_90a" ? "wgmma.mma_async" : "mma.sync.aligned.m16n8k16"),
              std::string::npos)
        << arch;
    EXPECT_EQ(k.resources().spill_store_bytes, 0) << arch << "\n" << k.compile_log();
  }
}

// FlashAttention's forward pass: both gemms wgmma on sm_90a (the second from registers), the row
// statistics in registers (shuffles within a quad, no shared-memory reduction), no spills.
TEST(Attention, CompilesWithoutSpillsOnBothPaths) {
  for (const std::string arch : {"sm_80", "sm_90a"})
    for (const auto& c :
         {T::kernels::GemmChainConfig{64, 64, 128, 2}, T::kernels::GemmChainConfig{128, 64, 256, 2}}) {
      T::JitOptions o;
      o.arch = arch;
      const int D = c.block_M == 64 ? 64 : 128;
      auto k = T::kernels::make_attention(1000, 1000, D, T::DType::bf16, 0.125f, c, o);
      const std::string& ptx = k.ptx();
      EXPECT_NE(ptx.find(arch == "sm_90a" ? "wgmma.mma_async" : "mma.sync.aligned.m16n8k16"),
                std::string::npos)
          << arch;
      EXPECT_NE(ptx.find("shfl.sync.bfly"), std::string::npos) << arch;
      EXPECT_NE(ptx.find("ex2.approx"), std::string::npos) << arch;
      // ptxas compiles the sm_80 64x64 kernel to 96 registers and one 8-byte spill slot (its
      // choice: 255 are allowed); the sm_90a kernels spill nothing.
      const int allowed = arch == "sm_80" ? 16 : 0;
      EXPECT_LE(k.resources().spill_store_bytes, allowed) << arch << " " << c.describe() << "\n" << k.compile_log();
      EXPECT_LE(k.resources().spill_load_bytes, allowed) << arch << " " << c.describe();
    }
}

}  // namespace
