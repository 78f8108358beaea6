// wgmma probe: the sm_90a path (device/tessel/hopper_gemm.cuh: TMA + mbarrier ring + wgmma,
// warp-specialized, persistent) on the tutorial GEMM C = A * B (row-major A [M][K], B [K][N],
// C [M][N]; f16 and bf16), checked against cuBLAS and timed side by side with it.
//
// Build: tools/probes/build_wgmma.sh  (nvcc ... -lcublas -lcuda; the driver API encodes the
// tensor maps here; the Tessel runtime does the same through its dlopen'd libcuda).
// Run:   .carry-hopper2/wgmma_probe [quick]   (exit status 1 if any result is wrong)
// Output: a table, then one JSON object per case on its own line starting with "{".
// ratio = cuBLAS ms / our ms (1.0 = parity).
//
// Correctness: C (and a guard after it) is poisoned with NaN before each checked run;
// relative Frobenius error against cuBLAS's f32-output GEMM < 2e-2; guard intact.
// Timing: CUDA events, 5 warm-ups, median of 20, ours and cuBLAS interleaved.
//
// TMA needs the global row strides to be multiples of 16 bytes (K % 8 == 0 and N % 8 == 0
// for 16-bit A and B) and 16-byte aligned base addresses; other shapes (17x33x65) must take
// the mma.sync path (gemm.cuh), which is what the compiler's fallback should select.
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <tessel/hopper_gemm.cuh>

#define CHECK_CUDA(x)                                                                            \
  do {                                                                                           \
    cudaError_t err_ = (x);                                                                      \
    if (err_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(err_)); \
      std::exit(2);                                                                              \
    }                                                                                            \
  } while (0)
