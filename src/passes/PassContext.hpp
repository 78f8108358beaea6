// What the lowering passes share beside the IR itself: the target, the layouts that
// infer_layouts chose, the shared-memory plan, and the kernel's launch shape. Passes read and
// fill it in the order src/Lower.cpp runs them; each pass says which fields it needs.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tessel/Error.hpp"
#include "tessel/ir/IR.hpp"

namespace tessel::passes {

struct Target {
  std::string arch;  // "sm_80", "sm_90a", ...
  int sm = 80;       // 80, 86, 89, 90, ...
  int smem_cap = 0;  // bytes of shared memory a block may use
  int sm_count = 0;  // SMs of the GPU the kernel is for (0: unknown; a persistent grid is
                     // capped at launch either way, this only steers choices like split-K)
  // The SMs the passes plan for: sm_count, or the H200's 132 when unknown.
  int sms() const { return sm_count > 0 ? sm_count : 132; }
};

// How a shared tile is laid out, as a value: where element (row, col) of the rows x cols matrix
// the tile holds (one stage) sits. Both its writers (copies) and its readers (gemm) lower from
// the same value, so they agree by construction; the device header's type for it is named only
// when an op lowers or codegen prints a declaration (device_type()).
struct SharedLayout {
  enum class Kind {
    // Row-major: (row, col) at row * cols + col.
    RowMajor,
    // 16-byte chunks of a row XOR-permuted by the row (tessel::SwizzledLayout: conflict-free
    // ldmatrix and cp.async), for elements of elem_bytes.
    Swizzled,
    // The layout a wgmma descriptor reads (tessel::WgmmaSwizzleLayout): panels swizzle_bytes wide
    // (128, 64 or 32), as TMA writes them; the tile is 1024-byte aligned.
    WgmmaSwizzle,
  };
  Kind kind = Kind::RowMajor;
  std::int64_t rows = 0, cols = 0;  // the 2-D matrix the layout covers (one stage)
  int elem_bytes = 0;               // Swizzled, WgmmaSwizzle
  int swizzle_bytes = 0;            // WgmmaSwizzle

  static SharedLayout row_major(std::int64_t rows, std::int64_t cols) {
    return {Kind::RowMajor, rows, cols, 0, 0};
  }
  static SharedLayout swizzled_for(std::int64_t rows, std::int64_t cols, int elem_bytes) {
    return {Kind::Swizzled, rows, cols, elem_bytes, 0};
  }
  static SharedLayout wgmma_swizzle(std::int64_t rows, std::int64_t cols, int elem_bytes, int swizzle_bytes) {
    return {Kind::WgmmaSwizzle, rows, cols, elem_bytes, swizzle_bytes};
  }
  // Any swizzle (not row-major): element-wise accesses go through the layout's offset().
  bool swizzled() const { return kind != Kind::RowMajor; }
  bool wgmma() const { return kind == Kind::WgmmaSwizzle; }
  // The device header's type (device/tessel/layout.cuh), e.g. "tessel::SwizzledLayout<128, 32, 2>".
  std::string device_type() const;
  // For TESSEL_DUMP and messages, e.g. "swizzled 128x32 (2-byte elements)".
  std::string describe() const;
  bool operator==(const SharedLayout&) const = default;
};

// The device type a gemm tile's registers belong to, as a value: the gemm instantiation an
// accumulator's gemm calls (tessel::BlockGemm, mma.sync; tessel::WarpgroupGemm, wgmma), or the
// plain register layout of a gemm's A operand held in registers (tessel::AccumulatorLayout). All
// of them lay out a [rows, cols] tile alike for one (warps_m, warps_n, interleaved); their acc_row /
// acc_col / row_of_register give the coordinates. Named only when an op lowers (device_type()).
struct GemmEngine {
  enum class Kind { BlockGemm, WarpgroupGemm, AccumulatorLayout };
  Kind kind = Kind::AccumulatorLayout;
  std::int64_t rows = 0, cols = 0;  // the tile: BM x BN (an A operand: BM x BK)
  int warps_m = 0, warps_n = 0;     // AccumulatorLayout, BlockGemm
  // Each warp's m16 row blocks are 16-row strips one every 16 * warps_m rows, not one contiguous
  // band (accumulator.cuh): a WarpgroupGemm of several m64 blocks a warpgroup, and the tiles laid
  // out like its accumulator. Implied by the WarpgroupGemm type, printed for AccumulatorLayout.
  bool interleaved = false;
  // BlockGemm and WarpgroupGemm: the operands' element type, K step, warpgroups (WarpgroupGemm),
  // transposes, and A's and B's shared layouts (A in registers: row-major BM x BK).
  std::string dtype;  // the device element type, e.g. "tessel::half_t"
  std::int64_t k = 0;
  int warpgroups = 0;
  bool trans_a = false, trans_b = false;
  SharedLayout a, b;
  // BlockGemm: the independent accumulator chains its run() spreads a K tile's k steps over
  // (BlockGemm's KChains; printed only when more than one).
  int k_chains = 1;

