// copy(src, dst): reads src, writes dst. verify: equal extents (one side may leave them out: taken
// from the other), tile regions inside their tiles, no global->global copy, a global->shared
// copy between equal dtypes.
#include "ops/TileOp.hpp"

#include "ops/Checks.hpp"
#include "ops/Layouts.hpp"
#include "ops/Lowering.hpp"
#include "tessel/Error.hpp"
#include "tessel/ir/Printer.hpp"

namespace tessel::ops {

namespace {

using namespace ir;

// The lowering of one copy (see lower()), with the state lower_tile_ops passes down.
class CopyLowering {
 public:
  explicit CopyLowering(LowerContext& lc) : lc_(lc), ctx_(lc.ctx), ranges_(lc.ranges) {}

  Stmt lower(const CopyStmt* op) {
    const Region &src = op->src, &dst = op->dst;
    Scope ss = src.buffer->scope, ds = dst.buffer->scope;
    // A global region that may start before index 0 in some dimension (X(bx - 1, 0), a column
    // -3): the element-wise copy tests both edges; the tiled paths below test only the far one.
    // Row copies of fragments handle it themselves (row_vector_copy_body).
    if ((ss == Scope::Global && !starts_nonnegative(src)) || (ds == Scope::Global && !starts_nonnegative(dst))) {
      const Region& frag = ss == Scope::Fragment ? src : dst;
      if (frag.buffer->scope != Scope::Fragment ||
          ctx_.fragment_layouts.at(frag.buffer->id).kind != FragmentLayout::Kind::RowBlocked)
        return element_copy(op);
    }
    if (ss == Scope::Global && ds == Scope::Shared && !op->pad.defined()) return global_to_shared(op);
    if (ss == Scope::Fragment && ds == Scope::Global) {
      const FragmentLayout& l = ctx_.fragment_layouts.at(src.buffer->id);
      if (l.kind == FragmentLayout::Kind::GemmAccumulator && covers_whole_buffer(src))
        return accumulators_to_global(op, l);
    }
    return element_copy(op);
  }

 private:
  Stmt global_to_shared(const CopyStmt* op) {
    const Region &src = op->src, &dst = op->dst;
    const Buffer& g = src.buffer;
    auto w = op->where;
    auto [rows, cols] = matrix_extents(dst, w, "copy");
    std::optional<GlobalMatrix> m = global_matrix(src);
    if (!m)
      TESSEL_USER_ERROR("copy", w,
                        "the region "
                            << to_string(src) << " of " << g->name
                            << " has more than two dimensions of extent > 1; a copy moves a 2-D tile");
    // Rows that are not contiguous (a column stride other than 1): element by element.
    if (!is_const_int(m->col_stride, 1)) return element_copy(op);
    const SharedLayout& layout = ctx_.shared_layouts.at(dst.buffer->id);
    TESSEL_INTERNAL_CHECK(
        layout.cols == cols && layout.rows == rows,
        "shared layout " << layout.describe() << " does not match the copied tile " << rows << "x" << cols);
    int elem = dtype_bytes(g->dtype);
    std::int64_t vec = 16 / elem;
    bool vectorized = elem <= 16 && (rows == 1 || known_divisor(m->ld) % vec == 0) &&
                      known_divisor(m->offset) % vec == 0 && (cols * elem) % 16 == 0;
    std::vector<std::string> targs{dtype_cuda(g->dtype),         std::to_string(rows),
                                   std::to_string(cols),         layout.device_type(),
                                   std::to_string(ctx_.threads), vectorized ? "true" : "false"};
    // A tile cut short at every call (an M below the tile, one block row: the skinny GEMMs' A)
    // keeps only the edge path, unrolled (TileExtent::Edge, device/tessel/copy.cuh).
    Expr edge = make_binary(BinaryOp::Or, make_binary(BinaryOp::LT, m->rows_valid, make_int(rows)),
                            make_binary(BinaryOp::LT, m->cols_valid, make_int(cols)));
    if (prove_by_cases(edge, ranges_) == std::optional<bool>(true))
      targs.push_back("tessel::TileExtent::Edge");
    std::vector<DeviceCallArg> args{{Expr(), dst.buffer, linear_offset(dst)},
                                    {Expr(), g, m->offset},
                                    {i64(m->ld), Buffer(), Expr()},
                                    {m->rows_valid, Buffer(), Expr()},
                                    {m->cols_valid, Buffer(), Expr()}};
    return make_device_call("tessel::copy_global_to_shared", targs, args, w);
  }

