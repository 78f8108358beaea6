#include "tessel/kernels/gemm/Matmul.hpp"

#include <functional>

#include "tessel/autotune/Autotune.hpp"
#include "tessel/runtime/Driver.hpp"

namespace tessel::kernels {

namespace T = tessel;

std::string MatmulConfig::describe() const {
  return std::to_string(block_M) + "x" + std::to_string(block_N) + "x" + std::to_string(block_K) + " s" +
         std::to_string(num_stages) + " t" + std::to_string(threads) + (use_swizzle ? " swz" : "") +
         (cluster_x * cluster_y > 1 ? " c" + std::to_string(cluster_x) + "x" + std::to_string(cluster_y)
                                    : "");
}

MatmulConfig default_matmul_config(long long M, long long N, long long K, DType dtype,
                                   const std::string& arch, int sm_count) {
  MatmulConfig c;
  c.dtype = dtype;
  auto tiles = [&](long long bm, long long bn) { return ((M + bm - 1) / bm) * ((N + bn - 1) / bn); };
  if (arch.rfind("sm_90", 0) == 0 && K % 8 == 0 && N % 8 == 0) {
    // Measured on the H200 (docs/perf-notes.md): 128x256x64 with two consumer warpgroups and 3
    // stages, which leaves room for the TMA-store epilogue's staging tile: 0.97-1.00 of cuBLAS
    // from 4096^3 to 8192x28672x8192 and 16384x4096x1024 (bench/results/2026-12-03-*), the
    // winner of both exhaustive tunes of session 3 at 8192x28672x8192 (panel 8) and of the
    // re-timed 4096^3 pair; smaller tiles when 128x256 tiles leave SMs idle.
    c.block_K = 64;
    c.use_swizzle = true;
    c.panel_size = 16;
    if (M <= 64 && 10 * tiles(64, 64) >= 9 * sm_count && tiles(64, 64) <= sm_count) {
      // Skinny, and 64-column tiles make one nearly full wave (N ~ 8192 on 132 SMs): one CTA
      // per 64x64 tile streams its own panel of B through 8 stages. H200 (bench/results/
      // 2026-12-04-gemm-issue17-s12-h200.json, `--config 64x64x64:8:128`): 64x8192x8192 0.98x
      // cuBLAS against 0.85x for the 64x256 tiles over 2-CTA clusters (64 CTAs); with more
      // tiles than SMs it loses (8x14336x4096, 224 tiles: 0.60x), so only here.
      c.block_M = 64, c.block_N = 64, c.num_stages = 8, c.threads = 128, c.use_swizzle = false;
    } else if (M <= 16 && dtype_bytes(dtype) == 2 && K >= 2048 && 10 * tiles(16, 32) >= 9 * sm_count &&
               tiles(16, 32) <= 2 * sm_count) {
      // GEMV-like (M <= 16) over a long K, where 32-column panels make one wave of CTAs (N ~ 4096
      // to 8192 on 132 SMs, two CTAs an SM in 96 KB of shared memory each): each CTA streams its
      // panel of B through an 8-stage cp.async ring of 128-deep K steps, mma.sync on 16 rows, no
      // split and so no reduction kernel behind it. The tuner's pick on an H100 (session 20,
      // bench/results/2026-12-05-tune-gemm-16x4096x4096-bf16-s20b-h100.json) and, forced on the
      // skinny shapes beside cuBLAS (2026-12-05-gemm-skinny-16x32x128-8-128-s20c-h100.json):
      // 16x4096x4096 1.11-1.12x cuBLAS against 0.91-0.94x for split-K 5 (session 19, H100),
      // 1x4096x4096 0.93x against 0.88-0.90x; at N = 14336 (448 CTAs) it lost to split-K 2.
      c.block_M = 16, c.block_N = 32, c.block_K = 128, c.num_stages = 8, c.threads = 128;
      c.use_swizzle = false;
    } else if (M <= 64) {
      c.block_M = 64, c.block_N = 256, c.num_stages = 4, c.threads = 128;
    } else if (tiles(128, 256) >= 2 * sm_count) {
      c.block_M = 128, c.block_N = 256, c.num_stages = 3, c.threads = 256, c.panel_size = 8;
    } else if (tiles(128, 128) >= sm_count) {
      // Rasterized in panels of 8 tile rows, not 16: on an H100 in session 32, each config in its
      // own process with cuBLAS, twice (bench/results/2026-12-07-gemm-panel-*-s32e-h100.json),
      // 2048^3 0.95-0.97x -> 1.00x, 2048x4096x4096 0.86-0.89x -> 0.96x, 4096x2048x4096 0.84-0.89x
      // -> 0.95-0.96x, 2560^3 0.90-0.92x -> 0.97x (f16 and bf16); `tessel tune gemm` at 2048^3
      // put panel 8 first too.
      c.block_M = 128, c.block_N = 128, c.num_stages = 5, c.threads = 256, c.panel_size = 8;
    } else if (K <= 2048) {
      // Few tiles and a short K loop (1024^3: 64 tiles of 128x128): 64-row tiles fill twice the
      // SMs. Exhaustive tune on the H200 (bench/results/2026-12-02-tune-1024x1024x1024-h200.json):
      // 64x128x64 s6 t128 best of 392 candidates, 8.8 us against 11.4 us for 128x128x64 s6.
      c.block_M = 64, c.block_N = 128, c.num_stages = 6, c.threads = 128;
    } else if (10 * tiles(128, 64) >= 9 * sm_count) {
      // Few tiles, long K, and 64-column tiles fill the GPU (128x8192x8192: 128 tiles): one CTA
      // per 128x64 tile with the full K loop, 8 stages, two consumer warpgroups of 64 rows —
      // the shape of cuBLAS's own kernel there. H200 (bench/results/2026-12-03-gemm-s6-runB-h200.json,
      // -runE-): 0.966-0.974 of cuBLAS f16 and bf16, against 0.907-0.94 for the split-K
      // 128x128x64 s5 t128 below; sharing A over 2-CTA clusters (use_cluster(2, 1)) 0.94.
      c.block_M = 128, c.block_N = 64, c.num_stages = 8, c.threads = 256;
    } else {
      // Few tiles, long K: 128x128 tiles with each tile's K loop split over a 2-CTA cluster
      // (select_hopper_gemm), which leaves room for 5 stages beside the reduction buffer. H200
      // (bench/results/2026-12-03-gemm-splitk-h200.json), at 128x8192x8192: 0.920 / 0.924 of
      // cuBLAS f16 / bf16, against 0.878 / 0.873 for the unsplit 128x128x64 s6 t128.
      c.block_M = 128, c.block_N = 128, c.num_stages = 5, c.threads = 128;
    }
    return c;
  }
  if (arch.rfind("sm_90", 0) == 0 && M <= 64 && dtype_bytes(dtype) == 2) {
    // Skinny with a row off 16 bytes (K or N not a multiple of 8): small tiles whose loop keeps
    // plan_pipelines' generic cp.async schedule, where an unaligned operand's loads go through a
    // realigned ring (session 35) and stay in flight across iterations. An H100 in session 36,
    // each config in its own process with cuBLAS (bench/results/2026-12-07-gemm-skinny-
    // unaligned-*-s36-h100.json, bf16): 32x64x64 s4 where N gives a wave of 64-column tiles --
    // 1x50257x4096 1.51x cuBLAS (staged 0.57x), 16x50257x4096 2.06x, 64x50257x4096 1.22x (16x32
    // tiles there 0.51x) -- and 16x32x128 s8 where it does not: 1x4096x4097 0.90x (32x64x64
    // 0.42x, staged 0.46x), 16x4097x4096 1.01x (0.63x, staged 0.89x). plan_matmul's model still
    // stages the shapes whose grid is a tile or two (1x15x4095). sm_80: not measured there.
    c.block_K = 64, c.num_stages = 4, c.threads = 128;
    if (tiles(32, 64) >= sm_count) {
      c.block_M = 32, c.block_N = 64;
    } else {
      c.block_M = 16, c.block_N = 32, c.block_K = 128, c.num_stages = 8;
    }
  } else if (M * N >= 4096LL * 4096LL) {
    c.block_M = 128, c.block_N = 256, c.block_K = 32, c.num_stages = 3, c.threads = 256;
  } else {
    c.block_M = 128, c.block_N = 128, c.block_K = 32, c.num_stages = 3, c.threads = 128;
  }
  return c;
}

long long matmul_smem_bytes(const MatmulConfig& c) {
  return (1LL * c.block_M * c.block_K + 1LL * c.block_K * c.block_N) * dtype_bytes(c.dtype) * c.num_stages;
}

namespace {

// The tutorial GEMM's kernel over tensors A, B, C: tiles, the pipelined main loop, `epilogue` on
// the accumulator (nothing for the plain GEMM), the store. Records into the PrimFunc being built.
void record_matmul_kernel(const T::Buffer& A, const T::Buffer& B, const T::Buffer& C, int M, int N, int K,
                          const MatmulConfig& c,
                          const std::function<void(const T::Buffer& C_local, T::Var bx)>& epilogue) {
  T::Kernel(T::ceildiv(N, c.block_N), T::ceildiv(M, c.block_M), c.threads, [&](T::Var bx, T::Var by) {
    auto A_shared = T::alloc_shared({c.block_M, c.block_K}, c.dtype);
    auto B_shared = T::alloc_shared({c.block_K, c.block_N}, c.dtype);
    auto C_local = T::alloc_fragment({c.block_M, c.block_N}, c.accum_dtype);
    if (c.use_swizzle) T::use_swizzle(c.panel_size);
    if (c.cluster_x * c.cluster_y > 1) T::use_cluster(c.cluster_x, c.cluster_y);
    T::clear(C_local);
    T::Pipelined(T::ceildiv(K, c.block_K), c.num_stages, [&](T::Var ko) {
      T::copy(A(by * c.block_M, ko * c.block_K), A_shared);
      T::copy(B(ko * c.block_K, bx * c.block_N), B_shared);
      T::gemm(A_shared, B_shared, C_local);
    });
    if (epilogue) epilogue(C_local, bx);
    T::copy(C_local, C(by * c.block_M, bx * c.block_N));
  });
}

}  // namespace

PrimFunc matmul_program(int M, int N, int K, const MatmulConfig& c) {
  T::PrimFunc f("matmul");
  auto A = f.tensor("A", {M, K}, c.dtype);
  auto B = f.tensor("B", {K, N}, c.dtype);
  auto C = f.tensor("C", {M, N}, c.dtype);
  f.body([&] { record_matmul_kernel(A, B, C, M, N, K, c, nullptr); });
  return f;
}

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::none:
      return "none";
    case Activation::relu:
      return "relu";
    case Activation::silu:
      return "silu";
  }
  return "?";
}

