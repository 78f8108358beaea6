// insert_barriers
//   Does:     the barriers a kernel's roles and rings need beyond those of its cp.async
//             schedules and around shared writes (plan_pipelines and order_shared_writes place those):
//             - initializes the rings' mbarrier arrays (ctx.mbarriers) and split_k_clusters'
//               hand-off barriers first thing in the kernel, after the shared declarations:
//               thread 0 sets each barrier's arrival count, fences the initialization for the
//               async proxy (TMA) and the cluster, and a block barrier publishes it to every
//               thread (the producer warpgroup included) -- a cluster barrier when the kernel
//               runs in clusters (split_k_clusters, multicast_cluster_loads), so that the peers'
//               barriers exist before any arrival on them or multicast into them, and another at
//               the kernel's end, so that no CTA exits while a peer may still access its shared
//               memory;
//             - in a warp-specialized kernel, every block barrier of the consumers becomes the
//               named barrier 1 over the consumer threads (the producer warpgroup never reaches
//               them). Barriers inside device functions follow TESSEL_CONSUMER_THREADS, which
//               codegen defines for such kernels (device/tessel/smem.cuh, block_sync).
//   Requires: specialize_warps; lowering done (lower_tile_ops and lower_reductions emit
//             barriers of their own, which must be converted too).
//   Ensures:  every mbarrier is initialized before any thread uses it; no block barrier
//             (id 0) inside a consumer role.
#include "passes/Passes.hpp"
#include "tessel/ir/Mutator.hpp"

namespace tessel::passes {

using namespace ir;

namespace {

class ConsumerBarriers : public IRMutator {
 public:
  explicit ConsumerBarriers(int threads) : threads_(threads) {}

 protected:
  Stmt mutate_node(const BarrierStmt* op, const Stmt& self) override {
    if (op->threads != 0) return self;
    return make_barrier(op->where, 1, threads_);
  }

 private:
  int threads_;
};

class RoleBarriers : public IRMutator {
 protected:
  Stmt mutate_node(const SpecializeStmt* op, const Stmt& self) override {
    Stmt c = ConsumerBarriers(op->consumer_threads).mutate(op->consumer);
    if (c.same_as(op->consumer)) return self;
    return make_specialize(op->consumer_threads, op->producer_threads, op->consumer_regs, op->producer_regs,
                           op->producer, c, op->where);
  }
};

class MbarrierInit : public IRMutator {
 public:
  explicit MbarrierInit(const PassContext& ctx) : ctx_(ctx) {}

 protected:
  Stmt mutate_node(const KernelStmt* op, const Stmt&) override {
    auto w = op->where;
    std::vector<Stmt> top =
        op->body.as<SeqStmt>() ? op->body.as<SeqStmt>()->stmts : std::vector<Stmt>{op->body};
    size_t at = 0;
    while (at < top.size() && top[at].as<DeclBuffer>()) ++at;
    std::vector<Stmt> init;
    for (const MbarrierArray& a : ctx_.mbarriers) {
      Var i("b");
      init.push_back(make_for(i, make_int(0), a.bars->shape[0], ForKind::Unrolled, 0,
                              make_mbarrier(MbarrierOp::Init, a.bars, i, make_int(a.count), w), w));
    }
    if (ctx_.cluster_split.applied) {
      Var i("b");
      init.push_back(make_for(
          i, make_int(0), ctx_.cluster_split.bars->shape[0], ForKind::Unrolled, 0,
          make_mbarrier(MbarrierOp::Init, ctx_.cluster_split.bars, i, make_int(ctx_.cluster_split.count), w),
          w));
    }
    init.push_back(make_device_call("tessel::mbarrier_init_fence", {}, {}, w));
    Expr first = make_binary(BinaryOp::EQ, ctx_.thread_index, make_int(0));
    // Clusters: the peers' barriers are initialized before anyone arrives on them or multicasts
    // into their stages (a cluster barrier, which also synchronizes the block).
    const bool cluster = ctx_.cluster_ctas() > 1;
    top.insert(top.begin() + static_cast<long>(at),
               cluster ? make_device_call("tessel::cluster_sync", {}, {}, w) : make_barrier(w));
    top.insert(top.begin() + static_cast<long>(at), make_if(first, make_seq(init, w), Stmt(), w));
    // ... and neither CTA exits before the other is done with its shared memory: the CUDA model
    // asks for a cluster barrier before exit after distributed-shared-memory accesses (each
    // receiver has waited for its sender's stores, but compute-sanitizer's racecheck cannot see
    // that through the mbarrier and flags each store as one into a block that might have exited).
    if (cluster) top.push_back(make_device_call("tessel::cluster_sync", {}, {}, w));
    return make_kernel(op->grid, op->threads, op->block_vars, make_seq(top, w), w);
  }

 private:
  const PassContext& ctx_;
};

}  // namespace

Stmt insert_barriers(const Stmt& body, PassContext& ctx) {
  Stmt out = RoleBarriers().mutate(body);
  if (!ctx.mbarriers.empty() || ctx.cluster_split.applied) out = MbarrierInit(ctx).mutate(out);
  return out;
}

}  // namespace tessel::passes
