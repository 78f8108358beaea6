// verify_hopper_pipeline
//   Does:     checks the mbarrier protocol of the kernel select_hopper_gemm chose, before any
//             code is generated: a model of device/tessel/hopper_gemm.cuh's agents (per CTA one
//             TMA producer; 4 warps per consumer warpgroup; under split-K both CTAs of the
//             cluster and the hand-off of the partial sums; with the TMA-store epilogue each
//             warpgroup's staging tile, its named barrier and the stores' asynchronous reads)
//             runs on a model of the barriers, round-robin and in many random interleavings,
//             for the plan's stages, warpgroups, split and epilogue and for short and long K
//             loops over one and several tiles per CTA. It reports (a) a wait that nothing will
//             ever complete (deadlock), (b) a parity wait that passes for a phase other than
//             the one it means (wrong parity, or two or more phases behind: parity alone cannot
//             tell them apart), (c) a ring stage, the reduction buffer or a staging tile written
//             while a reader of its previous contents has not released it, or read before it
//             was filled.
//   Requires: select_hopper_gemm (ctx.hopper).
//   Ensures:  the IR is unchanged; a violation is an InternalError (the template and this model
//             are the compiler's, not the author's).
//
// The model mirrors the loops of HopperGemm::produce / consume / reduce_split_k /
// store_tile_tma; a change to their barrier use must be made here too
// (tests/cpu/compiler/PipelineVerifierTest.cpp plants the classic mistakes and expects each to
// be caught).
#include <algorithm>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <tuple>

#include "passes/Passes.hpp"
#include "passes/PipelineModel.hpp"
#include "tessel/Error.hpp"

namespace tessel::passes {

namespace {

struct Barrier {
  std::string name;
  int count = 0;       // arrivals per phase
  int arrived = 0;     // in the current phase
  long completed = 0;  // phases completed so far
};

// One ring stage or the split-K reduction buffer: which fill it holds and who still reads it.
struct Buffer {
  std::string name;
  long filled = -1;    // the fill (ring position or tile) it holds; -1: none yet
  int readers = 0;     // readers of `filled` that have not released it
  int reads_done = 0;  // readers of `filled` that released it
};

enum class Op { Wait, Arrive, Write, Read, Release };

struct Step {
  Op op;
  int object = 0;       // barrier (Wait/Arrive) or buffer (Write/Read/Release) index
  unsigned parity = 0;  // Wait
  long phase = 0;       // Wait: the phase index meant (-1: the one before the first)
  long fill = 0;        // Write/Read/Release: which fill
};

struct Agent {
  std::string name;
  std::vector<Step> steps;
  std::size_t pc = 0;
};

class Machine {
 public:
  std::vector<Barrier> barriers;
  std::vector<Buffer> buffers;
  std::vector<Agent> agents;
  std::vector<int> expected_readers;  // per buffer: readers of each fill

  int barrier(std::string name, int count) {
    barriers.push_back({std::move(name), count, 0, 0});
    return static_cast<int>(barriers.size()) - 1;
  }
  int buffer(std::string name, int readers) {
    buffers.push_back({std::move(name)});
    expected_readers.push_back(readers);
    return static_cast<int>(buffers.size()) - 1;
  }

  // Tries the agent's next step; "" and progress=false when it must wait, a violation message
  // when it breaks the protocol.
  std::string step(Agent& a, bool& progress) {
    progress = false;
    const Step& s = a.steps[a.pc];
    std::ostringstream why;
    switch (s.op) {
      case Op::Wait: {
        Barrier& b = barriers[s.object];
        if ((static_cast<unsigned>(b.completed) & 1u) == s.parity) return "";  // that phase is pending
        const long seen = b.completed - 1;  // the phase a parity wait observes as complete
        if (seen != s.phase) {
          why << a.name << " waits for phase " << s.phase << " of " << b.name << " (parity " << s.parity
              << ") but passes on phase " << seen
              << (seen < s.phase ? ": before its phase completed (wrong parity)"
                                 : ": a parity wait two or more phases behind");
          return why.str();
        }
        break;
      }
      case Op::Arrive: {
        Barrier& b = barriers[s.object];
        if (++b.arrived == b.count) {
          b.arrived = 0;
          ++b.completed;
        }
        break;
      }
      case Op::Write: {
        Buffer& f = buffers[s.object];
        if (f.filled >= 0 && f.reads_done < expected_readers[s.object]) {
          why << a.name << " overwrites " << f.name << " with fill " << s.fill << " while "
              << expected_readers[s.object] - f.reads_done << " reader(s) of fill " << f.filled
              << " have not released it";
          return why.str();
        }
        f.filled = s.fill;
        f.readers = f.reads_done = 0;
        break;
      }
      case Op::Read: {
        Buffer& f = buffers[s.object];
        if (f.filled != s.fill) {
          why << a.name << " reads fill " << s.fill << " of " << f.name << " but it holds fill " << f.filled;
          return why.str();
        }
        ++f.readers;
        break;
      }
      case Op::Release: {
        Buffer& f = buffers[s.object];
        if (f.filled != s.fill) {
          why << a.name << " releases fill " << s.fill << " of " << f.name << " but it holds fill "
              << f.filled;
          return why.str();
        }
        ++f.reads_done;
        break;
      }
    }
    ++a.pc;
    progress = true;
    return "";
  }

