// specialize_warps
//   Does:     gives the producer work of a kernel's TMA rings (ProducerStmt, from plan_pipelines)
//             a warpgroup of its own: the kernel becomes
//               <shared declarations, use_swizzle>
//               specialize(consumers = the kernel's threads, producer = one more warpgroup) {
//                 producer: the ring prologues, and each ring loop with only its producer work
//                 consumers: the kernel's body without the producer work
//               }
//             so the consumer warpgroups never stop to issue loads, and wait on mbarriers only
//             for data, not on each other. It applies when the producer work can run alone:
//             every ProducerStmt is a ring prologue at the kernel's top level or the first
//             statement of a top-level Serial loop whose bounds read only block indices,
//             constants and global tensors the kernel never writes (so the producer knows the
//             trip count without the consumers), and the
//             kernel's threads are whole warpgroups. A persistent kernel's loop over tiles
//             (persist_tiles) and the lets in it that bind the tile's block indices go to both
//             roles, each keeping its own part of the loop's body, and so do the declaration and
//             the writes of the ring's carried position (ctx.tile_loop.base, when the trip count
//             depends on the tile), which both roles' ring indices read: the producer then runs on
//             into the next tile's loads while the consumers finish this one. Register budgets (setmaxnreg):
//             a CTA owns the registers it launched with -- entry = 65536 / threads per thread, in steps of 8,
//             which ptxas allocates under __launch_bounds__(threads, 1) (the JIT checks) -- and
//             setmaxnreg.inc takes registers only from what setmaxnreg.dec gave back to the CTA's pool (it
//             blocks until they are there). So the producer drops to kProducerRegs and the consumers rise by
//             its surplus shared among them: consumers = entry + (entry - kProducerRegs) * producer threads /
//             consumer threads, rounded down to 8 (384 threads: 168 -> 24 and 240). A single consumer
//             warpgroup gets a producer *warp* instead, and no setmaxnreg: registers are allocated for every
//             launched thread alike and a CTA's pool is its own, so a producer warpgroup's share would be
//             taken from the other CTAs that such small kernels fit on an SM (measured: 16384^2 attention at
//             D = 64 on 64x128 tiles ran 0.70-0.87x of its cp.async form with a producer warpgroup, H200,
//             2026-12-04).
//             A gemm whose accumulator leaves a wgmma instruction no room under the launch's
//             register cap (ptxas compiles every instruction within it, setmaxnreg or not: 512
//             threads cap it at 128, and m64n256 with an f32 accumulator needs 154) keeps the
//             kernel unspecialized, with the reason in ctx.specialize_why_not.
//   Requires: plan_pipelines (rings and their ProducerStmts).
//   Ensures:  no ProducerStmt is left when it applied; ctx.launch_threads, ctx.consumer_regs and
//             ctx.producer_regs set. Otherwise the IR is unchanged (one thread issues the loads).
#include <algorithm>

#include "passes/PassUtil.hpp"
#include "passes/Passes.hpp"
#include "tessel/ir/Mutator.hpp"

namespace tessel::passes {

using namespace ir;

namespace {

constexpr int kProducerRegs = 24;
constexpr int kRegisterFile = 65536;
// Registers a wgmma instruction needs besides its accumulator (descriptors, predicates,
// addresses): ptxas 13.0 asked for 154 for a 128-register accumulator.
constexpr int kWgmmaOverhead = 26;

// Registers per thread of the widest wgmma accumulator, which its instructions keep live together:
// an m64nN block with an f32 accumulator holds N / 2 a thread, and a warpgroup may compute several
// blocks (FragmentLayout::per_thread counts them all).
int widest_wgmma_accumulator(const Stmt& body, const PassContext& ctx) {
  struct Find : IRVisitor {
    const PassContext* ctx;
    int widest = 0;
    void visit_node(const GemmStmt* g) override {
      auto l = ctx->fragment_layouts.find(g->C.buffer->id);
      if (l == ctx->fragment_layouts.end() || !l->second.wgmma) return;
      widest = std::max(widest, l->second.per_thread * dtype_bytes(g->C.buffer->dtype) / 4);
    }
  } f;
  f.ctx = &ctx;
  f.visit(body);
  return f.widest;
}

// Splits statements into the producer's part and the consumers' part.
struct Splitter {
  // The variables the producer may read in loop bounds (block indices, the tile loop's variable
  // and lets); global tensors the kernel never writes it may read too (a trip count in memory).
  std::vector<Var> known;
  // The persistent ring's carried position (persist_tiles' ctx.tile_loop.base), whose
  // declaration and writes go to both roles (both read it in their ring indices).
  Buffer both;
  Stmt kernel;

  bool only_reads(const Expr& e) const { return reads_only(e, known, kernel); }

