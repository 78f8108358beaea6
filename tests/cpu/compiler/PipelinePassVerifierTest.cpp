// verify_pipelines reads the protocol from the pipeline passes' output: the attention kernel's
// and the chain's pass as produced; each planted mistake -- a release dropped or moved before
// the read, a wait on the wrong parity, an empty barrier counting too few warps, a producer
// that does not wait for the stage's release, a ping-pong turn that is never handed over or
// handed over twice, a gemm wait that leaves the gemm reading a stage in flight past the stage's
// release, a gemm never retired -- is caught with its own message.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <set>
#include <stdexcept>

#include "Lower.hpp"
#include "passes/PassUtil.hpp"
#include "passes/Passes.hpp"
#include "support/LoweringSupport.hpp"
#include "support/RegisterGemmPrograms.hpp"
#include "tessel/ir/Mutator.hpp"
#include "tessel/ir/Printer.hpp"
#include "tessel/kernels/attention/FlashAttention.hpp"
#include "tessel/kernels/gemm/Matmul.hpp"

namespace {

namespace T = tessel;
using namespace T::ir;

T::PrimFunc attention(bool causal) {
  T::kernels::AttentionShape s;
  s.batch = 1, s.heads = 2, s.kv_heads = 1, s.seqlen_q = 300, s.seqlen_k = 700, s.dim = 64;
  return T::kernels::attention_program(s, T::DType::f16, causal, 0.125f, {128, 128, 256, 2});
}

// The IR and context right before verify_pipelines: the warpgroups taking turns, or (rotated)
// without turns, O += P V of block j - 1 issued behind S = Q K^T of block j.
T::LoweredFunc before_verify(const T::PrimFunc& f) {
  return T::lower_until(f.ir(), T::test::sm90(), "place_gemm_waits");
}
T::LoweredFunc without_turns(const T::PrimFunc& f) {
  T::passes::PassContext::Switches no_turns;
  no_turns.allow_pingpong = false;
  no_turns.allow_loop_rotation = true;  // attention's loop split at its mask, each part rotated
  return T::lower_until(f.ir(), T::test::sm90(), "place_gemm_waits", no_turns);
}
// A branch-free two-gemm loop, rotated: O += P V of block j - 1 issued behind S = Q K^T of block j.
T::LoweredFunc rotated_chain(int n = 700) {
  T::passes::PassContext::Switches rotate;
  rotate.allow_loop_rotation = true;
  return T::lower_until(
      T::kernels::gemm_chain_program(300, n, 64, T::DType::f16, 0.5f, {64, 64, 128, 2}, true).ir(),
      T::test::sm90(), "place_gemm_waits", rotate);
}

std::string verify_error(const Stmt& body, T::passes::PassContext ctx) {
  try {
    T::passes::verify_pipelines(body, ctx);
  } catch (const T::InternalError& e) {
    return e.what();
  }
  return "<no error>";
}

// Rewrites the statements `pick` selects into what `edit` makes of them (undefined: removed).
class Edit : public IRMutator {
 public:
  Edit(std::function<bool(const Stmt&)> pick, std::function<Stmt(const Stmt&)> edit)
      : pick_(std::move(pick)), edit_(std::move(edit)) {}
  int edits = 0;

  Stmt mutate(const Stmt& s) override {
    if (s.defined() && pick_(s)) {
      ++edits;
      Stmt e = edit_(s);
      return e.defined() ? e : make_seq({});
    }
    return IRMutator::mutate(s);
  }