  // Runs every agent to its end; the schedule is round-robin (seed 0) or random: each agent gets
  // its own speed (steps per turn) and its own chance to sit a turn out, so that some run far
  // ahead of others, as warps on different SMs or behind a long wgmma do.
  std::string run(unsigned seed) {
    std::mt19937 rng(seed);
    std::vector<int> speed(agents.size(), 1);
    std::vector<double> idle(agents.size(), 0.0);
    if (seed != 0)
      for (std::size_t i = 0; i < agents.size(); ++i) {
        speed[i] = 1 + static_cast<int>(rng() % 8);
        idle[i] = (rng() % 10) / 10.0;
      }
    std::uniform_real_distribution<double> coin(0.0, 1.0);
    for (bool everyone = false;;) {
      std::vector<std::size_t> live;
      for (std::size_t i = 0; i < agents.size(); ++i)
        if (agents[i].pc < agents[i].steps.size()) live.push_back(i);
      if (live.empty()) return "";
      if (seed != 0) std::shuffle(live.begin(), live.end(), rng);
      bool any = false;
      for (std::size_t i : live) {
        if (!everyone && coin(rng) < idle[i]) continue;
        for (int n = 0; n < speed[i] && agents[i].pc < agents[i].steps.size(); ++n) {
          bool progress = false;
          std::string v = step(agents[i], progress);
          if (!v.empty()) return v;
          if (!progress) break;
          any = true;
        }
      }
      // A turn without progress is a deadlock only when nobody sat it out.
      if (!any && !everyone) {
        everyone = true;
        continue;
      }
      everyone = false;
      if (!any) {
        std::ostringstream why;
        why << "deadlock:";
        for (std::size_t i : live) {
          const Step& s = agents[i].steps[agents[i].pc];
          why << " " << agents[i].name << " waits for phase " << s.phase << " of " << barriers[s.object].name
              << ";";
        }
        return why.str();
      }
    }
  }
};

void build(Machine& m, const PipelineModel& p) {
  const int S = p.stages, warps = 4 * p.consumer_warpgroups, ctas = p.split_k;
  const Bug bug = p.bug;
  int red_full = -1, red_empty = -1;
  std::vector<int> red_slots;
  if (ctas > 1) {
    red_full = m.barrier("red_full (rank 0)", bug == Bug::ReductionCountOneShort ? warps - 1 : warps);
    red_empty = m.barrier("red_empty (rank 1)", warps);
    for (int w = 0; w < warps; ++w)  // each warp's slots: rank 1's warp w writes, rank 0's reads
      red_slots.push_back(m.buffer("warp " + std::to_string(w) + "'s slots of the reduction buffer", 1));
  }
  // TMA-store epilogue: per CTA and consumer warpgroup, its staging tile (one part per warp, read
  // by the TMA store that warp 0 issues) and its named barrier (bar.sync 3 + c over its 4 warps).
  auto make_staging = [&](const std::string& cta, std::vector<int>& staging, std::vector<int>& named) {
    if (p.tma_store)
      for (int c = 0; c < p.consumer_warpgroups; ++c) {
        for (int part = 0; part < 4; ++part)
          staging.push_back(m.buffer("warpgroup " + std::to_string(c) + "'s staging tile" + cta + ", warp " +
                                         std::to_string(part) + "'s rows",
                                     1));
        named.push_back(m.barrier("named barrier " + std::to_string(3 + c) + cta, 4));
      }
  };
  auto store_tile_tma = [&](Agent& a, const std::vector<int>& staging, const std::vector<int>& named, int w,
                            int t) {
    const int c = w / 4, lw = w % 4;
    const bool first = bug != Bug::TmaStoreNoFirstBarrier, second = bug != Bug::TmaStoreNoSecondBarrier;
    const long per_tile = (first ? 1 : 0) + (second ? 1 : 0);
    long phase = t * per_tile;
    // Warp 0: tma_store_wait_read<0> — the previous tile's stores have read the staging tile.
    if (lw == 0 && t > 0 && bug != Bug::TmaStoreSkipsWaitRead)
      for (int part = 0; part < 4; ++part)
        a.steps.push_back({Op::Release, staging[c * 4 + part], 0, 0, t - 1});
    auto sync = [&] {
      a.steps.push_back({Op::Arrive, named[c], 0, 0, 0});
      a.steps.push_back({Op::Wait, named[c], static_cast<unsigned>(phase & 1), phase, 0});
      ++phase;
    };
    if (first) sync();
    a.steps.push_back({Op::Write, staging[c * 4 + lw], 0, 0, t});
    if (second) sync();  // after fence.proxy.async
    if (lw == 0)         // one thread issues the TMA stores: they read every warp's rows
      for (int part = 0; part < 4; ++part) a.steps.push_back({Op::Read, staging[c * 4 + part], 0, 0, t});
  };
  // Multicast clusters (mc CTAs): stage s of every CTA holds one share from each CTA's producer
  // (ring[cta][s][share]); its full barrier completes when every share landed, its empty barrier
  // when the consumer warps of every CTA released it (each warp arrives in each CTA).
  const int mc = std::max(1, p.multicast), ctas_all = ctas * mc;
  const int empty_count = (bug == Bug::EmptyCountOneShort   ? warps - 1
                           : bug == Bug::EmptyCountOneExtra ? warps + 1
                                                            : warps) *
                          (bug == Bug::MulticastEmptyCountsOwnCta ? 1 : mc);
  std::vector<std::vector<int>> full(ctas_all, std::vector<int>(S)), empty(ctas_all, std::vector<int>(S));
  std::vector<std::vector<std::vector<int>>> ring(ctas_all, std::vector<std::vector<int>>(S));
  for (int r = 0; r < ctas_all; ++r) {
    const std::string cta = ctas_all > 1 ? " of rank " + std::to_string(r) : "";
    for (int s = 0; s < S; ++s) {
      full[r][s] = m.barrier("full[" + std::to_string(s) + "]" + cta, mc);
      empty[r][s] = m.barrier("empty[" + std::to_string(s) + "]" + cta, empty_count);
      for (int share = 0; share < mc; ++share)
        ring[r][s].push_back(m.buffer("ring stage " + std::to_string(s) + cta +
                                          (mc > 1 ? ", rank " + std::to_string(share) + "'s share" : ""),
                                      warps));
    }
  }
  for (int r = 0; r < ctas_all; ++r) {
    const std::string cta = ctas_all > 1 ? " of rank " + std::to_string(r) : "";
    // This CTA's K tiles per tile (HopperGemm::run: k_tiles * rank / split ..).
    const int kr = mc > 1 ? 0 : r;
    const int kb = p.k_tiles * kr / ctas, ke = p.k_tiles * (kr + 1) / ctas, kn = ke - kb;
    // The CTAs this one's producer fills and its consumers release: all of a multicast cluster.
    std::vector<int> peers;
    for (int d = 0; d < (mc > 1 ? mc : 1); ++d) peers.push_back(mc > 1 ? d : r);
    Agent prod{"the producer" + cta, {}, 0};
    for (int t = 0; t < p.tiles; ++t)
      for (int kt = 0; kt < kn; ++kt) {
        const long it = static_cast<long>(t) * kn + kt;
        const int s = static_cast<int>(it % S);
        const long pass = it / S;
        if (bug != Bug::ProducerSkipsEmptyWait)
          prod.steps.push_back({Op::Wait, empty[r][s], static_cast<unsigned>(pass & 1) ^ 1u, pass - 1, 0});
        for (int d : peers) {
          prod.steps.push_back({Op::Write, ring[d][s][mc > 1 ? r : 0], 0, 0, it});
          prod.steps.push_back({Op::Arrive, full[d][s], 0, 0, 0});  // expect_tx / the bytes landing
        }
      }
    m.agents.push_back(prod);
    std::vector<int> staging, named;
    make_staging(cta, staging, named);
    for (int w = 0; w < warps; ++w) {
      Agent a{"consumer warp " + std::to_string(w) + cta, {}, 0};
      auto release = [&](long pos) {
        const int s = static_cast<int>(pos % S);
        for (int share : ring[r][s]) a.steps.push_back({Op::Release, share, 0, 0, pos});
        if (bug != Bug::ReleaseBeforeWgmmaWait)
          for (int d : peers) a.steps.push_back({Op::Arrive, empty[d][s], 0, 0, 0});
      };
      for (int t = 0; t < p.tiles; ++t) {
        long prev = -1;
        for (int kt = 0; kt < kn; ++kt) {
          const long it = static_cast<long>(t) * kn + kt;
          const int s = static_cast<int>(it % S);
          const unsigned parity =
              static_cast<unsigned>((it / S) & 1) ^ (bug == Bug::FullParityFlipped ? 1u : 0u);
          a.steps.push_back({Op::Wait, full[r][s], parity, it / S, 0});
          for (int share : ring[r][s]) a.steps.push_back({Op::Read, share, 0, 0, it});  // wgmma on stage s
          // The stage handed back at issue, while the wgmma still reads it (until the wait below).
          if (bug == Bug::ReleaseBeforeWgmmaWait)
            for (int d : peers) a.steps.push_back({Op::Arrive, empty[d][s], 0, 0, 0});
          // wgmma_wait<1>: the previous position's reads are complete; release it.
          if (prev >= 0) release(prev);
          prev = it;
        }
        if (prev >= 0) release(prev);  // wgmma_wait<0>
        if (ctas > 1 && r == 1) {      // reduce_split_k, rank 1
          if (bug != Bug::SplitSkipsEmptyWait)
            a.steps.push_back({Op::Wait, red_empty, static_cast<unsigned>(t & 1) ^ 1u, t - 1, 0});
          a.steps.push_back({Op::Write, red_slots[w], 0, 0, t});
          a.steps.push_back({Op::Arrive, red_full, 0, 0, 0});
        } else if (ctas > 1) {  // rank 0
          a.steps.push_back({Op::Wait, red_full, static_cast<unsigned>(t & 1), t, 0});
          a.steps.push_back({Op::Read, red_slots[w], 0, 0, t});
          a.steps.push_back({Op::Release, red_slots[w], 0, 0, t});
          a.steps.push_back({Op::Arrive, red_empty, 0, 0, 0});
        }
        if (p.tma_store) store_tile_tma(a, staging, named, w, t);
      }
      if (p.tma_store && w % 4 == 0)  // the last stores complete before the CTA exits
        for (int part = 0; part < 4; ++part)
          a.steps.push_back({Op::Release, staging[w / 4 * 4 + part], 0, 0, p.tiles - 1});
      m.agents.push_back(a);
    }
  }
}

}  // namespace

std::string check_hopper_pipeline(const PipelineModel& p, int random_schedules) {
  for (int seed = 0; seed <= random_schedules; ++seed) {
    Machine m;
    build(m, p);
    std::string v = m.run(static_cast<unsigned>(seed));
    if (!v.empty()) {
      std::ostringstream out;
      out << v << " (stages " << p.stages << ", " << p.consumer_warpgroups << " consumer warpgroup(s), split "
          << p.split_k << (p.multicast > 1 ? ", multicast over " + std::to_string(p.multicast) + " CTAs" : "")
          << (p.tma_store ? ", TMA-store epilogue" : "") << ", " << p.tiles << " tile(s) of " << p.k_tiles
          << " K tiles, schedule "
          << (seed == 0 ? std::string("round-robin") : "random #" + std::to_string(seed)) << ")";
      return out.str();
    }
  }
  return "";
}

ir::Stmt verify_hopper_pipeline(const ir::Stmt& body, PassContext& ctx) {
  const HopperPlan& h = ctx.hopper;
  if (!h.selected) return body;
  // Short and long K loops (a ring wrapping once and several times), one and several tiles
  // per CTA (the persistent loop's ring positions and the hand-off's phases run on). The
  // verdict depends on these numbers only, so it is kept for the process (a few ms each).
  const int k_long = static_cast<int>(std::min<std::int64_t>(h.k_tiles, 2 * h.stages + 3));
  static std::mutex mutex;
  static std::map<std::tuple<int, int, int, int, bool, int>, std::string> verdicts;
  const int multicast = h.cluster_m * h.cluster_n;
  const auto key = std::make_tuple(h.stages, h.consumers, h.split_k, k_long, h.tma_store, multicast);
  std::string v;
  bool known = false;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = verdicts.find(key); it != verdicts.end()) v = it->second, known = true;
  }
  if (!known) {
    for (int k : {1, k_long})
      for (int tiles : {1, 3})
        if (v.empty()) {
          PipelineModel p{h.stages,    h.consumers, h.split_k, tiles, std::max(1, k) * h.split_k,
                          h.tma_store, multicast,   Bug::None};
          v = check_hopper_pipeline(p, 8);
        }
    std::lock_guard<std::mutex> lock(mutex);
    verdicts[key] = v;
  }
  TESSEL_INTERNAL_CHECK(
      v.empty(), "the sm_90a GEMM pipeline (" << h.gemm_type << ") breaks its barrier protocol: " << v);
  return body;
}

}  // namespace tessel::passes