  // Appends `s`'s parts to the two lists; false when producer work sits where a lone producer
  // cannot follow.
  bool split(const Stmt& s, std::vector<Stmt>& producer, std::vector<Stmt>& consumer);
};

bool Splitter::split(const Stmt& s, std::vector<Stmt>& producer, std::vector<Stmt>& consumer) {
  const auto* store = s.as<BufferStore>();
  const auto* decl = s.as<DeclBuffer>();
  if (both.defined() && ((store && store->buffer.same_as(both)) || (decl && decl->buffer.same_as(both)))) {
    producer.push_back(s);
    consumer.push_back(s);
    return true;
  }
  if (!contains_producer(s)) {
    consumer.push_back(s);
    return true;
  }
  if (const auto* p = s.as<ProducerStmt>()) {
    producer.push_back(p->body);
    return true;
  }
  if (const auto* seq = s.as<SeqStmt>()) {
    for (const Stmt& c : seq->stmts)
      if (!split(c, producer, consumer)) return false;
    return true;
  }
  if (const auto* l = s.as<LetStmt>()) {
    if (!only_reads(l->value)) return false;
    known.push_back(l->var);
    std::vector<Stmt> p, c;
    const bool ok = split(l->body, p, c);
    known.pop_back();
    if (!ok) return false;
    if (!p.empty()) producer.push_back(make_let(l->var, l->value, make_seq(p, l->where), l->where));
    if (!c.empty()) consumer.push_back(make_let(l->var, l->value, make_seq(c, l->where), l->where));
    return true;
  }
  const auto* f = s.as<ForStmt>();
  if (!f || !only_reads(f->min) || !only_reads(f->extent)) return false;
  if (f->kind == ForKind::Tiles) {
    known.push_back(f->var);
    std::vector<Stmt> p, c;
    const bool ok = split(f->body, p, c);
    known.pop_back();
    if (!ok) return false;
    producer.push_back(
        make_for(f->var, f->min, f->extent, ForKind::Tiles, 0, make_seq(p, f->where), f->where));
    consumer.push_back(
        make_for(f->var, f->min, f->extent, ForKind::Tiles, 0, make_seq(c, f->where), f->where));
    return true;
  }
  if (f->kind != ForKind::Serial) return false;
  std::vector<Stmt> inner = flatten_seq(f->body);
  const auto* first = inner.empty() ? nullptr : inner[0].as<ProducerStmt>();
  if (!first) return false;
  for (size_t i = 1; i < inner.size(); ++i)
    if (contains_producer(inner[i])) return false;
  producer.push_back(make_for(f->var, f->min, f->extent, ForKind::Serial, 0, first->body, f->where));
  consumer.push_back(make_for(f->var, f->min, f->extent, ForKind::Serial, 0,
                              make_seq(std::vector<Stmt>(inner.begin() + 1, inner.end()), f->where),
                              f->where));
  return true;
}

}  // namespace

Stmt specialize_warps(const Stmt& body, PassContext& ctx) {
  if (ctx.target.sm != 90 || !contains_producer(body)) return body;
  if (!ctx.allow_warp_specialization) {
    ctx.specialize_why_not = "turned off (JitOptions::disable_warp_specialization)";
    return body;
  }
  const auto* kernel = body.as<KernelStmt>();
  if (!kernel) return body;
  if (ctx.threads % 128 != 0) {
    ctx.specialize_why_not = "the kernel's " + std::to_string(ctx.threads) + " threads are not whole warpgroups";
    return body;
  }
  std::vector<Stmt> top = flatten_seq(kernel->body);
  std::vector<Stmt> shared_decls, producer, consumer;
  Splitter splitter{ctx.block_vars, ctx.tile_loop.base, body};
  for (const Stmt& s : top) {
    if (const auto* d = s.as<DeclBuffer>(); d && d->buffer->scope == Scope::Shared) {
      shared_decls.push_back(s);
    } else if (s.as<SwizzleStmt>()) {
      shared_decls.push_back(s);  // remaps the block indices both roles read
    } else if (!splitter.split(s, producer, consumer)) {
      ctx.specialize_why_not =
          "the ring's loads sit where a producer of its own cannot follow them (a loop whose bounds read "
          "what the consumers compute, or loads nested in a condition or a deeper loop)";
      return body;
    }
  }
  const bool one_warpgroup = ctx.threads == 128;
  const int producer_threads = one_warpgroup ? 32 : 128;
  const int launch = ctx.threads + producer_threads;
  const int entry = std::min(255, kRegisterFile / launch) / 8 * 8;
  // ptxas compiles each wgmma instruction within the launch's register cap, whatever setmaxnreg
  // raises the consumers to (measured, ptxas 13.0: m64n256k16 with an f32 accumulator needs 154
  // under a cap of 128 -- 512 threads -- and is a fatal error there): the accumulator of the
  // widest gemm plus kWgmmaOverhead must fit the entry budget, else the kernel stays unspecialized
  // (its launch cap is then the consumers' own).
  const int widest = widest_wgmma_accumulator(body, ctx);
  if (widest + kWgmmaOverhead > entry) {
    ctx.specialize_why_not = "a wgmma accumulator of " + std::to_string(widest) + " registers per thread (+" +
                             std::to_string(kWgmmaOverhead) + " for the instruction) is past the " +
                             std::to_string(entry) + " a thread gets at launch with a producer beside " +
                             std::to_string(ctx.threads) + " consumer threads";
    return body;
  }
  int consumer_regs = 0, producer_regs = 0;
  if (!one_warpgroup) {
    producer_regs = kProducerRegs;
    consumer_regs = std::min(256, entry + (entry - kProducerRegs) * producer_threads / ctx.threads / 8 * 8);
  }
  ctx.launch_threads = launch;
  ctx.consumer_regs = consumer_regs;
  ctx.producer_regs = producer_regs;
  ctx.entry_regs = entry;
  auto w = kernel->where;
  std::vector<Stmt> out = shared_decls;
  out.push_back(make_specialize(ctx.threads, producer_threads, consumer_regs, producer_regs,
                                make_seq(producer, w), make_seq(consumer, w), w));
  return make_kernel(kernel->grid, kernel->threads, kernel->block_vars, make_seq(out, w), w);
}

}  // namespace tessel::passes
