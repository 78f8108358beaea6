// Probe (issue 4): what does a row softmax need at N = 65536 (rows too long for registers) to
// reach 90 % of the H200's copy bandwidth? Tessel's two-pass online variant stays at 63-66 % for
// every thread count and chunk size (bench/results/2026-12-03-softmax-s5-runK-h200.json), close
// to the 2/3 that three DRAM transfers (read, read again, write) would give. Two suspects, timed
// separately here:
//   1. the second read misses L2: variants with L2 eviction hints (pass 1 loads evict_last, pass 2
//      loads evict_first, stores evict_first), and persistent grids that keep fewer rows in flight;
//   2. per-chunk block reductions (four barriers per chunk in Tessel's program): here every thread
//      keeps its own running max and sum over its elements, and the block combines the (max, sum)
//      pairs once per row.
// Each case: T threads, U 16-byte vectors per thread per chunk (chunk = T * U * 8 elements), H
// hints on/off, P persistent (grid = resident blocks, rows looped) or one block per row.
// 512 MiB f16 inputs, medians of 20, a device copy of the same bytes timed beside each case,
// sampled rows checked against float64.
//
// Build: nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a tools/probes/softmax_long_probe.cu
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#define CHECK(x)                                                                               \
  do {                                                                                         \
    cudaError_t e = (x);                                                                       \
    if (e != cudaSuccess) {                                                                    \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

constexpr float kLog2e = 1.4426950408889634f;

template <bool Hint>
__device__ inline uint4 load16(const void* p, uint64_t policy) {
  uint4 r;
  if constexpr (Hint) {
    asm volatile("ld.global.nc.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p), "l"(policy));
  } else {
    r = __ldg(reinterpret_cast<const uint4*>(p));
  }
  return r;
}
template <bool Hint>
__device__ inline void store16(void* p, uint4 v, uint64_t policy) {
  if constexpr (Hint) {
    asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1, %2, %3, %4}, %5;" ::"l"(p), "r"(v.x), "r"(v.y),
                 "r"(v.z), "r"(v.w), "l"(policy)
                 : "memory");
  } else {
    *reinterpret_cast<uint4*>(p) = v;
  }
}

template <int T>
__device__ float block_max(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  v = threadIdx.x % 32 < T / 32 ? scratch[threadIdx.x % 32] : -INFINITY;
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  return v;
}
template <int T>
__device__ float block_sum(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  v = threadIdx.x % 32 < T / 32 ? scratch[threadIdx.x % 32] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  return v;
}

// N must be a multiple of T * U * 8 (the probe does not mask).
template <int T, int U, bool Hint, bool Persistent, bool Reverse = false>
__global__ void __launch_bounds__(T) softmax_long(const __half* __restrict__ x, __half* __restrict__ y, int N,
                                                  long long M) {
  __shared__ float scratch[32];
  uint64_t keep = 0, drop = 0;
  if constexpr (Hint) {
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(keep));
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(drop));
  }
  constexpr int kChunk = T * U * 8;
  const int chunks = N / kChunk;
  for (long long row = blockIdx.x; row < M; row += Persistent ? gridDim.x : M) {
    const __half* xr = x + row * N;
    __half* yr = y + row * N;
    auto addr = [&](const __half* base, int c, int u) { return base + c * kChunk + (u * T + threadIdx.x) * 8; };
    // Pass 1: per-thread running max m and sum s (of exp(x - m)); the next chunk in flight.
    float m = -INFINITY, s = 0.0f;
    uint4 cur[U], nxt[U];
#pragma unroll
    for (int u = 0; u < U; ++u) cur[u] = load16<Hint>(addr(xr, 0, u), keep);
    for (int c = 0; c < chunks; ++c) {
      if (c + 1 < chunks) {
#pragma unroll
        for (int u = 0; u < U; ++u) nxt[u] = load16<Hint>(addr(xr, c + 1, u), keep);
      }
      float f[U * 8];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const __half2* h = reinterpret_cast<const __half2*>(&cur[u]);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float2 v = __half22float2(h[e]);
          f[u * 8 + 2 * e] = v.x;
          f[u * 8 + 2 * e + 1] = v.y;
        }
      }
      float lm = f[0];
#pragma unroll
      for (int i = 1; i < U * 8; ++i) lm = fmaxf(lm, f[i]);
      const float mn = fmaxf(m, lm);
      const float mb = mn * kLog2e;
      float ls = 0.0f;
