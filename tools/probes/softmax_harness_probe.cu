// Probe (issue 4): is the gap between Tessel's generated rows softmax at N = 16384 (85 % of copy in
// `tessel bench softmax`) and the hand-written one-CTA kernel of softmax_cluster_probe.cu (93-97 %
// in its own harness) the kernels' or the harnesses'? Times, in one process and one loop: the
// kernel Tessel generates (its source included from TESSEL_KERNEL_FILE), the probe's c1:t512:v4
// and c1:t256:v8, and a device copy of the same bytes, each with and without a 256 MiB L2 flush
// before the launch (tessel bench flushes; the probe did not). Medians of 20.
//
// Build: tools/probes/build_softmax_harness.sh (dumps the kernel, compiles for sm_90a).
#define main softmax_cluster_probe_main
#include "softmax_cluster_probe.cu"
#undef main
#include TESSEL_KERNEL_FILE

#include <functional>

// Variants of the generated kernel with one device helper swapped (build script: sed renames
// the calls to alt::...): plain __ldg loads instead of the predicated inline-asm load (V1), plain
// vector stores instead of the predicated inline-asm store with its "memory" clobber (V2).
namespace alt {
template <class T, int Vec, class D = float, bool Global = true>
__device__ inline void load_row_vector_whole(const T* g, bool present, float pad, D* dst) {
  union {
    uint4 word;
    T elems[Vec];
  } pack;
  pack.word = present ? __ldg(reinterpret_cast<const uint4*>(g)) : make_uint4(0, 0, 0, 0);
  const D pad_value = tessel::reduce_detail::as_fragment<D>(tessel::from_float<T>(pad));
#pragma unroll
  for (int v = 0; v < Vec; ++v)
    dst[v] = present ? tessel::reduce_detail::as_fragment<D>(pack.elems[v]) : pad_value;
}
template <class T, int Vec, class S = float>
__device__ inline void store_row_vector_whole(T* g, bool present, const S* src) {
  union {
    uint4 word;
    T elems[Vec];
  } pack;
#pragma unroll
  for (int v = 0; v < Vec; ++v) pack.elems[v] = tessel::from_float<T>(static_cast<float>(src[v]));
  if (present) *reinterpret_cast<uint4*>(g) = pack.word;
}
}  // namespace alt
#include TESSEL_KERNEL_V1
#include TESSEL_KERNEL_V2

int main() {
  const int N = 16384;
  const long long M = 16384;
  const size_t bytes = M * N * 2;
  std::vector<__half> hx(M * N);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-6.0f, 6.0f);
  for (auto& v : hx) v = __float2half(u(rng));
  __half *dx, *dy, *dref, *dcopy;
  unsigned char* flush;
  CHECK(cudaMalloc(&dx, bytes));
  CHECK(cudaMalloc(&dy, bytes));
  CHECK(cudaMalloc(&dref, bytes));
  CHECK(cudaMalloc(&dcopy, bytes));
  CHECK(cudaMalloc(&flush, 256u << 20));
  CHECK(cudaMemcpy(dx, hx.data(), bytes, cudaMemcpyHostToDevice));
  
  auto tessel = [&] {
    softmax_kernel<<<static_cast<unsigned>(M), 512, 192>>>(reinterpret_cast<tessel::half_t*>(dx),
                                                           reinterpret_cast<tessel::half_t*>(dy));
  };
  auto v1 = [&] {
    softmax_kernel_v1<<<static_cast<unsigned>(M), 512, 192>>>(reinterpret_cast<tessel::half_t*>(dx),
                                                              reinterpret_cast<tessel::half_t*>(dy));
  };
  auto v2 = [&] {
    softmax_kernel_v2<<<static_cast<unsigned>(M), 512, 192>>>(reinterpret_cast<tessel::half_t*>(dx),
                                                              reinterpret_cast<tessel::half_t*>(dy));
  };
  auto probe512 = [&] { softmax_cluster<1, 512, 4><<<static_cast<unsigned>(M), 512>>>(dx, dref, N); };
  auto probe256 = [&] { softmax_cluster<1, 256, 8><<<static_cast<unsigned>(M), 256>>>(dx, dref, N); };
  auto copy = [&] { CHECK(cudaMemcpyAsync(dcopy, dx, bytes, cudaMemcpyDeviceToDevice)); };
  // Same results (both round exp(x - max) / sum to f16; allow a few ulps).
  tessel();
  probe512();
  CHECK(cudaDeviceSynchronize());
  std::vector<__half> a(M * N), b(M * N);
  CHECK(cudaMemcpy(a.data(), dy, bytes, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(b.data(), dref, bytes, cudaMemcpyDeviceToHost));
  double diff = 0, norm = 0;
  for (long long i = 0; i < M * N; i += 97) {
    const double x = __half2float(a[i]), y = __half2float(b[i]);
    diff += (x - y) * (x - y);
    norm += y * y;
  }
  std::printf("softmax harness probe, N = %d, M = %lld: Tessel vs probe relative difference %.2e\n", N, M,
              std::sqrt(diff / norm));
  const char* names[] = {"tessel rows:t512:r1", "probe c1:t512:v4", "probe c1:t256:v8",
                         "V1 (no edge path)", "V2 (FFMA exp)", "copy"};
  std::function<void()> runs[] = {tessel, probe512, probe256, v1, v2, copy};
  constexpr int kRuns = 6;
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  for (int flushed = 0; flushed < 2; ++flushed) {
    std::vector<float> t[kRuns];
    for (int w = 0; w < 3; ++w)
      for (auto& r : runs) r();
    for (int rep = 0; rep < 20; ++rep)
      for (int k = 0; k < kRuns; ++k) {
        if (flushed) CHECK(cudaMemsetAsync(flush, rep & 0xff, 256u << 20));
        CHECK(cudaEventRecord(e0));
        runs[k]();
        CHECK(cudaEventRecord(e1));
        CHECK(cudaEventSynchronize(e1));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        t[k].push_back(ms);
      }
    const double copy_ms = median(t[kRuns - 1]);
    for (int k = 0; k < kRuns; ++k) {
      const double ms = median(t[k]);
      std::printf("  %-8s %-22s %8.4f ms %6.0f GB/s %6.1f %% of copy\n", flushed ? "flushed" : "no flush",
                  names[k], ms, 2.0 * bytes / ms / 1e6, 100.0 * copy_ms / ms);
    }
  }
  return 0;
}
