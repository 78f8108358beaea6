// Probe (issue 4): a row softmax with each row split over a thread-block cluster, every element
// read once into registers and written once, the row's max and sum exchanged through
// distributed shared memory. Question: does it reach 90 % of the copy bandwidth at N = 16384
// and 65536 on the H200, where Tessel's one-row-per-block (85 %) and two-pass online (66 %)
// variants stop? If it does, the language gets clusters and cluster-wide reductions.
//
// Build: tools/probes/build_softmax_cluster.sh (sm_90a). Run: softmax_cluster_probe [JSON_FILE]
// Each case: C CTAs per row (a cluster), T threads per CTA, V 16-byte vectors per thread, so
// N = C * T * V * 8 exactly (f16; the probe does not mask). 512 MiB inputs, medians of 20
// launches, a device-to-device copy of the same bytes timed beside each case; sampled rows
// checked against a float64 CPU softmax.
#include <cooperative_groups.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace cg = cooperative_groups;

#define CHECK(x)                                                                               \
  do {                                                                                         \
    cudaError_t e = (x);                                                                       \
    if (e != cudaSuccess) {                                                                    \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

constexpr float kLog2e = 1.4426950408889634f;

template <int T>
__device__ float block_reduce(float v, float* scratch, bool is_max) {
  for (int o = 16; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, w) : v + w;
  }
  constexpr int kWarps = T / 32;
  if constexpr (kWarps > 1) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < kWarps ? scratch[lane] : (is_max ? -INFINITY : 0.0f);
    for (int o = 16; o > 0; o >>= 1) {
      const float w = __shfl_xor_sync(0xffffffffu, v, o);
      v = is_max ? fmaxf(v, w) : v + w;
    }
    __syncthreads();  // scratch is reused by the next reduction
  }
  return v;
}

// Row r = blockIdx.x / C; this CTA holds columns [rank * T * V * 8, +T * V * 8).
template <int C, int T, int V>
__global__ void __launch_bounds__(T) softmax_cluster(const __half* __restrict__ x, __half* __restrict__ y, int N) {
  __shared__ float scratch[32];
  __shared__ float published[2];  // this CTA's max, then its sum (read by the peers)
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = C > 1 ? static_cast<int>(cluster.block_rank()) : 0;
  const long long row = blockIdx.x / C;
  const long long base = row * N + static_cast<long long>(rank) * T * V * 8;
  uint4 raw[V];
#pragma unroll
  for (int v = 0; v < V; ++v) raw[v] = __ldg(reinterpret_cast<const uint4*>(x + base) + v * T + threadIdx.x);
  float m = -INFINITY;
#pragma unroll
  for (int v = 0; v < V; ++v) {
    const __half2* h = reinterpret_cast<const __half2*>(&raw[v]);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float2 f = __half22float2(h[e]);
      m = fmaxf(m, fmaxf(f.x, f.y));
    }
  }
  m = block_reduce<T>(m, scratch, true);
  if constexpr (C > 1) {
    if (threadIdx.x == 0) published[0] = m;
    cluster.sync();
#pragma unroll
    for (int r = 0; r < C; ++r) m = fmaxf(m, *cluster.map_shared_rank(&published[0], r));
  }
  float s = 0.0f;
  const float mb = m * kLog2e;
#pragma unroll
  for (int v = 0; v < V; ++v) {
    const __half2* h = reinterpret_cast<const __half2*>(&raw[v]);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float2 f = __half22float2(h[e]);
      s += exp2f(f.x * kLog2e - mb) + exp2f(f.y * kLog2e - mb);
    }
  }
  s = block_reduce<T>(s, scratch, false);
  if constexpr (C > 1) {
    if (threadIdx.x == 0) published[1] = s;
    cluster.sync();
    float total = 0.0f;
#pragma unroll
    for (int r = 0; r < C; ++r) total += *cluster.map_shared_rank(&published[1], r);
    s = total;
  }
  const float inv = 1.0f / s;
#pragma unroll
  for (int v = 0; v < V; ++v) {
    __half2* h = reinterpret_cast<__half2*>(&raw[v]);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float2 f = __half22float2(h[e]);
      h[e] = __floats2half2_rn(exp2f(f.x * kLog2e - mb) * inv, exp2f(f.y * kLog2e - mb) * inv);
    }
    reinterpret_cast<uint4*>(y + base)[v * T + threadIdx.x] = raw[v];
  }
  if constexpr (C > 1) cluster.sync();  // no CTA leaves while a peer may still read its sums
}