#pragma unroll
      for (int i = 0; i < U * 8; ++i) ls += exp2f(f[i] * kLog2e - mb);
      s = s * (m == mn ? 1.0f : exp2f(m * kLog2e - mb)) + ls;
      m = mn;
#pragma unroll
      for (int u = 0; u < U; ++u) cur[u] = nxt[u];
    }
    const float M_row = block_max<T>(m, scratch);
    const float S_row = block_sum<T>(s * exp2f((m - M_row) * kLog2e), scratch);
    const float inv = 1.0f / S_row;
    const float mb = M_row * kLog2e;
    // Pass 2: read again (from L2 if it kept the row), normalize, write. Reverse: the chunks
    // pass 1 read last (the likeliest still in L2) first.
    auto chunk_of = [&](int i) { return Reverse ? chunks - 1 - i : i; };
#pragma unroll
    for (int u = 0; u < U; ++u) cur[u] = load16<Hint>(addr(xr, chunk_of(0), u), drop);
    for (int i = 0; i < chunks; ++i) {
      const int c = chunk_of(i);
      if (i + 1 < chunks) {
#pragma unroll
        for (int u = 0; u < U; ++u) nxt[u] = load16<Hint>(addr(xr, chunk_of(i + 1), u), drop);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        __half2* h = reinterpret_cast<__half2*>(&cur[u]);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float2 v = __half22float2(h[e]);
          h[e] = __floats2half2_rn(exp2f(v.x * kLog2e - mb) * inv, exp2f(v.y * kLog2e - mb) * inv);
        }
        store16<Hint>(const_cast<__half*>(addr(yr, c, u)), cur[u], drop);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) cur[u] = nxt[u];
    }
  }
}


// Hybrid (one row per block, nothing read twice): VR 16-byte vectors per thread held in
// registers and VS more in shared memory (cp.async, each thread reads back only its own
// slots), so that a 65536-wide f16 row (128 KB) fits with two blocks per SM — their load and
// compute phases overlap as the 16384 register-resident kernel's do.
template <int T, int VR, int VS>
__global__ void __launch_bounds__(T) softmax_hybrid(const __half* __restrict__ x, __half* __restrict__ y, int N,
                                                    long long M) {
  extern __shared__ __align__(16) uint4 slots[];  // [VS][T]
  __shared__ float scratch[32];
  const long long row = blockIdx.x;
  const uint4* xr = reinterpret_cast<const uint4*>(x + row * N);
  uint4* yr = reinterpret_cast<uint4*>(y + row * N);
#pragma unroll
  for (int v = 0; v < VS; ++v) {
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(&slots[v * T + threadIdx.x]));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(xr + (VR + v) * T + threadIdx.x));
  }
  asm volatile("cp.async.commit_group;");
  uint4 raw[VR];
#pragma unroll
  for (int v = 0; v < VR; ++v) raw[v] = __ldg(xr + v * T + threadIdx.x);
  asm volatile("cp.async.wait_all;" ::: "memory");
  auto each = [&](auto&& fn) {
#pragma unroll
    for (int v = 0; v < VR + VS; ++v) {
      uint4 w = v < VR ? raw[v < VR ? v : 0] : slots[(v - VR) * T + threadIdx.x];
      const __half2* h = reinterpret_cast<const __half2*>(&w);
#pragma unroll
      for (int e = 0; e < 4; ++e) fn(__half22float2(h[e]));
    }
  };
  float m = -INFINITY;
  each([&](float2 f) { m = fmaxf(m, fmaxf(f.x, f.y)); });
  m = block_max<T>(m, scratch);
  const float mb = m * kLog2e;
  float s = 0.0f;
  each([&](float2 f) { s += exp2f(f.x * kLog2e - mb) + exp2f(f.y * kLog2e - mb); });
  s = block_sum<T>(s, scratch);
  const float inv = 1.0f / s;
#pragma unroll
  for (int v = 0; v < VR + VS; ++v) {
    uint4 w = v < VR ? raw[v < VR ? v : 0] : slots[(v - VR) * T + threadIdx.x];
    __half2* h = reinterpret_cast<__half2*>(&w);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float2 f = __half22float2(h[e]);
      h[e] = __floats2half2_rn(exp2f(f.x * kLog2e - mb) * inv, exp2f(f.y * kLog2e - mb) * inv);
    }
    yr[v * T + threadIdx.x] = w;
  }
}

struct Result {
  std::string name;
  int N;
  double ms, copy_ms, err;
};

double median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class Launch>
Result time_case(const std::string& name, int N, Launch launch, __half* dy, __half* dcopy, const __half* dx,
                 const std::vector<__half>& hx, long long M);

