// cluster_reduce(acc, scratch, bars, rank) (split_k_clusters): the rank-0 CTA of a cluster of 2,
// 4 or 8 CTAs adds the others' partial accumulators to its own along a binary tree, each round
// through the receiving CTA's `scratch`.
#include "ops/Lowering.hpp"
#include "ops/TileOp.hpp"

namespace tessel::ops {

namespace {

using namespace ir;

class ClusterReduceOp final : public TileOp {
 public:
  const char* name() const override { return "cluster_reduce"; }
  // Reads and writes the accumulator; writes the scratch tile (a sender's stores land in its
  // receiver's copy of it).
  Access access(const ir::StmtNode& s) const override {
    const auto* c = static_cast<const ir::ClusterReduceStmt*>(&s);
    return {{whole(c->acc)}, {whole(c->acc), whole(c->scratch)}};
  }

  // tessel::cluster_reduce_to_rank0 (device/tessel/cluster_reduce.cuh): each thread's registers
  // as 16-byte vectors, thread t's q-th at (q * threads + t) * 16 bytes of the scratch.
  Stmt lower(const Stmt& s, LowerContext& lc) const override {
    const auto* op = s.as<ClusterReduceStmt>();
    PassContext& ctx = lc.ctx;
    const FragmentLayout& l = ctx.fragment_layouts.at(op->acc->id);
    const std::int64_t need = std::int64_t{l.per_thread} * ctx.threads * 4;
    const std::int64_t have = op->scratch.const_numel() * dtype_bytes(op->scratch->dtype);
    TESSEL_INTERNAL_CHECK(op->acc->dtype == DType::f32 && l.per_thread % 4 == 0 && need <= have,
                          "cluster_reduce of " << op->acc->name << " (" << dtype_name(op->acc->dtype) << ", "
                                               << l.per_thread << " registers x " << ctx.threads
                                               << " threads) through " << op->scratch->name << " of " << have
                                               << " bytes");
    std::vector<DeviceCallArg> args{{Expr(), ctx.registers_of(op->acc), Expr()},
                                    {Expr(), op->scratch, Expr()},
                                    {Expr(), op->bars, Expr()},
                                    {op->rank, Buffer(), Expr()},
                                    {ctx.thread_index, Buffer(), Expr()}};
    return make_device_call(
        "tessel::cluster_reduce_to_rank0",
        {std::to_string(l.per_thread), std::to_string(ctx.threads), std::to_string(op->ranks)}, args,
        op->where);
  }
};

}  // namespace

const TileOp& cluster_reduce_op() {
  static const ClusterReduceOp op;
  return op;
}

}  // namespace tessel::ops
