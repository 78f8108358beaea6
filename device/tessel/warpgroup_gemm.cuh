// Block GEMM through wgmma.mma_async (sm_90a) for the compiler's generic kernels: the `gemm`
// op of a program that is not the plain GEMM the warp-specialized HopperGemm takes over
// (hopper_gemm.cuh) -- a gemm with its A operand in registers (FlashAttention's P * V), or
// one among other work in the kernel. Same contract as BlockGemm::run: all threads of the
// block call it after the barrier that completes the shared tiles, and it returns with
// acc += A * B done (wgmma.wait_group 0), so the caller may overwrite the tiles and touch the
// accumulators right after.
//
// Shape: the block's warps form Warpgroups warpgroups stacked along M. The BM = 64 * Blocks *
// Warpgroups rows are m64 row blocks, block b = r * Warpgroups + g (rows [64 b, 64 b + 64)) computed
// by warpgroup g's r-th m64nBNk16 wgmma of each k16 step (Blocks = 1: warpgroup g owns rows [64 g,
// 64 g + 64)). Its accumulator is then exactly AccumulatorLayout<BM, BN, 4 * Warpgroups, 1,
// Blocks > 1> (accumulator.cuh: warp w owns the 16-row strip 16 w of every 64 * Warpgroups rows,
// the wgmma D fragments of its instructions, BN/8 m16n8 C fragments side by side each, one after
// the other in its registers), so a fragment's layout does not depend on which instruction the
// gemm used.
//
// Operands: B from shared memory in WgmmaSwizzleLayout (hopper_layout.cuh), [BN][BK] when
// TransB (K-major: 128-, 64- or 32-byte swizzle by the row size) or [BK][BN] (N-major: 128-byte
// swizzle, BN a multiple of 64). A either from shared memory the same way ([BM][BK] K-major, or
// [BK][BM] when TransA, M-major) -- run() -- or from registers -- run_rs(): this thread's
// elements of the [BM][BK] tile in AccumulatorLayout<BM, BK, 4 * Warpgroups, 1, Blocks > 1>, i.e.
// an accumulator tile converted to 16 bits element by element.
//
// Ordering: the shared tiles were written by ordinary stores or cp.async (the generic proxy)
// and wgmma reads them through the async proxy; the compiler emits fence.proxy.async.shared::cta
// in every thread before the barriers of such a kernel (codegen), which is what the PTX memory
// model asks of the writers. Reading back shared memory that a wgmma read needs nothing more
// than the wait_group here.
#pragma once

#include "block.cuh"
#include "gemm.cuh"
#include "hopper_layout.cuh"
#include "layout.cuh"
#include "mbarrier.cuh"
#include "smem.cuh"
#include "types.cuh"
#include "wgmma.cuh"

namespace tessel {

// The first 1024-byte boundary at or after p in the shared window (the generated kernel's
// dynamic shared memory is allocated with 1024 bytes to spare for this).
__device__ __forceinline__ unsigned char* align_shared_1024(unsigned char* p) {
  return p + ((1024u - (smem_address(p) & 1023u)) & 1023u);
}

template <class TIn, int BM, int BN, int BK, int Warpgroups, bool TransA, bool TransB, class LayoutA,
          class LayoutB>
struct WarpgroupGemm : AccumulatorLayout<BM, BN, 4 * Warpgroups, 1, (BM > 64 * Warpgroups)> {
  using Acc = AccumulatorLayout<BM, BN, 4 * Warpgroups, 1, (BM > 64 * Warpgroups)>;
  static_assert(is_mma_16bit<TIn>::value, "WarpgroupGemm: TIn must be half_t or bfloat16_t");
  static_assert(Warpgroups >= 1 && BM % (64 * Warpgroups) == 0,
                "WarpgroupGemm: BM must be whole m64 blocks, the same number for every warpgroup");
  static_assert(BN >= 64 && BN <= 256 && BN % 16 == 0,
                "WarpgroupGemm: BN must be a multiple of 16 in 64..256 (the wgmma shapes of wgmma.cuh)");
  static_assert(BK % 16 == 0, "WarpgroupGemm: BK must be a multiple of 16 (the wgmma k step)");
  static_assert(LayoutB::kRows == (TransB ? BN : BK) && LayoutB::kCols == (TransB ? BK : BN),
                "WarpgroupGemm: LayoutB must describe the B tile, [BK][BN] or [BN][BK] if TransB");
  static_assert(TransB || LayoutB::kSwizzleBytes == 128,
                "WarpgroupGemm: an N-major B tile needs the 128-byte swizzle (BN a multiple of 64)");