 private:
  std::function<bool(const Stmt&)> pick_;
  std::function<Stmt(const Stmt&)> edit_;
};

bool is_mbarrier(const Stmt& s, MbarrierOp op, const std::string& bars) {
  const auto* m = s.as<MbarrierStmt>();
  return m && m->op == op && m->bars->name == bars;
}

// The planted early release: the consumers' arrival on `<tile>_empty` moved from after the
// stage's last read to right after their wait on `<tile>_full` (only consumers wait on `full`);
// `moved` counts the waits it now follows (0: the tile has no such barriers).
Stmt release_right_after_the_wait(const Stmt& body, const std::string& tile, int& moved) {
  Buffer empty;
  struct Finder : IRVisitor {
    Buffer* out;
    std::string name;
    void visit_node(const MbarrierStmt* op) override {
      if (op->bars->name == name) *out = op->bars;
    }
  } finder;
  finder.out = &empty;
  finder.name = tile + "_empty";
  finder.visit(body);
  moved = 0;
  if (!empty.defined()) return body;
  Edit drop([&](const Stmt& s) { return is_mbarrier(s, MbarrierOp::WarpArrive, tile + "_empty"); },
            [](const Stmt&) { return Stmt(); });
  Edit early([&](const Stmt& s) { return is_mbarrier(s, MbarrierOp::Wait, tile + "_full"); },
             [&](const Stmt& s) {
               const auto* m = s.as<MbarrierStmt>();
               return make_seq({s, make_mbarrier(MbarrierOp::WarpArrive, empty, m->index, Expr(), m->where)});
             });
  Stmt out = early.mutate(drop.mutate(body));
  moved = early.edits;
  return out;
}

TEST(PipelinePassVerifier, PassOutputIsAccepted) {
  for (bool causal : {false, true}) {
    auto l = before_verify(attention(causal));
    ASSERT_FALSE(l.ctx.mbarriers.empty());
    EXPECT_EQ(verify_error(l.body, l.ctx), "<no error>");
  }
  auto chain = before_verify(T::test::gemm_chain_program({200, 300, 64, 64, 64, 128}, T::DType::f16, 0.5f));
  EXPECT_EQ(verify_error(chain.body, chain.ctx), "<no error>");
  // Not specialized (a ring whose producer work one consumer thread does): accepted too.
  T::passes::PassContext::Switches no_roles;
  auto flat = T::lower_until(attention(true).ir(), T::test::sm90(), "plan_pipelines", no_roles);
  EXPECT_EQ(verify_error(flat.body, flat.ctx), "<no error>");
}

// Loops longer than the model runs (it skips whole ring periods in the middle): the producer's
// loop from 0 and the rotated consumers' loop from 1 skip the same iterations, and the last
// block's gemm after the loop meets the ring where it would -- for every trip count around the cut.
TEST(PipelinePassVerifier, LongLoopsAreAcceptedForEveryTripCount) {
  for (std::int64_t sk : {3000, 3100, 3200, 3300, 4097, 16384}) {
    SCOPED_TRACE("Sk " + std::to_string(sk));
    auto chain = rotated_chain(static_cast<int>(sk));
    EXPECT_EQ(chain.ctx.rotated_gemm_loops, 1);
    EXPECT_EQ(verify_error(chain.body, chain.ctx), "<no error>");
    for (int D : {64, 128})
      for (bool causal : {false, true}) {
        T::kernels::AttentionShape s;
        s.batch = 1, s.heads = 2, s.seqlen_q = 256, s.seqlen_k = sk, s.dim = D;
        for (auto l : {before_verify(T::kernels::attention_program(s, T::DType::bf16, causal, 0.125f, {128, 128, 256, 2})),
                       without_turns(T::kernels::attention_program(s, T::DType::bf16, causal, 0.125f, {128, 128, 256, 2}))})
          EXPECT_EQ(verify_error(l.body, l.ctx), "<no error>") << "D " << D << (causal ? " causal" : "");
      }
  }
}

// The tutorial GEMM from the generic passes, persistent (persist_tiles): its ring counts stages
// and phases over a block's tiles, and A and B (both read by the gemm alone) share one barrier
// pair.
T::LoweredFunc persistent_gemm(int M, int N, int K, int max_ctas) {
  T::kernels::MatmulConfig c;
  c.block_M = 128, c.block_N = 256, c.block_K = 64, c.num_stages = 3, c.threads = 256;
  c.use_swizzle = true, c.panel_size = 8;
  T::passes::PassContext::Switches s;
  s.gemm_from_passes = true;
  s.max_persistent_ctas = max_ctas;
  return T::lower_until(T::kernels::matmul_program(M, N, K, c).ir(), T::test::sm90(), "place_gemm_waits", s);
}

TEST(PipelinePassVerifier, PersistentRingsAreAcceptedForEveryBlockCount) {
  for (int ctas : {0, 1, 3, 7, 131})
    for (auto [M, N, K] : {std::tuple{4096, 4096, 4096}, std::tuple{4000, 4104, 1000}, std::tuple{2100, 8200, 200}}) {
      SCOPED_TRACE(std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K) + " blocks " +
                   std::to_string(ctas));
      auto l = persistent_gemm(M, N, K, ctas);
      ASSERT_TRUE(l.ctx.tile_loop.applied) << l.ctx.tile_loop.why_not;
      EXPECT_EQ(verify_error(l.body, l.ctx), "<no error>");
    }
}