  // The plain register layout of a rows x cols tile over warps_m x warps_n warps.
  static GemmEngine accumulator(std::int64_t rows, std::int64_t cols, int warps_m, int warps_n,
                                bool interleaved = false) {
    GemmEngine e;
    e.kind = Kind::AccumulatorLayout;
    e.rows = rows, e.cols = cols, e.warps_m = warps_m, e.warps_n = warps_n, e.interleaved = interleaved;
    return e;
  }
  std::string device_type() const;
  bool operator==(const GemmEngine&) const = default;
};

// How a fragment's elements are spread over the block's threads.
struct FragmentLayout {
  enum class Kind {
    // The accumulator tile of tessel::BlockGemm<...> (device/tessel/gemm.cuh): element
    // (Gemm::acc_row(l), Gemm::acc_col(l)) is this thread's register l.
    GemmAccumulator,
    // Flat row-major element f lives in thread f % threads, register f / threads.
    Strided,
    // A [rows, cols] tile for row-wise work (softmax): each row is spread over `lanes`
    // consecutive threads, each holding runs of `vec` contiguous elements; `rows_per_pass`
    // rows are covered at once by all threads. Register l of thread t holds
    //   row = (l / (chunks * vec)) * rows_per_pass + t / lanes
    //   col = ((l / vec) % chunks * lanes + t % lanes) * vec + l % vec
    RowBlocked,
    // A [rows] vector that a reduction produced from a RowBlocked tile: every thread holds the
    // values of the rows it covers there (register l is row l * rows_per_pass + t / lanes),
    // replicated over the row's lanes.
    RowOf,
    // A [rows] vector reduced along dim 1 from a GemmAccumulator tile whose warps split M only:
    // register r of a thread holds row AccumulatorLayout::row_of_register(r) (`gemm` names
    // the layout), the two rows (lane / 4 and lane / 4 + 8) of each of its m16 blocks, replicated
    // over the 4 lanes of a quad. A tile register i sits in row register
    //   (i / 4 / mma_n) * 2 + (i % 4) / 2,   mma_n = the tile's columns per warp / 8.
    AccumulatorRows,
    // A [rows, cols] tile whose rows are not whole vectors (127 f16 columns) but whose rows*cols
    // elements are (rows * cols a multiple of vec), held as the contiguous run those rows are in
    // a row-major tensor: thread t holds the `chunks` consecutive `vec`-element words from word
    // t * chunks on. Register l of thread t holds the flat element
    //   f = t * chunks * vec + l,   row = f / cols, col = f % cols;
    // words past rows * cols / vec hold nothing. A thread's run holds parts of at most two rows
    // (chunks * vec <= cols + 1): its first `cols - f0 % cols` elements are one row's (f0 its
    // first element).
    FlatRows,
    // A [rows] vector beside a FlatRows tile (a reduction's result): two registers per thread,
    // the rows of its run's first and last elements -- register s of thread t holds row
    // t * chunks * vec / cols + s -- each row replicated in every thread it touches. Slots past
    // the last row hold nothing.
    FlatRowOf,
  };
  Kind kind = Kind::Strided;
  std::vector<std::int64_t> shape;
  int per_thread = 0;  // registers each thread holds
  // GemmAccumulator and AccumulatorRows: the device type whose acc_row / acc_col /
  // row_of_register give the coordinates (GemmEngine).
  GemmEngine gemm;
  int warps_m = 0, warps_n = 0;
  bool wgmma = false;  // GemmAccumulator of a gemm lowered to tessel::WarpgroupGemm
  int vec = 1, lanes = 1, rows_per_pass = 1, chunks = 1;  // RowBlocked and RowOf; FlatRows: vec, chunks = words
  std::int64_t row_length = 0;  // FlatRows and FlatRowOf: the tile's columns