  Stmt accumulators_to_global(const CopyStmt* op, const FragmentLayout& l) {
    const Region& dst = op->dst;
    const Buffer& g = dst.buffer;
    auto w = op->where;
    std::optional<GlobalMatrix> m = global_matrix(dst);
    if (!m || !is_const_int(m->col_stride, 1)) return element_copy(op);
    int elem = dtype_bytes(g->dtype);
    // Two adjacent columns go out as one store when both the row length and the region's
    // column start keep pairs aligned.
    bool pairs = elem <= 4 && known_divisor(m->ld) % 2 == 0 && known_divisor(m->offset) % 2 == 0;
    std::vector<DeviceCallArg> args{{Expr(), ctx_.registers_of(op->src.buffer), Expr()},
                                    {Expr(), g, m->offset},
                                    {i64(m->ld), Buffer(), Expr()},
                                    {m->rows_valid, Buffer(), Expr()},
                                    {m->cols_valid, Buffer(), Expr()}};
    // Through a staging tile and TMA stores when plan_tma_stores chose it for this copy.
    for (const PassContext::TmaStorePlan& p : ctx_.tma_stores) {
      if (p.fragment != op->src.buffer->id || p.tensor != g->id) continue;
      // The tile's start, innermost dimension first, as the tensor map counts them.
      std::vector<DeviceCallArg> tma{{Expr(), ctx_.registers_of(op->src.buffer), Expr()},
                                     {Expr(), p.staging, Expr()},
                                     {make_call("address_of", {p.map}, DType::i64), Buffer(), Expr()}};
      const int rank = g.ndim();
      for (int d = rank - 1; d >= 0; --d) tma.push_back({dst.starts[static_cast<size_t>(d)], Buffer(), Expr()});
      return make_device_call("tessel::store_accumulators_tma",
                              {dtype_cuda(g->dtype), l.gemm.device_type(), dtype_cuda(op->src.buffer->dtype),
                               std::to_string(rank), std::to_string(rank - 1 - m->col_dim),
                               std::to_string(rank - 1 - m->row_dim)},
                              tma, w);
    }
    // A wgmma tile to a 16-bit tensor whose rows and region start are provably 16-byte aligned:
    // 16-byte stores after a quad transpose where the ring epilogues apply (PassContext::ring_epilogues;
    // the template's direct stores do the same).
    const bool wgmma_tile = l.kind == FragmentLayout::Kind::GemmAccumulator && l.wgmma && l.warps_n == 1 &&
                            l.shape.size() == 2 && l.shape[0] % (16 * l.warps_m) == 0 && l.shape[1] % 32 == 0;
    if (ctx_.ring_epilogues() && wgmma_tile && (g->dtype == DType::f16 || g->dtype == DType::bf16) &&
        known_divisor(m->ld) % 8 == 0 && known_divisor(m->offset) % 8 == 0)
      return make_device_call("tessel::store_accumulators_wide",
                              {dtype_cuda(g->dtype), l.gemm.device_type(), dtype_cuda(op->src.buffer->dtype)}, args,
                              w);
    // Through shared memory when the drained ring of the gemm's main loop can hold the tile:
    // whole 16-byte rows go out instead of 4-byte pairs.
    auto scratch = ctx_.epilogue_scratch.find(op->src.buffer->id);
    if (scratch != ctx_.epilogue_scratch.end()) {
      const Buffer& a = scratch->second.a;
      std::int64_t a_bytes = a.const_numel() * dtype_bytes(a->dtype);
      std::int64_t ring = a_bytes + scratch->second.b.const_numel() * dtype_bytes(scratch->second.b->dtype);
      std::int64_t need = l.shape[0] * l.shape[1] * elem;
      if (a->dtype == g->dtype && a_bytes % 128 == 0 && need <= ring) {
        // The scratch tile goes out in 16-byte chunks only when every row of the region starts
        // 16-byte aligned (row length and column start multiples of 16 bytes) and a tile row is
        // whole chunks; otherwise element by element (N = 182 in bf16: rows 364 bytes apart).
        const std::int64_t chunk = 16 / elem;
        const bool chunks = elem <= 16 && known_divisor(m->ld) % chunk == 0 &&
                            known_divisor(m->offset) % chunk == 0 && (l.shape[1] * elem) % 16 == 0;
        args.insert(args.begin() + 1, DeviceCallArg{Expr(), a, Expr()});
        ctx_.smem_contiguous.emplace_back(scratch->second.a, scratch->second.b);
        return make_device_call("tessel::store_accumulators_via_shared",
                                {dtype_cuda(g->dtype), l.gemm.device_type(), chunks ? "true" : "false"}, args,
                                w);
      }
    }
    return make_device_call("tessel::store_accumulators",
                            {dtype_cuda(g->dtype), l.gemm.device_type(), pairs ? "true" : "false"}, args, w);
  }

  // Maps the squeezed coordinates of one side of a copy onto the other side's indices.
  static std::vector<Expr> map_indices(const Region& from, const std::vector<Expr>& from_idx,
                                       const Region& to) {
    std::vector<Expr> rel;
    for (size_t d = 0; d < from_idx.size(); ++d)
      if (!is_const_int(from.extents[d], 1)) rel.push_back(sub(from_idx[d], from.starts[d]));
    std::vector<Expr> out(to.starts.size());
    int k = static_cast<int>(rel.size()) - 1;
    for (int d = static_cast<int>(to.starts.size()) - 1; d >= 0; --d) {
      if (is_const_int(to.extents[d], 1) || k < 0) {
        out[d] = to.starts[d];
      } else {
        out[d] = add(to.starts[d], rel[k--]);
      }
    }
    return out;
  }

  bool may_be_negative(const Expr& e) const { return ops::may_be_negative(e, ranges_); }
  bool starts_nonnegative(const Region& r) const { return ops::starts_nonnegative(r, ranges_); }

  Expr read(const Region& src, const std::vector<Expr>& idx, const Expr& pad, DType to) {
    Expr v = make_load(src.buffer, idx);
    Expr in = in_bounds(src, idx, ranges_);
    if (in.defined()) v = make_select(in, v, pad.defined() ? pad : make_int(0));
    return make_cast(to, v);
  }

  Stmt element_copy(const CopyStmt* op) {
    const Region &src = op->src, &dst = op->dst;
    auto w = op->where;
    if (src.buffer->scope == Scope::Fragment && dst.buffer->scope == Scope::Fragment)
      return fragment_to_fragment(op);
    const Region* frag = src.buffer->scope == Scope::Fragment   ? &src
                         : dst.buffer->scope == Scope::Fragment ? &dst
                                                                : nullptr;
    if (!frag) {
      return over_region(lc_, dst, w, [&](const std::vector<Expr>& didx) {
        auto sidx = map_indices(dst, didx, src);
        return guarded_store(dst, didx, read(src, sidx, op->pad, dst.buffer->dtype), ranges_, w);
      });
    }
    if (!covers_whole_buffer(*frag))
      TESSEL_USER_ERROR("copy", w,
                        "copies part of fragment " << frag->buffer->name
                                                   << "; copies to or from a fragment cover all of it");
    const FragmentLayout& l = ctx_.fragment_layouts.at(frag->buffer->id);
    const Region& other = frag == &src ? dst : src;
    auto row_vectors_fit = [&] {
      if (other.buffer->scope == Scope::Shared)
        return frag == &dst && row_major_shared(other.buffer) && other.buffer.ndim() == 2;
      if (other.buffer->scope != Scope::Global) return false;
      std::optional<GlobalMatrix> m = global_matrix(other);
      return m && is_const_int(m->col_stride, 1);
    };
    if (l.kind == FragmentLayout::Kind::FlatRows && !op->row_window)
      if (Stmt flat = flat_copy(op, l, *frag, other); flat.defined()) return flat;
    if (l.kind == FragmentLayout::Kind::RowBlocked && row_vectors_fit() &&
        (frag->buffer->dtype == DType::f32 || frag->buffer->dtype == other.buffer->dtype) && l.vec > 1)
      return row_vector_copy(op, l);
    if (op->row_window)
      TESSEL_USER_ERROR("copy_window", w,
                        "fragment " << frag->buffer->name << " (" << dtype_name(frag->buffer->dtype)
                                    << ") cannot move in row vectors of "
                                    << other.buffer->name << " (" << dtype_name(other.buffer->dtype)
                                    << "); copy_window needs a fragment laid out in rows -- one that only "
                                       "element-wise ops and row reductions use -- of f32 or the tensor's dtype");
    const Buffer& regs = ctx_.registers_of(frag->buffer);
    Var v("l");
    std::vector<Expr> coords = fragment_coordinates(l, v, ctx_.thread_index, ctx_.threads);
    Stmt body;
    if (frag == &src) {
      auto didx = map_indices(src, coords, dst);
      body = guarded_store(dst, didx, make_cast(dst.buffer->dtype, make_load(regs, {v})), ranges_, w);
    } else {
      auto sidx = map_indices(dst, coords, src);
      body = make_store(regs, {v}, read(src, sidx, op->pad, dst.buffer->dtype), w);
    }
    if (Expr valid = fragment_register_valid(l, v, ctx_.thread_index, ctx_.threads); valid.defined())
      body = make_if(valid, body, Stmt(), w);
    return make_for(v, make_int(0), make_int(l.per_thread), ForKind::Unrolled, 0, body, w);
  }

