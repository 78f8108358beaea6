// plan_shared_memory
//   Does:     places every shared buffer (multi-buffered stages included) in the kernel's one
//             dynamic shared-memory array, each at a 128-byte aligned offset (the swizzle and
//             cp.async assume 16-byte alignment; 128 keeps whole bank lines; 1024 for tiles a
//             wgmma descriptor reads, whose swizzle uses address bits 7-9), and rejects a
//             kernel that needs more than the target allows, naming each buffer's share.
//   Requires: plan_pipelines (stages are part of the buffers' shapes).
//   Ensures:  ctx.smem_offsets has every shared buffer; ctx.smem_bytes <= ctx.target.smem_cap;
//             ctx.min_blocks_per_sm set when fragments keep tails in shared memory, or to
//             JitOptions::min_blocks_per_sm capped at the blocks per SM the kernel's shared
//             memory and threads allow.
#include <algorithm>
#include <sstream>

#include "passes/Passes.hpp"
#include "tessel/ir/Mutator.hpp"

namespace tessel::passes {

using namespace ir;

namespace {
struct SharedCollector : IRVisitor {
  std::vector<Buffer> buffers;
  std::source_location kernel_where;
  void visit_node(const DeclBuffer* op) override {
    if (op->buffer->scope == Scope::Shared) buffers.push_back(op->buffer);
  }
  void visit_node(const KernelStmt* op) override {
    kernel_where = op->where;
    IRVisitor::visit_node(op);
  }
};
}  // namespace

Stmt plan_shared_memory(const Stmt& body, PassContext& ctx) {
  SharedCollector c;
  c.visit(body);
  constexpr std::int64_t kAlign = 128;
  std::int64_t offset = 0;
  std::ostringstream parts;
  for (const Buffer& b : c.buffers) {
    // A tile a wgmma descriptor reads swizzles with address bits [7, 10): 1024-byte aligned.
    auto l = ctx.shared_layouts.find(b->id);
    const std::int64_t align = l != ctx.shared_layouts.end() && l->second.wgmma() ? 1024 : kAlign;
    offset = (offset + align - 1) / align * align;
    ctx.smem_offsets[b->id] = offset;
    std::int64_t bytes = b.const_numel() * dtype_bytes(b->dtype);
    parts << (offset ? ", " : "") << b->name << " " << bytes << " B";
    offset += bytes;
  }
  if (ctx.uses_wgmma && offset > 0) {
    offset += 1024;  // codegen moves the array's start up to the next 1024-byte boundary
    parts << ", alignment slack 1024 B";
  }
  ctx.smem_bytes = offset;
  for (const auto& [first, second] : ctx.smem_contiguous) {
    std::int64_t end = ctx.smem_offsets.at(first->id) + first.const_numel() * dtype_bytes(first->dtype);
    TESSEL_INTERNAL_CHECK(ctx.smem_offsets.at(second->id) == end,
                          second->name << " does not directly follow " << first->name
                                       << " in shared memory, but the epilogue stages through both");
  }
  // Each SM has the per-block cap plus 1 KB of shared memory, and each block reserves 1 KB
  // (sm_80 and sm_90); at most 2048 threads per SM.
  const std::int64_t per_sm = static_cast<std::int64_t>(ctx.target.smem_cap) + 1024;
  const std::int64_t by_smem = per_sm / (offset + 1024), by_threads = ctx.threads > 0 ? 2048 / ctx.threads : 1;
  if (!ctx.register_tails.empty() && ctx.threads > 0) {
    // Two blocks are what overlapping one block's loads with the other's math needs; asking
    // for more would squeeze the registers into spills.
    ctx.min_blocks_per_sm = static_cast<int>(std::min({by_smem, by_threads, std::int64_t(2)}));
  }
  // The author's request (JitOptions::min_blocks_per_sm), as far as the kernel can have them.
  if (ctx.requested_min_blocks_per_sm > 0)
    ctx.min_blocks_per_sm = std::max<int>(
        ctx.min_blocks_per_sm,
        static_cast<int>(std::min({by_smem, by_threads, std::int64_t(ctx.requested_min_blocks_per_sm)})));
  if (offset > ctx.target.smem_cap)
    TESSEL_USER_ERROR("Kernel", c.kernel_where,
                      "the kernel needs " << offset << " bytes of shared memory (" << parts.str() << ") but "
                                          << ctx.target.arch << " allows " << ctx.target.smem_cap
                                          << " bytes per block; lower num_stages or the tile sizes");
  return body;
}

}  // namespace tessel::passes