  // What infer_layouts chose, in words (TESSEL_DUMP's layout lines): "gemm accumulator, warps 2x2".
  std::string describe() const;
  // GemmAccumulator: the plain register layout of a [rows, cols] tile laid out like this one
  // (a tile that follows an accumulator, the rows reduced from it).
  GemmEngine accumulator_layout(std::int64_t rows, std::int64_t cols) const {
    return GemmEngine::accumulator(rows, cols, warps_m, warps_n, gemm.interleaved);
  }
};

// A tensor the kernel reads through TMA: the host encodes its tensor map before each launch and
// passes it by value (a __grid_constant__ parameter named by `var`).
struct TmaParam {
  ir::Var var;
  ir::Buffer tensor;  // a global parameter
  int box_cols = 0;   // the box: box_rows x box_cols elements, swizzled by its row size
  int box_rows = 0;   // (box_cols * 2 bytes: 128-byte or 64-byte swizzle)
  // N-D maps (plan_tma_copies): the box per tensor dimension, outermost first (1 for the
  // dimensions a tile does not span), and the swizzle; the map's dimensions and strides are
  // the tensor's own. Empty: the 2-D row-major map of box_rows x box_cols above.
  std::vector<int> box;
  int swizzle_bytes = 0;
  // multicast_cluster_loads: the dimension (outermost first) whose box extent is one CTA's share
  // of the tile's rows, when the map's loads are multicast over a cluster; -1 otherwise.
  int share_dim = -1;
};

// A shared array of mbarriers (ir::MbarrierStmt) and the arrivals that complete each phase;
// insert_barriers initializes them at the kernel's start.
struct MbarrierArray {
  ir::Buffer bars;
  int count = 1;
  // A ring's `empty` barriers: the multi-buffered tiles whose stages they release (one, or the
  // tiles that the same statements read, which share one barrier pair; empty for other
  // barriers).
  std::vector<ir::Buffer> releases{};
};

// Set when select_hopper_gemm replaced the kernel by the sm_90a warp-specialized GEMM.
struct HopperPlan {
  bool selected = false;
  std::string gemm_type;        // tessel::HopperGemm<...>
  int launch_threads = 0;       // producer + consumer warpgroups
  int smem_bytes = 0;           // the ring, its mbarriers and alignment slack
  std::int64_t tiles = 0;       // output tiles (clusters' tile groups); grid min(tiles * cluster_size, SMs)
  int split_k = 1;              // 2: each tile's K loop split over the 2 CTAs of a cluster
  int cluster_m = 1;            // 2: vertically adjacent tiles share B (TMA multicast)
  int cluster_n = 1;            // 2: horizontally adjacent tiles share A (TMA multicast)
  int cluster_size = 1;         // CTAs per cluster: split_k * cluster_m * cluster_n
  int stages = 0;               // the ring's stages
  int consumers = 0;            // consumer warpgroups
  std::int64_t k_tiles = 0;     // K tiles per tile (over all split_k CTAs)
  bool tma_store = false;       // the epilogue stores C through shared memory and TMA
  bool fused_epilogue = false;  // the author's Parallel epilogue runs on the accumulators
  std::string why_not;          // when not selected on sm_90a: the reason, for tools and tests
};

struct PassContext {
  Target target;
  std::string func_name;
  std::vector<ir::Buffer> params;

