// GEMM probe: a hand-written kernel that uses device/tessel/*.cuh exactly the way the Tessel
// compiler's generated code will, checked against cuBLAS and timed side by side with it.
//
// Build (from the repository root; also tools/probes/build.sh):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I device \
//        tools/probes/gemm_probe.cu -lcublas -o build-probe/gemm_probe
// Run: build-probe/gemm_probe            (exit status 1 if any result is wrong)
// Output: a table, then one JSON object per case, each alone on a line starting with "{".
// ratio = cuBLAS ms / our ms (1.0 = parity; the goal at 4096^3 f16 is >= 0.6).
//
// Kernel shape (what the compiler emits for T::Pipelined + T::gemm): grid (ceil(N/BN),
// ceil(M/BM)), dynamic shared memory with `stages` A and B buffers, a cp.async pipeline
// whose prologue issues stages-1 K tiles; each iteration waits for the oldest group
// (cp_async_wait<stages-2>), barriers once, issues the copy of tile kt+stages-1 into the
// buffer freed by iteration kt-1, then computes tile kt.
//
// Prediction (4096^3 f16 on an H200): 128x256x64, 3 stages, 256 threads wins. Every
// 256-thread config with 64x64 warp tiles has the same mma:ldmatrix ratio (32 mma to 8
// ldmatrix.x4 per k16 step) and runs one block (8 warps) per SM, limited by ~230 registers
// per thread; what differs is latency hiding. BK=64 halves the barriers and pipeline
// bookkeeping per mma and keeps 2 x 48 KiB of operands in flight instead of 2 x 24 KiB,
// which Hopper's higher DRAM latency needs at one block per SM. 128x256 beats 256x128 only
// marginally (same traffic per flop). 128x128x32 with 128 threads runs 2 blocks per SM but
// re-reads operands twice as often per flop from L2; 128x128x64 with 8 warps of 64x32 has a
// worse ldmatrix ratio (16 mma to 6 ldmatrix) and should trail.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <tessel/tessel.cuh>

#define CHECK_CUDA(x)                                                                            \
  do {                                                                                           \
    cudaError_t err_ = (x);                                                                      \
    if (err_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(err_)); \
      std::exit(2);                                                                              \
    }                                                                                            \
  } while (0)
#define CHECK_CUBLAS(x)                                                                                     \
  do {                                                                                                      \
    cublasStatus_t st_ = (x);                                                                               \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                                                     \
      std::fprintf(stderr, "%s:%d: %s: cuBLAS status %d\n", __FILE__, __LINE__, #x, static_cast<int>(st_)); \
      std::exit(2);                                                                                         \
    }                                                                                                       \
  } while (0)

namespace {

__host__ __device__ constexpr int ceil_div(int a, int b) {
  return (a + b - 1) / b;
}

// One kernel configuration: the knobs of make_matmul in DESIGN.md section 1.
template <class T, int BM_, int BN_, int BK_, int WarpsM, int WarpsN, int Stages_, bool TransA_, bool TransB_>
struct Config {
  using Elem = T;
  static constexpr int BM = BM_, BN = BN_, BK = BK_, kStages = Stages_;
  static constexpr bool TransA = TransA_, TransB = TransB_;
  static constexpr int kThreads = 32 * WarpsM * WarpsN;
  using LayoutA = tessel::SwizzledLayout<TransA ? BK : BM, TransA ? BM : BK, sizeof(T)>;
  using LayoutB = tessel::SwizzledLayout<TransB ? BN : BK, TransB ? BK : BN, sizeof(T)>;
  using Gemm = tessel::BlockGemm<T, BM, BN, BK, WarpsM, WarpsN, TransA, TransB, LayoutA, LayoutB>;
  static constexpr int kPipelineBytes = kStages * (LayoutA::kSize + LayoutB::kSize) * sizeof(T);
  static constexpr int kScratchBytes = BM * BN * sizeof(T);
  static constexpr int kSmemBytes = kPipelineBytes;  // scratch aliases the pipeline buffers
  static_assert(kScratchBytes <= kPipelineBytes, "probe: staged epilogue scratch must fit");
  static_assert(kStages >= 2, "probe: the pipeline needs at least 2 stages");