  // A flat-rows fragment and the whole rows of a row-major tensor it covers (column 0, rows the
  // tile's width apart, contiguous), whose run starts at a multiple of the vector (tensors are
  // 16-byte aligned, checked at launch): each thread's words are aligned vectors of the run
  // (load_vector_or_zeros / store_row_vector_whole), or wholly past its end. A block whose run
  // ends inside a word (its last rows past the tensor's end, rows * cols not a multiple of the
  // vector) takes the element-wise masked form instead (load_row_vector / store_row_vector) -- a
  // test of the block's run, the same in every thread. Undefined for any other copy (the
  // element-wise copy below then moves it).
  Stmt flat_copy(const CopyStmt* op, const FragmentLayout& l, const Region& frag, const Region& other) {
    if (other.buffer->scope != Scope::Global || !starts_nonnegative(other)) return Stmt();
    const Buffer& t = other.buffer;
    const std::optional<GlobalMatrix> m = global_matrix(other);
    const std::int64_t R = l.shape[0], C = l.shape[1], vec = l.vec;
    const int bytes = static_cast<int>(vec) * dtype_bytes(t->dtype);
    if (!m || m->row_dim < 0 || !is_const_int(m->col_stride, 1) || !is_const_int(m->col_start, 0) ||
        !is_const_int(m->ld, C) || !is_const_int(t->shape[static_cast<size_t>(m->col_dim)], C) ||
        known_divisor(m->offset) % vec != 0 || (bytes != 16 && bytes != 8 && bytes != 4) ||
        (frag.buffer->dtype != DType::f32 && frag.buffer->dtype != t->dtype))
      return Stmt();
    auto w = op->where;
    const bool load = op->dst.buffer->scope == Scope::Fragment;
    const Buffer& regs = ctx_.registers_of(frag.buffer);
    Var grp("g");
    // The word's first element in the run, and the run's elements in the tensor.
    Expr at = mul(add(mul(ctx_.thread_index, make_int(l.chunks)), grp), make_int(vec));
    Expr run = mul(make_binary(BinaryOp::Max, make_binary(BinaryOp::Min, m->rows_valid, make_int(R)), make_int(0)),
                   make_int(C));
    Expr offset = add(m->offset, i64(at));
    Expr first = mul(grp, make_int(vec));
    Expr present = lt(at, run);
    std::vector<std::string> targs{dtype_cuda(t->dtype), std::to_string(vec), dtype_cuda(frag.buffer->dtype)};
    auto loop = [&](Stmt call) {
      return make_for(grp, make_int(0), make_int(l.chunks), ForKind::Unrolled, 0, call, w);
    };
    Stmt whole, masked;
    if (load) {
      Expr pad = op->pad.defined() ? make_cast(DType::f32, op->pad) : make_float(0.0);
      // Words past the run hold zeros: nothing reads them (no copy stores them, no reduction
      // combines them), so there is no padding to select element by element.
      whole = loop(make_device_call("tessel::load_vector_or_zeros", targs,
                                    {{Expr(), t, offset}, {present, Buffer(), Expr()}, {Expr(), regs, first}}, w));
      masked = loop(make_device_call(
          "tessel::load_row_vector", targs,
          {{Expr(), t, offset}, {sub(run, at), Buffer(), Expr()}, {pad, Buffer(), Expr()}, {Expr(), regs, first}},
          w));
    } else {
      whole = loop(make_device_call("tessel::store_row_vector_whole", targs,
                                    {{Expr(), t, offset}, {present, Buffer(), Expr()}, {Expr(), regs, first}}, w));
      masked = loop(make_device_call("tessel::store_row_vector", targs,
                                     {{Expr(), t, offset}, {sub(run, at), Buffer(), Expr()}, {Expr(), regs, first}},
                                     w));
    }
    // Whole words for every block when rows past the tensor's end come in multiples that keep the
    // run whole (C * (rows % R) % vec == 0 for every row count -- C * 1 is not, so only when the
    // rows provably never run out mid-tile); otherwise the block's own test.
    Expr ends_whole = make_binary(BinaryOp::EQ, make_binary(BinaryOp::Mod, run, make_int(vec)), make_int(0));
    if (prove_by_cases(ends_whole, ranges_) == std::optional<bool>(true)) return whole;
    return make_if(ends_whole, whole, masked, w);
  }

  // Between two fragments of one layout (infer_layouts gives a copy's destination its source's
  // layout): register l to register l, converted to the destination's dtype.
  Stmt fragment_to_fragment(const CopyStmt* op) {
    const Region &src = op->src, &dst = op->dst;
    auto w = op->where;
    if (!covers_whole_buffer(src) || !covers_whole_buffer(dst))
      TESSEL_USER_ERROR("copy", w,
                        "copies part of fragment " << (covers_whole_buffer(src) ? dst : src).buffer->name
                                                   << "; copies between fragments cover both whole");
    const FragmentLayout &ls = ctx_.fragment_layouts.at(src.buffer->id),
                         &ld = ctx_.fragment_layouts.at(dst.buffer->id);
    if (!same_fragment_layout(ls, ld))
      TESSEL_USER_ERROR(
          "copy", w,
          "fragments " << src.buffer->name << " and " << dst.buffer->name
                       << " are spread over threads differently; a copy between "
                       << "fragments needs one layout (both [M, N] tiles fed by the same gemm)");
    Var v("l");
    Stmt body = make_store(ctx_.registers_of(dst.buffer), {v},
                           make_cast(dst.buffer->dtype, make_load(ctx_.registers_of(src.buffer), {v})), w);
    if (Expr valid = fragment_register_valid(ls, v, ctx_.thread_index, ctx_.threads); valid.defined())
      body = make_if(valid, body, Stmt(), w);
    return make_for(v, make_int(0), make_int(ls.per_thread), ForKind::Unrolled, 0, body, w);
  }

  // Every row of the region starts at a multiple of `vec` elements (the tensor is 16-byte
  // aligned): the row vector path moves it whole, with no realignment.
  static bool rows_provably_aligned(const GlobalMatrix& m, int vec) {
    return known_divisor(m.offset) % vec == 0 && (m.row_dim < 0 || known_divisor(m.ld) % vec == 0);
  }

  bool row_major_shared(const Buffer& b) const {
    auto it = ctx_.shared_layouts.find(b->id);
    return it != ctx_.shared_layouts.end() && !it->second.swizzled();
  }