  static constexpr int kBK = BK;
  static constexpr int kKSteps = BK / 16;
  static constexpr int kBlocks = BM / (64 * Warpgroups);   // m64 instructions per warpgroup and k16 step
  static constexpr int kARegs = Acc::kMmaM * kKSteps * 8;  // run_rs: A elements per thread
  using Acc::kAccPerThread;
  static_assert(Acc::kMmaM == kBlocks && kAccPerThread == kBlocks * (BN / 2),
                "WarpgroupGemm: the accumulator is one wgmma D fragment per m64 block");

  // Descriptors are built once a call, from the tile's base address (this warpgroup's rows of
  // A included), and each wgmma's is that base plus a constant byte offset >> 4, added to the
  // low word alone: the start-address field (bits 0-13, address >> 4) never carries, shared
  // addresses being under 2^18 bytes, so the sum is the descriptor of the offset address bit for
  // bit -- one 32-bit add a wgmma (folded into the constant) where building it again costs a
  // shift, a mask and an or of 64-bit values.
  struct Desc {
    unsigned lo, hi;
    __device__ unsigned long long at(unsigned offset_bytes) const {
      return (static_cast<unsigned long long>(hi) << 32) | (lo + (offset_bytes >> 4));
    }
  };
  template <bool MnMajor, class Layout>
  __device__ static Desc base_desc(unsigned base) {
    unsigned long long d;
    if constexpr (MnMajor) {
      d = wgmma_desc_mnmajor_sw128(base, Layout::kPanelBytes);
    } else {
      d = wgmma_desc_kmajor(base, Layout::kSwizzleBytes);
    }
    return {static_cast<unsigned>(d), static_cast<unsigned>(d >> 32)};
  }
  // Byte offset of a K-major tile's (rows along M or N, K along columns) rows [row0, row0 + 64
  // or BN) at k16 step kk.
  template <class Layout>
  __device__ static constexpr unsigned kmajor_offset(int row0, int kk) {
    constexpr int kPanelK = Layout::kPanelCols;
    const int k = kk * 16;
    return static_cast<unsigned>((k / kPanelK) * Layout::kPanelBytes + row0 * Layout::kSwizzleBytes +
                                 (k % kPanelK) * static_cast<int>(sizeof(TIn)));
  }
  // Byte offset of an MN-major tile's (rows along K, M or N along columns, 128-byte panels of 64
  // elements) column panel `panel` at k16 step kk.
  template <class Layout>
  __device__ static constexpr unsigned mnmajor_offset(int panel, int kk) {
    static_assert(Layout::kSwizzleBytes == 128, "WarpgroupGemm: MN-major tiles use the 128-byte swizzle");
    return static_cast<unsigned>(panel * Layout::kPanelBytes + kk * 16 * 128);
  }
  // A's offset of m64 block `block` at k16 step kk (K-major, or M-major when TransA).
  __device__ static constexpr unsigned a_offset(int block, int kk) {
    if constexpr (TransA) {
      return mnmajor_offset<LayoutA>(block, kk);
    } else {
      return kmajor_offset<LayoutA>(64 * block, kk);
    }
  }
  // B's offset at k16 step kk (K-major when TransB, else N-major).
  __device__ static constexpr unsigned b_offset(int kk) {
    if constexpr (TransB) {
      return kmajor_offset<LayoutB>(0, kk);
    } else {
      return mnmajor_offset<LayoutB>(0, kk);
    }
  }
  // The D fragment of this thread's r-th m64 block: registers [r * BN / 2, (r + 1) * BN / 2) of acc.
  __device__ static float (&block_acc(float (&acc)[kAccPerThread], int r))[BN / 2] {
    return *reinterpret_cast<float(*)[BN / 2]>(acc + r * (BN / 2));
  }