  static std::string name() {
    char buf[128];
    std::snprintf(buf, sizeof buf, "%dx%dx%d_s%d_t%d_%s_%c%c", BM, BN, BK, kStages, kThreads,
                  tessel::is_same<T, tessel::half_t>::value ? "f16" : "bf16", TransA ? 'T' : 'N',
                  TransB ? 'T' : 'N');
    return buf;
  }
};

// A: [M][K] (ld K), or [K][M] (ld M) when TransA. B: [K][N] (ld N), or [N][K] (ld K) when
// TransB. C: [M][N] (ld N). VecCopy: 16-byte cp.async (needs the contiguous dims % 8 == 0);
// otherwise the compiler's !Vectorized copy, which picks its chunk size at run time.
// VecStore: 2-element stores (N even). Staged: epilogue through shared memory (N % 8 == 0).
// Mode: kBase = what the compiler emits today (wait, barrier, copies, commit, run per K
// tile); kPipelined = BlockGemm::run_pipelined, the fragments of the next tile's first k step
// carried across the tile boundary, the copies issued where run_pipelined's default says;
// the others are its schedule knobs: copies before the first mma (kPipeIssueFirst), after
// the first k step's mmas (kPipeIssueLate, named "pipe_issue0"), half the last k step's
// mmas before the barrier (kPipeSplit).
enum Mode { kBase = 0, kPipelined = 1, kPipeIssueFirst = 2, kPipeSplit = 3, kPipeIssueLate = 4 };
const char* mode_name(int m) {
  switch (m) {
    case kBase:
      return "base";
    case kPipelined:
      return "pipe";
    case kPipeIssueFirst:
      return "pipe_issue_first";
    case kPipeSplit:
      return "pipe_split";
    default:
      return "pipe_issue0";
  }
}

template <class Cfg, bool VecCopy, bool VecStore, bool Staged, int Mode_>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    gemm_kernel(const typename Cfg::Elem* __restrict__ A, const typename Cfg::Elem* __restrict__ B,
                typename Cfg::Elem* __restrict__ C, int M, int N, int K, int panel) {
  using T = typename Cfg::Elem;
  using Gemm = typename Cfg::Gemm;
  using LayoutA = typename Cfg::LayoutA;
  using LayoutB = typename Cfg::LayoutB;
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, kStages = Cfg::kStages;
  constexpr int kThreads = Cfg::kThreads;

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sA = reinterpret_cast<T*>(smem_raw);
  T* sB = sA + kStages * LayoutA::kSize;

  int tile_x = 0, tile_y = 0;
  tessel::rasterize(panel, blockIdx.x, blockIdx.y, gridDim.x, gridDim.y, tile_x, tile_y);
  const int m0 = tile_y * BM;
  const int n0 = tile_x * BN;
  const int k_tiles = ceil_div(K, BK);

  auto issue_tile = [&](int kt, int stage) {
    const int k0 = kt * BK;
    T* a_dst = sA + stage * LayoutA::kSize;
    T* b_dst = sB + stage * LayoutB::kSize;
    if constexpr (!Cfg::TransA) {
      tessel::copy_global_to_shared<T, BM, BK, LayoutA, kThreads, VecCopy>(a_dst, A + (long long)m0 * K + k0,
                                                                           K, M - m0, K - k0);
    } else {
      tessel::copy_global_to_shared<T, BK, BM, LayoutA, kThreads, VecCopy>(a_dst, A + (long long)k0 * M + m0,
                                                                           M, K - k0, M - m0);
    }
    if constexpr (!Cfg::TransB) {
      tessel::copy_global_to_shared<T, BK, BN, LayoutB, kThreads, VecCopy>(b_dst, B + (long long)k0 * N + n0,
                                                                           N, K - k0, N - n0);
    } else {
      tessel::copy_global_to_shared<T, BN, BK, LayoutB, kThreads, VecCopy>(b_dst, B + (long long)n0 * K + k0,
                                                                           K, N - n0, K - k0);
    }
  };

  float acc[Gemm::kAccPerThread];
#pragma unroll
  for (int i = 0; i < Gemm::kAccPerThread; ++i) acc[i] = 0.0f;

    // Prologue: stages-1 tiles in flight. One commit per stage even when nothing was issued,
    // so that wait<stages-2> always refers to the right tile.
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < k_tiles) issue_tile(s, s);
    tessel::cp_async_commit();
  }

  if constexpr (Mode_ == kBase) {
    int read_stage = 0;
    int write_stage = kStages - 1;
    for (int kt = 0; kt < k_tiles; ++kt) {
      tessel::cp_async_wait<kStages - 2>();
      // Makes tile kt visible to all warps AND guarantees every warp finished computing
      // tile kt-1, whose buffer (write_stage) the copy below overwrites.
      tessel::barrier();
      if (kt + kStages - 1 < k_tiles) issue_tile(kt + kStages - 1, write_stage);
      tessel::cp_async_commit();
      Gemm::run(sA + read_stage * LayoutA::kSize, sB + read_stage * LayoutB::kSize, acc);
      read_stage = read_stage + 1 == kStages ? 0 : read_stage + 1;
      write_stage = write_stage + 1 == kStages ? 0 : write_stage + 1;
    }
  } else {
    tessel::cp_async_wait<kStages - 2>();
    tessel::barrier();
    typename Gemm::Fragments frag[2];
    Gemm::load_first(frag, sA, sB);
    int read_stage = 0;
    int write_stage = kStages - 1;
    for (int kt = 0; kt < k_tiles; ++kt) {
      const int next_stage = read_stage + 1 == kStages ? 0 : read_stage + 1;
      constexpr int kIssueStep = Mode_ == kPipeIssueFirst  ? -1
                                 : Mode_ == kPipeIssueLate ? 0
                                                           : Gemm::kDefaultIssueStep;
      Gemm::template run_pipelined<kIssueStep, Mode_ == kPipeSplit>(
          frag, sA + read_stage * LayoutA::kSize, sB + read_stage * LayoutB::kSize,
          sA + next_stage * LayoutA::kSize, sB + next_stage * LayoutB::kSize, acc,
          [&] {
            tessel::cp_async_wait<kStages - 2>();
            tessel::barrier();
          },
          [&] {
            if (kt + kStages - 1 < k_tiles) issue_tile(kt + kStages - 1, write_stage);
            tessel::cp_async_commit();
          });
      read_stage = next_stage;
      write_stage = write_stage + 1 == kStages ? 0 : write_stage + 1;
    }
  }
  // The compiler closes every pipeline with these two (and the staged epilogue repeats them).
  tessel::cp_async_wait<0>();
  tessel::barrier();

  T* c_tile = C + (long long)m0 * N + n0;
  if constexpr (Staged) {
    tessel::store_accumulators_via_shared<T, Gemm, true>(acc, reinterpret_cast<T*>(smem_raw), c_tile, N,
                                                         M - m0, N - n0);
  } else {
    tessel::store_accumulators<T, Gemm, VecStore>(acc, c_tile, N, M - m0, N - n0);
  }
}