template <int T, int U, bool Hint, bool Persistent, bool Reverse = false>
Result run_case(int N, const __half* dx, __half* dy, __half* dcopy, const std::vector<__half>& hx, long long M,
                int blocks_per_sm_cap = 0) {
  if (N % (T * U * 8) != 0) {
    std::fprintf(stderr, "bad case\n");
    std::exit(1);
  }
  auto kernel = softmax_long<T, U, Hint, Persistent, Reverse>;
  int per_sm = 0, sms = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, T, 0));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  if (blocks_per_sm_cap) per_sm = std::min(per_sm, blocks_per_sm_cap);
  const unsigned grid = Persistent ? static_cast<unsigned>(std::min<long long>(M, 1LL * sms * per_sm))
                                   : static_cast<unsigned>(M);
  auto launch = [&] { kernel<<<grid, T>>>(dx, dy, N, M); };
  return time_case("t" + std::to_string(T) + ":u" + std::to_string(U) + (Hint ? ":hint" : ":plain") +
                       (Persistent ? ":persistent" + std::to_string(per_sm) : ":grid") + (Reverse ? ":rev" : ""),
                   N, launch, dy, dcopy, dx, hx, M);
}



template <int T, int VR, int VS>
Result run_hybrid(int N, const __half* dx, __half* dy, __half* dcopy, const std::vector<__half>& hx, long long M) {
  if (N != T * 8 * (VR + VS)) {
    std::fprintf(stderr, "bad hybrid case\n");
    std::exit(1);
  }
  auto kernel = softmax_hybrid<T, VR, VS>;
  const int smem = T * VS * 16;
  CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  int per_sm = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, T, smem));
  auto launch = [&] { kernel<<<static_cast<unsigned>(M), T, smem>>>(dx, dy, N, M); };
  return time_case("hybrid:t" + std::to_string(T) + ":r" + std::to_string(VR) + ":s" + std::to_string(VS) +
                       ":occ" + std::to_string(per_sm),
                   N, launch, dy, dcopy, dx, hx, M);
}

template <class Launch>
Result time_case(const std::string& name, int N, Launch launch, __half* dy, __half* dcopy, const __half* dx,
                 const std::vector<__half>& hx, long long M) {
  CHECK(cudaMemset(dy, 0xff, M * N * 2));
  launch();
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  double err2 = 0, ref2 = 0;
  std::vector<__half> row(N);
  for (int k = 0; k < 16; ++k) {
    const long long r = (k * 7919LL) % M;
    CHECK(cudaMemcpy(row.data(), dy + r * N, N * 2, cudaMemcpyDeviceToHost));
    double mx = -INFINITY, sum = 0;
    for (int j = 0; j < N; ++j) mx = std::max(mx, static_cast<double>(__half2float(hx[r * N + j])));
    for (int j = 0; j < N; ++j) sum += std::exp(static_cast<double>(__half2float(hx[r * N + j])) - mx);
    for (int j = 0; j < N; ++j) {
      const double want = std::exp(static_cast<double>(__half2float(hx[r * N + j])) - mx) / sum;
      const double got = __half2float(row[j]);
      err2 += (got - want) * (got - want);
      ref2 += want * want;
    }
  }
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::vector<float> t_kernel, t_copy;
  for (int i = 0; i < 3; ++i) launch();
  for (int i = 0; i < 20; ++i) {
    float ms = 0;
    CHECK(cudaEventRecord(a));
    launch();
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    CHECK(cudaEventElapsedTime(&ms, a, b));
    t_kernel.push_back(ms);
    CHECK(cudaEventRecord(a));
    CHECK(cudaMemcpyAsync(dcopy, dx, M * N * 2, cudaMemcpyDeviceToDevice));
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    CHECK(cudaEventElapsedTime(&ms, a, b));
    t_copy.push_back(ms);
  }
  Result r{name, N, median(t_kernel), median(t_copy), std::sqrt(err2 / ref2)};
  const double bytes = 2.0 * M * N * 2;
  std::printf("  N=%-6d %-26s %8.4f ms %6.0f GB/s  copy %6.0f GB/s  %5.1f %% of copy  rel.err %.1e\n", N,
              r.name.c_str(), r.ms, bytes / r.ms / 1e6, bytes / r.copy_ms / 1e6, 100.0 * r.copy_ms / r.ms, r.err);
  std::fflush(stdout);
  return r;
}

