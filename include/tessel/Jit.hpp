// From a recorded program to something you can call: lower (src/Lower.cpp), generate CUDA C++,
// compile with NVRTC (through the kernel cache), load and launch through the driver API.
//
//   T::JitKernel k = T::jit(f, {.out_idx = {-1}});
//   T::Tensor c = k(a, b);          // allocates C, launches on the default stream
//   k.source(); k.ptx(); k.resources();
#pragma once

#include <memory>
#include <source_location>
#include <string>
#include <vector>

#include "tessel/Frontend.hpp"
#include "tessel/interp/HostTensor.hpp"
#include "tessel/runtime/Nvrtc.hpp"
#include "tessel/runtime/Tensor.hpp"

typedef struct CUstream_st* CUstream;

namespace tessel {

struct JitOptions {
  // Parameters the call allocates and returns instead of taking them (negative: from the end).
  std::vector<int> out_idx{};
  // NVRTC target ("sm_80", "sm_90a", ...). Empty: the GPU's own arch, or sm_90a with no GPU.
  std::string arch{};
  // Shared memory a block may use. 0: the GPU's opt-in cap, or the target's known cap; else 1 to
  // 16 MiB (more is refused as a mistake).
  int smem_cap_bytes = 0;
  // Debugging switches for the sm_90a path (TMA loads, wgmma, warp specialization). They
  // come as one kernel today, so turning off any of them falls back to the mma.sync path,
  // which must give the same results; that includes the gemms of kernels the Hopper GEMM does
  // not take, which otherwise use wgmma too (tessel::WarpgroupGemm). The environment variable
  // TESSEL_DISABLE=tma,wgmma,warp_specialization (any of them) does the same for every jit;
  // it also takes split_k, tma_store and multicast (below), and any other name is an error.
  bool disable_tma = false;
  bool disable_wgmma = false;
  bool disable_warp_specialization = false;
  // The sm_90a GEMM splits the K loop of each tile over a 2-CTA cluster when the grid has
  // too few tiles to fill the GPU, and so do generic ring kernels over clusters of 2, 4 or 8
  // CTAs (split_k_clusters: GEMM-shaped kernels under gemm_from_passes, any ring under
  // persistent_rings); true turns both off
  // (TESSEL_DISABLE=split_k does the same).
  bool disable_split_k = false;
  // The sm_90a GEMM stores 16-bit outputs through shared memory and TMA when the staging tile
  // fits beside the ring, and so do generic kernels storing a wgmma accumulator tile
  // (plan_tma_stores: GEMM-shaped kernels under gemm_from_passes, any ring under
  // persistent_rings); true keeps their register stores
  // (TESSEL_DISABLE=tma_store does the same).
  bool disable_tma_store = false;
  // The sm_90a GEMM (from the passes' multicast_cluster_loads, or the template's kernel) honours the
  // program's use_cluster hint by loading the operand tiles a 2-CTA cluster shares once and multicasting them
  // (TESSEL_DISABLE=multicast ignores the hint).
  bool disable_multicast = false;
  // Generic kernels (not the tutorial GEMM's own kernel) load the tiles of their Pipelined loops
  // with TMA into mbarrier rings that a producer warpgroup fills, when every load of the loop can
  // be a TMA load (sm_90a); this keeps their cp.async schedule instead
  // (TESSEL_DISABLE=async_pipeline does the same).
  bool disable_async_pipeline = false;
  // In such kernels with two consumer warpgroups, the warpgroups take turns for their gemm
  // phases so that one's softmax (or other work) runs while the other's gemms do; this lets them
  // run unscheduled (TESSEL_DISABLE=pingpong does the same).
  bool disable_pingpong = false;
  // Ring loops whose wgmma gemms run asynchronously: the gemm is issued, its wait placed just
  // before the first statement that touches its registers (place_gemm_waits), a ring stage
  // released once the gemms reading it retired, and a loop's last gemm issued behind the next
  // iteration's first (rotate_async_gemms). True waits right after every gemm
  // (TESSEL_DISABLE=async_gemm does the same).
  bool disable_async_gemm = false;
  // mma.sync gemms whose warp tile is one or two m16n8 blocks (skinny GEMMs: 16x32 tiles on four
  // warps) spread each K tile's k steps over independent accumulator chains, summed at the end,
  // so a warp's mmas do not wait for each other (infer_layouts; BlockGemm's KChains). True keeps
  // one chain (TESSEL_DISABLE=gemm_chains does the same).
  bool disable_gemm_chains = false;
  // Register loops that only scale an f32 array by another's factors (FlashAttention's rescale
  // of O) run under a test that skips them when every factor of the thread is exactly 1, which
  // changes no value (skip_unit_scales; TESSEL_ENABLE=unit_scale_skips does the same). Opt-in: on
  // an H100 the branch alone made attention 1-6 % slower, where the factors are rarely all 1.
  // kernels::make_flash_attention turns it on for AttentionConfig::lazy_rescale, whose factors
  // mostly are (docs/perf-notes.md, sessions 31-32).
  bool unit_scale_skips = false;
  // True keeps skip_unit_scales off even where unit_scale_skips or a lazy attention config asks
  // for it (TESSEL_DISABLE=unit_scale_skips does the same): lazy rescaling without the skips.
  bool disable_unit_scale_skips = false;
  // Ring loops rotated so that a loop's last gemm is issued behind the next iteration's first
  // (rotate_async_gemms; attention's loop split where its mask turns on). Off by default: on the
  // H200 it measured between -3.5 % and +2.5 % on attention's causal ring (docs/perf-notes.md,
  // session 9), no gain yet.
  bool rotate_gemm_loops = false;
  // Row copies between a global tensor and a row-blocked fragment whose rows do not start
  // 16-byte aligned (a softmax over 127 columns) move the block's rows as one contiguous span
  // through shared memory, in 16-byte chunks, instead of element by element (H200: 1.4-3.5x
  // faster on issue 17's odd widths, docs/perf-notes.md session 11). True keeps them on the
  // element-wise path (TESSEL_DISABLE=row_staging does the same).
  bool disable_row_staging = false;
  // The staged span's global-to-shared chunks go by cp.async, every chunk in flight before one
  // wait (H200: 1.05-1.45x over a load-then-store loop on issue 17's odd widths, 57-76 % of copy
  // against 49-55 %; docs/perf-notes.md session 12). True keeps the load-then-store loop
  // (TESSEL_DISABLE=async_span_copy does the same).
  bool disable_async_span_copy = false;
  // A staged span's 16-byte vectors are read from shared memory as the two aligned words that
  // cover each, shifted into place in registers, instead of one element at a time where the
  // row starts unaligned. Off by default: written in session 12 and not yet run on the H200
  // (docs/perf-notes.md has the prediction). TESSEL_ENABLE=realigned_span_reads does the same.
  bool realigned_span_reads = false;
  // Loads of rows that start unaligned (a softmax over 1023 columns) read each 16-byte vector as
  // the two aligned global words that cover it, shifted into place in registers, instead of
  // staging the block's rows through shared memory (no scratch, no block barrier; the stores
  // still go through the span). By default for rows of 1024 bytes or more, where it is faster
  // (H200, session 14: f16 softmax 1023 / 8191 / 8193 columns at 78 / 77 / 67 % of copy against
  // 69 / 61 / 58 % staged); shorter rows stay staged (127, 129: 72 / 51 % against 76 / 57 %).
  // realigned_global_loads = true takes it for every row length (TESSEL_ENABLE=
  // realigned_global_loads); disable_realigned_global_loads = true for none
  // (TESSEL_DISABLE=realigned_global_loads).
  bool realigned_global_loads = false;
  bool disable_realigned_global_loads = false;
  // Hopper's programmatic dependent launch (sm_90+; ignored elsewhere): the kernel is launched
  // with the programmatic-stream-serialization attribute, so that it may start while the previous
  // kernel on its stream finishes; it waits at entry, before any memory access, until that kernel
  // has completed and its writes are visible (griddepcontrol.wait), and lets the next such
  // kernel start once all of its own CTAs have started (griddepcontrol.launch_dependents). The
  // results are those of plain stream order; what it saves is the gap between two kernels.
  // Off by default for a kernel of its own; kernels::Matmul turns it on for a split-K GEMM's pair
  // (the partial kernel and its reduction: 1.1-1.3 us off each ~45 us pair on an H100, session
  // 24, docs/perf-notes.md). TESSEL_ENABLE=programmatic_launch does the same for every kernel;
  // disable_programmatic_launch (TESSEL_DISABLE=programmatic_launch) turns it off everywhere,
  // the split-K pairs included.
  bool programmatic_launch = false;
  bool disable_programmatic_launch = false;
  // Warp-specialized sm_90a kernels test their roles (producer or consumer) on the warp's index
  // broadcast from lane 0 (warp-uniform to ptxas), so that the wgmma descriptors built inside
  // the consumers' branch stay in uniform registers. By default where the consumers are one
  // warpgroup (its index is then a constant): the passes' 1024^3 GEMM 29 -> 4 R2UR and 0.89 ->
  // 0.99x the template's speed, attention's one-warpgroup kernels unchanged (H100, session 25,
  // docs/perf-notes.md). uniform_roles (TESSEL_ENABLE=uniform_roles) extends it to kernels of
  // several consumer warpgroups, whose warpgroup index then comes from a lane-0 broadcast too
  // (attention's D = 128 kernel 20 -> 5 R2UR but 1-4 % slower, so not by default);
  // disable_uniform_roles (TESSEL_DISABLE=uniform_roles) turns it off everywhere.
  bool uniform_roles = false;
  bool disable_uniform_roles = false;
  // The tutorial GEMM (and any kernel shaped like it: a K loop whose only compute is one gemm,
  // its loads all TMA loads into the wgmma layouts) compiled by the generic sm_90a passes -- TMA
  // loads into an mbarrier ring, a producer warpgroup, wgmma issued asynchronously with placed
  // waits, wgmma over several m64 blocks a warpgroup, persistent (persist_tiles), a TMA-store
  // epilogue where its staging tile fits (plan_tma_stores), split over clusters when the tiles
  // are few (split_k_clusters), use_cluster's multicast (multicast_cluster_loads). On by default
  // since session 29 (the passes' kernel at 0.997x the template over issue 5's shapes on an H100,
  // every shape within the run-to-run spread; docs/perf-notes.md). False (or TESSEL_DISABLE=
  // gemm_from_passes) swaps in select_hopper_gemm's hand-written kernel instead, for comparison
  // (`tessel bench gemm --compare-template`).
  bool gemm_from_passes = true;
  // Generic sm_90a ring kernels other than the GEMM-shaped ones gemm_from_passes takes (attention,
  // gemm chains, a user's ring with other work in its loop): persistent (persist_tiles:
  // min(tiles, SMs) blocks loop over the tiles, a causal or data-dependent ring's position
  // carried from tile to tile) and their wgmma accumulator tiles stored through TMA where the
  // staging tile fits (plan_tma_stores) -- what gemm_from_passes does to a GEMM's kernel. Off by
  // default for those kernels; kernels::flash_attention asks for it per config
  // (AttentionConfig::persistent, the default for non-causal rings at D = 128: 1.06-1.14x on the
  // H200). TESSEL_ENABLE=persistent_rings does the same for every kernel.
  bool persistent_rings = false;
  // Generic sm_90a kernels whose work is one TMA ring loop per output tile (one wave of tiles
  // too) run persistently: min(tiles, SMs) blocks each loop over their tiles, the producer
  // loading the next tile while the consumers finish this one (persist_tiles; GEMM-shaped
  // kernels under gemm_from_passes, any ring under persistent_rings). True launches one block per tile
  // (TESSEL_DISABLE=persistent_tiles does the same).
  bool disable_persistent_tiles = false;
  // In a persistent kernel, a shared tile loaded once per tile before its ring loop (attention's
  // Q) comes by TMA from the producer into two slots, the next tile's while this one computes,
  // instead of by the consumers' cp.async and two block barriers at every tile's start
  // (plan_tile_loads). True keeps the consumers' load (TESSEL_DISABLE=tile_loads does the same).
  bool disable_tile_loads = false;
  // A Pipelined loop's global->shared copy whose rows provably start off 16 bytes (a constant
  // odd row length of 16-bit elements: an odd K or N) keeps its ring stages in flight as raw
  // aligned 16-byte words by cp.async and shifts the current stage's words into the tile at the
  // top of each iteration (plan_pipelines' realigned rings). True keeps the synchronous realigned
  // chunks of copy_global_to_shared (TESSEL_DISABLE=realigned_rings does the same).
  bool disable_realigned_rings = false;
  // A kernel whose fragments and local arrays hold more than 510 values per thread (twice the
  // 255 registers a thread can have), in one buffer or in all, is a CompileError naming the
  // buffer: ptxas would spill most of it to local memory, slowly and at length. True compiles it
  // anyway (check_register_budget, src/passes/CheckRegisterBudget.cpp).
  bool allow_register_spills = false;
  // Seconds NVRTC may spend on the kernel; 0: no limit. Past it jit() throws
  // CompileTimeLimitError (a RuntimeError). NVRTC checks the limit between its phases, so the
  // compile stops at the first check past it, not exactly at it (CompileOptions::time_limit_s).
  double compile_time_limit_s = 0;
  // Keep the IR text after every compiler pass (JitKernel::ir_stages): what `tessel tutorial
  // --section 6` and TESSEL_DUMP=after:all show, for tools that want it as data.
  bool keep_ir_stages = false;
  // Persistent kernels launch min(tiles, SMs) CTAs; a positive cap launches fewer (whole
  // clusters, at least one), so that each CTA loops over many tiles: for tests and debugging.
  // (The Hopper GEMM's grid is capped at launch; persist_tiles' loop takes it at compile time.)
  int max_persistent_ctas = 0;
  // Blocks per SM that ptxas fits the kernel's registers to (__launch_bounds__'s second
  // argument): 2 for a 256-thread kernel caps its registers at 128, so that two blocks share an
  // SM. Capped at the blocks the kernel's shared memory and threads allow; 0 (default): no
  // request (a kernel with shared-memory fragment tails asks for 2 itself). Warp-specialized
  // kernels (setmaxnreg budgets) ignore it. kernels::flash_attention sets 2 for its cp.async
  // schedule at (padded) D = 64 on blocks of up to 256 threads (two CTAs an SM). A request that
  // leaves ptxas too few registers for an instruction is a CompileError naming this option;
  // legal: 0 to 32 (else a CompileError at the jit call).
  int min_blocks_per_sm = 0;
};

// What the lowered kernel does, for tools and tests: the launch shape and the features used.
struct KernelInfo {
  std::string kernel_name{};
  int threads = 0;
  int dynamic_smem_bytes = 0;
  std::string arch{};
  // Which of "mma.sync", "wgmma", "ldmatrix", "cp.async", "cp.async.bulk.tensor", "mbarrier",
  // "setmaxnreg" the PTX holds.
  std::vector<std::string> instructions{};
  // "sm90 TMA + wgmma, warp-specialized, persistent" (the Hopper GEMM), "sm90 wgmma block gemm
  // (generic kernel)" (a generic kernel whose gemms use wgmma, "+ mma.sync" when some do not),
  // "mma.sync", or "CUDA cores (no gemm)" for kernels without tensor-core instructions; and,
  // on sm_90a when the Hopper GEMM was not taken, why.
  std::string path{};
  std::string hopper_declined{};
  // Hopper machinery a generic sm_90a kernel did not get, each as "what: why" ("wgmma: gemm at
  // Matmul.cpp:110 (fragment_2): a 128-row tile on 4 warps ...", for a gemm kept on mma.sync;
  // with a TMA ring, "persistent tiles: for a kernel whose K loop ...", "warp specialization: a
  // wgmma accumulator of ..."): where to look when a kernel is slower than its neighbours.
  std::vector<std::string> declined{};
  // The blocks loop over the tiles: the Hopper GEMM's grid is min(tiles * cluster_size, SMs),
  // whole clusters, capped at launch; a generic kernel made persistent by persist_tiles has the
  // grid min(tiles, SMs) fixed at compile time.
  bool persistent = false;
  int cluster_size = 1;  // CTAs per thread-block cluster (the template's split-K or multicast: 2;
                         // split_k_clusters: 2, 4 or 8)
  // What the Hopper pipeline passes decided for a generic kernel (empty / zero otherwise): one
  // line per TMA tensor map ("K_map: box [1, 128, 1, 64] of K, 128-byte swizzle") and per
  // mbarrier array ("K_full[2]: 1 arrival per phase"); the warp roles (consumer threads and
  // register budget, producer threads and budget); the warpgroups taking turns.
  std::vector<std::string> tma_maps{}, mbarriers{};
  int consumer_threads = 0, consumer_regs = 0, producer_threads = 0, producer_regs = 0;
  bool pingpong = false;
  // A persistent kernel's once-per-tile tiles that the producer loads a tile ahead into two
  // slots ("Q -> shared_0", plan_tile_loads); those it left to the consumers are in `declined`.
  std::vector<std::string> tile_loads{};
};

class JitKernelImpl;

class JitKernel {
 public:
  JitKernel() = default;
  explicit JitKernel(std::shared_ptr<JitKernelImpl> impl) : impl_(std::move(impl)) {}