  // Row-blocked fragment <-> 2-D global tensor: one vector of `vec` contiguous elements per
  // register group, 16 bytes wide when the row is in bounds and aligned, masked otherwise.
  Stmt row_vector_copy(const CopyStmt* op, const FragmentLayout& l) {
    Stmt s = row_vector_copy_body(op, l);
    const bool load = op->dst.buffer->scope == Scope::Fragment;
    if (load && ctx_.register_tails.count(ctx_.registers_of(op->dst.buffer)->id)) {
      // Vectors bound for a fragment's shared tail go by cp.async (no registers in between);
      // each thread waits for its own before any use. Only that thread reads its slots, so no
      // barrier.
      s = make_seq({s, make_async_commit(op->where), make_async_wait(0, op->where)}, op->where);
    }
    return s;
  }

  // Unless JitOptions::disable_row_staging: a tile of whole rows of a row-major tensor whose rows
  // are not provably 16-byte aligned (127 columns of f16) is one contiguous run of global memory.
  // It moves through a shared scratch tile in 16-byte chunks (tessel::copy_span_to_shared /
  // copy_shared_span_to_global), the scratch offset by the run's misalignment so that chunks are
  // aligned on both sides, and each thread's vectors go between the scratch tile and its
  // registers. Undefined (the usual path) when the copy is not such a tile.
  Stmt span_copy(const CopyStmt* op, const FragmentLayout& l, const GlobalMatrix& m, const Region& f,
                 const Buffer& regs, const Var& grp, const Expr& first, const std::vector<Expr>& coords,
                 const Expr& valid) {
    const Buffer& t = (op->dst.buffer->scope == Scope::Fragment ? op->src : op->dst).buffer;
    const bool load = op->dst.buffer->scope == Scope::Fragment;
    // Not in a warp-specialized kernel: the span copy's barriers and thread count are the block's.
    if (!ctx_.allow_row_staging || l.shape.size() != 2 || ctx_.launch_threads > 0) return Stmt();
    // Not for a fragment with a shared tail (its shared memory is spoken for), nor for spans past
    // 48 KB: two of them (the load and the store) must leave room for other blocks on the SM.
    if (ctx_.register_tails.count(regs->id)) return Stmt();
    const int elem = dtype_bytes(t->dtype);
    if (16 % elem != 0 || t.ndim() != 2 || !t->strides.empty()) return Stmt();
    // Whole rows, one after another: the region starts at column 0 of a row-major tensor whose
    // row length the tile covers (one row, or rows `ld` = the row length apart); or a piece of
    // one row (a one-row tile narrower than the row, or starting past column 0: a long row's
    // chunk), which is one run of its valid columns. Rows the vector path already moves aligned
    // are left to it.
    const auto L = as_const_int(t->shape[1]);
    const bool one_row = m.row_dim < 0;
    if (!L || !is_const_int(m.col_stride, 1) || (one_row && l.shape[0] != 1)) return Stmt();
    const bool whole_rows = is_const_int(m.col_start, 0) && l.shape[1] >= *L;
    if (!whole_rows && !one_row) return Stmt();
    if (!one_row && as_const_int(m.ld) != L) return Stmt();
    if (rows_provably_aligned(m, l.vec)) return Stmt();
    // The run starts at the region's first row: not for a region that may start before row 0.
    if (!starts_nonnegative(op->dst.buffer->scope == Scope::Fragment ? op->src : op->dst)) return Stmt();
    auto w = op->where;
    const std::int64_t R = l.shape[0], vec = l.vec;
    constexpr std::int64_t kMaxSpanBytes = 48 * 1024;
    // A load reads its 16-byte vectors out of the scratch as the two aligned words that cover
    // each (tessel::load_shared_vector_realigned, opt-in: JitOptions::realigned_span_reads):
    // two spare vectors past the span keep the second word of the last one inside the tile.
    const bool realigned = load && ctx_.realigned_span_reads && vec * elem == 16;
    const std::int64_t extent = (whole_rows ? R * *L : l.shape[1]) + (realigned ? 3 : 1) * vec;
    if (extent * elem > kMaxSpanBytes) return Stmt();
    Buffer scratch = Buffer::make(t->name + "_span", {make_int(extent)}, t->dtype, Scope::Shared, w);
    ctx_.shared_layouts[scratch->id] = SharedLayout::row_major(1, extent);
    // The run: the valid rows (at most the tile's), whole; a row's piece: its valid columns (at
    // most the tile's), none when the row is past the tensor's end. The scratch offset by the
    // run's misalignment.
    Expr rows =
        make_binary(BinaryOp::Max, make_binary(BinaryOp::Min, m.rows_valid, make_int(R)), make_int(0));
    Expr count =
        whole_rows
            ? mul(i64(rows), i64(make_int(*L)))
            : mul(i64(rows), i64(make_binary(BinaryOp::Max,
                                             make_binary(BinaryOp::Min, m.cols_valid, make_int(l.shape[1])),
                                             make_int(0))));
    Expr shift = make_binary(BinaryOp::Mod, m.offset, i64(make_int(vec)));
    Expr at = add(shift, add(mul(i64(coords[0]), i64(make_int(*L))), i64(coords[1])));
    std::vector<std::string> span_targs{dtype_cuda(t->dtype), std::to_string(ctx_.threads)};
    std::vector<std::string> load_targs = span_targs;
    if (ctx_.async_span_copy) load_targs.push_back("true");
    std::vector<std::string> vec_targs{dtype_cuda(t->dtype), std::to_string(vec),
                                       dtype_cuda(f.buffer->dtype)};
    const int groups = l.per_thread / l.vec;
    // A warp over two or more consecutive rows of the span, rows whose length is not a multiple
    // of vec: two neighbouring rows' starts are L elements apart, so they are never both
    // aligned, and no vector position is whole and aligned for the whole warp -- the per-warp
    // whole form is dead code (at 129 f16 it held 17 registers: 80 -> 63), so it is not compiled.
    const bool warp_never_whole = l.kind == FragmentLayout::Kind::RowBlocked &&
                                  2 * l.lanes <= std::min(32, ctx_.threads) && *L % vec != 0;
    std::vector<Stmt> out{make_decl(scratch, w)};
    if (load) {
      out.push_back(
          make_device_call("tessel::copy_span_to_shared", load_targs,
                           {{Expr(), scratch, shift}, {Expr(), t, m.offset}, {count, Buffer(), Expr()}}, w));
      Expr pad = op->pad.defined() ? make_cast(DType::f32, op->pad) : make_float(0.0);
      if (!realigned) {
        vec_targs.push_back("false");  // shared memory: plain loads
        if (warp_never_whole) vec_targs.push_back("false");  // load_row_vector's WarpMayBeWhole
      }
      Stmt call = make_device_call(
          realigned ? "tessel::load_shared_vector_realigned" : "tessel::load_row_vector", vec_targs,
          {{Expr(), scratch, at}, {valid, Buffer(), Expr()}, {pad, Buffer(), Expr()}, {Expr(), regs, first}},
          w);
      out.push_back(make_for(grp, make_int(0), make_int(groups), ForKind::Unrolled, 0, call, w));
    } else {
      std::vector<std::string> store_targs = vec_targs;
      store_targs.push_back("true");  // whole vectors chosen per warp (store_row_vector's PerWarp)
      if (warp_never_whole) store_targs.push_back("false");  // ... and never all whole (WarpMayBeWhole)
      Stmt call =
          make_device_call("tessel::store_row_vector", store_targs,
                           {{Expr(), scratch, at}, {valid, Buffer(), Expr()}, {Expr(), regs, first}}, w);
      out.push_back(make_for(grp, make_int(0), make_int(groups), ForKind::Unrolled, 0, call, w));
      out.push_back(
          make_device_call("tessel::copy_shared_span_to_global", span_targs,
                           {{Expr(), t, m.offset}, {Expr(), scratch, shift}, {count, Buffer(), Expr()}}, w));
    }
    return make_seq(out, w);
  }