#define CHECK_CU(x)                                                                      \
  do {                                                                                   \
    CUresult r_ = (x);                                                                   \
    if (r_ != CUDA_SUCCESS) {                                                            \
      std::fprintf(stderr, "%s:%d: %s: CUresult %d\n", __FILE__, __LINE__, #x, (int)r_); \
      std::exit(2);                                                                      \
    }                                                                                    \
  } while (0)
#define CHECK_CUBLAS(x)                                                                        \
  do {                                                                                         \
    cublasStatus_t st_ = (x);                                                                  \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                                        \
      std::fprintf(stderr, "%s:%d: %s: cuBLAS status %d\n", __FILE__, __LINE__, #x, (int)st_); \
      std::exit(2);                                                                            \
    }                                                                                          \
  } while (0)

namespace {

// Row-major [rows][cols] 16-bit tensor, box {box_cols, box_rows}, swizzle box_cols * 2 bytes
// (64 -> SWIZZLE_128B, 32 -> SWIZZLE_64B), zero OOB fill.
tessel::TmaDescriptor make_tmap(const void* ptr, int rows, int cols, int box_rows, bool bf16,
                                int box_cols = 64) {
  static_assert(sizeof(tessel::TmaDescriptor) == sizeof(CUtensorMap), "tensor map size");
  CUtensorMap map;
  const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
  const cuuint64_t strides[1] = {(cuuint64_t)cols * 2};
  const cuuint32_t box[2] = {(cuuint32_t)box_cols, (cuuint32_t)box_rows};
  const cuuint32_t estrides[2] = {1, 1};
  CHECK_CU(cuTensorMapEncodeTiled(
      &map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2,
      const_cast<void*>(ptr), dims, strides, box, estrides, CU_TENSOR_MAP_INTERLEAVE_NONE,
      box_cols == 64 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  tessel::TmaDescriptor d;
  std::memcpy(&d, &map, sizeof d);
  return d;
}

struct Problem {
  int M, N, K;
  bool bf16;
  void *A = nullptr, *B = nullptr, *C = nullptr, *Cb = nullptr;
  float* ref = nullptr;
  std::vector<float> ref_host;
};

constexpr int kGuard = 256;
constexpr unsigned short kPoison = 0xFFFF;  // NaN in f16 and bf16

unsigned long long g_rng = 0x243F6A8885A308D3ull;
float next_uniform() {
  g_rng ^= g_rng >> 12;
  g_rng ^= g_rng << 25;
  g_rng ^= g_rng >> 27;
  const unsigned long long x = g_rng * 0x2545F4914F6CDD1Dull;
  return static_cast<float>((x >> 40) * (1.0 / 8388608.0) - 1.0);
}
unsigned short to_bits(float f, bool bf16) {
  unsigned short b;
  if (bf16) {
    __nv_bfloat16 h = __float2bfloat16_rn(f);
    std::memcpy(&b, &h, 2);
  } else {
    __half h = __float2half_rn(f);
    std::memcpy(&b, &h, 2);
  }
  return b;
}
float from_bits(unsigned short b, bool bf16) {
  if (bf16) {
    __nv_bfloat16 h;
    std::memcpy(&h, &b, 2);
    return __bfloat162float(h);
  }
  __half h;
  std::memcpy(&h, &b, 2);
  return __half2float(h);
}
void* upload_random(size_t n, bool bf16) {
  std::vector<unsigned short> h(n);
  for (auto& x : h) x = to_bits(next_uniform(), bf16);
  void* d = nullptr;
  CHECK_CUDA(cudaMalloc(&d, n * 2));
  CHECK_CUDA(cudaMemcpy(d, h.data(), n * 2, cudaMemcpyHostToDevice));
  return d;
}

// Row-major C = A B through column-major cuBLAS: C^T = B^T A^T.
void cublas_gemm(cublasHandle_t h, const Problem& p, void* C, cudaDataType c_type) {
  const float alpha = 1.0f, beta = 0.0f;
  const cudaDataType ab = p.bf16 ? CUDA_R_16BF : CUDA_R_16F;
  CHECK_CUBLAS(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, p.N, p.M, p.K, &alpha, p.B, ab, p.N, p.A, ab, p.K,
                            &beta, C, c_type, p.N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

Problem make_problem(cublasHandle_t h, int M, int N, int K, bool bf16) {
  Problem p{M, N, K, bf16};
  p.A = upload_random((size_t)M * K, bf16);
  p.B = upload_random((size_t)K * N, bf16);
  CHECK_CUDA(cudaMalloc(&p.C, ((size_t)M * N + kGuard) * 2));
  CHECK_CUDA(cudaMalloc(&p.Cb, (size_t)M * N * 2));
  CHECK_CUDA(cudaMalloc(&p.ref, (size_t)M * N * 4));
  cublas_gemm(h, p, p.ref, CUDA_R_32F);
  p.ref_host.resize((size_t)M * N);
  CHECK_CUDA(cudaMemcpy(p.ref_host.data(), p.ref, p.ref_host.size() * 4, cudaMemcpyDeviceToHost));
  return p;
}
void free_problem(Problem& p) {
  cudaFree(p.A);
  cudaFree(p.B);
  cudaFree(p.C);
  cudaFree(p.Cb);
  cudaFree(p.ref);
}

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Row {
  std::string config, variant;
  int M, N, K;
  bool bf16;
  float ms = NAN, cublas_ms = NAN;
  double rel_err = NAN;
  bool ok = false;
  std::string note;
};
std::vector<Row> g_rows;
int g_sms = 132;
int g_max_grid = 1 << 30;  // correctness runs cap the grid so that each CTA takes many tiles
constexpr int kWarmup = 5, kTimed = 20;

// PP: ping-pong consumers; WS: 16-byte epilogue stores; PR/CR: setmaxnreg budgets;
// attr: launch with a 1x1x1 cluster attribute even when Cl == 1 (the runtime launches with
// cuLaunchKernel and no attribute, which is the default here).
template <class T, int BM, int BN, int BK, int Stages, int CW, int Cl = 1, int PP = 0, int WS = 1,
          int PR = 40, int CR = 232>
void run_case(cublasHandle_t handle, Problem& p, int panel, bool time_it, bool attr = false) {
  using G = tessel::HopperGemm<T, BM, BN, BK, Stages, CW, PR, CR, Cl, PP, WS>;
  const bool persistent = true;
  Row row;
  char name[96];
  std::snprintf(name, sizeof name, "%dx%dx%d_s%d_c%d_cl%d%s%s%s", BM, BN, BK, Stages, CW, Cl, PP ? "_pp" : "",
                WS ? "" : "_ws0", CR != 232 ? "_r240" : "");
  row.config = name;
  row.variant = std::string("p") + std::to_string(panel) + (attr ? "_attr" : "");
  row.M = p.M, row.N = p.N, row.K = p.K, row.bf16 = p.bf16;
  if ((p.K * 2) % 16 != 0 || (p.N * 2) % 16 != 0) {
    row.note = "skipped: TMA needs 16-byte row strides (K % 8, N % 8); use the mma.sync path";
    g_rows.push_back(row);
    return;
  }
  auto kernel = tessel::hopper_gemm_kernel<G, T>;
  CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, G::kSmemBytes));
  const tessel::TmaDescriptor ta = make_tmap(p.A, p.M, p.K, BM, p.bf16, BK >= 64 ? 64 : BK);
  const tessel::TmaDescriptor tb = make_tmap(p.B, p.K, p.N, BK, p.bf16);
  // Grid: one CTA per tile, or (persistent) as many clusters as fit on the GPU at once.
  const int tiles = ((p.M + BM * Cl - 1) / (BM * Cl)) * Cl * ((p.N + BN - 1) / BN);
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute la[1];
  la[0].id = cudaLaunchAttributeClusterDimension;
  la[0].val.clusterDim.x = Cl;
  la[0].val.clusterDim.y = 1;
  la[0].val.clusterDim.z = 1;
  cfg.blockDim = dim3(G::kThreads);
  cfg.dynamicSmemBytes = G::kSmemBytes;
  cfg.attrs = la;
  cfg.numAttrs = (Cl > 1 || attr) ? 1 : 0;
  int resident = std::min(g_sms, g_max_grid / Cl * Cl);
  if (Cl > 1) {
    cfg.gridDim = dim3(tiles);
    int clusters = 0;
    CHECK_CUDA(cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg));
    resident = clusters * Cl;
  }
  const int grid = persistent ? std::min(tiles, resident) : tiles;
  cfg.gridDim = dim3(grid);
  if (row.note.empty() && Cl > 1) row.note = "grid " + std::to_string(grid);
  auto launch = [&] {
    CHECK_CUDA(cudaLaunchKernelEx(&cfg, kernel, ta, tb, static_cast<T*>(p.C), p.M, p.N, p.K, panel));
  };
  const size_t mn = (size_t)p.M * p.N;
  CHECK_CUDA(cudaMemset(p.C, 0xFF, (mn + kGuard) * 2));
  launch();
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<unsigned short> c(mn + kGuard);
  CHECK_CUDA(cudaMemcpy(c.data(), p.C, c.size() * 2, cudaMemcpyDeviceToHost));
  double num = 0, den = 0;
  for (size_t i = 0; i < mn; ++i) {
    const double d = (double)from_bits(c[i], p.bf16) - p.ref_host[i];
    num += d * d;
    den += (double)p.ref_host[i] * p.ref_host[i];
  }
  row.rel_err = std::sqrt(num / (den > 0 ? den : 1));
  bool guard_ok = true;
  for (int i = 0; i < kGuard; ++i) guard_ok &= c[mn + i] == kPoison;
  row.ok = row.rel_err < 2e-2 && guard_ok;
  if (!guard_ok) row.note = "wrote past the end of C";
  if (time_it) {
    cudaEvent_t e0, e1, e2;
    CHECK_CUDA(cudaEventCreate(&e0));
    CHECK_CUDA(cudaEventCreate(&e1));
    CHECK_CUDA(cudaEventCreate(&e2));
    const cudaDataType ct = p.bf16 ? CUDA_R_16BF : CUDA_R_16F;
    for (int i = 0; i < kWarmup; ++i) {
      launch();
      cublas_gemm(handle, p, p.Cb, ct);
    }
    std::vector<float> ours, theirs;
    for (int i = 0; i < kTimed; ++i) {
      CHECK_CUDA(cudaEventRecord(e0));
      launch();
      CHECK_CUDA(cudaEventRecord(e1));
      cublas_gemm(handle, p, p.Cb, ct);
      CHECK_CUDA(cudaEventRecord(e2));
      CHECK_CUDA(cudaEventSynchronize(e2));
      float a = 0, b = 0;
      CHECK_CUDA(cudaEventElapsedTime(&a, e0, e1));
      CHECK_CUDA(cudaEventElapsedTime(&b, e1, e2));
      ours.push_back(a);
      theirs.push_back(b);
    }
    CHECK_CUDA(cudaGetLastError());
    row.ms = median(ours);
    row.cublas_ms = median(theirs);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaEventDestroy(e2);
  }
  std::fprintf(stderr, "# %s %s %s %dx%dx%d ms %.4f cublas %.4f ratio %.3f err %.2e %s\n", row.config.c_str(),
               row.variant.c_str(), p.bf16 ? "bf16" : "f16", p.M, p.N, p.K, row.ms, row.cublas_ms,
               row.cublas_ms / row.ms, row.rel_err, row.ok ? "ok" : "FAIL");
  g_rows.push_back(row);
}

void print_results() {
  std::printf("%-20s %-14s %-4s %5s %5s %5s %9s %8s %9s %8s %6s %9s %s\n", "config", "variant", "type", "M",
              "N", "K", "ms", "TFLOP/s", "cuBLAS ms", "cuBLAS", "ratio", "rel_err", "status");
  for (const Row& r : g_rows) {
    const double flop = 2.0 * r.M * r.N * r.K;
    std::printf("%-20s %-14s %-4s %5d %5d %5d %9.4f %8.1f %9.4f %8.1f %6.3f %9.2e %s %s\n", r.config.c_str(),
                r.variant.c_str(), r.bf16 ? "bf16" : "f16", r.M, r.N, r.K, r.ms, flop / (r.ms * 1e-3) / 1e12,
                r.cublas_ms, flop / (r.cublas_ms * 1e-3) / 1e12, r.cublas_ms / r.ms, r.rel_err,
                r.ok ? "ok" : (r.note.rfind("skipped", 0) == 0 ? "skip" : "FAIL"), r.note.c_str());
  }
  auto num = [](double x) { return std::isfinite(x) ? std::to_string(x) : std::string("null"); };
  for (const Row& r : g_rows) {
    const double flop = 2.0 * r.M * r.N * r.K;
    std::printf(
        "{\"config\":\"%s\",\"variant\":\"%s\",\"dtype\":\"%s\",\"M\":%d,\"N\":%d,\"K\":%d,"
        "\"ms\":%s,\"tflops\":%s,\"cublas_ms\":%s,\"cublas_tflops\":%s,\"ratio\":%s,"
        "\"rel_err\":%s,\"ok\":%s,\"note\":\"%s\"}\n",
        r.config.c_str(), r.variant.c_str(), r.bf16 ? "bf16" : "f16", r.M, r.N, r.K, num(r.ms).c_str(),
        num(flop / (r.ms * 1e-3) / 1e12).c_str(), num(r.cublas_ms).c_str(),
        num(flop / (r.cublas_ms * 1e-3) / 1e12).c_str(), num(r.cublas_ms / r.ms).c_str(),
        num(r.rel_err).c_str(), r.ok ? "true" : "false", r.note.c_str());
  }
}

template <class T>
void correctness(cublasHandle_t h, Problem& p) {
  g_max_grid = 6;
  run_case<T, 128, 256, 64, 4, 2>(h, p, 0, false);
  run_case<T, 128, 256, 64, 4, 2, 1, 0, 0>(h, p, 0, false);
  run_case<T, 128, 256, 64, 4, 2, 2>(h, p, 0, false);
  run_case<T, 256, 128, 64, 4, 2>(h, p, 0, false);
  run_case<T, 128, 128, 64, 6, 2, 1, 1>(h, p, 0, false);
  run_case<T, 128, 192, 64, 5, 2, 1, 1>(h, p, 0, false);
  run_case<T, 64, 256, 64, 5, 2, 1, 1>(h, p, 0, false);
  run_case<T, 128, 128, 64, 6, 1>(h, p, 0, false);
  run_case<T, 128, 128, 32, 3, 1>(h, p, 0, false);  // the tutorial's config, 64-byte swizzle A
  run_case<T, 128, 256, 32, 8, 2>(h, p, 0, false);
  run_case<T, 128, 128, 32, 10, 2, 1, 1>(h, p, 0, false);
  g_max_grid = 1 << 30;
}

template <class T>
void timed(cublasHandle_t h, Problem& p, int pn) {
  run_case<T, 128, 256, 64, 4, 2, 1, 0, 0>(h, p, 16, true, true);  // the 2026-12-02 kernel
  run_case<T, 128, 256, 64, 4, 2>(h, p, 16, true);
  run_case<T, 128, 256, 64, 4, 2>(h, p, pn, true);
  run_case<T, 256, 128, 64, 4, 2>(h, p, pn, true);
  run_case<T, 128, 128, 64, 6, 2, 1, 1>(h, p, pn, true);
  run_case<T, 128, 128, 64, 7, 2, 1, 1>(h, p, 16, true);
  run_case<T, 128, 192, 64, 5, 2, 1, 1>(h, p, pn, true);
  run_case<T, 64, 256, 64, 5, 2, 1, 1>(h, p, pn, true);
  run_case<T, 128, 128, 32, 3, 1>(h, p, pn, true);
  run_case<T, 128, 128, 32, 10, 2, 1, 1>(h, p, pn, true);
  run_case<T, 128, 256, 32, 8, 2>(h, p, pn, true);
}

template <class T>
void run_dtype(cublasHandle_t h, bool bf16, bool quick) {
  for (auto [m, n, k] :
       {std::array<int, 3>{300, 264, 72}, {256, 512, 64}, {1000, 1000, 1000}, {200, 136, 40}}) {
    Problem e = make_problem(h, m, n, k, bf16);  // ragged M, N; partial K tile; one K tile
    correctness<T>(h, e);
    free_problem(e);
  }
  Problem t = make_problem(h, 17, 33, 65, bf16);
  run_case<T, 128, 256, 64, 4, 2>(h, t, 0, false);
  free_problem(t);
  if (quick) return;
  for (int n : {4096, 2048}) {
    Problem p = make_problem(h, n, n, n, bf16);
    timed<T>(h, p, 8);
    free_problem(p);
  }
  for (int k : {64, 512}) {  // fixed cost: K sweep at 2048 x 2048
    Problem p = make_problem(h, 2048, 2048, k, bf16);
    run_case<T, 128, 256, 64, 4, 2, 1, 0, 0>(h, p, 16, true, true);
    run_case<T, 128, 256, 64, 4, 2>(h, p, 16, true);
    run_case<T, 128, 128, 64, 6, 2, 1, 1>(h, p, 8, true);
    free_problem(p);
  }
  Problem o = make_problem(h, 1000, 1000, 1000, bf16);
  run_case<T, 128, 128, 64, 6, 2, 1, 1>(h, o, 0, true);
  run_case<T, 128, 128, 64, 6, 1>(h, o, 0, true);
  run_case<T, 64, 256, 64, 5, 2, 1, 1>(h, o, 0, true);
  free_problem(o);
  Problem b = make_problem(h, 8192, 8192, 8192, bf16);
  run_case<T, 128, 256, 64, 4, 2>(h, b, 8, true);
  run_case<T, 128, 128, 64, 6, 2, 1, 1>(h, b, 8, true);
  free_problem(b);
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "quick") == 0;
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  g_sms = prop.multiProcessorCount;
  std::printf("device: %s (sm_%d%d, %d SMs)\n", prop.name, prop.major, prop.minor, g_sms);
  cublasHandle_t h;
  CHECK_CUBLAS(cublasCreate(&h));
  run_dtype<tessel::half_t>(h, false, quick);
  run_dtype<tessel::bfloat16_t>(h, true, quick);
  print_results();
  cublasDestroy(h);
  bool all_ok = true;
  for (const Row& r : g_rows) all_ok &= r.ok || r.note.rfind("skipped", 0) == 0;
  std::printf("%s\n", all_ok ? "ALL OK" : "SOME RESULTS WRONG");
  return all_ok ? 0 : 1;
}
