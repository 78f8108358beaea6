// Reference kernels keep their generated CUDA as golden text, so a refactor that changes codegen
// shows up in review. After an intended change, regenerate with TESSEL_UPDATE_GOLDEN=1 and
// commit the new files.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "Lower.hpp"
#include "codegen/CodegenCuda.hpp"
#include "fuzz/FuzzCase.hpp"
#include "fuzz/Program.hpp"
#include "tessel/kernels/attention/FlashAttention.hpp"
#include "tessel/kernels/attention/GemmChain.hpp"
#include "tessel/kernels/gemm/Matmul.hpp"
#include "tessel/kernels/softmax/Softmax.hpp"

#ifndef TESSEL_SOURCE_DIR
#define TESSEL_SOURCE_DIR "."
#endif

namespace {

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void check_golden(const std::string& name, const std::string& text) {
  std::filesystem::path file = std::filesystem::path(TESSEL_SOURCE_DIR) / "tests/cpu/compiler/golden" / name;
  if (std::getenv("TESSEL_UPDATE_GOLDEN")) {
    std::ofstream(file) << text;
    GTEST_SKIP() << "SKIPPED: rewrote " << file;
  }
  ASSERT_TRUE(std::filesystem::exists(file)) << file << " is missing; run with TESSEL_UPDATE_GOLDEN=1";
  EXPECT_EQ(read_file(file), text) << "generated code for " << name
                                   << " changed; if intended, rerun with TESSEL_UPDATE_GOLDEN=1";
}

// The tutorial GEMM through select_hopper_gemm's hand-written template (gemm_from_passes = false;
// the passes' kernel, the default, is TutorialMatmulFromThePasses').
TEST(GoldenCodegen, TutorialMatmul) {
  auto f = tessel::kernels::matmul_program(1000, 1000, 1000, {});
  tessel::passes::PassContext::Switches s;
  s.gemm_from_passes = false;
  auto lowered = tessel::lower(f.ir(), {"sm_90a", 90, 232448}, s);
  check_golden("matmul_1000_128x128x32_s3.cu", tessel::codegen::generate_cuda(lowered));
}

TEST(GoldenCodegen, TutorialMatmulSwizzledOddShape) {
  tessel::kernels::MatmulConfig c;
  c.block_M = 64;
  c.block_N = 64;
  c.num_stages = 2;
  c.use_swizzle = true;
  c.dtype = tessel::DType::bf16;
  auto f = tessel::kernels::matmul_program(17, 33, 65, c);
  auto lowered = tessel::lower(f.ir(), {"sm_80", 80, 166912});
  check_golden("matmul_17x33x65_64x64x32_s2_swz_bf16.cu", tessel::codegen::generate_cuda(lowered));
}

// The tutorial GEMM compiled by the generic sm_90a passes (JitOptions::gemm_from_passes, the default)
// instead of the template: what each pass decided for it shows up here when it changes.
TEST(GoldenCodegen, TutorialMatmulFromThePasses) {
  tessel::kernels::MatmulConfig c;
  c.block_M = 128, c.block_N = 256, c.block_K = 64, c.num_stages = 3, c.threads = 256;
  c.use_swizzle = true, c.panel_size = 8;
  auto f = tessel::kernels::matmul_program(4000, 4096, 4104, c);
  tessel::passes::PassContext::Switches s;
  s.gemm_from_passes = true;
  auto lowered = tessel::lower(f.ir(), {"sm_90a", 90, 232448, 132}, s);
  check_golden("matmul_4000x4096x4104_128x256x64_s3_swz8_passes_sm90.cu", tessel::codegen::generate_cuda(lowered));
}

// Kernels whose barriers, proxy fences, rings and roles come from the pipeline passes: a change
// to where a pass puts a barrier or a fence shows up here.
const tessel::passes::Target kSm90{"sm_90a", 90, 232448, 132};
const tessel::passes::Target kSm80{"sm_80", 80, 166912, 108};

tessel::kernels::AttentionShape attention_shape(std::int64_t sq, std::int64_t sk, std::int64_t d) {
  tessel::kernels::AttentionShape s;
  s.batch = 2, s.heads = 4, s.kv_heads = 2, s.seqlen_q = sq, s.seqlen_k = sk, s.dim = d;
  return s;
}

TEST(GoldenCodegen, FlashAttentionSchedules) {
  using Schedule = tessel::kernels::AttentionConfig::Schedule;
  for (auto [schedule, causal, name] :
       {std::tuple{Schedule::ring_pingpong, false, "attention_ring_pingpong_d128_bf16.cu"},
        std::tuple{Schedule::ring, true, "attention_ring_causal_d64_bf16.cu"},
        std::tuple{Schedule::cp_async, false, "attention_cp_async_d64_f16_sm90.cu"}}) {
    tessel::kernels::AttentionConfig c;
    c.schedule = schedule;
    if (schedule != Schedule::ring_pingpong) c.block_N = 64;
    const std::int64_t d = schedule == Schedule::ring_pingpong ? 128 : 64;
    const tessel::DType t = schedule == Schedule::cp_async ? tessel::DType::f16 : tessel::DType::bf16;
    auto f = tessel::kernels::attention_program(attention_shape(1000, 1000, d), t, causal, 0.125f, c);
    check_golden(name, tessel::codegen::generate_cuda(tessel::lower(f.ir(), kSm90)));
  }
}

TEST(GoldenCodegen, GemmChainsAndSoftmax) {
  auto chain = tessel::kernels::gemm_chain_program(200, 300, 64, tessel::DType::f16, 0.125f, {}, true);
  check_golden("gemm_chain_200x300xd64_copy_f16_sm90.cu", tessel::codegen::generate_cuda(tessel::lower(chain.ir(), kSm90)));
  auto att = tessel::kernels::attention_program(300, 1000, 64, tessel::DType::bf16, 0.125f);
  check_golden("attention_chain_300x1000xd64_bf16_sm80.cu", tessel::codegen::generate_cuda(tessel::lower(att.ir(), kSm80)));
  auto sm = tessel::kernels::softmax_program(4096, 999, tessel::DType::f16,
                                             tessel::kernels::parse_softmax_config("rows:t256:r8:bn1024"));
  check_golden("softmax_4096x999_rows_t256_r8_f16.cu", tessel::codegen::generate_cuda(tessel::lower(sm.ir(), kSm90)));
  // Rows without room for copy_window's shift (1020 + 7 > 1024): the shared span.
  auto span = tessel::kernels::softmax_program(4096, 1020, tessel::DType::f16,
                                               tessel::kernels::parse_softmax_config("rows:t256:r8:bn1024"));
  check_golden("softmax_4096x1020_rows_t256_r8_span_f16.cu",
               tessel::codegen::generate_cuda(tessel::lower(span.ir(), kSm90)));
  auto tail = tessel::kernels::softmax_program(4096, 65000, tessel::DType::f16,
                                               tessel::kernels::parse_softmax_config("rows:t512:r1:bn65536:s14"));
  check_golden("softmax_4096x65000_shared_tail_f16.cu", tessel::codegen::generate_cuda(tessel::lower(tail.ir(), kSm90)));
}

// Generated programs that write shared memory outside pipelined loops (tiles staged through
// shared memory on the way in or out) and gemms of every path: the first few of each kind from
// fixed seeds, both archs, in one file per arch.
TEST(GoldenCodegen, FuzzProgramsWithSharedWrites) {
  std::vector<tessel::fuzz::FuzzCase> picked;
  int tiles = 0, gemms = 0;
  for (std::uint64_t seed = 1; seed < 5000 && (tiles < 4 || gemms < 4); ++seed) {
    tessel::fuzz::FuzzCase c = tessel::fuzz::generate_case(seed);
    const bool tile = c.family == tessel::fuzz::Family::Tile && (c.via_shared || c.store_via_shared) && tiles < 4;
    const bool gemm = c.family == tessel::fuzz::Family::Gemm && gemms < 4;
    if (!tile && !gemm) continue;
    (tile ? tiles : gemms)++;
    picked.push_back(c);
  }
  ASSERT_EQ(picked.size(), 8u);
  for (const auto& [target, name] : {std::pair{kSm90, "fuzz_shared_writes_sm90.cu"}, std::pair{kSm80, "fuzz_shared_writes_sm80.cu"}}) {
    std::string text;
    for (const tessel::fuzz::FuzzCase& c : picked) {
      text += "// ==== " + c.summary() + "\n";
      try {
        text += tessel::codegen::generate_cuda(tessel::lower(tessel::fuzz::build_program(c).ir(), target));
      } catch (const tessel::CompileError& e) {
        text += "// rejected: " + std::string(e.what()).substr(0, std::string(e.what()).find('\n')) + "\n";
      }
    }
    check_golden(name, text);
  }
}

}  // namespace