  // The row length (bytes) from which unaligned row loads are realigned in registers by default.
  static constexpr std::int64_t kRealignedRowBytes = 1024;

  // A load of rows of a contiguous tensor whose starts are not provably 16-byte aligned (1023
  // columns of f16), rows of 1024 bytes or more (any length under JitOptions::
  // realigned_global_loads; none under disable_realigned_global_loads), reads each 16-byte
  // vector as the two aligned global words that cover it, shifted into place in registers
  // (tessel::load_global_words_realigned, then tessel::unpack_global_words_realigned): no scratch
  // tile and no block barrier, a thread's vectors in flight together as on the aligned path. A
  // warp in which some thread's second word would pass the tensor's end takes the element-wise
  // path instead (decided per warp, like the vector path's choice). Undefined when the copy is
  // not such a load.
  Stmt realigned_load(const CopyStmt* op, const FragmentLayout& l, const GlobalMatrix& m, const Buffer& regs,
                      const Var& grp, const Expr& first, const Expr& valid, const Expr& offset) {
    const Buffer& t = op->src.buffer;
    const int elem = dtype_bytes(t->dtype);
    // Not for a fragment with a shared tail: its vectors past the registers are cp.async'd into
    // shared slots by the usual path (row_vector_copy).
    if (!ctx_.allow_realigned_global_loads || l.vec * elem != 16 || !t->strides.empty() ||
        !is_const_int(m.col_stride, 1) || ctx_.register_tails.count(regs->id) || t->shape.empty())
      return Stmt();
    // Long rows only, unless forced: measured faster from 1023 f16 columns on (a thread's
    // vectors of one row in flight with no barrier), slower at 127 and 129 (every second word is
    // another L1 request, and the staged path's one span per block amortizes its barrier over
    // 64 or 32 short rows). H200, session 14, docs/perf-notes.md.
    const auto row = as_const_int(t->shape.back());
    if (!ctx_.realigned_global_loads && (!row || *row * elem < kRealignedRowBytes)) return Stmt();
    if (rows_provably_aligned(m, l.vec)) return Stmt();  // the vector path
    std::int64_t extent = 1;
    for (const Expr& d : t->shape) {
      const auto n = as_const_int(d);
      if (!n) return Stmt();
      extent *= *n;
    }
    auto w = op->where;
    const int groups = l.per_thread / l.vec;
    // Every vector of the thread absent, or both its words inside the tensor.
    Expr fits;
    for (int gi = 0; gi < groups; ++gi) {
      std::vector<std::pair<Var, Expr>> at{{grp, make_int(gi)}};
      Expr o = substitute(offset, at);
      Expr word = sub(o, make_binary(BinaryOp::Mod, o, i64(make_int(l.vec))));
      Expr ok = make_binary(BinaryOp::Or, make_binary(BinaryOp::LE, substitute(valid, at), make_int(0)),
                            make_binary(BinaryOp::LE, add(word, i64(make_int(2 * l.vec))), i64(make_int(extent))));
      fits = fits.defined() ? make_binary(BinaryOp::And, fits, ok) : ok;
    }
    const std::vector<std::string> targs{dtype_cuda(t->dtype), std::to_string(l.vec),
                                         dtype_cuda(op->dst.buffer->dtype)};
    Expr pad = op->pad.defined() ? make_cast(DType::f32, op->pad) : make_float(0.0);
    const std::vector<DeviceCallArg> args{
        {Expr(), t, offset}, {valid, Buffer(), Expr()}, {pad, Buffer(), Expr()}, {Expr(), regs, first}};
    // Two loops: every load of the thread first (one basic block, all in flight), then the
    // shifts and unpacks, whose per-warp branch would otherwise stand between one vector's
    // loads and the next's (in the sm_90a SASS of 1023 f16, one loop: each vector's loads were
    // issued only after the previous vector's unpack, so after its loads returned).
    // The shift each vector's words are realigned by, read off the address handed to the
    // unpack: the first vector's when every vector of the thread is a multiple of vec elements
    // away from it (a long row's vectors), so that the shift and its branch are computed once a
    // thread rather than once a vector.
    const Expr first_offset = substitute(offset, {{grp, make_int(0)}});
    bool one_shift = true;
    for (int gi = 1; gi < groups; ++gi)
      if (known_divisor(sub(substitute(offset, {{grp, make_int(gi)}}), first_offset)) % l.vec != 0) one_shift = false;
    const Expr shift_at = one_shift ? first_offset : offset;
    Buffer words = Buffer::make(regs->name + "_words", {make_int(8 * groups)}, DType::i32, Scope::Local, w);
    const Expr at_words = make_binary(BinaryOp::Mul, grp, make_int(8));
    const std::vector<std::string> word_targs{dtype_cuda(t->dtype), std::to_string(l.vec)};
    Stmt realigned = make_seq(
        {make_decl(words, w),
         make_for(grp, make_int(0), make_int(groups), ForKind::Unrolled, 0,
                  make_device_call("tessel::load_global_words_realigned", word_targs,
                                   {{Expr(), t, offset}, {valid, Buffer(), Expr()}, {Expr(), words, at_words}}, w),
                  w),
         make_for(grp, make_int(0), make_int(groups), ForKind::Unrolled, 0,
                  make_device_call("tessel::unpack_global_words_realigned", targs,
                                   {{Expr(), t, shift_at},
                                    {valid, Buffer(), Expr()},
                                    {pad, Buffer(), Expr()},
                                    {Expr(), words, at_words},
                                    {Expr(), regs, first}},
                                   w),
                  w)},
        w);
    Stmt masked = make_for(grp, make_int(0), make_int(groups), ForKind::Unrolled, 0,
                           make_device_call("tessel::load_row_vector", targs, args, w), w);
    return make_if(make_call("tessel::warp_all", {fits}, DType::boolean), realigned, masked, w);
  }