// multicast_cluster_loads' rings: each consumer warp arrives on the shared stage's `empty`
// barrier in both CTAs (counted twice in the one-CTA model), for every persistent block count;
// planted: a release that arrives in its own CTA only leaves the producer waiting for the peer's
// half of the count.
TEST(PipelinePassVerifier, MulticastRingsCountBothCtasReleases) {
  for (int ctas : {0, 2, 6})
    for (auto [x, y] : {std::pair{2, 1}, std::pair{1, 2}}) {
      T::kernels::MatmulConfig c;
      c.block_M = 128, c.block_N = 128, c.block_K = 64, c.num_stages = 4, c.threads = 256;
      c.use_swizzle = true, c.panel_size = 3, c.cluster_x = x, c.cluster_y = y;
      T::passes::PassContext::Switches s;
      s.gemm_from_passes = true;
      s.max_persistent_ctas = ctas;
      auto l = T::lower_until(T::kernels::matmul_program(1000, 1064, 1000, c).ir(), T::test::sm90(),
                              "place_gemm_waits", s);
      SCOPED_TRACE("cluster " + std::to_string(x) + "x" + std::to_string(y) + " blocks " +
                   std::to_string(ctas));
      ASSERT_TRUE(l.ctx.cluster_multicast.applied) << l.ctx.cluster_multicast.why_not;
      EXPECT_EQ(verify_error(l.body, l.ctx), "<no error>");
      Edit local([](const Stmt& st) { return is_mbarrier(st, MbarrierOp::WarpArrive, "shared_0_empty"); },
                 [](const Stmt& st) {
                   const auto* m = st.as<MbarrierStmt>();
                   return make_mbarrier(m->op, m->bars, m->index, Expr(), m->where);
                 });
      Stmt bad = local.mutate(l.body);
      ASSERT_GE(local.edits, 1);
      const std::string e = verify_error(bad, l.ctx);
      EXPECT_NE(e.find("deadlock: the producer waits forever at mbarrier.wait shared_0_empty"),
                std::string::npos)
          << e;
    }
}

TEST(PipelinePassVerifier, PersistentAttentionIsAcceptedForEveryBlockCount) {
  // Non-causal attention under persistent_rings: Q by TMA into two slots a tile (plan_tile_loads),
  // the warpgroups' turns inside each tile, the ring over the block's tiles.
  T::kernels::AttentionShape s;
  s.batch = 2, s.heads = 3, s.kv_heads = 1, s.seqlen_q = 1000, s.seqlen_k = 700, s.dim = 128;  // 48 tiles
  for (int ctas : {1, 3, 7, 40}) {
    SCOPED_TRACE("blocks " + std::to_string(ctas));
    T::passes::PassContext::Switches sw;
    sw.persistent_rings = true;
    sw.max_persistent_ctas = ctas;
    auto l = T::lower_until(
        T::kernels::attention_program(s, T::DType::bf16, false, 0.125f, {128, 128, 256, 2}).ir(),
        T::test::sm90(), "place_gemm_waits", sw);
    ASSERT_TRUE(l.ctx.tile_loop.applied) << l.ctx.tile_loop.why_not;
    EXPECT_TRUE(l.ctx.pingpong);
    EXPECT_EQ(verify_error(l.body, l.ctx), "<no error>");
  }
}

// Causal attention under persistent_rings: the ring's trip count depends on the tile, so the
// ring's position is carried across the block's tiles in ring_base (both roles). Accepted for
// every block count, with tiles of no key at all (Sq > Sk: the first query blocks see nothing),
// tiles longer than the model runs (it skips part of each, by the tile's own trip count), blocks
// of many tiles (the model skips whole tiles), both ring schedules, rotated or not, and rings of
// two and three stages.
T::LoweredFunc persistent_causal(const T::kernels::AttentionShape& s, int ctas, T::kernels::AttentionConfig c,
                                 bool rotate = false) {
  T::passes::PassContext::Switches sw;
  sw.persistent_rings = true;
  sw.max_persistent_ctas = ctas;
  sw.allow_loop_rotation = rotate;
  return T::lower_until(T::kernels::attention_program(s, T::DType::bf16, true, 0.125f, c).ir(), T::test::sm90(),
                        "place_gemm_waits", sw);
}

TEST(PipelinePassVerifier, PersistentCausalAttentionIsAcceptedForEveryBlockCount) {
  using Schedule = T::kernels::AttentionConfig::Schedule;
  struct Shape {
    std::int64_t B, H, Sq, Sk;
  };
  for (Shape sh : {Shape{2, 3, 1000, 700}, Shape{1, 2, 1000, 300}, Shape{1, 2, 8192, 8192}, Shape{1, 1, 300, 5000}})
    for (int ctas : {1, 3, 7, 40, 132})
      for (T::kernels::AttentionConfig c :
           {T::kernels::AttentionConfig{128, 128, 256, 2, Schedule::ring},
            T::kernels::AttentionConfig{128, 128, 256, 2, Schedule::ring_pingpong},
            T::kernels::AttentionConfig{128, 192, 256, 3, Schedule::ring}})
        for (bool rotate : {false, true}) {
          SCOPED_TRACE("B" + std::to_string(sh.B) + " H" + std::to_string(sh.H) + " Sq" + std::to_string(sh.Sq) +
                       " Sk" + std::to_string(sh.Sk) + " blocks " + std::to_string(ctas) + " " + c.describe() +
                       (rotate ? " rotated" : ""));
          T::kernels::AttentionShape s;
          s.batch = sh.B, s.heads = sh.H, s.kv_heads = 1, s.seqlen_q = sh.Sq, s.seqlen_k = sh.Sk, s.dim = 64;
          auto l = persistent_causal(s, ctas, c, rotate);
          ASSERT_TRUE(l.ctx.tile_loop.applied) << l.ctx.tile_loop.why_not;
          ASSERT_TRUE(l.ctx.tile_loop.base.defined());
          EXPECT_EQ(verify_error(l.body, l.ctx), "<no error>");
        }
}