int main(int argc, char** argv) {
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("softmax long-row probe on %s (%d SMs, L2 %d MB), f16, 512 MiB inputs\n", prop.name,
              prop.multiProcessorCount, prop.l2CacheSize >> 20);
  std::vector<Result> all;
  for (int N : {65536, 16384}) {
    const long long M = (512LL << 20) / (2LL * N);
    std::vector<__half> hx(M * N);
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-6.0f, 6.0f);
    for (auto& v : hx) v = __float2half(u(rng));
    __half *dx, *dy, *dcopy;
    CHECK(cudaMalloc(&dx, M * N * 2));
    CHECK(cudaMalloc(&dy, M * N * 2));
    CHECK(cudaMalloc(&dcopy, M * N * 2));
    CHECK(cudaMemcpy(dx, hx.data(), M * N * 2, cudaMemcpyHostToDevice));
    if (std::getenv("HYBRID_ONLY")) {
      if (N == 65536) {
        all.push_back(run_hybrid<512, 8, 8>(N, dx, dy, dcopy, hx, M));
        all.push_back(run_hybrid<512, 6, 10>(N, dx, dy, dcopy, hx, M));
        all.push_back(run_hybrid<512, 10, 6>(N, dx, dy, dcopy, hx, M));
        all.push_back(run_hybrid<1024, 4, 4>(N, dx, dy, dcopy, hx, M));
        all.push_back(run_hybrid<256, 16, 16>(N, dx, dy, dcopy, hx, M));
        all.push_back(run_case<1024, 1, true, true>(N, dx, dy, dcopy, hx, M));
        all.push_back(run_case<256, 2, false, false, true>(N, dx, dy, dcopy, hx, M));
        all.push_back(run_case<512, 2, false, false, true>(N, dx, dy, dcopy, hx, M));
        all.push_back(run_case<512, 2, true, false, true>(N, dx, dy, dcopy, hx, M));
        all.push_back(run_case<1024, 1, true, true, true>(N, dx, dy, dcopy, hx, M));
        all.push_back(run_case<1024, 1, false, true, true>(N, dx, dy, dcopy, hx, M));
      } else {
        all.push_back(run_hybrid<256, 4, 4>(N, dx, dy, dcopy, hx, M));
        all.push_back(run_hybrid<512, 2, 2>(N, dx, dy, dcopy, hx, M));
      }
      CHECK(cudaFree(dx));
      CHECK(cudaFree(dy));
      CHECK(cudaFree(dcopy));
      continue;
    }
    all.push_back(run_case<256, 2, false, false>(N, dx, dy, dcopy, hx, M));
    all.push_back(run_case<256, 2, true, false>(N, dx, dy, dcopy, hx, M));
    all.push_back(run_case<512, 2, false, false>(N, dx, dy, dcopy, hx, M));
    all.push_back(run_case<512, 2, true, false>(N, dx, dy, dcopy, hx, M));
    all.push_back(run_case<512, 2, true, true>(N, dx, dy, dcopy, hx, M));
    all.push_back(run_case<512, 2, true, true>(N, dx, dy, dcopy, hx, M, 2));
    all.push_back(run_case<1024, 1, true, true>(N, dx, dy, dcopy, hx, M));
    all.push_back(run_case<1024, 2, true, true>(N, dx, dy, dcopy, hx, M));
    all.push_back(run_case<256, 4, true, true>(N, dx, dy, dcopy, hx, M));
    all.push_back(run_case<256, 4, true, true>(N, dx, dy, dcopy, hx, M, 4));
    all.push_back(run_case<256, 4, false, true>(N, dx, dy, dcopy, hx, M, 4));
    CHECK(cudaFree(dx));
    CHECK(cudaFree(dy));
    CHECK(cudaFree(dcopy));
  }
  if (argc > 1) {
    FILE* f = std::fopen(argv[1], "w");
    std::fprintf(f, "{\"probe\": \"softmax_long_probe\", \"device\": \"%s\", \"cases\": [\n", prop.name);
    for (size_t i = 0; i < all.size(); ++i)
      std::fprintf(f,
                   "  {\"N\": %d, \"case\": \"%s\", \"ms\": %.6f, \"copy_ms\": %.6f, \"of_copy\": %.4f, "
                   "\"rel_error\": %.3e}%s\n",
                   all[i].N, all[i].name.c_str(), all[i].ms, all[i].copy_ms, all[i].copy_ms / all[i].ms, all[i].err,
                   i + 1 < all.size() ? "," : "");
    std::fprintf(f, "]}\n");
    std::fclose(f);
  }
  return 0;
}