  // A row copy whose column start may be negative, or a copy_window: vector positions before
  // `lo` and at or past `hi` are padded on the way in and left alone on the way out, as past the
  // row's end (the interpreter's semantics). A tile that starts at the aligned word at or before
  // its row's start (copy_window, or a column start -(row offset % vec): the offset provably a
  // multiple of vec) moves every vector as one aligned word: whole words in, with the row's head
  // and tail elements selected in registers (element by element only in a warp with a word that
  // may lie outside the tensor); whole words out, element-wise stores only in the warps that
  // hold a row's head or tail. Not provably aligned: element by element.
  Stmt window_copy(const CopyStmt* op, const FragmentLayout& l, const Region& f, const Buffer& regs,
                   const Var& grp, const Expr& first, const Expr& lo, const Expr& hi, const Expr& offset) {
    auto w = op->where;
    const bool load = op->dst.buffer->scope == Scope::Fragment;
    const Buffer& t = (load ? op->src : op->dst).buffer;
    const int groups = l.per_thread / l.vec;
    const int vec = l.vec;
    const int vector_bytes = vec * dtype_bytes(t->dtype);
    // Aligned for every vector, block and iteration (the only way to whole-word moves).
    Expr aligned, whole, fits;
    std::int64_t extent = 1;
    bool static_extent = true;
    for (const Expr& d : t->shape) {
      const auto n = as_const_int(d);
      if (!n) static_extent = false;
      else extent *= *n;
    }
    for (int gi = 0; gi < groups; ++gi) {
      std::vector<std::pair<Var, Expr>> at{{grp, make_int(gi)}};
      Expr o = substitute(offset, at), vlo = substitute(lo, at), vhi = substitute(hi, at);
      Expr a = make_binary(BinaryOp::EQ, make_binary(BinaryOp::Mod, o, i64(make_int(vec))), i64(make_int(0)));
      aligned = aligned.defined() ? make_binary(BinaryOp::And, aligned, a) : a;
      Expr absent = make_binary(BinaryOp::Or, make_binary(BinaryOp::LE, vhi, make_int(0)),
                                make_binary(BinaryOp::GE, vlo, make_int(vec)));
      Expr full = make_binary(BinaryOp::And, make_binary(BinaryOp::LE, vlo, make_int(0)),
                              make_binary(BinaryOp::GE, vhi, make_int(vec)));
      Expr wk = make_binary(BinaryOp::Or, absent, full);
      whole = whole.defined() ? make_binary(BinaryOp::And, whole, wk) : wk;
      if (static_extent) {
        Expr inside = make_binary(BinaryOp::And, make_binary(BinaryOp::GE, o, i64(make_int(0))),
                                  make_binary(BinaryOp::LE, add(o, i64(make_int(vec))), i64(make_int(extent))));
        Expr fk = make_binary(BinaryOp::Or, absent, inside);
        fits = fits.defined() ? make_binary(BinaryOp::And, fits, fk) : fk;
      }
    }
    ranges_.set(grp, {0, groups - 1});
    const bool words = (vector_bytes == 16 || vector_bytes == 8 || vector_bytes == 4) &&
                       prove_by_cases(aligned, ranges_) == std::optional<bool>(true);
    const bool always_fits = words && fits.defined() && prove_by_cases(fits, ranges_) == std::optional<bool>(true);
    ranges_.erase(grp);
    std::vector<std::string> targs{dtype_cuda(t->dtype), std::to_string(vec), dtype_cuda(f.buffer->dtype)};
    auto loop = [&](Stmt call) { return make_for(grp, make_int(0), make_int(groups), ForKind::Unrolled, 0, call, w); };
    if (load) {
      Expr pad = op->pad.defined() ? make_cast(DType::f32, op->pad) : make_float(0.0);
      auto call = [&](bool word) {
        std::vector<std::string> a = targs;
        a.push_back(word ? "true" : "false");
        return loop(make_device_call(
            "tessel::load_row_window", a,
            {{Expr(), t, offset}, {lo, Buffer(), Expr()}, {hi, Buffer(), Expr()}, {pad, Buffer(), Expr()},
             {Expr(), regs, first}},
            w));
      };
      if (!words || !fits.defined()) return call(false);
      // A register array (no shared tail): two loops, every word of the thread loaded before the
      // first unpack (tessel::load_global_words_window, unpack_row_window). With one loop the
      // head's and tail's selects stood between a vector's load and the next one's (sm_90a,
      // 65536x8191 f16 on 11 warps: 8 SEL and up to 16 ISETP a vector, in every warp); the
      // unpack now selects only in a warp holding a row's head or tail, decided per warp after
      // the loads. A shared tail keeps load_row_window: its whole vectors go by cp.async.
      Stmt word_path = call(true);
      if (!ctx_.register_tails.count(regs->id)) {
        const int ints = vector_bytes / 4;
        Buffer held =
            Buffer::make(regs->name + "_words", {make_int(ints * groups)}, DType::i32, Scope::Local, w);
        const Expr at_words = make_binary(BinaryOp::Mul, grp, make_int(ints));
        const std::vector<std::string> word_targs{dtype_cuda(t->dtype), std::to_string(vec)};
        word_path = make_seq({make_decl(held, w),
                              loop(make_device_call("tessel::load_global_words_window", word_targs,
                                                    {{Expr(), t, offset},
                                                     {lo, Buffer(), Expr()},
                                                     {hi, Buffer(), Expr()},
                                                     {Expr(), held, at_words}},
                                                    w)),
                              loop(make_device_call("tessel::unpack_row_window", targs,
                                                    {{lo, Buffer(), Expr()},
                                                     {hi, Buffer(), Expr()},
                                                     {pad, Buffer(), Expr()},
                                                     {Expr(), held, at_words},
                                                     {Expr(), regs, first}},
                                                    w))},
                             w);
      }
      if (always_fits) return word_path;
      return make_if(make_call("tessel::warp_all", {fits}, DType::boolean), word_path, call(false), w);
    }
    Stmt masked = loop(make_device_call("tessel::store_row_window", targs,
                                        {{Expr(), t, offset}, {lo, Buffer(), Expr()}, {hi, Buffer(), Expr()},
                                         {Expr(), regs, first}},
                                        w));
    if (!words) return masked;
    Expr present = make_binary(BinaryOp::And, make_binary(BinaryOp::GT, hi, make_int(0)),
                               make_binary(BinaryOp::LT, lo, make_int(vec)));
    Stmt fast = loop(make_device_call("tessel::store_row_vector_whole", targs,
                                      {{Expr(), t, offset}, {present, Buffer(), Expr()}, {Expr(), regs, first}}, w));
    return make_if(make_call("tessel::warp_all", {whole}, DType::boolean), fast, masked, w);
  }