  // Feature switches (JitOptions), for debugging: each must still give correct results.
  struct Switches {
    bool allow_tma = true, allow_wgmma = true, allow_warp_specialization = true;
    bool allow_split_k = true;
    bool allow_tma_store = true;
    bool allow_multicast = true;
    bool allow_async_pipeline = true;
    bool allow_register_spills = false;  // check_register_budget off
    bool allow_pingpong = true;
    bool allow_async_gemm = true;
    bool allow_gemm_chains = true;
    bool unit_scale_skips = false;
    bool allow_loop_rotation = false;
    bool allow_row_staging = true;
    bool async_span_copy = true;
    bool realigned_span_reads = false;
    bool realigned_global_loads = false;
    bool allow_realigned_global_loads = true;
    bool programmatic_launch = false;
    bool uniform_roles = false;
    bool allow_uniform_roles = true;
    bool gemm_from_passes = true;
    bool allow_persistent_tiles = true;
    bool allow_tile_loads = true;
    int max_persistent_ctas = 0;
    bool persistent_rings = false;
    int min_blocks_per_sm = 0;
    bool allow_realigned_rings = true;
  };
  bool allow_tma = true, allow_wgmma = true, allow_warp_specialization = true;
  bool allow_split_k = true;
  bool allow_tma_store = true;
  bool allow_multicast = true;
  // Generic kernels' TMA loads, mbarrier rings and warp roles (plan_tma_copies,
  // specialize_warps); off: their Pipelined loops keep the cp.async schedule.
  bool allow_async_pipeline = true;
  bool allow_register_spills = false;
  // schedule_warpgroups: the consumer warpgroups take turns for their gemm phases.
  bool allow_pingpong = true;
  // rotate_async_gemms and place_gemm_waits: wgmma gemms issued asynchronously, their waits
  // placed at the first use; off: each waits right after it is issued.
  bool allow_async_gemm = true;
  // infer_layouts: an mma.sync gemm of one or two m16n8 blocks a warp spreads its k steps over
  // independent accumulator chains (GemmEngine::k_chains; JitOptions::disable_gemm_chains).
  bool allow_gemm_chains = true;
  // skip_unit_scales (opt-in, measured slower on an H100: JitOptions::unit_scale_skips): register
  // loops scaling by factors of exactly 1 are skipped.
  bool unit_scale_skips = false;
  // rotate_async_gemms (opt-in: JitOptions::rotate_gemm_loops).
  bool allow_loop_rotation = false;
  // Row copies whose rows start unaligned move through shared memory as one contiguous span
  // (JitOptions::disable_row_staging turns it off; ops/Copy.cpp).
  bool allow_row_staging = true;
  // The span's global-to-shared chunks by cp.async, all in flight before one wait
  // (JitOptions::disable_async_span_copy turns it off; ops/Copy.cpp).
  bool async_span_copy = true;
  // A span load's vectors read from the scratch as two aligned 16-byte words each, shifted into
  // place (opt-in, unmeasured: JitOptions::realigned_span_reads; ops/Copy.cpp).
  bool realigned_span_reads = false;
  // Unaligned row loads as two aligned global words per vector, shifted into place, instead of
  // the span's scratch (ops/Copy.cpp): for rows of 1024 bytes or more unless
  // allow_realigned_global_loads is off (JitOptions::disable_realigned_global_loads), for every
  // row when realigned_global_loads is on (JitOptions::realigned_global_loads).
  bool realigned_global_loads = false;
  bool allow_realigned_global_loads = true;
  // The kernel waits at entry for the previous grid and lets the next start early (Hopper's
  // programmatic dependent launch; JitOptions::programmatic_launch; plan_kernel_abi).
  bool programmatic_launch = false;
  // Warp-specialized kernels' role tests (and, with several consumer warpgroups, their
  // warpgroup indices) broadcast from lane 0: by default at one consumer warpgroup, everywhere
  // under uniform_roles, nowhere without allow_uniform_roles (JitOptions::uniform_roles and
  // disable_uniform_roles; plan_kernel_abi).
  bool uniform_roles = false;
  bool allow_uniform_roles = true;
  // The tutorial GEMM's kernel from the generic passes (TMA ring, warp roles, asynchronous
  // wgmma with placed waits) instead of select_hopper_gemm's template (the default since session
  // 29; JitOptions::gemm_from_passes = false keeps the template): select_hopper_gemm declines, and
  // a Pipelined loop's sole gemm takes wgmma when its loads can all be TMA loads (infer_layouts'
  // MainLoopGemmScan), which then sets gemm_ring.
  bool gemm_from_passes = true;
  // Set by infer_layouts: the kernel has a K loop whose only compute is one gemm, fed by loads
  // that will all be TMA loads into the wgmma layouts -- the loop gemm_from_passes takes from
  // mma.sync's cp.async pipeline to a wgmma ring. Such a kernel gets the ring epilogues below.
  bool gemm_ring = false;
  // persist_tiles: ring kernels loop over their tiles in min(tiles, SMs)
  // blocks (JitOptions::disable_persistent_tiles turns it off).
  bool allow_persistent_tiles = true;
  // plan_tile_loads: a persistent kernel's once-per-tile shared tiles by TMA into two slots
  // (JitOptions::disable_tile_loads turns it off).
  bool allow_tile_loads = true;
  // plan_pipelines' realigned rings (JitOptions::disable_realigned_rings turns them off).
  bool allow_realigned_rings = true;
  // JitOptions::max_persistent_ctas: persist_tiles launches at most this many blocks (0: the SMs).
  int max_persistent_ctas = 0;
  // Every generic ring kernel persistent with TMA-stored accumulator tiles (persist_tiles,
  // plan_tma_stores, ops/Copy.cpp's wide stores), split over clusters and multicast
  // (split_k_clusters, multicast_cluster_loads): JitOptions::persistent_rings (attention asks per
  // config). Without it, only a gemm ring kernel under gemm_from_passes (the template's choices,
  // measured there); others -- attention, gemm chains, a ring with other work -- keep the launch
  // shape and stores they were measured with.
  bool persistent_rings = false;
  bool ring_epilogues() const { return persistent_rings || (gemm_from_passes && gemm_ring); }
  // Why a kernel does not get them (for the passes' why_not): empty when it does.
  std::string ring_epilogues_why_not() const {
    if (ring_epilogues()) return "";
    if (!gemm_from_passes)
      return "JitOptions::gemm_from_passes is off (TESSEL_DISABLE=gemm_from_passes) and persistent_rings not "
             "on";
    return "for a kernel whose K loop is one gemm fed by TMA loads (gemm_from_passes) or under "
           "JitOptions::persistent_rings (TESSEL_ENABLE=persistent_rings); no loop of this kernel is one "
           "gemm "
           "alone on TMA loads";
  }
  // JitOptions::min_blocks_per_sm: the blocks per SM the author asks ptxas to fit registers to
  // (plan_shared_memory caps it at what shared memory and threads allow).
  int requested_min_blocks_per_sm = 0;