// Planted mistakes in the carried position: the producer forgets to bump it (its ring restarts
// at every tile while the consumers count on), or the consumers bump it by one too many.
TEST(PipelinePassVerifier, APersistentCausalRingWhosePositionIsNotCarriedAlike) {
  T::kernels::AttentionShape s;
  s.batch = 1, s.heads = 2, s.kv_heads = 1, s.seqlen_q = 1000, s.seqlen_k = 1000, s.dim = 64;  // 16 tiles
  auto l = persistent_causal(s, 3, {128, 128, 256, 2, T::kernels::AttentionConfig::Schedule::ring});
  ASSERT_TRUE(l.ctx.tile_loop.base.defined());
  const Buffer base = l.ctx.tile_loop.base;
  const auto* kernel = l.body.as<KernelStmt>();
  ASSERT_NE(kernel, nullptr);
  const SpecializeStmt* roles = nullptr;
  for (const Stmt& st : T::passes::flatten_seq(kernel->body))
    if (const auto* sp = st.as<SpecializeStmt>()) roles = sp;
  ASSERT_NE(roles, nullptr);
  auto bump = [&](const Stmt& st) {
    const auto* b = st.as<BufferStore>();
    return b && b->buffer.same_as(base) && !is_const_int(b->value, 0);
  };
  auto with_roles = [&](const Stmt& producer, const Stmt& consumer) {
    std::vector<Stmt> top;
    for (const Stmt& st : T::passes::flatten_seq(kernel->body))
      top.push_back(st.as<SpecializeStmt>()
                        ? make_specialize(roles->consumer_threads, roles->producer_threads, roles->consumer_regs,
                                          roles->producer_regs, producer, consumer, st->where)
                        : st);
    return make_kernel(kernel->grid, kernel->threads, kernel->block_vars, make_seq(top, kernel->where),
                       kernel->where);
  };
  Edit drop(bump, [](const Stmt&) { return Stmt(); });
  Stmt producer_restarts = with_roles(drop.mutate(roles->producer), roles->consumer);
  ASSERT_EQ(drop.edits, 1);
  std::string e = verify_error(producer_restarts, l.ctx);
  EXPECT_TRUE(e.find("deadlock") != std::string::npos ||
              e.find("the stage was refilled while it was still being read") != std::string::npos ||
              e.find("before that load landed") != std::string::npos)
      << e;
  Edit over(bump, [&](const Stmt& st) {
    const auto* b = st.as<BufferStore>();
    return make_store(b->buffer, b->indices, T::passes::add(b->value, make_int(1)), b->where);
  });
  Stmt consumers_ahead = with_roles(roles->producer, over.mutate(roles->consumer));
  ASSERT_EQ(over.edits, 1);
  e = verify_error(consumers_ahead, l.ctx);
  EXPECT_TRUE(e.find("deadlock") != std::string::npos ||
              e.find("the stage was refilled while it was still being read") != std::string::npos ||
              e.find("before that load landed") != std::string::npos)
      << e;
}

TEST(PipelinePassVerifier, APersistentProducerThatRestartsItsRingEachTile) {
  // The producer counts A's ring iterations from 0 again at every tile (tile_i dropped), while
  // the consumers count on: its waits for the stages' releases no longer match their phases.
  auto l = persistent_gemm(4096, 4096, 4096, 3);
  ASSERT_TRUE(l.ctx.tile_loop.applied);
  const Var tile_i = l.ctx.tile_loop.var;
  Edit restart([](const Stmt& s) { return is_mbarrier(s, MbarrierOp::Wait, "shared_0_empty"); },
               [&](const Stmt& s) { return substitute(s, {{tile_i, make_int(0)}}); });
  Stmt bad = restart.mutate(l.body);
  ASSERT_EQ(restart.edits, 1);
  const std::string e = verify_error(bad, l.ctx);
  EXPECT_NE(e.find("verify_pipelines: matmul at block (0)"), std::string::npos) << e;
  EXPECT_TRUE(e.find("deadlock") != std::string::npos ||
              e.find("the stage was refilled while it was still being read") != std::string::npos)
      << e;
}