  Stmt row_vector_copy_body(const CopyStmt* op, const FragmentLayout& l) {
    auto w = op->where;
    bool load = op->dst.buffer->scope == Scope::Fragment;
    const Region& g = load ? op->src : op->dst;
    const Region& f = load ? op->dst : op->src;
    const Buffer& regs = ctx_.registers_of(f.buffer);
    Var grp("g");
    Expr first = mul(grp, make_int(l.vec));
    std::vector<Expr> coords = fragment_coordinates(l, first, ctx_.thread_index, ctx_.threads);
    const Buffer& t = g.buffer;
    Expr valid, offset;
    if (t->scope == Scope::Global) {
      // The fragment's rows and columns along the global region's matrix dimensions.
      const GlobalMatrix m = *global_matrix(g);
      // The region's rows inside the tensor: below its end, and at or past row 0 (and every other
      // dimension's index >= 0) where a start may be negative.
      Expr row_ok = lt(coords[0], m.rows_valid);
      for (size_t d = 0; d + 1 < g.starts.size(); ++d) {
        if (!may_be_negative(g.starts[d])) continue;
        Expr index = static_cast<int>(d) == m.row_dim ? add(g.starts[d], coords[0]) : g.starts[d];
        row_ok = make_binary(BinaryOp::And, row_ok, make_binary(BinaryOp::GE, index, make_int(0)));
      }
      valid = make_select(row_ok, sub(m.cols_valid, coords[1]), make_int(0));
      offset = add(m.offset, add(mul(i64(coords[0]), i64(m.ld)), i64(coords[1])));
      const bool from_column_0 = !may_be_negative(m.col_start);
      // Columns before 0 on the row: the region's own (lo = -column of the vector's first element).
      Expr before = from_column_0 ? Expr() : sub(make_int(0), add(m.col_start, coords[1]));
      if (op->row_window) {
        // copy_window: each row from the aligned word at or before its start (at the region's
        // column c0): shift s = the start's offset mod vec (floored where c0 may be negative),
        // the first s positions and those past the row's end padding.
        Expr row_start = add(m.offset, mul(i64(coords[0]), i64(m.ld)));
        Expr v = i64(make_int(l.vec));
        Expr shift = make_binary(BinaryOp::Mod, row_start, v);
        if (!from_column_0) shift = make_binary(BinaryOp::Mod, add(shift, v), v);
        Expr lo = sub(shift, i64(coords[1]));
        if (!from_column_0)
          lo = add(lo, make_binary(BinaryOp::Max, sub(make_int(0), m.col_start), make_int(0)));
        Expr hi = make_select(row_ok, add(sub(m.cols_valid, coords[1]), shift), make_int(0));
        return window_copy(op, l, f, regs, grp, first, lo, hi, add(sub(row_start, shift), i64(coords[1])));
      }
      if (!from_column_0) return window_copy(op, l, f, regs, grp, first, before, valid, offset);
      if (load) {
        if (Stmt realigned = realigned_load(op, l, m, regs, grp, first, valid, offset); realigned.defined())
          return realigned;
      }
      if (Stmt staged = span_copy(op, l, m, f, regs, grp, first, coords, valid); staged.defined())
        return staged;
    } else {
      Expr row = add(g.starts[0], coords[0]), col = add(g.starts[1], coords[1]);
      valid = make_select(lt(row, t->shape[0]), sub(t->shape[1], col), make_int(0));
      offset = add(mul(i64(row), i64(t->shape[1])), i64(col));
    }
    std::vector<std::string> targs{dtype_cuda(t->dtype), std::to_string(l.vec)};
    const bool global = t->scope == Scope::Global;
    Stmt call;
    const int groups = l.per_thread / l.vec;
    const int vector_bytes = l.vec * dtype_bytes(t->dtype);
    targs.push_back(dtype_cuda(f.buffer->dtype));
    if (!global) targs.push_back("false");  // a row-major shared tile: plain loads
    if (groups > 1 && (vector_bytes == 16 || vector_bytes == 8 || vector_bytes == 4)) {
      // Several vectors per thread: when every one is whole and aligned (tested once, the same
      // test for the whole copy), the loads form one basic block and are all in flight together;
      // otherwise each vector takes the masked path. (One masked call per vector put a branch
      // between consecutive loads, and ptxas then waited for each load before issuing the next.)
      // Alignment: tensors are 16-byte aligned (checked at launch), so a vector is aligned when
      // its element offset is a multiple of vec.
      // Each vector whole and aligned, or wholly past the row's end (valid <= 0: padded on
      // load, dropped on store) -- the common case even when the tile is wider than the row.
      Expr fast;
      for (int gi = 0; gi < groups; ++gi) {
        std::vector<std::pair<Var, Expr>> at{{grp, make_int(gi)}};
        Expr v = substitute(valid, at);
        Expr aligned = make_binary(BinaryOp::EQ,
                                   make_binary(BinaryOp::Mod, substitute(offset, at), i64(make_int(l.vec))),
                                   i64(make_int(0)));
        // A count that is a multiple of vec is whole or <= 0 by itself (N = 1000 in a 1024 tile).
        Expr ok = known_divisor(v) % l.vec == 0
                      ? aligned
                      : make_binary(BinaryOp::And,
                                    make_binary(BinaryOp::Or, make_binary(BinaryOp::GE, v, make_int(l.vec)),
                                                make_binary(BinaryOp::LE, v, make_int(0))),
                                    aligned);
        fast = fast.defined() ? make_binary(BinaryOp::And, fast, ok) : ok;
      }
      Expr present = make_binary(BinaryOp::GT, valid, make_int(0));
      ranges_.set(grp, {0, groups - 1});
      if (prove_by_cases(present, ranges_) == std::optional<bool>(true))
        present = make_int(1, DType::boolean);
      const bool provably_fast = prove_by_cases(fast, ranges_) == std::optional<bool>(true);
      ranges_.erase(grp);
      Stmt whole, masked;
      if (load) {
        Expr pad = op->pad.defined() ? make_cast(DType::f32, op->pad) : make_float(0.0);
        whole = make_device_call("tessel::load_row_vector_whole", targs,
                                 {{Expr(), t, offset},
                                  {present, Buffer(), Expr()},
                                  {pad, Buffer(), Expr()},
                                  {Expr(), regs, first}},
                                 w);
        masked = make_device_call(
            "tessel::load_row_vector", targs,
            {{Expr(), t, offset}, {valid, Buffer(), Expr()}, {pad, Buffer(), Expr()}, {Expr(), regs, first}},
            w);
      } else {
        whole =
            make_device_call("tessel::store_row_vector_whole", targs,
                             {{Expr(), t, offset}, {present, Buffer(), Expr()}, {Expr(), regs, first}}, w);
        masked = make_device_call("tessel::store_row_vector", targs,
                                  {{Expr(), t, offset}, {valid, Buffer(), Expr()}, {Expr(), regs, first}}, w);
      }
      Stmt fast_path = make_for(grp, make_int(0), make_int(groups), ForKind::Unrolled, 0, whole, w);
      // Provably whole and aligned for every block, thread and loop iteration (a static shape
      // whose rows the tile divides): only the fast path. The edge path's mere presence costs
      // ~6 % of copy bandwidth at N = 16384 (bench/results/2026-12-03-softmax-s5-harness-h200.txt).
      if (provably_fast) return fast_path;
      // Decided per warp (tessel::warp_all): a thread takes the vector path only when its whole
      // warp does, so the two paths never diverge inside a warp (see reduce.cuh: ptxas
      // miscompiled the divergent form).
      return make_if(make_call("tessel::warp_all", {fast}, DType::boolean), fast_path,
                     make_for(grp, make_int(0), make_int(groups), ForKind::Unrolled, 0, masked, w), w);
    }
    if (load) {
      Expr pad = op->pad.defined() ? make_cast(DType::f32, op->pad) : make_float(0.0);
      call = make_device_call(
          "tessel::load_row_vector", targs,
          {{Expr(), t, offset}, {valid, Buffer(), Expr()}, {pad, Buffer(), Expr()}, {Expr(), regs, first}},
          w);
    } else {
      call = make_device_call("tessel::store_row_vector", targs,
                              {{Expr(), t, offset}, {valid, Buffer(), Expr()}, {Expr(), regs, first}}, w);
    }
    return make_for(grp, make_int(0), make_int(l.per_thread / l.vec), ForKind::Unrolled, 0, call, w);
  }