PrimFunc matmul_bias_act_program(int M, int N, int K, const MatmulConfig& c, Activation act, float alpha) {
  T::PrimFunc f(std::string("matmul_bias_") + activation_name(act));
  auto A = f.tensor("A", {M, K}, c.dtype);
  auto B = f.tensor("B", {K, N}, c.dtype);
  auto bias = f.tensor("bias", {N}, c.dtype);
  auto C = f.tensor("C", {M, N}, c.dtype);
  f.body([&] {
    record_matmul_kernel(A, B, C, M, N, K, c, [&](const T::Buffer& C_local, T::Var bx) {
      T::Parallel(c.block_M, c.block_N, [&](T::Var i, T::Var j) {
        // The last column tile reaches past N: bias is read only inside it.
        Expr col = bx * c.block_N + j;
        Expr v = C_local(i, j) * alpha + T::if_then_else(col < N, T::cast(T::f32, bias(col)), 0.0f);
        if (act == Activation::relu) v = T::max(v, 0.0f);
        if (act == Activation::silu) v = v / (1.0f + T::exp(-v));
        C_local(i, j) = v;
      });
    });
  });
  return f;
}

JitKernel make_matmul_bias_act(int M, int N, int K, const MatmulConfig& c, Activation act, float alpha,
                               const JitOptions& options) {
  JitOptions o = options;
  if (o.out_idx.empty()) o.out_idx = {-1};
  return jit(matmul_bias_act_program(M, N, K, c, act, alpha), o);
}

JitKernel make_matmul(int M, int N, int K, const MatmulConfig& c, const JitOptions& options) {
  JitOptions o = options;
  if (o.out_idx.empty()) o.out_idx = {-1};
  return jit(matmul_program(M, N, K, c), o);
}

MatmulChoice choose_matmul_config(int M, int N, int K, DType dtype) {
  // A split winner's config is a partial GEMM's: not a kernel for C on its own.
  if (auto tuned = autotune::tuned_matmul_config(M, N, K, dtype); tuned && tuned->split_k == 1)
    return {tuned->config, true};
  const bool gpu = gpu_available();
  const std::string arch = gpu ? current_device().arch() : "sm_90a";
  const int sms = gpu ? current_device().sm_count : 132;
  return {default_matmul_config(M, N, K, dtype, arch, sms), false};
}

JitKernel make_matmul(int M, int N, int K, DType dtype) {
  return make_matmul(M, N, K, choose_matmul_config(M, N, K, dtype).config);
}

}  // namespace tessel::kernels