// Planted mistakes in Q's two slots (plan_tile_loads: persistent attention loads each tile's Q by
// TMA from the producer): the consumers never release a slot (ADroppedReleaseDeadlocks), or
// release it right after its wait, before the ring loop's gemms read it (the
// producer refills it with the tile after next while they still read -- seen where a tile has
// one key block, so that the two-stage K / V ring lets the producer run two tiles ahead; with
// longer tiles the ring holds it back and the early release is harmless).
T::LoweredFunc persistent_attention_at(int ctas, std::int64_t seqlen_k = 700) {
  T::kernels::AttentionShape s;
  s.batch = 2, s.heads = 3, s.kv_heads = 1, s.seqlen_q = 1000, s.seqlen_k = seqlen_k,
  s.dim = 128;  // 48 tiles
  T::passes::PassContext::Switches sw;
  sw.persistent_rings = true;
  sw.max_persistent_ctas = ctas;
  return T::lower_until(
      T::kernels::attention_program(s, T::DType::bf16, false, 0.125f, {128, 128, 256, 2}).ir(),
      T::test::sm90(), "place_gemm_waits", sw);
}

TEST(PipelinePassVerifier, ATileLoadReleasedBeforeItsReadsIsRefilled) {
  auto l = persistent_attention_at(3, 100);              // one key block a tile
  ASSERT_EQ(verify_error(l.body, l.ctx), "<no error>");  // as the passes made it
  int moved = 0;
  Stmt bad = release_right_after_the_wait(l.body, "shared_0", moved);
  ASSERT_EQ(moved, 1);
  const std::string e = verify_error(bad, l.ctx);
  EXPECT_NE(e.find("reads shared_0 stage"), std::string::npos) << e;
  EXPECT_NE(e.find("the stage was refilled while it was still being read"), std::string::npos) << e;
}

TEST(PipelinePassVerifier, ASharedFullBarrierExpectingOneTileOnly) {
  // A and B share one barrier pair; an expect_tx for A's bytes alone lets the phase complete
  // (or the count run past it) before B's load has landed.
  auto l = persistent_gemm(4096, 4096, 4096, 3);
  Edit shrink([](const Stmt& s) { return is_mbarrier(s, MbarrierOp::ArriveExpectTx, "shared_0_full"); },
              [](const Stmt& s) {
                const auto* m = s.as<MbarrierStmt>();
                return make_mbarrier(m->op, m->bars, m->index, make_int(16384), m->where);
              });
  Stmt bad = shrink.mutate(l.body);
  ASSERT_EQ(shrink.edits, 1);
  const std::string e = verify_error(bad, l.ctx);
  EXPECT_NE(e.find("reads shared_1 stage 0 for its use 1 before that load landed"), std::string::npos) << e;
}

// K's ring release dropped, and a persistent tile's Q slot release dropped (the producer then
// waits forever for the third tile's slot).
TEST(PipelinePassVerifier, ADroppedReleaseDeadlocks) {
  for (const auto& [l, tile] : {std::pair{before_verify(attention(false)), std::string("shared_1")},
                                std::pair{persistent_attention_at(3), std::string("shared_0")}}) {
    SCOPED_TRACE(tile);
    ASSERT_EQ(verify_error(l.body, l.ctx), "<no error>");  // as the passes made it
    Edit drop([&](const Stmt& s) { return is_mbarrier(s, MbarrierOp::WarpArrive, tile + "_empty"); },
              [](const Stmt&) { return Stmt(); });
    Stmt bad = drop.mutate(l.body);
    ASSERT_EQ(drop.edits, 1);
    const std::string e = verify_error(bad, l.ctx);
    EXPECT_NE(e.find("deadlock: the producer waits forever at mbarrier.wait " + tile + "_empty"),
              std::string::npos)
        << e;
  }
}

TEST(PipelinePassVerifier, AWaitOnTheWrongParityReadsTooEarly) {
  auto l = before_verify(attention(false));
  Edit flip([](const Stmt& s) { return is_mbarrier(s, MbarrierOp::Wait, "shared_1_full"); },
            [](const Stmt& s) {
              const auto* m = s.as<MbarrierStmt>();
              return make_mbarrier(
                  m->op, m->bars, m->index,
                  make_binary(BinaryOp::Mod, make_binary(BinaryOp::Add, m->value, make_int(1)), make_int(2)),
                  m->where);
            });
  Stmt bad = flip.mutate(l.body);
  ASSERT_GE(flip.edits, 1);
  const std::string e = verify_error(bad, l.ctx);
  EXPECT_NE(e.find("reads shared_1 stage 0 for its use 1 before that load landed"), std::string::npos) << e;
}