struct Result {
  std::string name;
  int N, C, T, V;
  double ms, copy_ms, err;
};

double median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <int C, int T, int V>
Result run_case(int N, const __half* dx, __half* dy, __half* dcopy, const std::vector<__half>& hx, long long M) {
  static_assert(T % 32 == 0 && T <= 1024, "T");
  if (N != C * T * V * 8) {
    std::fprintf(stderr, "bad case\n");
    std::exit(1);
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(M * C));
  cfg.blockDim = dim3(T);
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = C;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  auto launch = [&] { CHECK(cudaLaunchKernelEx(&cfg, softmax_cluster<C, T, V>, dx, dy, N)); };
  CHECK(cudaMemset(dy, 0xff, M * N * 2));  // NaN-poisoned
  launch();
  CHECK(cudaDeviceSynchronize());
  // Check 16 sampled rows against float64.
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
  Result r{"c" + std::to_string(C) + ":t" + std::to_string(T) + ":v" + std::to_string(V), N, C, T, V,
           median(t_kernel), median(t_copy), std::sqrt(err2 / ref2)};
  const double bytes = 2.0 * M * N * 2;
  std::printf("  N=%-6d %-14s %8.4f ms %6.0f GB/s  copy %6.0f GB/s  %5.1f %% of copy  rel.err %.1e\n", N,
              r.name.c_str(), r.ms, bytes / r.ms / 1e6, bytes / r.copy_ms / 1e6, 100.0 * r.copy_ms / r.ms, r.err);
  std::fflush(stdout);
  return r;
}

int main(int argc, char** argv) {
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("softmax cluster probe on %s (%d SMs), f16, 512 MiB inputs\n", prop.name, prop.multiProcessorCount);
  std::vector<Result> all;
  for (int N : {16384, 65536}) {
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
    if (N == 16384) {
      all.push_back(run_case<1, 512, 4>(N, dx, dy, dcopy, hx, M));  // Tessel's rows t512 r1 shape
      all.push_back(run_case<1, 256, 8>(N, dx, dy, dcopy, hx, M));
      all.push_back(run_case<2, 256, 4>(N, dx, dy, dcopy, hx, M));
      all.push_back(run_case<2, 128, 8>(N, dx, dy, dcopy, hx, M));
      all.push_back(run_case<4, 128, 4>(N, dx, dy, dcopy, hx, M));
      all.push_back(run_case<4, 64, 8>(N, dx, dy, dcopy, hx, M));
      all.push_back(run_case<8, 64, 4>(N, dx, dy, dcopy, hx, M));
    } else {
      all.push_back(run_case<1, 1024, 8>(N, dx, dy, dcopy, hx, M));  // whole row in one CTA
      all.push_back(run_case<2, 512, 8>(N, dx, dy, dcopy, hx, M));
      all.push_back(run_case<4, 256, 8>(N, dx, dy, dcopy, hx, M));
      all.push_back(run_case<4, 512, 4>(N, dx, dy, dcopy, hx, M));
      all.push_back(run_case<8, 256, 4>(N, dx, dy, dcopy, hx, M));
      all.push_back(run_case<8, 128, 8>(N, dx, dy, dcopy, hx, M));
    }
    CHECK(cudaFree(dx));
    CHECK(cudaFree(dy));
    CHECK(cudaFree(dcopy));
  }
  if (argc > 1) {
    FILE* f = std::fopen(argv[1], "w");
    std::fprintf(f, "{\"probe\": \"softmax_cluster_probe\", \"device\": \"%s\", \"cases\": [\n", prop.name);
    for (size_t i = 0; i < all.size(); ++i)
      std::fprintf(f,
                   "  {\"N\": %d, \"cluster\": %d, \"threads\": %d, \"vectors\": %d, \"ms\": %.6f, \"copy_ms\": %.6f, "
                   "\"of_copy\": %.4f, \"rel_error\": %.3e}%s\n",
                   all[i].N, all[i].C, all[i].T, all[i].V, all[i].ms, all[i].copy_ms, all[i].copy_ms / all[i].ms,
                   all[i].err, i + 1 < all.size() ? "," : "");
    std::fprintf(f, "]}\n");
    std::fclose(f);
  }
  return 0;
}