  LowerContext& lc_;
  PassContext& ctx_;
  VarRanges& ranges_;
};

class CopyOp final : public TileOp {
 public:
  const char* name() const override { return "copy"; }
  Access access(const StmtNode& s) const override {
    const auto* c = static_cast<const CopyStmt*>(&s);
    return {{c->src}, {c->dst}};
  }

  Stmt lower(const Stmt& s, LowerContext& lc) const override {
    return CopyLowering(lc).lower(s.as<CopyStmt>());
  }

  // Strict: fragments exchanged with global tensors set the vector width of row-blocked tiles.
  void infer_layouts(const StmtNode& st, LayoutContext& lc, LayoutLevel level) const override {
    if (level != LayoutLevel::Strict) return;
    const auto* op = static_cast<const CopyStmt*>(&st);
    const Region &s = op->src, &d = op->dst;
    // Fragments exchanged with global tensors move in 16-byte vectors of the global dtype.
    bool with_global = s.buffer->scope == Scope::Global || d.buffer->scope == Scope::Global;
    bool with_fragment = s.buffer->scope == Scope::Fragment || d.buffer->scope == Scope::Fragment;
    if (with_global && with_fragment) {
      int bytes = dtype_bytes(s.buffer->scope == Scope::Global ? s.buffer->dtype : d.buffer->dtype);
      lc.vec = std::min(lc.vec, 16 / bytes);
    }
  }

  Stmt verify(const Stmt& s) const override {
    const auto* op = s.as<CopyStmt>();
    const auto* c = op;
    Region src = c->src, dst = c->dst;
    const char* name = "copy";
    if (src.extents.empty() && dst.extents.empty())
      TESSEL_USER_ERROR(name, op->where,
                        "neither " << src.buffer->name << " nor " << dst.buffer->name
                                   << " gives the region's extents; pass a whole buffer on one side");
    if (src.extents.empty()) {
      auto e = fit_extents(dst.extents, src.starts.size());
      if (!e)
        TESSEL_USER_ERROR(
            name, op->where,
            "the destination " << to_string(dst) << " has more dimensions than " << buffer_desc(src.buffer));
      src.extents = *e;
    }
    if (dst.extents.empty()) {
      auto e = fit_extents(src.extents, dst.starts.size());
      if (!e)
        TESSEL_USER_ERROR(
            name, op->where,
            "the source " << to_string(src) << " has more dimensions than " << buffer_desc(dst.buffer));
      dst.extents = *e;
    }
    if (!same_extents(src.extents, dst.extents))
      TESSEL_USER_ERROR(name, op->where,
                        "the regions have different extents: "
                            << to_string(src) << " is " << shape_str(src.extents) << ", " << to_string(dst)
                            << " is " << shape_str(dst.extents) << "; a copy needs equal extents");
    check_inside(src, name, op->where);
    check_inside(dst, name, op->where);
    if (src.buffer->scope == Scope::Global && dst.buffer->scope == Scope::Global)
      TESSEL_USER_ERROR(name, op->where,
                        "copies from global " << src.buffer->name << " to global " << dst.buffer->name
                                              << "; stage the data through shared memory or a fragment");
    if (src.buffer->scope == Scope::Global && dst.buffer->scope == Scope::Shared &&
        src.buffer->dtype != dst.buffer->dtype)
      TESSEL_USER_ERROR(name, op->where,
                        "global " << src.buffer->name << " is " << dtype_name(src.buffer->dtype)
                                  << " but shared " << dst.buffer->name << " is "
                                  << dtype_name(dst.buffer->dtype)
                                  << "; a global->shared copy moves bytes, so the dtypes must match");
    if (c->row_window) {
      const Region* g = src.buffer->scope == Scope::Global ? &src : dst.buffer->scope == Scope::Global ? &dst : nullptr;
      const Region* fr = src.buffer->scope == Scope::Fragment ? &src : dst.buffer->scope == Scope::Fragment ? &dst : nullptr;
      if (!g || !fr)
        TESSEL_USER_ERROR("copy_window", op->where,
                          "copies " << buffer_desc(src.buffer) << " to " << buffer_desc(dst.buffer)
                                    << "; copy_window moves rows between a global tensor and a fragment");
      std::optional<passes::GlobalMatrix> m = passes::global_matrix(*g);
      const int elem = dtype_bytes(g->buffer->dtype);
      if (!m || !is_const_int(m->col_stride, 1) || 16 % elem != 0)
        TESSEL_USER_ERROR("copy_window", op->where,
                          "the region " << to_string(*g) << " of " << buffer_desc(g->buffer)
                                        << " is not rows of contiguous elements of at most 16 bytes; copy_window "
                                           "shifts each row to a 16-byte word, so it needs a 2-D region "
                                           "whose innermost dimension has stride 1");
    }
    return make_copy(src, dst, c->pad, op->where, c->row_window);
  }
};

}  // namespace

const TileOp& copy_op() {
  static const CopyOp op;
  return op;
}

}  // namespace tessel::ops