TEST(PipelinePassVerifier, AReleaseBeforeTheReadLetsTheStageBeRefilled) {
  auto l = before_verify(attention(false));
  // K's release moved from after the gemm that reads K to right after the wait for it.
  int moved = 0;
  Stmt bad = release_right_after_the_wait(l.body, "shared_1", moved);
  ASSERT_GE(moved, 1);
  const std::string e = verify_error(bad, l.ctx);
  EXPECT_NE(e.find("the stage was refilled while it was still being read"), std::string::npos) << e;
}

TEST(PipelinePassVerifier, AnEmptyBarrierCountingTooFewWarps) {
  auto l = before_verify(attention(false));
  T::passes::PassContext ctx = l.ctx;
  bool changed = false;
  for (auto& a : ctx.mbarriers)
    if (a.bars->name == "shared_1_empty") {
      a.count -= 1;
      changed = true;
    }
  ASSERT_TRUE(changed);
  const std::string e = verify_error(l.body, ctx);
  EXPECT_NE(e.find("the stage was refilled while it was still being read"), std::string::npos) << e;
}

TEST(PipelinePassVerifier, AProducerThatDoesNotWaitForTheRelease) {
  auto l = before_verify(attention(false));
  Edit drop([](const Stmt& s) { return is_mbarrier(s, MbarrierOp::Wait, "shared_2_empty"); },
            [](const Stmt&) { return Stmt(); });
  Stmt bad = drop.mutate(l.body);
  ASSERT_EQ(drop.edits, 1);
  const std::string e = verify_error(bad, l.ctx);
  EXPECT_NE(e.find("reads shared_2 stage"), std::string::npos) << e;
  EXPECT_NE(e.find("the stage was refilled while it was still being read"), std::string::npos) << e;
}

TEST(PipelinePassVerifier, APingPongTurnNeverHandedOver) {
  auto l = before_verify(attention(false));
  ASSERT_TRUE(l.ctx.pingpong);
  // Warpgroup 0's hand-over after the loop: warpgroup 1's last wait is never released.
  Edit drop(
      [](const Stmt& s) {
        const auto* d = s.as<DeviceCall>();
        return d && d->callee == "tessel::named_barrier_arrive" && is_const_int(d->args[0].expr, 3);
      },
      [](const Stmt&) { return Stmt(); });
  Stmt bad = drop.mutate(l.body);
  ASSERT_EQ(drop.edits, 1);
  const std::string e = verify_error(bad, l.ctx);
  EXPECT_NE(e.find("deadlock: consumer warp 4 waits forever at tessel::named_barrier_sync(3)"),
            std::string::npos)
      << e;
}

TEST(PipelinePassVerifier, APingPongTurnHandedOverTwice) {
  auto l = before_verify(attention(false));
  // Without warpgroup 1's wait before the loop, a warpgroup can hand over its next turn before
  // the other took the last one: one generation of the barrier mixes two turns' arrivals.
  Edit drop(
      [](const Stmt& s) {
        const auto* d = s.as<DeviceCall>();
        return d && d->callee == "tessel::named_barrier_sync" && is_const_int(d->args[0].expr, 3);
      },
      [](const Stmt&) { return Stmt(); });
  Stmt bad = drop.mutate(l.body);
  ASSERT_EQ(drop.edits, 1);
  const std::string e = verify_error(bad, l.ctx);
  EXPECT_NE(e.find("arrived twice in one generation: arrivals meant for two turns met"), std::string::npos)
      << e;
}

TEST(PipelinePassVerifier, AGemmWaitThatLeavesTheReaderInFlightPastTheRelease) {
  auto l = rotated_chain();
  ASSERT_EQ(l.ctx.rotated_gemm_loops, 1);
  ASSERT_GT(l.ctx.async_gemms, 0);
  // The wait before P is rewritten retires O += P V of the previous block, whose V stage is
  // released right after it; waiting with one group pending instead keeps that gemm reading V
  // while the producer refills the stage.
  int seen = 0;
  Edit loosen([](const Stmt& s) { return s.as<AsyncGemmWait>() && s.as<AsyncGemmWait>()->pending == 0; },
              [&](const Stmt& s) {
                const auto* w = s.as<AsyncGemmWait>();
                return ++seen == 1 ? make_async_gemm_wait(1, w->fence, w->where) : s;
              });
  Stmt bad = loosen.mutate(l.body);
  ASSERT_GE(loosen.edits, 1);
  const std::string e = verify_error(bad, l.ctx);
  EXPECT_NE(e.find("(by an asynchronous gemm, until its wait)"), std::string::npos) << e;
  EXPECT_NE(e.find("the stage was refilled while it was still being read"), std::string::npos) << e;
}

TEST(PipelinePassVerifier, AGemmNeverRetired) {
  auto l = rotated_chain();
  Edit drop([](const Stmt& s) { return s.as<AsyncGemmWait>() != nullptr; }, [](const Stmt&) { return Stmt(); });
  Stmt bad = drop.mutate(l.body);
  ASSERT_GE(drop.edits, 2);
  const std::string e = verify_error(bad, l.ctx);
  EXPECT_NE(e.find("still in flight when the kernel ends"), std::string::npos) << e;
}

}  // namespace