  // Set by select_hopper_gemm.
  HopperPlan hopper;
  // Set by persist_tiles: the loop over a block's tiles (ForKind::Tiles), when it made one.
  struct TileLoop {
    bool applied = false;
    ir::Var var;              // the loop's variable: this block's tile count so far
    std::int64_t tiles = 0;   // the author's grid, as tiles
    std::int64_t blocks = 0;  // the launch: min(tiles, SMs); the loop's stride
    int panel = 0;            // use_swizzle's panel order over the tiles (0: row-major)
    // When the ring loop's trip count depends on the tile (causal attention): a one-element
    // Local i32 holding the ring position of the tile's first iteration (the trip counts of
    // the block's earlier tiles, summed), which both roles keep; undefined when it is constant
    // (the position is then tile_i * n + k).
    ir::Buffer base;
    ir::Expr trips;           // with `base`: the ring loop's trip count, max(n(tile), 0), in the
                              // block indices the tile loop's lets bind
    std::string why_not;      // when not applied on sm_90a
  };
  TileLoop tile_loop;
  // Set by split_k_clusters: each output tile's K loop split over the `ranks` CTAs of a cluster
  // (2, 4 or 8: the grid's x extent times ranks; cluster rank = blockIdx.x % ranks), the other
  // ranks' partial sums added into the rank-0 CTA's by a cluster_reduce through `bars` (shared
  // i64[2 log2(ranks)], initialized with `count` arrivals by insert_barriers, then a cluster barrier).
  struct ClusterSplit {
    bool applied = false;
    ir::Buffer bars;
    int count = 0;
    int ranks = 1;
    std::int64_t tiles = 0;  // the author's grid, as tiles
    std::string why_not;     // when not applied on sm_90a with the switches on
  };
  ClusterSplit cluster_split;
  // Set by multicast_cluster_loads: use_cluster's 2-CTA clusters (rank = blockIdx.x % 2, the
  // regridded kernel's), the operand tiles both CTAs share loaded once by TMA multicast.
  struct ClusterMulticast {
    bool applied = false;
    int ctas = 1;
    int axis = 0;                   // the author's grid axis the cluster spans (0: x, 1: y)
    std::vector<ir::Buffer> tiles;  // the shared tiles (single-stage, as the author declared them)
    std::vector<std::string> tensors;  // the global tensors they load from
    std::string why_not;            // when the kernel asked for a cluster and did not get one
  };
  ClusterMulticast cluster_multicast;
  // The CTAs of the kernel's clusters (1: none), as split_k_clusters or
  // multicast_cluster_loads made them.
  int cluster_ctas() const {
    return cluster_split.applied       ? cluster_split.ranks
           : cluster_multicast.applied ? cluster_multicast.ctas
                                       : 1;
  }
  // plan_tile_loads: the once-per-tile copies of a persistent kernel's tile body it looked at,
  // each taken (the producer's TMA load into two slots) or not, with the reason.
  struct TileLoad {
    std::string tensor, buffer;
    bool taken = false;
    std::string why_not;
  };
  std::vector<TileLoad> tile_loads;
  std::vector<TmaParam> tma_params;