  const std::string& name() const;
  const std::string& source() const;  // the generated CUDA C++
  const std::string& ptx() const;
  // The cubin NVRTC made of it (machine code for the kernel's arch; what `tessel dump --sass`
  // disassembles).
  const std::vector<char>& cubin() const;
  const std::string& compile_log() const;
  const Resources& resources() const;  // registers, spills, compile ms, cache hit
  const KernelInfo& info() const;
  const ir::PrimFuncNode& program() const;
  // The IR after lowering (what codegen saw).
  std::string lowered_ir() const;
  // The IR text after each pass, in order, with its pass's name (JitOptions::keep_ir_stages;
  // empty otherwise).
  const std::vector<std::pair<std::string, std::string>>& ir_stages() const;

  // Inputs are the parameters not in out_idx, in order; returns the outputs, in order.
  std::vector<Tensor> call(const std::vector<Tensor>& inputs, CUstream stream = nullptr) const;
  // Every parameter given; nothing allocated.
  void launch(const std::vector<Tensor>& args, CUstream stream = nullptr) const;
  // kernel(a, b) -> the single output.
  template <class... A>
  Tensor operator()(const A&... inputs) const {
    auto out = call(std::vector<Tensor>{inputs...});
    return single_output(out);
  }

  // The same program on the CPU reference interpreter (src/interp): same argument checks,
  // same meaning, host tensors in and out. For tests without a GPU and for hunting bugs.
  std::vector<interp::HostTensor> run_on_cpu(const std::vector<interp::HostTensor>& inputs) const;

  bool defined() const { return impl_ != nullptr; }

 private:
  Tensor single_output(std::vector<Tensor>& out) const;
  std::shared_ptr<JitKernelImpl> impl_;
};

// Lowers, generates and compiles `f`. Compile errors in the program are CompileError (with the
// author's line; errors in `options` — an arch this NVRTC does not target, a shared-memory cap
// below 0 or above 16 MiB, an out_idx out of range or named twice — at the jit call's line); a
// failure of the generated code to compile is InternalError.
JitKernel jit(const PrimFunc& f, const JitOptions& options = {},
              std::source_location where = std::source_location::current());

}  // namespace tessel