namespace {

// What a role may compute a trip count from on its own (specialize_warps, persist_tiles):
// the given variables, constants, and global tensors the kernel never writes.
TEST(PipelinePassVerifier, TripCountsEachRoleCanReadAlone) {
  Var by("by"), other("other");
  auto w = std::source_location::current();
  Buffer steps = Buffer::make("steps", {make_int(8)}, T::DType::i32, Scope::Global, w);
  Buffer local = Buffer::make("count", {make_int(1)}, T::DType::i32, Scope::Local, w);
  const Expr n = make_binary(BinaryOp::Min, make_load(steps, {by}), make_int(16));
  const Stmt reads = make_seq({make_decl(local, w)}, w);
  const Stmt writes = make_seq({make_store(steps, {by}, make_int(0), w)}, w);
  EXPECT_TRUE(T::passes::reads_only(n, {by}, reads));
  EXPECT_FALSE(T::passes::reads_only(n, {by}, writes)) << "a tensor the kernel writes";
  EXPECT_FALSE(T::passes::reads_only(n, {other}, reads)) << "a variable the role does not know";
  EXPECT_FALSE(T::passes::reads_only(make_load(local, {make_int(0)}), {by}, reads)) << "a thread's own register";
  EXPECT_TRUE(T::passes::reads_only(T::passes::add(by, make_int(3)), {by}, writes));
}

}  // namespace

namespace {

// Integer expressions of the tile loop (constants, variables bound in `env`, + - * / %, the
// comparisons, select).
std::int64_t eval_int(const Expr& e, const std::map<const ExprNode*, std::int64_t>& env) {
  if (auto c = as_const_int(e)) return *c;
  if (e.as<VarNode>()) return env.at(e.get());
  if (const auto* s = e.as<Select>()) return eval_int(s->cond, env) ? eval_int(s->true_value, env) : eval_int(s->false_value, env);
  const auto* b = e.as<Binary>();
  if (!b) throw std::runtime_error("eval_int: " + T::ir::to_string(e));
  const std::int64_t x = eval_int(b->a, env), y = eval_int(b->b, env);
  switch (b->op) {
    case BinaryOp::Add: return x + y;
    case BinaryOp::Sub: return x - y;
    case BinaryOp::Mul: return x * y;
    case BinaryOp::Div: return x / y;
    case BinaryOp::Mod: return x % y;
    case BinaryOp::EQ: return x == y;
    case BinaryOp::LT: return x < y;
    case BinaryOp::GE: return x >= y;
    case BinaryOp::Min: return std::min(x, y);
    default: throw std::runtime_error("eval_int: " + T::ir::to_string(e));
  }
}

// Causal attention's persistent blocks take the tiles in serpentine rounds (the ring's trip count
// varies by tile): every tile exactly once, for whole and partial last rounds of either parity,
// and each block's work within 5 % of the mean on the causal shapes (round-robin: up to
// 1.34x at S = 1024).
TEST(PipelinePassVerifier, PersistentCausalBlocksTakeEveryTileOnceInSerpentineRounds) {
  struct Shape {
    std::int64_t B, H, S;
    int ctas;
  };
  for (Shape sh : {Shape{32, 16, 1024, 0}, Shape{8, 16, 4096, 0}, Shape{2, 16, 16384, 0}, Shape{1, 3, 1000, 7},
                   Shape{1, 2, 1000, 3}, Shape{1, 1, 500, 7}, Shape{2, 3, 777, 5}}) {
    SCOPED_TRACE("B" + std::to_string(sh.B) + " H" + std::to_string(sh.H) + " S" + std::to_string(sh.S) +
                 " blocks " + std::to_string(sh.ctas));
    T::kernels::AttentionShape s;
    s.batch = sh.B, s.heads = sh.H, s.kv_heads = sh.H, s.seqlen_q = sh.S, s.seqlen_k = sh.S, s.dim = 128;
    T::passes::PassContext::Switches sw;
    sw.persistent_rings = true;
    sw.max_persistent_ctas = sh.ctas;
    auto l = T::lower_until(
        T::kernels::attention_program(s, T::DType::bf16, true, 0.125f, {128, 128, 256, 2, T::kernels::AttentionConfig::Schedule::ring})
            .ir(),
        T::test::sm90(), "persist_tiles", sw);
    ASSERT_TRUE(l.ctx.tile_loop.applied) << l.ctx.tile_loop.why_not;
    const std::int64_t tiles = l.ctx.tile_loop.tiles, P = l.ctx.tile_loop.blocks;
    const ForStmt* loop = nullptr;
    struct Find : IRVisitor {
      const ForStmt** loop;
      void visit_node(const ForStmt* f) override {
        if (f->kind == ForKind::Tiles) *loop = f;
        IRVisitor::visit_node(f);
      }
    } find;
    find.loop = &loop;
    find.visit(l.body);
    ASSERT_NE(loop, nullptr);
    const auto* let = loop->body.as<LetStmt>();
    ASSERT_NE(let, nullptr);
    ASSERT_EQ(let->var.name(), "tile");
    const Var pid = l.ctx.block_vars.at(0);
    std::vector<int> seen(static_cast<size_t>(tiles), 0);
    const std::int64_t q_blocks = (sh.S + 127) / 128;
    std::vector<std::int64_t> work(static_cast<size_t>(P), 0);
    for (std::int64_t p = 0; p < P; ++p) {
      std::map<const ExprNode*, std::int64_t> env{{pid.get(), p}};
      const std::int64_t trips = eval_int(loop->extent, env);
      for (std::int64_t i = 0; i < trips; ++i) {
        env[loop->var.get()] = i;
        const std::int64_t t = eval_int(let->value, env);
        ASSERT_GE(t, 0);
        ASSERT_LT(t, tiles);
        ++seen[static_cast<size_t>(t)];
        work[static_cast<size_t>(p)] += q_blocks - t % q_blocks + 1;  // its key blocks, and one for the rest
      }
    }
    for (std::int64_t t = 0; t < tiles; ++t) ASSERT_EQ(seen[static_cast<size_t>(t)], 1) << "tile " << t;
    if (sh.ctas == 0) {
      const double mean = std::accumulate(work.begin(), work.end(), 0.0) / static_cast<double>(P);
      EXPECT_LE(static_cast<double>(*std::max_element(work.begin(), work.end())), 1.05 * mean);
    }
  }
}

}  // namespace

