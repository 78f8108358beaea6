// plan_tma_copies
//   Does:     on sm_90a (the Hopper switches on), turns the global->shared copies of each
//             Pipelined loop into TMA loads when every one of them can be one: a 16-bit tensor
//             whose last dimension is contiguous and whose other strides are multiples of 16
//             bytes (at most 5 dimensions); a region that is a 2-D tile of it (global_matrix:
//             columns along the last dimension) of at most 256 rows; a destination a wgmma
//             reads (infer_layouts gave it a WgmmaSwizzleLayout, whose 128/64/32-byte panels
//             are what a TMA box with that swizzle writes) whose stage size keeps the next
//             stage 1024-byte aligned. Each tensor gets one tensor map per box shape, a kernel
//             parameter (ctx.tma_params: the box per tensor dimension, 1 where the tile does
//             not span it, and the swizzle); the load covers the tile with one box per panel.
//             Reads past the tensor's edges fill zeros, as the copies did. A loop with any
//             other producer, and loops nested in other loops (a ring's phases count the loop's
//             iterations from the kernel's start), keep their cp.async schedule.
//   Requires: infer_layouts (shared layouts; a tile takes the wgmma layout when a wgmma reads it).
//   Ensures:  every TmaLoadStmt's map is in ctx.tma_params; TmaLoadStmts have no barrier yet
//             (plan_pipelines gives them their ring's).
#include "passes/GlobalRegions.hpp"
#include "passes/PassUtil.hpp"
#include "passes/Passes.hpp"
#include "tessel/ir/Mutator.hpp"

namespace tessel::passes {

using namespace ir;

namespace {

bool is_producer(const Stmt& s) {
  const auto* c = s.as<CopyStmt>();
  return c && c->src.buffer->scope == Scope::Global && c->dst.buffer->scope == Scope::Shared &&
         !c->pad.defined();
}

class TmaPlanner : public IRMutator {
 public:
  explicit TmaPlanner(PassContext& ctx) : ctx_(ctx) {}

 protected:
  Stmt mutate_node(const ForStmt* op, const Stmt& self) override {
    if (op->kind != ForKind::Pipelined || depth_ > 0) {
      // A ring's barrier phases follow its loop's iteration count from the kernel's start, so
      // only loops that run once per kernel get one; loops inside others keep cp.async.
      ++depth_;
      Stmt out = IRMutator::mutate_node(op, self);
      --depth_;
      return out;
    }
    std::vector<Stmt> body =
        op->body.as<SeqStmt>() ? op->body.as<SeqStmt>()->stmts : std::vector<Stmt>{op->body};
    std::vector<std::optional<TmaParam>> boxes;
    bool all = true, any = false;
    for (const Stmt& s : body) {
      if (!is_producer(s)) continue;
      any = true;
      boxes.push_back(box_for(s.as<CopyStmt>()));
      all = all && boxes.back().has_value();
    }
    if (!any || !all) return self;
    size_t next = 0;
    for (Stmt& s : body) {
      if (!is_producer(s)) continue;
      const auto* c = s.as<CopyStmt>();
      s = make_tma_load(c->src, c->dst, tma_load_map(ctx_, *boxes[next++]), Buffer(), Expr(), c->where);
    }
    return make_for(op->var, op->min, op->extent, op->kind, op->num_stages, make_seq(body, op->where),
                    op->where);
  }

 private:
  // The box a TMA load of this copy needs, or nullopt when the copy cannot be one.
  std::optional<TmaParam> box_for(const CopyStmt* c) const {
    auto layout = ctx_.shared_layouts.find(c->dst.buffer->id);
    if (layout == ctx_.shared_layouts.end()) return std::nullopt;
    return tma_box(c, layout->second);
  }

  PassContext& ctx_;
  int depth_ = 0;
};

}  // namespace

Var tma_load_map(PassContext& ctx, const TmaParam& want) {
  for (const TmaParam& t : ctx.tma_params)
    if (t.tensor.same_as(want.tensor) && t.box == want.box && t.swizzle_bytes == want.swizzle_bytes) return t.var;
  TmaParam p = want;
  p.var = Var(want.tensor->name + "_map");
  ctx.tma_params.push_back(p);
  return p.var;
}

std::optional<TmaParam> tma_box(const CopyStmt* c, const SharedLayout& l) {
  const Buffer& g = c->src.buffer;
  const int elem = dtype_bytes(g->dtype);
  if (elem != 2 || g.ndim() > 5) return std::nullopt;
  if (!l.wgmma() || l.swizzle_bytes == 0) return std::nullopt;
  if ((l.rows * l.cols * elem) % 1024 != 0) return std::nullopt;  // the next stage's alignment
  std::optional<GlobalMatrix> m = global_matrix(c->src);
  if (!m || !is_const_int(m->col_stride, 1)) return std::nullopt;
  const std::vector<Expr> strides = g.strides();
  for (size_t d = 0; d + 1 < strides.size(); ++d) {
    auto st = as_const_int(strides[d]);
    if (!st || (*st * elem) % 16 != 0 || *st * elem >= (std::int64_t(1) << 40)) return std::nullopt;
  }
  for (const Expr& e : g->shape)
    if (auto n = as_const_int(e); !n || *n >= (std::int64_t(1) << 32)) return std::nullopt;
  auto cols = as_const_int(c->src.extents[m->col_dim]);
  auto rows = m->row_dim >= 0 ? as_const_int(c->src.extents[m->row_dim]) : std::optional<std::int64_t>(1);
  if (!cols || !rows || *cols != l.cols || *rows != l.rows || *rows > 256) return std::nullopt;
  const int panel_cols = l.swizzle_bytes / elem;
  if (*cols % panel_cols != 0) return std::nullopt;
  TmaParam p;
  p.tensor = g;
  p.swizzle_bytes = l.swizzle_bytes;
  p.box.assign(static_cast<size_t>(g.ndim()), 1);
  p.box[static_cast<size_t>(m->col_dim)] = panel_cols;
  if (m->row_dim >= 0) p.box[static_cast<size_t>(m->row_dim)] = static_cast<int>(*rows);
  return p;
}

Stmt plan_tma_copies(const Stmt& body, PassContext& ctx) {
  if (ctx.target.sm != 90 || !ctx.allow_tma || !ctx.allow_wgmma || !ctx.allow_warp_specialization ||
      !ctx.allow_async_pipeline || ctx.hopper.selected)
    return body;
  return TmaPlanner(ctx).mutate(body);
}

}  // namespace tessel::passes
