// FlashAttention's tuning space (kernels/attention/FlashAttention.hpp): the tiles, ring depths
// and schedules the compiler accepts for one shape, and the check a candidate must pass: O and
// LSE against float64 on sampled rows.
#include <climits>
#include <cmath>
#include <iomanip>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>

#include "Lower.hpp"
#include "tessel/kernels/attention/AttentionReference.hpp"
#include "tessel/autotune/Autotune.hpp"
#include "tessel/runtime/Driver.hpp"

namespace tessel::autotune {

namespace {

using Schedule = kernels::AttentionConfig::Schedule;

int sm_number(const std::string& arch) {
  int v = 0;
  for (char ch : arch)
    if (ch >= '0' && ch <= '9') v = v * 10 + (ch - '0');
  return v;
}

// What the compiler makes of a config's program (lowered for the arch, no NVRTC).
struct Lowered {
  long long smem_bytes = 0;
  int launch_threads = 0;  // consumers and, with a ring, the producer warpgroup
  bool ring = false;       // a TMA + mbarrier ring that a producer fills (plan_pipelines)
  bool roles = false;      // the producer has warps of its own (specialize_warps)
  bool pingpong = false;   // the consumer warpgroups take turns (schedule_warpgroups)
  bool persistent = false;  // a block loops over tiles (persist_tiles)
};

// Lowers each config's program at most once (the constraints and the shared-memory count ask for
// the same lowering; a ring's lowering, pipeline model check included, takes ~10 ms); the space
// may be asked from several threads.
class Lowerings {
 public:
  // The jit's switches are read here, once: a bad TESSEL_ENABLE / TESSEL_DISABLE name is the
  // space's error (naming the legal ones), not every candidate's rejection.
  Lowerings(std::string arch, kernels::AttentionShape shape, DType dtype, bool causal,
            const JitOptions& options)
      : arch_(std::move(arch)), shape_(std::move(shape)), dtype_(dtype), causal_(causal), options_(options) {
    options_.arch = arch_;
    (void)jit_switches(options_);
  }

  // nullopt when the compiler rejects the program.
  // A lazy config and its exact twin share one lowering: lazy rescaling changes only the
  // softmax's arithmetic (a compare and select of the running max) and adds skip_unit_scales'
  // branch, no buffer, role, ring or launch dimension -- nothing a constraint or the shared-memory
  // count reads -- and lowering every candidate twice doubled the space's cost (under the
  // sanitizers, minutes). NVRTC still compiles the lazy kernel itself before it is timed.
  std::optional<Lowered> get(const Config& config) {
    Config c = config;
    c.erase("lazy");
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (auto it = memo_.find(c); it != memo_.end()) return it->second;
    }
    std::optional<Lowered> result;
    try {
      const kernels::AttentionConfig a = attention_config(c);
      // The switches make_flash_attention compiles with: the options, the environment's
      // TESSEL_ENABLE / TESSEL_DISABLE (under persistent_rings the kernel keeps a staging tile
      // for O, which its shared memory must count), the config's on top.
      const passes::PassContext::Switches switches =
          jit_switches(kernels::attention_jit_options(shape_, a, options_));
      const auto program_ptr = kernels::attention_program(shape_, dtype_, causal_, 0.0f, a).ir_ptr();
      const auto& program = *program_ptr;
      const int cap = default_smem_cap(arch_);
      auto lower_under = [&](int smem_cap) {
        return lower(program, passes::Target{arch_, sm_number(arch_), smem_cap}, switches);
      };
      // Under the target's own cap first: what the compiler really builds (plan_tma_stores, say,
      // adds its staging tile only where it fits). A program over the cap is lowered again with
      // the cap lifted, so that shared memory is pruned by the GPU's limit with its own reason; one
      // that fails for anything else is rejected.
      std::optional<LoweredFunc> l;
      try {
        l = lower_under(cap);
      } catch (const std::exception&) {
        LoweredFunc over = lower_under(INT_MAX);
        if (over.ctx.smem_bytes <= cap) throw;
        l = std::move(over);
      }
      result = Lowered{l->ctx.smem_bytes, l->ctx.launch_threads ? l->ctx.launch_threads : l->ctx.threads,
                       !l->ctx.mbarriers.empty(), l->ctx.launch_threads > l->ctx.threads, l->ctx.pingpong,
                       l->ctx.tile_loop.applied};
    } catch (const std::exception&) {
      result = std::nullopt;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    memo_.emplace(c, result);
    return result;
  }