  // Set by plan_tma_stores: copies of a wgmma accumulator (fragment id) to a global tensor
  // (tensor id) that go through `staging` and TMA stores with tensor map `map`.
  struct TmaStorePlan {
    int fragment = -1, tensor = -1;
    ir::Buffer staging;
    ir::Var map;
  };
  std::vector<TmaStorePlan> tma_stores;

  // Set by plan_pipelines: the mbarrier arrays of its rings.
  std::vector<MbarrierArray> mbarriers;
  // Set by specialize_warps: threads the kernel launches (consumers plus the producer
  // warpgroup), 0 when it is `threads`; the roles' register budgets (setmaxnreg).
  int launch_threads = 0;
  int consumer_regs = 0, producer_regs = 0;
  int entry_regs = 0;  // per thread at launch, which the budgets assume ptxas allocated
  std::string specialize_why_not;  // when a ring kept its loads in the consumers' threads
  // Set by schedule_warpgroups: the two consumer warpgroups alternate their gemm phases.
  bool pingpong = false;
  // Set by rotate_async_gemms: loops whose last gemm now issues behind the next iteration's first.
  int rotated_gemm_loops = 0;
  // Set by rotate_async_gemms: loops split where their branches' conditions turn true.
  int split_gemm_loops = 0;
  // Set by place_gemm_waits: gemms issued asynchronously, and the waits placed for them.
  int async_gemms = 0, gemm_waits = 0;

