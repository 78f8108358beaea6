// The tile-op interface: what the passes ask of a tile op (copy, gemm, fill, reductions, TMA
// loads), one implementation per op in src/ops/<Op>.cpp. Today: the regions an op reads and
// writes, which every pass that orders, moves or waits for statements needs (order_shared_writes,
// plan_pipelines, place_gemm_waits), the checks of the author's use (verify_program), the
// layouts an op decides (infer_layouts: gemm's, a copy's vector width, a reduction's result; the
// layouts that follow from them are propagated by infer_layouts itself) and the lowering to thread-level code (lower_tile_ops;
// lower_reductions for reductions).
#pragma once

#include <vector>

#include "tessel/ir/IR.hpp"

namespace tessel::ops {

struct LowerContext;   // ops/Lowering.hpp
struct LayoutContext;  // ops/Layouts.hpp
enum class LayoutLevel;

// The regions a tile op reads and writes (a reduction's whole source and destination buffers;
// a destination it also reads when it accumulates -- gemm's C, a reduction without clear --
// is in both lists).
struct Access {
  std::vector<ir::Region> reads;
  std::vector<ir::Region> writes;
};

class TileOp {
 public:
  virtual ~TileOp() = default;
  virtual const char* name() const = 0;
  // `s` is a statement of this op's kind.
  virtual Access access(const ir::StmtNode& s) const = 0;
  // The author's misuse of the op in `s` as a CompileError at the author's line; returns the
  // statement with what it implies filled in (a copy's extents taken from its other side).
  // verify_program calls it on each tile op as written.
  virtual ir::Stmt verify(const ir::Stmt& s) const { return s; }
  // The layouts the op in `s` decides at `level` (ops/Layouts.hpp), into the pass context's
  // fragment and shared layouts: gemm (Strict) fixes its accumulator, its shared operands' tiles
  // and a register A operand, and chooses mma.sync or wgmma; a copy between a fragment and global
  // memory (Strict) narrows the vector width of row-blocked tiles; a reduction (Common) lays its
  // result out along its source's rows. Fill and TMA loads decide none.
  virtual void infer_layouts(const ir::StmtNode& /*s*/, LayoutContext& /*lc*/, LayoutLevel /*level*/) const {}
  // Thread-level code for `s` on the pass context's target (lower_tile_ops calls it, after
  // infer_layouts chose the layouts and the pipeline passes placed the op): device calls, element
  // loops over a fragment's registers, guarded stores.
  virtual ir::Stmt lower(const ir::Stmt& s, LowerContext& lc) const = 0;
};

// The interface of `s`'s op, or nullptr when `s` is not a tile op.
const TileOp* tile_op(const ir::StmtNode* s);
inline const TileOp* tile_op(const ir::Stmt& s) {
  return tile_op(s.get());
}

// access(s) of a tile op; empty lists for any other statement.
Access access(const ir::StmtNode* s);
inline Access access(const ir::Stmt& s) {
  return access(s.get());
}

// Whether a tile op writes a buffer of `scope` / copies global memory into shared memory (a
// producer of a pipelined loop).
bool writes_scope(const ir::Stmt& s, ir::Scope scope);
bool is_global_to_shared_copy(const ir::Stmt& s);
// A copy or fill into shared memory: the writes that block barriers order (a TMA load's stage is
// ordered by its ring's mbarriers instead).
bool is_shared_write(const ir::Stmt& s);

// The op implementations (src/ops/<Op>.cpp).
const TileOp& copy_op();
const TileOp& gemm_op();
const TileOp& fill_op();
const TileOp& reduce_op();
const TileOp& tma_load_op();
const TileOp& cluster_reduce_op();

// The whole of `b` as a region.
ir::Region whole(const ir::Buffer& b);

}  // namespace tessel::ops