namespace {

// use_swizzle(panel) over a persistent kernel's tiles is tessel::rasterize's order written as IR
// lets: every tile of a grid whose width is not a multiple of the panel (a narrower last panel)
// maps to its own (bx, by), in panels of `panel` columns walked row by row.
TEST(PipelinePassVerifier, PersistentTilesFollowTheSwizzlePanelOrder) {
  T::kernels::MatmulConfig c;
  c.block_M = 128, c.block_N = 256, c.block_K = 64, c.num_stages = 3, c.threads = 256;
  c.use_swizzle = true, c.panel_size = 3;
  T::passes::PassContext::Switches s;
  s.gemm_from_passes = true;
  s.max_persistent_ctas = 5;
  const int gx = 11, gy = 7;  // N = 11 * 256 - 96 (rows of 16-byte multiples: TMA), M = 7 * 128 - 5
  auto l = T::lower_until(T::kernels::matmul_program(gy * 128 - 5, gx * 256 - 96, 512, c).ir(), T::test::sm90(),
                          "persist_tiles", s);
  ASSERT_TRUE(l.ctx.tile_loop.applied) << l.ctx.tile_loop.why_not;
  // The lets from `tile` down to bx and by.
  std::vector<const LetStmt*> lets;
  struct Find : IRVisitor {
    std::vector<const LetStmt*>* lets;
    bool inside = false;
    void visit_node(const ForStmt* f) override {
      if (f->kind == ForKind::Tiles) inside = true;
      IRVisitor::visit_node(f);
    }
    void visit_node(const LetStmt* let) override {
      if (inside) lets->push_back(let);
      IRVisitor::visit_node(let);
    }
  } find;
  find.lets = &lets;
  find.visit(l.body);
  ASSERT_GE(lets.size(), 3u);
  ASSERT_EQ(lets[0]->var.name(), "tile");
  std::set<std::pair<std::int64_t, std::int64_t>> seen;
  for (std::int64_t t = 0; t < gx * gy; ++t) {
    std::map<const ExprNode*, std::int64_t> env{{lets[0]->var.get(), t}};
    std::int64_t bx = -1, by = -1;
    for (size_t i = 1; i < lets.size(); ++i) {
      const std::int64_t v = eval_int(lets[i]->value, env);
      env[lets[i]->var.get()] = v;
      if (lets[i]->var.name() == "bx") bx = v;
      if (lets[i]->var.name() == "by") by = v;
    }
    // The panel order: panels of 3 columns (the last 2 wide), each row-major.
    const std::int64_t first = t / (3 * gy) * 3, width = std::min<std::int64_t>(gx - first, 3), in = t % (3 * gy);
    EXPECT_EQ(bx, first + in % width) << "tile " << t;
    EXPECT_EQ(by, in / width) << "tile " << t;
    EXPECT_TRUE(seen.insert({bx, by}).second) << "tile " << t << " repeats (" << bx << ", " << by << ")";
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(gx * gy));
}

}  // namespace