  // Set by verify_program.
  int threads = 0;
  std::vector<ir::Expr> grid;
  std::vector<ir::Var> block_vars;
  ir::Var thread_index{"tx"};  // threadIdx.x, bound by codegen

  // Set by infer_layouts, keyed by Buffer id.
  std::map<int, FragmentLayout> fragment_layouts;
  std::map<int, SharedLayout> shared_layouts;
  // Some gemm of the (generic) kernel lowers to tessel::WarpgroupGemm: codegen includes its
  // header, fences the async proxy before every barrier and aligns shared memory to 1024.
  bool uses_wgmma = false;
  // Set by infer_layouts (ops/Gemm.cpp) on sm_90a with the Hopper switches on: each gemm that
  // keeps mma.sync, and why ("gemm at Matmul.cpp:110 (fragment_2): ..."); KernelInfo::declined.
  std::vector<std::string> wgmma_declined;

  // The per-thread register array that holds each fragment after lowering (a Local buffer of
  // FragmentLayout::per_thread elements), by fragment id; made on first use.
  std::map<int, ir::Buffer> fragment_registers;
  // Register arrays whose last `tail_elems` elements live in shared memory (a fragment with
  // shared_tail), by the register array's id: the slots (threads * tail_elems elements; vector
  // v of thread t at (v * threads + t) * vec) and the split. Codegen declares such an array as
  // a tessel::SplitRegs (device/tessel/split_regs.cuh).
  struct RegisterTail {
    ir::Buffer slots;
    int register_elems = 0, tail_elems = 0, vec = 1;
  };
  std::map<int, RegisterTail> register_tails;
  const ir::Buffer& registers_of(const ir::Buffer& fragment) {
    auto it = fragment_registers.find(fragment->id);
    if (it != fragment_registers.end()) return it->second;
    const FragmentLayout& l = fragment_layouts.at(fragment->id);
    ir::Buffer r = ir::Buffer::make(fragment->name, {ir::make_int(l.per_thread)}, fragment->dtype,
                                    ir::Scope::Local, fragment->where);
    if (fragment->shared_tail > 0) {
      const int vectors = l.vec > 0 ? l.per_thread / l.vec : 0;
      if (l.kind != FragmentLayout::Kind::RowBlocked || l.vec < 2 || fragment->shared_tail > vectors)
        TESSEL_USER_ERROR("alloc_fragment", fragment->where,
                          "fragment "
                              << fragment->name << " asks for shared_tail(" << fragment->shared_tail
                              << ") but its layout gives each thread "
                              << (l.kind == FragmentLayout::Kind::RowBlocked && l.vec >= 2
                                      ? std::to_string(vectors) + " vectors of " + std::to_string(l.vec)
                                      : std::string("no row vectors"))
                              << "; shared_tail is for row-wise fragments and at most the vectors a "
                                 "thread holds");
      RegisterTail t;
      t.vec = l.vec;
      t.tail_elems = fragment->shared_tail * l.vec;
      t.register_elems = l.per_thread - t.tail_elems;
      const std::int64_t slots = static_cast<std::int64_t>(threads) * t.tail_elems;
      t.slots = ir::Buffer::make(fragment->name + "_tail", {ir::make_int(slots)}, fragment->dtype,
                                 ir::Scope::Shared, fragment->where);
      shared_layouts[t.slots->id] = SharedLayout::row_major(1, slots);
      register_tails[r->id] = t;
    }
    return fragment_registers.emplace(fragment->id, r).first->second;
  }