 private:
  std::string arch_;
  kernels::AttentionShape shape_;
  DType dtype_;
  bool causal_;
  JitOptions options_;
  std::mutex mutex_;
  std::map<Config, std::optional<Lowered>> memo_;
};

}  // namespace

Config attention_point(const kernels::AttentionConfig& c) {
  return {{"block_M", c.block_M},
          {"block_N", c.block_N},
          {"threads", c.threads},
          {"num_stages", c.num_stages},
          {"schedule", static_cast<int>(c.schedule)},
          {"persistent", c.persistent ? 1 : 0},
          {"kv_interleave", c.kv_interleave ? 1 : 0},
          {"lazy", c.lazy_rescale ? 1 : 0}};
}

kernels::AttentionConfig attention_config(const Config& c) {
  kernels::AttentionConfig a;
  a.block_M = get(c, "block_M", a.block_M);
  a.block_N = get(c, "block_N", a.block_N);
  a.threads = get(c, "threads", a.threads);
  a.num_stages = get(c, "num_stages", a.num_stages);
  const int schedule = get(c, "schedule", static_cast<int>(a.schedule));
  a.schedule = schedule == 0 ? Schedule::ring_pingpong : schedule == 1 ? Schedule::ring : Schedule::cp_async;
  a.persistent = get(c, "persistent", 0) != 0;
  a.kv_interleave = get(c, "kv_interleave", 0) != 0;
  a.lazy_rescale = get(c, "lazy", 0) != 0;
  return a;
}

Space attention_space(const std::string& arch, const kernels::AttentionShape& shape, DType dtype,
                      bool causal, const JitOptions& options) {
  Space s("attention " + arch + " D" + std::to_string(shape.dim) + (causal ? " causal " : " ") +
          std::string(dtype_name(dtype)));
  const bool rings = kernels::has_ring_schedules(arch);
  std::vector<int> block_N = {64, 96, 128, 160, 192, 224, 256};
  if (!rings) block_N.insert(block_N.begin(), 32);
  // 192 query rows: three consumer warpgroups (FlashAttention 3's tile at D = 64).
  s.knob("block_M", {64, 128, 192})
      .knob("threads", {128, 256, 384})
      .knob("block_N", block_N)
      .knob("num_stages", {1, 2, 3})
      .knob("schedule",
            rings ? std::vector<int>{static_cast<int>(Schedule::ring_pingpong),
                                     static_cast<int>(Schedule::ring), static_cast<int>(Schedule::cp_async)}
                  : std::vector<int>{static_cast<int>(Schedule::cp_async)})
      // One block per SM over the tiles (the ring schedules only).
      .knob("persistent", rings ? std::vector<int>{0, 1} : std::vector<int>{0})
      // GQA only: the query heads walked K/V head by K/V head across blockIdx.y (with one query
      // head a K/V head the two orders are the same kernel).
      .knob("kv_interleave", shape.kv_heads < shape.heads ? std::vector<int>{0, 1} : std::vector<int>{0})
      // Lazy rescaling with its skips of O's rescale (AttentionConfig::lazy_rescale): ahead on one
      // kernel, behind on another (sessions 31-32), so searched -- on the rings only, where it was
      // measured (the cp.async kernel at D = 64 runs two blocks an SM, where skip_unit_scales
      // declines, and lazy alone changes nothing measurable).
      .knob("lazy", rings ? std::vector<int>{0, 1} : std::vector<int>{0});
  // The dispatcher's own choice, whatever the grid above holds.
  s.point(attention_point(kernels::default_attention_config(shape, dtype, causal, arch)));

  s.constraint("persistent only on the ring schedules",
               [](const Config& c) {
                 return get(c, "persistent", 0) == 0 || get(c, "schedule") != static_cast<int>(Schedule::cp_async);
               });
  s.constraint("lazy rescaling only on the ring schedules", [](const Config& c) {
    return get(c, "lazy", 0) == 0 || get(c, "schedule") != static_cast<int>(Schedule::cp_async);
  });
  s.constraint("a consumer warpgroup per 64 query rows (threads = 2 * block_M)",
               [](const Config& c) { return get(c, "threads") == 2 * get(c, "block_M"); });
  s.constraint("ring+pingpong needs two consumer warpgroups (256 threads; with one it is the ring)",
               [](const Config& c) {
                 return get(c, "schedule") != static_cast<int>(Schedule::ring_pingpong) ||
                        get(c, "threads") == 256;
               });
  // Three consumer warpgroups launch 384 threads (512 with a producer): each has at most 168
  // registers (128), where 256 keys a block hold S's 128 accumulators a thread alone -- ptxas
  // spills them (cp.async) or cannot place the ring's wgmma at all (specialize_warps declines).
  s.constraint("block_N at most 192 with 192 query rows (three warpgroups' registers)",
               [](const Config& c) { return get(c, "block_M") < 192 || get(c, "block_N") <= 192; });
  // Query rows past the sequence's end are wasted work too: 192-row tiles only where Sq is
  // longer than 128 (64 and 128 stay, the dispatcher's choices among them).
  const std::int64_t rows = std::max<std::int64_t>(128, (shape.seqlen_q + 63) / 64 * 64);
  s.constraint("block_M at most max(128, Sq rounded up to 64) (" + std::to_string(rows) + ")",
               [rows](const Config& c) { return get(c, "block_M") <= rows; });
  // A block of keys past the sequence's end is masked work: no more than the keys rounded up to
  // 64 (the smallest block on sm_90a), so that a short Sk does not try every block_N.
  const std::int64_t keys = (shape.seqlen_k + 63) / 64 * 64;
  s.constraint("block_N at most Sk rounded up to 64 (" + std::to_string(keys) + ")",
               [keys](const Config& c) { return get(c, "block_N") <= keys; });
  // Registers: the compiler's budget (check_register_budget) is part of lowering. ptxas still
  // spills a few candidates the budget lets through (measured for sm_90a: D = 256, 64-row
  // cp.async tiles with block_N >= 160); they are dropped after compiling.
  auto lowerings = std::make_shared<Lowerings>(arch, shape, dtype, causal, options);
  s.constraint("the compiler accepts the program (layouts, pipeline, register budget)",
               [lowerings](const Config& c) { return lowerings->get(c).has_value(); });
  // A ring the compiler cannot build (an operand wgmma cannot read, say) leaves the cp.async
  // kernel: the same candidate twice.
  // So does a ring whose producer stays in the consumers' threads (specialize_warps declines a
  // gemm too wide for the launch's register cap: 192 x 256 tiles on 512 threads).
  // A persistent config whose grid the compiler leaves as it is (fewer tiles than SMs) is the
  // same kernel as the plain one, and a plain one under TESSEL_ENABLE=persistent_rings the same
  // as the persistent one.
  s.constraint("the compiler builds the schedule asked for (a TMA ring with a producer of its own, with ping-pong "
               "for ring+pingpong, persistent or not as asked)",
               [lowerings](const Config& c) {
                 const auto l = lowerings->get(c);
                 const int schedule = get(c, "schedule");
                 return l && (schedule == static_cast<int>(Schedule::cp_async) ||
                              (l->ring && l->roles &&
                               l->pingpong == (schedule == static_cast<int>(Schedule::ring_pingpong)) &&
                               l->persistent == (get(c, "persistent", 0) != 0)));
               });
  s.smem_bytes([lowerings](const Config& c) {
    const auto l = lowerings->get(c);
    return l ? l->smem_bytes : 0;
  });
  s.threads([lowerings](const Config& c) {
    const auto l = lowerings->get(c);
    return l ? l->launch_threads : get(c, "threads");
  });
  return s;
}

Factory attention_factory(const kernels::AttentionShape& shape, DType dtype, bool causal,
                          JitOptions options) {
  return [=](const Config& c) {
    kernels::AttentionOptions o;
    o.causal = causal;
    o.config = attention_config(c);
    o.jit = options;
    return kernels::make_flash_attention(shape, dtype, o);
  };
}

AttentionTolerance attention_tolerance(DType dtype) {
  return {dtype == DType::f16 ? 5e-3 : 2e-2, 1e-3};
}

int attention_strides_class(const std::vector<std::int64_t>& strides, std::int64_t B, std::int64_t S,
                            std::int64_t H, std::int64_t D) {
  if (strides.empty() || strides == std::vector<std::int64_t>{S * H * D, H * D, D, 1}) return 0;
  if (strides == kernels::bhsd_strides(B, S, H, D)) return 1;
  return 2;
}

Callbacks attention_callbacks(const kernels::AttentionShape& shape, DType dtype, bool causal,
                              std::uint64_t seed) {
  const kernels::AttentionShape& s = shape;
  struct State {
    std::vector<Tensor> storage;  // what strided views of Q, K and V borrow
    Tensor q, k, v, o, lse;
    std::vector<kernels::AttentionSample> samples;
    kernels::AttentionRows reference;
  };
  auto st = std::make_shared<State>();
  // One of Q, K, V: [B, S, H, D] with the shape's strides (row-major when none are given), in an
  // allocation that spans them.
  auto input = [&](std::int64_t S, std::int64_t H, const std::vector<std::int64_t>& strides,
                   std::uint64_t sd) {
    Tensor t;
    if (strides.empty()) {
      t = Tensor::empty({s.batch, S, H, s.dim}, dtype);
    } else {
      const std::int64_t sizes[4] = {s.batch, S, H, s.dim};
      std::int64_t extent = 1;
      for (std::size_t d = 0; d < 4; ++d) extent += (sizes[d] - 1) * strides[d];
      st->storage.push_back(Tensor::empty({extent}, dtype));
      t = Tensor::view_of(st->storage.back().device_ptr(), {s.batch, S, H, s.dim}, dtype, strides);
    }
    t.fill_random(sd, -2, 2);
    return t;
  };
  st->q = input(s.seqlen_q, s.heads, s.q_strides, seed);
  st->k = input(s.seqlen_k, s.kv_heads, s.k_strides, seed + 1);
  st->v = input(s.seqlen_k, s.kv_heads, s.v_strides, seed + 2);
  st->o = Tensor::empty({s.batch, s.seqlen_q, s.heads, s.dim}, dtype);
  st->lse = Tensor::empty({s.batch, s.heads, s.seqlen_q}, DType::f32);
  st->samples = kernels::choose_attention_samples(s);
  st->reference = kernels::attention_reference(st->q.to_host_f64(), st->k.to_host_f64(), st->v.to_host_f64(),
                                               s, causal, 0.0, st->samples);
  const AttentionTolerance tol = attention_tolerance(dtype);

  Callbacks cb;
  cb.run = [st](const JitKernel& k) { k.launch({st->q, st->k, st->v, st->o, st->lse}); };
  cb.check = [st, tol](const JitKernel& k, std::string& why) {
    st->o.fill(std::nan(""));  // a row the kernel does not write cannot pass
    st->lse.fill(std::nan(""));
    k.launch({st->q, st->k, st->v, st->o, st->lse});
    check_cu(driver().cuCtxSynchronize(), "cuCtxSynchronize");
    // The sampled rows only: O can be gigabytes.
    const std::vector<double> lse = st->lse.to_host_f64();
    const std::int64_t H = st->o.size(2), Sq = st->o.size(1);
    kernels::AttentionRows got;
    for (const auto& x : st->samples) {
      const std::vector<double> row = st->o.slice(0, x.batch, x.batch + 1)
                                          .slice(1, x.row, x.row + 1)
                                          .slice(2, x.head, x.head + 1)
                                          .to_host_f64();
      got.O.insert(got.O.end(), row.begin(), row.end());
      got.LSE.push_back(lse[static_cast<std::size_t>((x.batch * H + x.head) * Sq + x.row)]);
    }
    const kernels::AttentionError e = kernels::attention_error(st->reference, got);
    if (e.O <= tol.O && e.LSE <= tol.LSE) return true;  // false for NaN
    std::ostringstream os;
    os << std::setprecision(3) << "relative error against float64 on " << st->samples.size()
       << " sampled rows: O " << e.O << ", LSE " << e.LSE << " (tolerance O " << tol.O << ", LSE " << tol.LSE
       << ")";
    why = os.str();
    return false;
  };
  return cb;  // timed by event_timer: CUDA events, L2 flushed before each repeat
}

}  // namespace tessel::autotune