// ---- host side ------------------------------------------------------------------------

struct Problem {
  int M, N, K;
  bool trans_a, trans_b;
  bool bf16;
  void* A = nullptr;     // device, 16-bit
  void* B = nullptr;     // device, 16-bit
  void* C = nullptr;     // device, 16-bit, M*N + guard
  void* Cb = nullptr;    // device, 16-bit, cuBLAS timing output
  float* ref = nullptr;  // device, f32 reference
  std::vector<float> ref_host;
};

constexpr int kGuard = 256;                 // poisoned elements after C: catches out-of-bounds stores
constexpr unsigned short kPoison = 0xFFFF;  // NaN in f16 and bf16

unsigned long long g_rng = 0x243F6A8885A308D3ull;  // fixed seed
float next_uniform() {                             // xorshift64*, uniform in [-1, 1)
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

// Row-major C = op(A) op(B) through column-major cuBLAS: C^T = op(B)^T op(A)^T, where a
// row-major buffer read column-major is its transpose.
void cublas_gemm(cublasHandle_t h, const Problem& p, void* C, cudaDataType c_type) {
  const float alpha = 1.0f, beta = 0.0f;
  const cudaDataType ab = p.bf16 ? CUDA_R_16BF : CUDA_R_16F;
  const cublasOperation_t op_b = p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int ldb = p.trans_b ? p.K : p.N;
  const int lda = p.trans_a ? p.M : p.K;
  CHECK_CUBLAS(cublasGemmEx(h, op_b, op_a, p.N, p.M, p.K, &alpha, p.B, ab, ldb, p.A, ab, lda, &beta, C,
                            c_type, p.N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

Problem make_problem(cublasHandle_t h, int M, int N, int K, bool ta, bool tb, bool bf16) {
  Problem p{M, N, K, ta, tb, bf16};
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
  std::string config;
  int M, N, K, panel;
  std::string variant;
  float ms = NAN, cublas_ms = NAN;
  double rel_err = NAN;
  bool ok = false;
  std::string note;
};
std::vector<Row> g_rows;

// Lazily made problems, keyed by shape, order and type (one set of inputs per key).
struct Problems {
  cublasHandle_t h;
  std::vector<std::pair<std::string, Problem>> made;
  Problem& get(int M, int N, int K, bool ta = false, bool tb = false, bool bf16 = false) {
    char key[96];
    std::snprintf(key, sizeof key, "%d,%d,%d,%d,%d,%d", M, N, K, ta, tb, bf16);
    for (auto& kv : made)
      if (kv.first == key) return kv.second;
    made.emplace_back(key, make_problem(h, M, N, K, ta, tb, bf16));
    return made.back().second;
  }
  void clear() {
    for (auto& kv : made) free_problem(kv.second);
    made.clear();
  }
};

constexpr int kWarmup = 5;
constexpr int kTimed = 20;
std::string g_filter;    // --only SUBSTRING of "config/variant"
bool g_no_time = false;  // --no-time: correctness only (for ncu)
bool g_short = false;    // --short: the main configurations only
// --only takes comma-separated substrings of "config/mode:variant/M"; a case runs if any
// matches.
bool selected(const std::string& name) {
  if (g_filter.empty()) return true;
  size_t b = 0;
  while (b <= g_filter.size()) {
    size_t e = g_filter.find(',', b);
    if (e == std::string::npos) e = g_filter.size();
    if (e > b && name.find(g_filter.substr(b, e - b)) != std::string::npos) return true;
    b = e + 1;
  }
  return false;
}

template <class Cfg, bool VecCopy, bool VecStore, bool Staged, int Mode_>
void run_case(Problems& P, int M, int N, int K, int panel, bool time_it) {
  static_assert(sizeof(typename Cfg::Elem) == 2, "probe: 16-bit inputs only");
  Row row;
  row.config = Cfg::name();
  row.M = M, row.N = N, row.K = K, row.panel = panel;
  row.variant = std::string(mode_name(Mode_)) + ":" + (VecCopy ? "vec" : "scalar") +
                (Staged ? "+staged" : "") + (VecStore ? "" : "+scalar_store");
  if (!selected(row.config + "/" + row.variant + "/" + std::to_string(M))) return;
  cublasHandle_t handle = P.h;
  Problem& p = P.get(M, N, K, Cfg::TransA, Cfg::TransB,
                     tessel::is_same<typename Cfg::Elem, tessel::bfloat16_t>::value);
  auto kernel = gemm_kernel<Cfg, VecCopy, VecStore, Staged, Mode_>;
  const int smem = Cfg::kSmemBytes;
  int dev = 0, max_smem = 0;
  CHECK_CUDA(cudaGetDevice(&dev));
  CHECK_CUDA(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  if (smem > max_smem) {
    row.note = "skipped: needs " + std::to_string(smem) + " B shared memory";
    g_rows.push_back(row);
    return;
  }
  CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const dim3 grid(ceil_div(p.N, Cfg::BN), ceil_div(p.M, Cfg::BM));
  const dim3 block(Cfg::kThreads);
  using T = typename Cfg::Elem;
  auto launch = [&] {
    kernel<<<grid, block, smem>>>(static_cast<const T*>(p.A), static_cast<const T*>(p.B),
                                  static_cast<T*>(p.C), p.M, p.N, p.K, panel);
  };

  // Correctness: poison C (and the guard after it), run once, compare.
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
  row.ok = row.rel_err < 2e-2 && guard_ok;  // NaN fails
  if (!guard_ok) row.note = "wrote past the end of C";

  if (time_it && !g_no_time) {
    cudaEvent_t e0, e1, e2, e3;
    CHECK_CUDA(cudaEventCreate(&e0));
    CHECK_CUDA(cudaEventCreate(&e1));
    CHECK_CUDA(cudaEventCreate(&e2));
    CHECK_CUDA(cudaEventCreate(&e3));
    for (int i = 0; i < kWarmup; ++i) {
      launch();
      cublas_gemm(handle, p, p.Cb, p.bf16 ? CUDA_R_16BF : CUDA_R_16F);
    }
    std::vector<float> ours, theirs;
    for (int i = 0; i < kTimed; ++i) {  // interleaved so both see the same clocks
      CHECK_CUDA(cudaEventRecord(e0));
      launch();
      CHECK_CUDA(cudaEventRecord(e1));
      cublas_gemm(handle, p, p.Cb, p.bf16 ? CUDA_R_16BF : CUDA_R_16F);
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
    cudaEventDestroy(e3);
  }
  g_rows.push_back(row);
}

// Configurations (f16 unless named, A [M][K], B [K][N]). WarpsM x WarpsN is chosen so that
// every warp owns a 64x64 sub-tile (~230 registers: 8 warps per SM at most).
using f16 = tessel::half_t;
using C128x128x32s3 = Config<f16, 128, 128, 32, 2, 2, 3, false, false>;
using C128x128x32s4 = Config<f16, 128, 128, 32, 2, 2, 4, false, false>;
using C128x128x64s3 = Config<f16, 128, 128, 64, 2, 2, 3, false, false>;
using C128x256x32s3 = Config<f16, 128, 256, 32, 2, 4, 3, false, false>;
using C128x256x64s3 = Config<f16, 128, 256, 64, 2, 4, 3, false, false>;
using C128x256x64s4 = Config<f16, 128, 256, 64, 2, 4, 4, false, false>;
using C256x128x64s3 = Config<f16, 256, 128, 64, 4, 2, 3, false, false>;

// Big sizes, both modes: the speed table.
template <class Cfg>
void run_speed(Problems& P, bool pipelined_panel8 = false) {
  run_case<Cfg, true, true, false, kBase>(P, 4096, 4096, 4096, 0, true);
  run_case<Cfg, true, true, false, kBase>(P, 2048, 2048, 2048, 0, true);
  run_case<Cfg, true, true, false, kPipelined>(P, 4096, 4096, 4096, 0, true);
  run_case<Cfg, true, true, false, kPipelined>(P, 2048, 2048, 2048, 0, true);
  if (pipelined_panel8) {
    run_case<Cfg, true, true, false, kPipelined>(P, 4096, 4096, 4096, 8, true);
    run_case<Cfg, true, true, false, kPipelined>(P, 2048, 2048, 2048, 8, true);
  }
}

// The schedule knobs of run_pipelined, big sizes.
template <class Cfg>
void run_knobs(Problems& P) {
  for (int n : {4096, 2048}) {
    run_case<Cfg, true, true, false, kPipeIssueFirst>(P, n, n, n, 0, true);
    run_case<Cfg, true, true, false, kPipeSplit>(P, n, n, n, 0, true);
    run_case<Cfg, true, true, false, kPipeIssueLate>(P, n, n, n, 0, true);
  }
}

// The !Vectorized copy at sizes whose rows allow 16-, 4-byte and no cp.async chunks,
// and a tiny ragged problem; both modes.
template <class Cfg, int Mode_>
void run_unaligned(Problems& P) {
  run_case<Cfg, false, true, false, Mode_>(P, 1000, 1000, 1000, 0, true);   // 16 B
  run_case<Cfg, false, true, false, Mode_>(P, 1004, 1004, 1004, 0, true);   // 4 B (ld % 8 == 4)
  run_case<Cfg, false, true, false, Mode_>(P, 1002, 1002, 1002, 0, true);   // 4 B
  run_case<Cfg, false, false, false, Mode_>(P, 1001, 1001, 1001, 0, true);  // elements
  run_case<Cfg, false, false, false, Mode_>(P, 17, 33, 65, 0, false);
  run_case<Cfg, true, true, false, Mode_>(P, 1000, 1000, 1000, 0, true);  // vec, ragged K
}

// Other operand orders and bf16: correctness, timed for information.
template <class T, bool TA, bool TB, int BK, int Mode_>
void run_order(Problems& P) {
  using Cfg = Config<T, 128, 128, BK, 2, 2, 3, TA, TB>;
  run_case<Cfg, true, true, false, Mode_>(P, 2048, 2048, 2048, 0, true);
  run_case<Cfg, false, false, false, Mode_>(P, 17, 33, 65, 0, false);
  run_case<Cfg, false, true, false, Mode_>(P, 1002, 1002, 1002, 0, false);
}

void print_results() {
  std::printf("%-28s %-22s %5s %5s %5s %5s %9s %8s %9s %6s %9s %s\n", "config", "variant", "M", "N", "K",
              "panel", "ms", "TFLOP/s", "cuBLAS ms", "ratio", "rel_err", "status");
  for (const Row& r : g_rows) {
    const double flop = 2.0 * r.M * r.N * r.K;
    const double tflops = flop / (r.ms * 1e-3) / 1e12;
    std::printf("%-28s %-22s %5d %5d %5d %5d %9.4f %8.1f %9.4f %6.3f %9.2e %s %s\n", r.config.c_str(),
                r.variant.c_str(), r.M, r.N, r.K, r.panel, r.ms, tflops, r.cublas_ms, r.cublas_ms / r.ms,
                r.rel_err, r.ok ? "ok" : "FAIL", r.note.c_str());
  }
  for (const Row& r : g_rows) {
    const double flop = 2.0 * r.M * r.N * r.K;
    auto num = [](double x) { return std::isfinite(x) ? std::to_string(x) : std::string("null"); };
    std::printf(
        "{\"config\":\"%s\",\"variant\":\"%s\",\"M\":%d,\"N\":%d,\"K\":%d,\"panel\":%d,"
        "\"ms\":%s,\"tflops\":%s,\"cublas_ms\":%s,\"cublas_tflops\":%s,\"ratio\":%s,"
        "\"rel_err\":%s,\"ok\":%s,\"note\":\"%s\"}\n",
        r.config.c_str(), r.variant.c_str(), r.M, r.N, r.K, r.panel, num(r.ms).c_str(),
        num(flop / (r.ms * 1e-3) / 1e12).c_str(), num(r.cublas_ms).c_str(),
        num(flop / (r.cublas_ms * 1e-3) / 1e12).c_str(), num(r.cublas_ms / r.ms).c_str(),
        num(r.rel_err).c_str(), r.ok ? "true" : "false", r.note.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--only" && i + 1 < argc) {
      g_filter = argv[++i];
    } else if (a == "--short") {
      g_short = true;
    } else if (a == "--no-time") {
      g_no_time = true;
    } else {
      std::fprintf(stderr, "usage: %s [--only SUBSTRING[,...]] [--no-time] [--short]\n", argv[0]);
      return 2;
    }
  }
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (sm_%d%d, %d SMs)\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);
  cublasHandle_t h;
  CHECK_CUBLAS(cublasCreate(&h));
  Problems P{h, {}};
  // Problems are made on first use: a filter that skips a case skips its inputs too.

  if (!g_short) {
    run_speed<C128x128x32s3>(P, true);
    run_speed<C128x128x32s4>(P);
    run_speed<C128x128x64s3>(P, true);
    run_speed<C128x256x32s3>(P);
    run_speed<C128x256x64s3>(P, true);
    run_speed<C128x256x64s4>(P);
    run_speed<C256x128x64s3>(P);
    run_knobs<C128x128x32s3>(P);
    run_knobs<C128x128x64s3>(P);
    run_knobs<C128x256x64s3>(P);
  } else {
    run_speed<C128x128x32s3>(P);
    run_speed<C128x128x64s3>(P);
    run_speed<C128x256x64s3>(P);
    run_speed<C256x128x64s3>(P);
  }
  // The coalesced, shared-memory-staged epilogue.
  for (int n : {4096, 2048}) {
    run_case<C128x128x64s3, true, true, true, kPipelined>(P, n, n, n, 0, true);
    run_case<C128x256x64s3, true, true, true, kPipelined>(P, n, n, n, 0, true);
    run_case<C256x128x64s3, true, true, true, kPipelined>(P, n, n, n, 0, true);
    run_case<C128x256x64s3, true, true, true, kPipelined>(P, n, n, n, 8, true);
    run_case<C128x128x32s3, true, true, true, kBase>(P, n, n, n, 0, true);
  }
  run_case<C128x256x64s3, true, true, true, kPipelined>(P, 1000, 1000, 1000, 0, true);
  P.clear();
  run_unaligned<C128x128x32s3, kBase>(P);
  run_unaligned<C128x128x32s3, kPipelined>(P);
  run_unaligned<C128x128x64s3, kPipelined>(P);
  run_unaligned<C128x256x64s3, kPipelined>(P);
  P.clear();
  run_order<f16, false, true, 32, kBase>(P);
  run_order<f16, false, true, 64, kPipelined>(P);
  run_order<f16, true, false, 64, kPipelined>(P);
  run_order<f16, true, true, 64, kPipelined>(P);
  run_order<f16, true, true, 32, kPipelined>(P);
  P.clear();
  run_order<tessel::bfloat16_t, false, false, 64, kPipelined>(P);
  P.clear();

  print_results();
  cublasDestroy(h);
  bool all_ok = true;
  for (const Row& r : g_rows) all_ok &= r.ok || r.note.rfind("skipped", 0) == 0;
  std::printf("%s\n", all_ok ? "ALL OK" : "SOME RESULTS WRONG");
  return all_ok ? 0 : 1;
}
