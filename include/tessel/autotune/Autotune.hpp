// The autotuner (issue 6): a space of named knobs with constraints, pruned by hardware limits
// before anything compiles; candidates compiled in parallel; checked by the caller's reference;
// timed with CUDA events (L2 flushed, medians); searched exhaustively, at random within a
// budget, or by successive halving (the default); the answer kept in a tuning cache.
//
//   T::autotune::Space s = T::autotune::gemm_space("sm_90a", DType::f16);
//   T::autotune::Callbacks cb{.run = ..., .check = ...};
//   auto r = T::autotune::autotune(T::autotune::gemm_factory(M, N, K, DType::f16), s, cb, opts);
//
// Thread safety of the parallel compile: jit() is safe to call from several threads (the
// frontend's builder state is thread_local, NVRTC programs are per call, the kernel cache locks
// its map and writes files atomically, device queries are call_once). Loading, checking and
// timing run on the calling thread only.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tessel/DType.hpp"
#include "tessel/Jit.hpp"
#include "tessel/Version.hpp"
#include "tessel/kernels/attention/FlashAttention.hpp"
#include "tessel/kernels/gemm/Matmul.hpp"
#include "tessel/kernels/softmax/Softmax.hpp"

namespace tessel::autotune {

// One point of a space: knob name -> value (bools as 0/1, enums as their index).
using Config = std::map<std::string, int>;
// "block_K=32 block_M=128 ..." (sorted by name: stable, used in keys and tables).
std::string describe(const Config& c);
// 0 when the knob is absent.
int get(const Config& c, const std::string& name, int fallback = 0);

struct HardwareLimits {
  long long smem_per_block = 0;  // 0: not checked
  int threads_per_block = 0;     // 0: not checked
};

class Space {
 public:
  explicit Space(std::string name = "space") : name_(std::move(name)) {}

  // A grid knob; the grid is the product of all knobs.
  Space& knob(const std::string& name, std::vector<int> values);
  // An explicit point, enumerated after the grid (knobs it lacks are absent).
  Space& point(Config c);
  // A named predicate; configs for which it is false are pruned with the name as the reason.
  Space& constraint(const std::string& name, std::function<bool(const Config&)> ok);
  // What a config needs of the hardware, for pruning by HardwareLimits.
  Space& smem_bytes(std::function<long long(const Config&)> f);
  Space& threads(std::function<int(const Config&)> f);

  // Every point (grid then explicit points, duplicates removed), before any pruning.
  std::vector<Config> points() const;
  // A stable text of the knobs, points and constraint names (part of the tuning key).
  std::string description() const;
  const std::string& name() const { return name_; }

  struct Pruned {
    Config config{};
    std::string reason{};
  };
  struct Enumeration {
    std::vector<Config> kept{};
    std::vector<Pruned> pruned{};
    std::size_t total = 0;
  };
  Enumeration enumerate(const HardwareLimits& limits = {}) const;
  // Why `c` is not a config this space would try under `limits` ("lacks the knob threads of the
  // space 'gemm sm_90a f16'" -- a knob every point has --, "has a knob split_k the space ... does
  // not have", "is not a point of ...", "is pruned from ... by constraint ..."), or
  // nullopt when it is one: what a stored tuning result must pass before it is used.
  std::optional<std::string> why_not(const Config& c, const HardwareLimits& limits = {}) const;

 private:
  // The constraint or limit that prunes `c`; empty when none does.
  std::string prune_reason(const Config& c, const HardwareLimits& limits) const;

