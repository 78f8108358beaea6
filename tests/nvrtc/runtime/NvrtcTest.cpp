// NVRTC end to end, no GPU needed: both targets, the embedded headers, resource parsing on
// real ptxas output, error reporting, thread safety and the cache's hit latency.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "support/TestSupport.hpp"
#include "tessel/runtime/Cache.hpp"
#include "tessel/runtime/EmbeddedHeaders.hpp"
#include "tessel/runtime/Nvrtc.hpp"
#include "tessel/tessel.hpp"

namespace tessel {
namespace {

const char* kVectorAdd = R"(
extern "C" __global__ void vadd(const float* a, const float* b, float* c, int n) {
  __shared__ float staged[64];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  staged[threadIdx.x % 64] = i < n ? a[i] : 0.0f;
  __syncthreads();
  if (i < n) c[i] = staged[threadIdx.x % 64] + b[i];
}
)";

CompileOptions for_arch(const std::string& arch) {
  CompileOptions o;
  o.arch = arch;
  return o;
}

class NvrtcArch : public ::testing::TestWithParam<std::string> {};

TEST_P(NvrtcArch, CompilesAKernel) {
  CompiledKernel k = nvrtc_compile(kVectorAdd, "vadd", for_arch(GetParam()));
  EXPECT_EQ(k.lowered_name, "vadd");
  EXPECT_NE(k.ptx.find(".entry vadd"), std::string::npos);
  EXPECT_NE(k.ptx.find(".target " + GetParam()), std::string::npos);
  ASSERT_GT(k.cubin.size(), 4u);
  EXPECT_EQ(std::string(k.cubin.data(), 4),
            "\x7f"
            "ELF");
  EXPECT_GT(k.resources.registers, 0) << k.log;
  EXPECT_EQ(k.resources.static_smem_bytes, 256) << k.log;
  EXPECT_EQ(k.resources.barriers, 1) << k.log;
  EXPECT_EQ(k.resources.spill_store_bytes, 0);
  EXPECT_EQ(k.resources.arch, GetParam());
  EXPECT_FALSE(k.resources.cache_hit);
  EXPECT_EQ(k.source, kVectorAdd);
  std::printf("%s: %d registers, %.1f ms cold compile\n", GetParam().c_str(), k.resources.registers,
              k.resources.compile_ms);
}

TEST_P(NvrtcArch, IncludesTheEmbeddedTypesHeader) {
  bool present = false;
  for (const EmbeddedFile& f : embedded_device_headers()) present |= f.include_name == "tessel/types.cuh";
  if (!present) GTEST_SKIP() << "device/tessel/types.cuh is not embedded in this build";
  const char* source = R"(
#include "tessel/types.cuh"
extern "C" __global__ void widen(const tessel::half_t* in, float* out) {
  out[threadIdx.x] = tessel::to_float(in[threadIdx.x]);
}
)";
  CompiledKernel k = nvrtc_compile(source, "widen", for_arch(GetParam()));
  EXPECT_GT(k.cubin.size(), 0u);
  EXPECT_GT(k.resources.registers, 0);
}

INSTANTIATE_TEST_SUITE_P(Targets, NvrtcArch, ::testing::Values("sm_80", "sm_90a"));

TEST(Nvrtc, Version) {
  EXPECT_GE(nvrtc_version(), 12000);
  EXPECT_EQ(nvrtc_version() % 10, 0);
}

TEST(Nvrtc, SyntaxErrorCarriesTheLog) {
  const char* broken = "extern \"C\" __global__ void k(float* x) { x[0] = undeclared_thing + ; }";
  try {
    nvrtc_compile(broken, "k", for_arch("sm_90a"));
    FAIL() << "compiled broken code";
  } catch (const NvrtcError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("NVRTC failed to compile tessel_kernel.cu"), std::string::npos) << msg;
    EXPECT_NE(msg.find("undeclared_thing"), std::string::npos) << msg;  // NVRTC's own words
    EXPECT_NE(msg.find("error"), std::string::npos) << msg;
    EXPECT_NE(e.log().find("undeclared_thing"), std::string::npos);
    EXPECT_NE(msg.find(e.log()), std::string::npos);  // the whole log, not a summary
  }
}

TEST(Nvrtc, MissingKernelNameIsAnError) {
  CompileOptions o = for_arch("sm_80");
  o.program_name = "named_program.cu";
  try {
    nvrtc_compile(kVectorAdd, "no_such_kernel", o);
    FAIL();
  } catch (const NvrtcError& e) {
    EXPECT_NE(std::string(e.what()).find("named_program.cu"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("no_such_kernel"), std::string::npos) << e.what();
  }
}

TEST(Nvrtc, StackFrameIsReported) {
  // A local array too big for registers, indexed at run time, lives on the stack.
  const char* source = R"(
extern "C" __global__ void stacky(float* out, int j) {
  float local[512];
  for (int i = 0; i < 512; ++i) local[i] = out[i * j];
  out[threadIdx.x] = local[(threadIdx.x * j) & 511];
}
)";
  CompiledKernel k = nvrtc_compile(source, "stacky", for_arch("sm_90a"));
  EXPECT_GE(k.resources.stack_frame_bytes, 2048) << k.log;
}

TEST(Nvrtc, ExtraFlagsReachTheCompiler) {
  CompileOptions o = for_arch("sm_80");
  o.extra_flags = {"-DVALUE=3"};
  const char* source = R"(
#ifndef VALUE
#error VALUE must come from extra_flags
#endif
extern "C" __global__ void k(int* out) { out[0] = VALUE; }
)";
  EXPECT_NO_THROW(nvrtc_compile(source, "k", o));
}