  // This thread's warpgroup among the consumers: a constant at one warpgroup (only threads 0-127
  // run it then), so that ptxas keeps the descriptors built from it in uniform registers (no R2UR
  // before a wgmma); with several, the thread's index over 128, or under TESSEL_UNIFORM_WARPGROUP
  // (JitOptions::uniform_roles) its lane-0 broadcast.
  __device__ static int warpgroup() {
    if constexpr (Warpgroups == 1) {
      return 0;
    } else {
#ifdef TESSEL_UNIFORM_WARPGROUP
      return warp_uniform(static_cast<int>(threadIdx.x / 128));
#else
      return static_cast<int>(threadIdx.x / 128);
#endif
    }
  }

  // acc += A_tile * B_tile, both from shared memory: run_async, then its wait.
  __device__ static void run(const TIn* sA, const TIn* sB, float (&acc)[kAccPerThread]) {
    run_async(sA, sB, acc);
    wgmma_wait<0>();
    wgmma_fence_operand(acc);
  }

  // The issue half of run(): the wgmmas as one commit group, returning at once. Whoever calls it
  // must wgmma_wait<N>() (and wgmma_fence_operand on acc) before anything touches acc or
  // overwrites the tiles -- run() right away; the IR's GemmStmt::async / AsyncGemmWait are for a
  // pass that would place the wait later, which does not exist yet.
  __device__ static void run_async(const TIn* sA, const TIn* sB, float (&acc)[kAccPerThread]) {
    static_assert(LayoutA::kRows == (TransA ? BK : BM) && LayoutA::kCols == (TransA ? BM : BK),
                  "WarpgroupGemm: LayoutA must describe the A tile, [BM][BK] or [BK][BM] if TransA");
    static_assert(!TransA || LayoutA::kSwizzleBytes == 128,
                  "WarpgroupGemm: an M-major A tile needs the 128-byte swizzle");
    // Block r * Warpgroups + g's offset is block r * Warpgroups's plus block g's (both linear).
    const Desc da = base_desc<TransA, LayoutA>(smem_address(sA) + a_offset(warpgroup(), 0));
    const Desc db = base_desc<!TransB, LayoutB>(smem_address(sB));
    wgmma_fence_operand(acc);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
#pragma unroll
      for (int r = 0; r < kBlocks; ++r) {
        // m64 block r * Warpgroups + g: rows [64 (r * Warpgroups + g), + 64)
        wgmma_ss<TIn, BN, TransA ? 1 : 0, TransB ? 0 : 1>(
            block_acc(acc, r), da.at(a_offset(r * Warpgroups, kk)), db.at(b_offset(kk)), 1);
      }
    }
    wgmma_commit();
  }

  // run_rs() without the wait (see run_async). The A registers must not change until the wait.
  __device__ static void run_rs_async(const TIn (&a)[kARegs], const TIn* sB, float (&acc)[kAccPerThread]) {
    static_assert(!TransA, "WarpgroupGemm::run_rs: an A operand in registers is [BM][BK], never transposed");
    const Desc db = base_desc<!TransB, LayoutB>(smem_address(sB));
    unsigned regs[kBlocks][kKSteps][4];
#pragma unroll
    for (int r = 0; r < kBlocks; ++r)
#pragma unroll
      for (int kk = 0; kk < kKSteps; ++kk) pack_a_operand<TIn, kKSteps>(a, r, kk, regs[r][kk]);
    wgmma_fence_operand(acc);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk)
#pragma unroll
      for (int r = 0; r < kBlocks; ++r)
        wgmma_rs<TIn, BN, TransB ? 0 : 1>(block_acc(acc, r), regs[r][kk], db.at(b_offset(kk)), 1);
    wgmma_commit();
  }

  // acc += A * B_tile with A from registers (see the file comment): run_rs_async, then its wait.
  __device__ static void run_rs(const TIn (&a)[kARegs], const TIn* sB, float (&acc)[kAccPerThread]) {
    run_rs_async(a, sB, acc);
    wgmma_wait<0>();
    wgmma_fence_operand(acc);
  }
};

}  // namespace tessel
