// insert_proxy_fences
//   Does:     in a kernel whose gemms read shared memory through the async proxy (wgmma;
//             infer_layouts sets ctx.uses_wgmma), precedes every block barrier with
//             `tessel::fence_proxy_async_shared()` (fence.proxy.async.shared::cta) in every
//             thread: the PTX memory model asks the threads that wrote a wgmma operand (stores,
//             completed cp.async) to order those writes for the async proxy before the barrier
//             that hands the operand over. Elsewhere it changes nothing.
//   Requires: the passes that place block barriers around shared-memory writes have run
//             (order_shared_writes, plan_pipelines: every block barrier in the IR is theirs at
//             this point); before place_gemm_waits, which drains in-flight gemms at a barrier
//             and treats the fence as passive (the fence stays first).
//   Ensures:  in a wgmma kernel each block barrier is the second statement of
//             { fence_proxy_async_shared(); barrier }.
#include "passes/Passes.hpp"
#include "tessel/ir/Mutator.hpp"

namespace tessel::passes {

using namespace ir;

namespace {

class ProxyFences : public IRMutator {
 protected:
  Stmt mutate_node(const BarrierStmt* op, const Stmt& self) override {
    if (op->id != 0) return self;
    return make_seq({make_device_call("tessel::fence_proxy_async_shared", {}, {}, op->where), self}, op->where);
  }
};

}  // namespace

Stmt insert_proxy_fences(const Stmt& body, PassContext& ctx) {
  if (!ctx.uses_wgmma) return body;
  return ProxyFences().mutate(body);
}

}  // namespace tessel::passes