TEST(Nvrtc, ParallelCompilesAreIndependent) {
  std::vector<std::thread> threads;
  std::vector<std::string> errors(8);
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      try {
        const std::string name = "k" + std::to_string(t);
        const std::string src = "extern \"C\" __global__ void " + name +
                                "(int* o) { o[threadIdx.x] = " + std::to_string(t) + "; }";
        CompiledKernel k = nvrtc_compile(src, name, for_arch(t % 2 ? "sm_80" : "sm_90a"));
        if (k.lowered_name != name || k.ptx.find(".entry " + name) == std::string::npos)
          errors[t] = "wrong kernel";
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  for (auto& th : threads) th.join();
  for (const std::string& e : errors) EXPECT_EQ(e, "");
}

TEST(Nvrtc, CacheHitIsFast) {
  test::TempDir dir;
  test::ScopedEnv env("TESSEL_CACHE_DIR", dir.path().string());
  test::ScopedEnv on("TESSEL_CACHE", std::nullopt);
  // A source no other test compiles, so the first call is a real miss.
  const std::string source = std::string(kVectorAdd) + "// cache test\n";
  CompiledKernel cold = compile_cached(source, "vadd", for_arch("sm_90a"));
  EXPECT_FALSE(cold.resources.cache_hit);
  CompiledKernel warm = compile_cached(source, "vadd", for_arch("sm_90a"));
  EXPECT_TRUE(warm.resources.cache_hit);
  EXPECT_EQ(warm.cubin, cold.cubin);
  EXPECT_EQ(warm.resources.registers, cold.resources.registers);

  KernelCache::global().clear_memory();
  CompiledKernel disk = compile_cached(source, "vadd", for_arch("sm_90a"));
  EXPECT_TRUE(disk.resources.cache_hit);
  EXPECT_EQ(disk.cubin, cold.cubin);
  EXPECT_EQ(disk.ptx, cold.ptx);
  std::printf("cold %.2f ms, memory hit %.3f ms, disk hit %.3f ms\n", cold.resources.compile_ms,
              warm.resources.compile_ms, disk.resources.compile_ms);
  EXPECT_LT(warm.resources.compile_ms, 50.0);  // the target is < 10 ms; 50 leaves room for loaded CI
  EXPECT_LT(disk.resources.compile_ms, 50.0);
}

// Every target tessel_archs() lists (what the CLI's --arch and jit() accept) really compiles.
TEST(Nvrtc, EveryListedArchCompiles) {
  const std::vector<std::string>& archs = tessel_archs();
  ASSERT_FALSE(archs.empty());
  EXPECT_EQ(archs.front(), "sm_80");
  EXPECT_NE(std::find(archs.begin(), archs.end(), "sm_90a"), archs.end());
  for (const std::string& arch : archs) {
    EXPECT_FALSE(why_not_arch(arch)) << arch;
    CompiledKernel k;
    ASSERT_NO_THROW(k = nvrtc_compile(kVectorAdd, "vadd", for_arch(arch))) << arch;
    EXPECT_FALSE(k.cubin.empty()) << arch;
  }
  for (const char* bad : {"sm_75", "sm_90b", "compute_90", "", "sm_80 "})
    EXPECT_TRUE(why_not_arch(bad)) << "'" << bad << "'";
}

// A source that keeps NVRTC busy for tens of seconds (thousands of dependent statements).
std::string slow_source() {
  std::string s =
      "extern \"C\" __global__ void slow(float* p) {\n  float a = p[threadIdx.x], b = p[threadIdx.x + 1];\n";
  for (int i = 0; i < 4000; ++i)
    s += "  a = a * p[(" + std::to_string(i) + " * threadIdx.x) & 1023] + __sinf(b); b = b + a * " +
         std::to_string(i) + ".f;\n";
  return s + "  p[0] = a + b;\n}\n";
}

TEST(Nvrtc, TimeLimitStopsACompile) {
  CompileOptions o = for_arch("sm_90a");
  o.time_limit_s = 0.01;  // NVRTC checks between phases; the first check comes well past 10 ms
  const auto t0 = std::chrono::steady_clock::now();
  try {
    nvrtc_compile(slow_source(), "slow", o);
    FAIL() << "the compile was not stopped";
  } catch (const CompileTimeLimitError& e) {
    EXPECT_NE(std::string(e.what()).find("NVRTC stopped compiling tessel_kernel.cu after "),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("CompileOptions::time_limit_s is 0.01"), std::string::npos)
        << e.what();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Unbounded, this compile takes 25-30 s on a 2-core CI machine; stopped, well under a second
  // there. 8 s leaves room for a loaded machine.
  EXPECT_LT(seconds, 8.0);
  // The limit is not part of the cache key: it does not change the output.
  CompileOptions unlimited = for_arch("sm_90a");
  EXPECT_EQ(nvrtc_flags(o), nvrtc_flags(unlimited));
}

// Through jit(): a Tessel program NVRTC would chew on for minutes (8192 floats per thread,
// allowed past the register budget) stops at JitOptions::compile_time_limit_s with a
// RuntimeError, not an InternalError.
TEST(Nvrtc, JitTimeLimitStopsACompileAsARuntimeError) {
  test::TempDir dir;
  test::ScopedEnv env("TESSEL_CACHE_DIR", dir.path().string());
  PrimFunc f("huge_fragment");
  auto C = f.tensor("C", {128, 8192}, DType::f32);
  f.body([&] {
    Kernel(1, 128, [&](Var) {
      auto frag = alloc_fragment({128, 8192}, DType::f32);
      clear(frag);
      copy(frag, C(0, 0));
    });
  });
  JitOptions o;
  o.arch = "sm_90a";
  o.allow_register_spills = true;
  o.compile_time_limit_s = 0.01;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THROW(jit(f, o), CompileTimeLimitError);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 8.0);
}

}  // namespace
}  // namespace tessel