  // Set by plan_pipelines: for a gemm accumulator whose main loop owns a ring of staged A and B
  // tiles, those tiles (A first; the epilogue may stage C through their memory once the ring is
  // drained). plan_shared_memory checks that B directly follows A.
  struct EpilogueScratch {
    ir::Buffer a, b;
  };
  std::map<int, EpilogueScratch> epilogue_scratch;
  // Pairs of shared buffers that lower_tile_ops relies on being adjacent (first, then second).
  std::vector<std::pair<ir::Buffer, ir::Buffer>> smem_contiguous;

  // Set by plan_shared_memory.
  std::map<int, std::int64_t> smem_offsets;  // byte offset of each shared buffer
  std::int64_t smem_bytes = 0;
  // Blocks per SM codegen asks ptxas to fit the registers to (__launch_bounds__'s second
  // argument); 0: no request. Set for kernels with fragment shared tails (register_tails).
  int min_blocks_per_sm = 0;

  // Set by plan_kernel_abi, the last pass: the kernel as seen from outside. Codegen prints its
  // signature and preamble from it, and the JIT launches by it; neither decides any of it.
  struct KernelAbi {
    // Device headers beyond tessel.cuh, in include order ("tessel/hopper_gemm.cuh", ...).
    std::vector<std::string> headers;
    int consumer_threads = 0;  // a warp-specialized kernel's TESSEL_CONSUMER_THREADS; 0: none
    int threads = 0;           // per block, at launch (and __launch_bounds__'s first argument)
    // __launch_bounds__'s second argument: 1 for kernels that move registers with setmaxnreg
    // (it only works under a cap at entry), the blocks per SM a register-bound kernel asks for,
    // or 0 (none).
    int min_blocks_per_sm = 0;
    int cluster_size = 1;  // __cluster_dims__(cluster_size, 1, 1) when more than 1
    // The dynamic shared-memory array: its declared alignment (128, or 1024 for the Hopper
    // GEMM's TMA tiles), whether the wgmma tiles' 1024-byte alignment is made at run time
    // (tessel::align_shared_1024; generic kernels with wgmma), and its size.
    int smem_alignment = 128;
    bool smem_realigned = false;
    std::int64_t dynamic_smem_bytes = 0;
    std::vector<ir::Expr> grid;  // blocks per dimension (the JIT needs them constant)
    // The CTAs loop over the tiles: the Hopper GEMM's, whose grid the JIT caps at launch
    // (grid_capped_at_launch: min(tiles, SMs) in whole clusters, JitOptions::max_persistent_ctas),
    // or persist_tiles' loop, whose grid (its stride) is fixed here.
    bool persistent = false;
    bool grid_capped_at_launch = false;
    // use_swizzle(panel): the block indices are remapped (tessel::rasterize) before any use;
    // 0: not.
    int raster_panel = 0;
    // A generic kernel with tensor maps: its first thread prefetches their descriptors
    // (prefetch.tensormap) at entry, so that the first TMA load or store does not wait for a
    // descriptor fetch (the Hopper GEMM template prefetches its own).
    bool prefetch_tensor_maps = false;
    // Hopper's programmatic dependent launch (JitOptions::programmatic_launch, sm_90+): the
    // kernel waits at entry for the previous grid on its stream (griddepcontrol.wait) and lets
    // the next start (griddepcontrol.launch_dependents); the JIT launches it with the
    // programmatic-stream-serialization attribute.
    bool programmatic_launch = false;
    // A warp-specialized kernel's role test compares a warp index broadcast from lane 0
    // (tessel::warp_uniform); uniform_warpgroup (TESSEL_UNIFORM_WARPGROUP) makes WarpgroupGemm's
    // warpgroup index the same kind of value where there are several (at one it is a constant).
    bool uniform_roles = false;
    bool uniform_warpgroup = false;
  };
  KernelAbi abi;
};

}  // namespace tessel::passes
