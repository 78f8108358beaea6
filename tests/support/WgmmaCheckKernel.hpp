// The one-warpgroup wgmma check kernel (tests/gpu/hopper/WgmmaGpuTest.cpp runs it on the H200;
// tests/nvrtc/hopper/WgmmaCheckCompileTest.cpp compiles every variant without a GPU).
#pragma once

#include <string>
#include <vector>

namespace tessel::test {

// C[64][N] = A[64][K] * B[K][N], K = 64, one warpgroup; the macros WG_N, WG_TRANS_B, WG_FROM_REGS
// and WG_ELEM select it. WG_TRANS_B = 1: B staged [K][N] (N-major, the tutorial's B); 0: staged
// [N][K] (K-major). WG_FROM_REGS = 1: A fragments from global memory into registers (the
// layout wgmma.cuh documents for wgmma_rs); 0: A staged K-major.
inline const char* kWgmmaCheckKernel = R"cuda(
#include <tessel/wgmma.cuh>
#include <tessel/hopper_layout.cuh>
#include <tessel/mbarrier.cuh>
constexpr int K = 64;
using LA = tessel::WgmmaSwizzle128Layout<64, K, 2>;                             // [M][K]
// B staged [K][N] or [N][K].
using LB = tessel::WgmmaSwizzle128Layout<WG_TRANS_B ? K : WG_N, WG_TRANS_B ? WG_N : K, 2>;
extern "C" __global__ void __launch_bounds__(128, 1)
    wgmma_check(const unsigned short* A, const unsigned short* B, float* C) {
  __shared__ __align__(1024) unsigned short sa[64 * K];
  __shared__ __align__(1024) unsigned short sb[K * WG_N];
  const int t = threadIdx.x, w = t / 32, l = t % 32;
  for (int i = t; i < K * WG_N; i += 128) {
    const int k = i / WG_N, n = i % WG_N;
    sb[WG_TRANS_B ? LB::offset(k, n) : LB::offset(n, k)] = B[i];
  }
  for (int i = t; i < 64 * K; i += 128) sa[LA::offset(i / K, i % K)] = A[i];
  tessel::fence_proxy_async_shared();  // generic writes, read by wgmma (the async proxy)
  __syncthreads();
  unsigned a[K / 16][4];
  for (int ks = 0; ks < K / 16; ++ks)
    for (int j = 0; j < 4; ++j) {
      const int row = 16 * w + l / 4 + 8 * (j % 2), col = 16 * ks + 2 * (l % 4) + 8 * (j / 2);
      a[ks][j] = A[row * K + col] | (static_cast<unsigned>(A[row * K + col + 1]) << 16);
    }
  float d[WG_N / 2];
  for (int i = 0; i < WG_N / 2; ++i) d[i] = -1.0f;  // scale_d = 0 on the first step ignores it
  const unsigned base_a = tessel::smem_address(sa), base_b = tessel::smem_address(sb);
  tessel::wgmma_fence();
  for (int ks = 0; ks < K / 16; ++ks) {
    const unsigned long long db =
        WG_TRANS_B ? tessel::wgmma_desc_mnmajor_sw128(base_b + ks * 2048, LB::kPanelBytes)
                : tessel::wgmma_desc_kmajor_sw128(base_b + ks * 32);
    if (WG_FROM_REGS)
      tessel::wgmma_rs<WG_ELEM, WG_N, WG_TRANS_B>(d, a[ks], db, ks > 0);
    else
      tessel::wgmma_ss<WG_ELEM, WG_N, 0, WG_TRANS_B>(d, tessel::wgmma_desc_kmajor_sw128(base_a + ks * 32), db, ks > 0);
  }
  tessel::wgmma_commit();
  tessel::wgmma_wait<0>();
  tessel::wgmma_fence_operand(d);
  for (int i = 0; i < WG_N / 2; ++i) {
    const int row = 16 * w + l / 4 + 8 * ((i / 2) % 2), col = 8 * (i / 4) + 2 * (l % 4) + i % 2;
    C[row * WG_N + col] = d[i];
  }
}
)cuda";

// NVRTC flags selecting a variant: element type, N, B's major order, A from registers or not.
inline std::vector<std::string> wgmma_check_flags(bool f16, int n, int trans_b, bool from_regs) {
  return {"-DWG_N=" + std::to_string(n), "-DWG_TRANS_B=" + std::to_string(trans_b),
          "-DWG_FROM_REGS=" + std::to_string(from_regs ? 1 : 0),
          std::string("-DWG_ELEM=tessel::") + (f16 ? "half_t" : "bfloat16_t")};
}

}  // namespace tessel::test