  std::string name_;
  std::vector<std::pair<std::string, std::vector<int>>> knobs_;
  std::vector<Config> points_;
  std::vector<std::pair<std::string, std::function<bool(const Config&)>>> constraints_;
  std::function<long long(const Config&)> smem_;
  std::function<int(const Config&)> threads_;
};

// ranked_out: the cost model ranked it below the fraction the search compiles (halving only).
enum class Status { ok, pruned, compile_failed, launch_failed, wrong, spills, not_timed, ranked_out };
const char* status_name(Status s);

struct Row {
  Config config{};
  Status status = Status::not_timed;
  std::string reason{};
  double ms = -1;   // the last (most repeated) median; -1 when not timed
  int repeats = 0;  // repeats behind `ms`
  int registers = -1;
  double compile_ms = 0;
  int spill_bytes = 0;  // spill stores and loads ptxas reported (compiled candidates)
  int smem_bytes = -1;  // shared memory per block, static and dynamic; -1 when not compiled
};

enum class Strategy { exhaustive, random, halving };
const char* strategy_name(Strategy s);
std::optional<Strategy> parse_strategy(const std::string& s);

// A timing: the median of `repeats` and the spread (interquartile range) of the samples.
struct Measurement {
  double median_ms = 0;
  double spread_ms = 0;
};

// ---- the search itself, independent of compiling (tested with a fake timer) -----------------
// measure(i, repeats) times candidate i. Returns the winner's index and fills `rows_ms`/
// `rows_repeats` (one per candidate; -1 / 0 when never timed) and the number of timings at
// full repeats.
struct SearchOptions {
  Strategy strategy = Strategy::halving;
  int repeats = 20;               // full repeats
  int first_repeats = 2;          // successive halving's first round
  int budget = 0;                 // random: how many candidates (0: a quarter of them)
  double final_fraction = 0.125;  // halving stops when this fraction (at least 2) is left
  double keep_within = 0.05;      // halving: also keep everyone this close to a round's leader
  std::uint64_t seed = 1;
};
struct SearchResult {
  int best = -1;
  std::vector<Measurement> measured{};  // per candidate, the last measurement
  std::vector<int> repeats{};           // per candidate, repeats behind it (0: never timed)
  int timed_full = 0;                   // candidates timed at full repeats
  int timings = 0;                      // measure() calls
};
SearchResult search(int candidates, const std::function<Measurement(int, int)>& measure,
                    const SearchOptions& options);
// The measure() calls search() will make for `candidates`, near-tie re-timings not counted
// (those add at most the finalists again): for a progress bar's total.
int planned_timings(int candidates, const SearchOptions& options);

// ---- the tuning cache ------------------------------------------------------------------------
struct KeyParts {
  std::string kernel{};
  std::vector<long long> shapes{};
  std::vector<std::string> dtypes{};
  std::string device_name{};
  int cc_major = 0, cc_minor = 0, sm_count = 0, driver_version = 0;
  int nvrtc_version = 0;
  std::string tessel_version = TESSEL_VERSION;
  std::string space{};  // Space::description()
};
// The device half of a key: which GPU, driver and NVRTC a result was measured with.
struct DeviceKey {
  std::string name{};
  int cc_major = 0, cc_minor = 0, sm_count = 0, driver_version = 0;
  int nvrtc_version = 0;
  std::string arch() const;  // arch_for_compute_capability(cc_major, cc_minor)
};
// This process's GPU and NVRTC; nullopt when there is no GPU. Never throws.
std::optional<DeviceKey> current_device_key();
KeyParts key_parts(std::string kernel, std::vector<long long> shapes, std::vector<std::string> dtypes,
                   const Space& space, const DeviceKey& device);
// key_parts for current_device_key(); throws RuntimeError without a GPU.
KeyParts key_parts_for_current_device(std::string kernel, std::vector<long long> shapes,
                                      std::vector<std::string> dtypes, const Space& space);
std::string tuning_key(const KeyParts& p);

struct StoredResult {
  Config config{};
  double ms = 0;
  std::string strategy{};
  std::string space{};
};
// cache_directory()/tune, or nullopt when the disk cache is off or its folder is not private
// (then after the warning CacheFolder.hpp describes).
std::optional<std::filesystem::path> tuning_cache_directory();
// <dir>/<key>.json, read as the kernel cache reads entries (a private folder, no links, regular
// files of at most 1 MiB). nullopt when missing or damaged (not JSON, another key, fields
// missing, a knob that is not an integer fitting an int: 1e20, 12.5, 2^31); a damaged file is
// removed with a note on stderr, so that the next tune rewrites it.
std::optional<StoredResult> read_tuning_entry(const std::filesystem::path& dir, const std::string& key);
// The same, used only when its config passes space.why_not(config, limits); an entry that does
// not (block_M=7, a config the space no longer holds, missing knobs) is removed with a note.
std::optional<StoredResult> read_valid_tuning_entry(const std::filesystem::path& dir, const std::string& key,
                                                    const Space& space, const HardwareLimits& limits = {});
// Atomic (unique temp file + rename, 0600 in a 0700 folder); false when the directory cannot be
// written or is not private.
bool write_tuning_entry(const std::filesystem::path& dir, const std::string& key, const StoredResult& r);

// ---- autotune ----------------------------------------------------------------------------------
using Factory = std::function<JitKernel(const Config&)>;

struct Callbacks {
  // One unchecked launch on the caller's inputs (what the default timer times).
  std::function<void(const JitKernel&)> run{};
  // Launches and checks against the caller's reference: true when right; else sets `reason`.
  // A throw counts as launch_failed. Absent: every candidate counts as right.
  std::function<bool(const JitKernel&, std::string& reason)> check{};
  // Times `repeats` runs; absent: event_timer(run) (CUDA events, L2 flushed between repeats).
  std::function<Measurement(const JitKernel&, int repeats)> time{};
};

// Where a tune is, for a progress bar: `done` of `total` steps of the phase finished (timing's
// total is planned_timings(), raised if near-ties are re-timed); `label` names the candidate.
struct ProgressEvent {
  enum class Phase { compiling, checking, timing };
  Phase phase = Phase::compiling;
  int done = 0, total = 0;
  std::string label{};
};

struct Options {
  SearchOptions search{};
  int warmup = 3;
  bool allow_spills = false;
  int compile_threads = 0;                           // 0: std::thread::hardware_concurrency()
  double compile_time_limit_s = 60;                  // per candidate (CompileOptions::time_limit_s)
  HardwareLimits limits{};                           // all 0: the current device's (none without a GPU)
  std::string cache_key{};                           // empty: no tuning cache
  std::optional<std::filesystem::path> cache_dir{};  // default tuning_cache_directory()
  // One plain line per event (every candidate compiled, checked or timed, and the summaries):
  // for logs.
  std::function<void(const std::string&)> progress{};
  // The same events as counts, for a bar; called from one thread at a time.
  std::function<void(const ProgressEvent&)> on_progress{};
  // Successive halving only: rank the candidates by this estimate (lower is better; e.g.
  // gemm_cost_model in CostModel.hpp) before compiling, and compile only the best `model_keep`
  // of them (at least `model_min_keep`); the rest are rows with status ranked_out. Absent or
  // model_keep >= 1: every candidate is compiled.
  std::function<double(const Config&)> cost_model{};
  double model_keep = 0.25;
  std::size_t model_min_keep = 16;
};

struct Result {
  bool found = false;
  bool from_cache = false;
  Config config{};
  JitKernel kernel{};
  double ms = -1;
  std::vector<Row> table{};  // every enumerated config (pruned ones included)
  int compiled = 0;
  double compile_seconds = 0;
  int timed_full = 0;
};

// Compiles `configs` in parallel. Failures become rows with status compile_failed (or spills,
// unless allowed); kernels[i] is defined only when ok. A candidate still compiling after
// `time_limit_s` becomes compile_failed ("compile time limit ...") at once and a fresh worker
// takes its place; NVRTC cannot be interrupted, so its compile runs on, is discarded, and
// compile_all returns when it ends (no thread outlives the call).
struct CompileOptions {
  int threads = 0;  // 0: std::thread::hardware_concurrency()
  bool allow_spills = false;
  double time_limit_s = 0;  // per candidate; 0: none
  // Called as each candidate finishes (row i final), one call at a time, from the worker threads.
  std::function<void(std::size_t i, const Row& row)> on_compiled{};
};
struct CompileReport {
  std::vector<Row> rows{};
  std::vector<JitKernel> kernels{};
  double seconds = 0;
};
CompileReport compile_all(const Factory& factory, const std::vector<Config>& configs,
                          const CompileOptions& options = {});

Result autotune(const Factory& factory, const Space& space, const Callbacks& callbacks,
                const Options& options = {});

// The same, with the callbacks made only when they are needed: `prepare` runs once, after the
// tuning cache missed (inputs, references and library handles cost nothing on a cache hit).
Result autotune(const Factory& factory, const Space& space, const std::function<Callbacks()>& prepare,
                const Options& options = {});

// The default timer: `warmup` launches, then `repeats` launches each timed with CUDA events on the
// default stream, a 256 MiB memset before each to flush L2. Needs a GPU.
std::function<Measurement(const JitKernel&, int)> event_timer(std::function<void(const JitKernel&)> run,
                                                              int warmup = 3);

// The median and interquartile range of samples.
Measurement summarize(std::vector<double> samples_ms);

// ---- GEMM -------------------------------------------------------------------------------------
// block_M/N {64,128,256} x block_K {32,64} x stages {2..5} x threads {128,256} x panel {0,4,8,16}
// (0: no swizzle); at most 256 f32 accumulators per thread; smem and threads for pruning. On
// sm_90a the tiles the wgmma path takes (block_K 64, 128 or 256 threads) are among them, and four
// points of 128x256x64, 3 stages, 256 threads in 2-CTA multicast clusters (cluster_x = 2: the A
// tile shared, cluster_y = 2: the B tile; panels 4 and 8).
Space gemm_space(const std::string& arch, DType dtype = DType::f16);
// The same for one M x N x K kernel shape, with kernels::Matmul's split-K where it may apply
// (kernels::split_k_candidates: sm_90, f16 or bf16, M <= 64, 16-byte rows, K of 8 tiles of 64 or
// more): a point per share count n, the partial GEMM's tiles (kernels::split_k_config), panel 0
// and split_k = n. The grid's points have no split_k knob: they are one kernel (split 1). Skinny
// 16-bit shapes with a row off 16 bytes on sm_90 (M <= 64, N or K not a multiple of 8) add the
// small realigned-ring tiles (32x64x64 s4, 16x32x128 s8, 16x64x64 s4; 128 threads). Where
// neither applies this is gemm_space(arch, dtype), description and tuning key included.
Space gemm_space(const std::string& arch, DType dtype, long long M, long long N, long long K);
// Compiles a config of gemm_space (knobs absent keep MatmulConfig defaults): make_matmul, or for
// split_k = n >= 2 the partial GEMM (kernels::matmul_split_k_program; parameters A, B, W [n, M, N]
// f32), after compiling its reduction (gemm_split_k_reduce), so that the compile phase compiles
// both and a reduction that fails fails the candidate.
Factory gemm_factory(int M, int N, int K, DType dtype, JitOptions options = {});
// The tiles of a config (the partial GEMM's for a split), with its cluster (cluster_x / cluster_y,
// 1 when absent).
kernels::MatmulConfig gemm_config(const Config& c, DType dtype);
// The shares of K: a config's split_k knob, 1 when it has none; and of a kernel gemm_factory
// compiled, W's leading dimension for a partial GEMM (three parameters, the last of rank 3), 1
// for the plain GEMM. A split candidate runs as kernels::Matmul runs it: the kernel on A, B and
// an f32 workspace [n, M, N], then gemm_split_k_reduce's kernel on the workspace and C.
int gemm_split_k(const Config& c);
int gemm_split_k(const JitKernel& kernel);
// kernels::Matmul's reduction of a split into C (kernels::default_split_k_reduce's tiles;
// parameters W, C). A second call with the same arguments is the JIT's in-process cache hit.
JitKernel gemm_split_k_reduce(int M, int N, int splits, DType dtype, JitOptions options = {});
// The key of the one-kernel space: kernel "matmul", shapes {M, N, K}, the dtype's name,
// gemm_space(device.arch(), dtype) (tessel.tune in Python stores under it, and `tessel tune gemm`
// did before it searched split-K).
KeyParts gemm_key_parts(long long M, long long N, long long K, DType dtype, const DeviceKey& device);
// The same over gemm_space(device.arch(), dtype, M, N, K): what `tessel tune gemm` stores its
// winner under. The two keys are one where the shape has no split candidates.
KeyParts gemm_split_k_key_parts(long long M, long long N, long long K, DType dtype, const DeviceKey& device);

// ---- softmax ----------------------------------------------------------------------------------
// Knobs: variant (0 rows, 1 row, 2 online: kernels::SoftmaxVariant), threads, rows_per_block
// (1 unless rows), block_N. The points, for one row length N: rows with 128-1024 threads, 2-1024
// rows per block and 1-32 lanes' worth of vectors per row (block_N the row padded to them); row
// (staged in shared memory) in one chunk with 128-1024 threads where the padding stays under
// half, and row and online in chunks of 1-4 vectors per thread shorter than the row; and
// default_softmax_config(M, N, dtype). Constraints: the rows tile holds the row; at most
// kMaxSoftmaxValuesPerThread f32 values per thread and kMaxSoftmaxVectorsPerBlock 16-byte vectors
// per block (registers); the compiler lays the tile out (checked by lowering the program for
// `arch`, no NVRTC); shared memory as the compiler plans it, against the GPU's limit. A few
// candidates may still spill and are dropped after compiling.
inline constexpr int kMaxSoftmaxValuesPerThread = 64;
inline constexpr int kMaxSoftmaxVectorsPerBlock = 4096;
Space softmax_space(const std::string& arch, long long M, long long N, DType dtype);
Factory softmax_factory(long long M, long long N, DType dtype, JitOptions options = {});
kernels::SoftmaxConfig softmax_config(const Config& c);
Config softmax_point(const kernels::SoftmaxConfig& c);
// Kernel "softmax", shapes {M, N}, the dtype's name, softmax_space(device.arch(), M, N, dtype).
KeyParts softmax_key_parts(long long M, long long N, DType dtype, const DeviceKey& device);

// ---- attention --------------------------------------------------------------------------------
// Knobs: block_M {64, 128, 192} with threads {128, 256, 384} (a consumer warpgroup per 64 query rows, so
// threads = 2 * block_M); block_N, the multiples of 32 from 64 to 256 (the N tiles wgmma takes,
// ops/Gemm.cpp's wgmma_choice; 32 too off sm_90a, where mma.sync takes any multiple of 8);
// num_stages {1, 2, 3}; schedule, kernels::AttentionConfig::Schedule's index (0 ring+pingpong,
// 1 ring, 2 cp.async; off sm_90a only cp.async, the one schedule there); persistent {0, 1}
// (ring schedules); kv_interleave {0, 1} for GQA (H_kv < H; {0} otherwise); lazy {0, 1}
// (AttentionConfig::lazy_rescale with its skips; ring schedules only); and
// default_attention_config's choice. Constraints, cheap ones first: threads = 2 * block_M;
// ring+pingpong only with two consumer warpgroups (with one it is the ring); block_N no longer
// than the keys need (Sk rounded up to 64); the compiler accepts the program
// (lowered for `arch`, no NVRTC: its layouts, its pipeline and its register budget) and builds
// the schedule asked for (else the candidate is the cp.async kernel again); shared memory as the
// compiler plans it and the threads it launches, against the GPU's limits. A few candidates
// still spill (D = 256) and are dropped after compiling. `options`: the JitOptions the factory
// compiles with (with the environment's TESSEL_ENABLE / TESSEL_DISABLE, as jit() reads them), so
// that the lowering the constraints and the shared-memory count ask is the kernel's own.
Space attention_space(const std::string& arch, const kernels::AttentionShape& shape, DType dtype,
                      bool causal, const JitOptions& options = {});
kernels::AttentionConfig attention_config(const Config& c);
Config attention_point(const kernels::AttentionConfig& c);
// Compiles make_flash_attention with the config (options.jit.arch and switches kept).
Factory attention_factory(const kernels::AttentionShape& shape, DType dtype, bool causal,
                          JitOptions options = {});
// Inputs Q, K and V filled at random (from `seed`), the float64 reference on sampled rows
// (kernels::choose_attention_samples), outputs O and LSE. check: O and LSE poisoned with NaN,
// one launch, the sampled rows against the reference within attention_tolerance; run: one
// launch (timed by event_timer, the L2 flushed). Needs a GPU.
Callbacks attention_callbacks(const kernels::AttentionShape& shape, DType dtype, bool causal,
                              std::uint64_t seed = 1);
// The relative errors a right kernel stays within against float64 (tests/gpu/kernels/
// FlashAttentionGpuTest.cpp): O 5e-3 (f16) or 2e-2 (bf16; P is rounded to 16 bits before P V),
// LSE 1e-3.
struct AttentionTolerance {
  double O = 0, LSE = 0;
};
AttentionTolerance attention_tolerance(DType dtype);
// How a tensor's strides over [B, S, H, D] are laid out, for the tuning key: 0 row-major (BSHD,
// also no strides given), 1 BHSD, 2 anything else.
int attention_strides_class(const std::vector<std::int64_t>& strides, std::int64_t B, std::int64_t S,
                            std::int64_t H, std::int64_t D);
// Kernel "attention", shapes {B, H, H_kv, Sq, Sk, D, causal, Q's, K's and V's strides class},
// the dtype's name, attention_space(device.arch(), shape, dtype, causal).
KeyParts attention_key_parts(const kernels::AttentionShape& shape, DType dtype, bool causal,
                             const DeviceKey& device);

// ---- tuned configs for the library's default entry points ------------------------------------
// make_matmul(M, N, K, dtype), make_softmax(M, N, dtype) and make_flash_attention (without a
// config) ask these (through kernels::choose_matmul_config / choose_softmax_config /
// choose_attention_config) before falling back to their built-in defaults; kernels::Matmul's
// automatic split-K asks the GEMM's (kernels::plan_matmul_for_current_device).
//
// The config `tessel tune` stored in `dir` for this problem on `device`, or nullopt. Reads only
// that one entry, and uses it only when it is a point of the space that passes the space's
// constraints and `limits` (read_valid_tuning_entry: a damaged or invalid one is removed).
//
// The GEMM's: the entry under gemm_split_k_key_parts, validated against the shape's space (a
// split_k that is not one of its points -- 0, 1, more shares than the space has, a split where
// the arch or dtype has none -- is removed with the note); else, where the shape has split
// candidates, the one-kernel entry under gemm_key_parts, validated against gemm_space(arch,
// dtype). An entry without split_k is one kernel (split 1): it may have been tuned before the
// knob existed, or by tessel.tune in Python, which does not search it.
struct TunedMatmul {
  kernels::MatmulConfig config{};  // a split's partial GEMM tiles
  int split_k = 1;                 // 1: one kernel; n >= 2: kernels::Matmul's split-K, n shares
  bool split_searched = false;     // the tune timed split candidates beside the one-kernel configs
};
std::optional<TunedMatmul> find_tuned_matmul_config(long long M, long long N, long long K, DType dtype,
                                                    const DeviceKey& device, const std::filesystem::path& dir,
                                                    const HardwareLimits& limits = {});
std::optional<kernels::SoftmaxConfig> find_tuned_softmax_config(long long M, long long N, DType dtype,
                                                                const DeviceKey& device,
                                                                const std::filesystem::path& dir,
                                                                const HardwareLimits& limits = {});
std::optional<kernels::AttentionConfig> find_tuned_attention_config(const kernels::AttentionShape& shape,
                                                                    DType dtype, bool causal,
                                                                    const DeviceKey& device,
                                                                    const std::filesystem::path& dir,
                                                                    const HardwareLimits& limits = {});
// The same for this process's GPU and tuning cache folder. nullopt without a GPU, without a
// cache folder (TESSEL_CACHE=0), or on any error: never throws. Costs a space description, a
// SHA-256 and one file lookup (microseconds; far below a jit()).
std::optional<TunedMatmul> tuned_matmul_config(long long M, long long N, long long K, DType dtype) noexcept;
std::optional<kernels::SoftmaxConfig> tuned_softmax_config(long long M, long long N, DType dtype) noexcept;
std::optional<kernels::AttentionConfig> tuned_attention_config(const kernels::AttentionShape& shape,
                                                               DType dtype, bool causal) noexcept;

}  // namespace tessel::autotune
