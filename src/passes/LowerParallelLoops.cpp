// lower_parallel_loops
//   Does:     spreads each Parallel nest over the block's threads. A nest that touches a
//             fragment follows that fragment's layout: each thread visits its own registers l
//             and recovers the element's coordinates from the layout, so fragment accesses
//             become register accesses with no data movement. A nest with no fragment is split
//             flat over threads (element f goes to thread f % threads).
//   Requires: infer_layouts. Fragments inside a nest are indexed by the nest's variables in
//             order (checked: anything else would need data from another thread).
//             Row vectors beside a flat-rows tile are read as a select between a thread's two
//             registers (where a warp's runs are shorter than a row, a warp with no row
//             boundary takes a copy of the nest without it).
//   Ensures:  no ForStmt of kind Parallel remains; fragment accesses inside former nests are
//             accesses to ctx.registers_of(fragment) with one index (or a select of two).
#include <functional>
#include <map>

#include "passes/FragmentCoordinates.hpp"
#include "passes/PassUtil.hpp"
#include "passes/Passes.hpp"
#include "tessel/ir/Mutator.hpp"
#include "tessel/ir/Printer.hpp"

namespace tessel::passes {

using namespace ir;

namespace {

// How one fragment in a nest is reached: the nest variables it must be indexed with and the
// register that holds that element in the calling thread.
struct RegisterMap {
  std::vector<Var> vars;
  Expr reg;
  // A row vector beside a flat-rows tile: the element is in register `reg` where `first` holds
  // (the element is in its run's first row), else in `other`; read only.
  Expr first, other;
};

// Rewrites fragment(i, j) -> registers[reg] inside one nest, checking the indices. A row vector
// beside a flat-rows tile (a map with `first`) reads select(first, its register 0, register 1);
// a largest subexpression that reads nothing but such row vectors and constants (m(i) * log2 e)
// becomes one select between its value on each register, so that both are computed once per
// thread, not once per element. Under `first_only`, those maps read register 0 alone (a warp
// whose runs all lie in one row).
class RegisterAccess : public IRMutator {
 public:
  RegisterAccess(PassContext& ctx, const std::map<int, RegisterMap>& maps, std::source_location w,
                 bool first_only = false)
      : ctx_(ctx), maps_(maps), where_(w), first_only_(first_only) {}

  using IRMutator::mutate;
  Expr mutate(const Expr& e) override {
    if (!first_only_ && !e.as<BufferLoad>() && row_only(e)) {
      Expr first;
      for (const auto& [id, m] : maps_)
        if (m.first.defined()) first = m.first;
      return make_select(first, RegisterAccess(ctx_, maps_, where_, true).mutate(e),
                         RegisterAccess(ctx_, second_maps(), where_, true).mutate(e));
    }
    return IRMutator::mutate(e);
  }

 protected:
  // Whether e reads at least one row vector of a flat-rows tile and otherwise only constants.
  bool row_only(const Expr& e) const {
    struct Scan : IRVisitor {
      const std::map<int, RegisterMap>& maps;
      explicit Scan(const std::map<int, RegisterMap>& m) : maps(m) {}
      bool rows = false, other = false;
      void visit_node(const BufferLoad* op) override {
        auto it = maps.find(op->buffer->id);
        if (op->buffer->scope == Scope::Fragment && it != maps.end() && it->second.first.defined())
          rows = true;  // its index is the nest's row variable: checked when rewritten
        else
          other = true;
      }
      void visit_node(const VarNode*) override { other = true; }
    } scan(maps_);
    scan.visit(e);
    return scan.rows && !scan.other;
  }
  // The maps with each row vector's second register in place of its first.
  std::map<int, RegisterMap> second_maps() const {
    std::map<int, RegisterMap> out = maps_;
    for (auto& [id, m] : out)
      if (m.first.defined()) m.reg = m.other;
    return out;
  }

  const RegisterMap& check(const Buffer& b, const std::vector<Expr>& idx) {
    const RegisterMap& m = maps_.at(b->id);
    bool ok = idx.size() == m.vars.size();
    for (size_t d = 0; ok && d < idx.size(); ++d) ok = idx[d].same_as(m.vars[d]);
    if (!ok) {
      std::string got, want;
      for (size_t d = 0; d < idx.size(); ++d) got += (d ? ", " : "") + to_string(idx[d]);
      for (size_t d = 0; d < m.vars.size(); ++d) want += (d ? ", " : "") + m.vars[d].name();
      TESSEL_USER_ERROR("Parallel", where_,
                        "fragment " << b->name << " is indexed as " << b->name << "(" << got
                                    << "); inside this Parallel nest it must be " << b->name << "(" << want
                                    << ") (an element of another thread cannot be "
                                    << "reached)");
    }
    return m;
  }
  Expr mutate_node(const BufferLoad* op, const Expr& self) override {
    if (op->buffer->scope != Scope::Fragment) return IRMutator::mutate_node(op, self);
    const RegisterMap& m = check(op->buffer, op->indices);
    const Buffer& regs = ctx_.registers_of(op->buffer);
    if (m.first.defined() && !first_only_)
      return make_select(m.first, make_load(regs, {m.reg}), make_load(regs, {m.other}));
    return make_load(regs, {m.reg});
  }
  Stmt mutate_node(const BufferStore* op, const Stmt& self) override {
    if (op->buffer->scope != Scope::Fragment) return IRMutator::mutate_node(op, self);
    const RegisterMap& m = check(op->buffer, op->indices);
    if (m.first.defined())
      TESSEL_USER_ERROR("Parallel", where_,
                        "stores to row vector " << op->buffer->name << " inside a nest over a tile laid out as "
                                                << "flat rows, where each row's value sits in every word "
                                                << "of the row; compute the row vector in a nest of its own");
    Expr reg = m.reg;
    return make_store(ctx_.registers_of(op->buffer), {reg}, mutate(op->value), op->where);
  }

 private:
  PassContext& ctx_;
  const std::map<int, RegisterMap> maps_;
  std::source_location where_;
  bool first_only_;
};

// Binds vars to the coordinates of flat row-major index f over `shape`.
Stmt bind_coordinates(const std::vector<Var>& vars, const std::vector<std::int64_t>& shape, const Expr& f,
                      Stmt body, std::source_location w) {
  std::int64_t stride = 1;
  std::vector<Expr> coords(vars.size());
  for (int d = static_cast<int>(vars.size()) - 1; d >= 0; --d) {
    Expr c = stride == 1 ? f : make_binary(BinaryOp::Div, f, make_int(stride));
    if (d > 0) c = make_binary(BinaryOp::Mod, c, make_int(shape[d]));
    coords[d] = c;
    stride *= shape[d];
  }
  for (int d = static_cast<int>(vars.size()) - 1; d >= 0; --d) body = make_let(vars[d], coords[d], body, w);
  return body;
}

// Whether `s` reads and writes nothing but registers and locals (no global or shared memory).
bool registers_only(const Stmt& s) {
  struct Scan : IRVisitor {
    bool memory = false;
    void visit_node(const BufferLoad* op) override {
      memory = memory || op->buffer->scope == Scope::Global || op->buffer->scope == Scope::Shared;
      IRVisitor::visit_node(op);
    }
    void visit_node(const BufferStore* op) override {
      memory = memory || op->buffer->scope == Scope::Global || op->buffer->scope == Scope::Shared;
      IRVisitor::visit_node(op);
    }
  } scan;
  scan.visit(s);
  return !scan.memory;
}

class ParallelLowering : public IRMutator {
 public:
  explicit ParallelLowering(PassContext& ctx) : ctx_(ctx) {}

 protected:
  Stmt mutate_node(const ForStmt* op, const Stmt& self) override {
    if (op->kind != ForKind::Parallel) return IRMutator::mutate_node(op, self);
    std::vector<Var> vars;
    std::vector<std::int64_t> shape;
    Stmt body = self;
    while (const auto* f = body.as<ForStmt>()) {
      if (f->kind != ForKind::Parallel) break;
      auto e = as_const_int(f->extent);
      if (!e || !is_const_int(f->min, 0))
        TESSEL_USER_ERROR("Parallel", op->where,
                          "extent " << to_string(f->extent)
                                    << " is not a compile-time constant; Parallel nests cover tiles");
      vars.push_back(f->var);
      shape.push_back(*e);
      body = f->body;
    }
    body = mutate(body);  // nested nests inside are lowered on their own
    const std::vector<Buffer> fragments = fragments_used(body);
    std::int64_t numel = 1;
    for (auto s : shape) numel *= s;
    const int threads = ctx_.threads;
    auto w = op->where;
    if (fragments.empty()) {
      // Flat split over threads.
      Var t("t");
      Expr f =
          make_binary(BinaryOp::Add, make_binary(BinaryOp::Mul, t, make_int(threads)), ctx_.thread_index);
      Stmt inner = bind_coordinates(vars, shape, f, body, w);
      if (numel % threads) inner = make_if(make_binary(BinaryOp::LT, f, make_int(numel)), inner, Stmt(), w);
      return make_for(t, make_int(0), make_int((numel + threads - 1) / threads), ForKind::Unrolled, 0, inner,
                      w);
    }
    // The nest follows the fragment of the highest rank; 1-D row vectors (RowOf,
    // AccumulatorRows) ride along with the tile they were reduced from (or one laid out alike).
    Buffer lead = fragments[0];
    for (const Buffer& b : fragments)
      if (b.ndim() > lead.ndim()) lead = b;
    const FragmentLayout& layout = ctx_.fragment_layouts.at(lead->id);
    if (layout.shape != shape)
      TESSEL_USER_ERROR("Parallel", w,
                        "the nest covers " << shape_text(shape) << " but fragment " << lead->name << " is "
                                           << shape_text(layout.shape)
                                           << "; a Parallel nest over a fragment must cover all of it");
    Var l("l");
    std::map<int, RegisterMap> maps;
    for (const Buffer& b : fragments) {
      const FragmentLayout& bl = ctx_.fragment_layouts.at(b->id);
      if (same_fragment_layout(bl, layout)) {
        maps[b->id] = RegisterMap{vars, l};
      } else if (layout.kind == FragmentLayout::Kind::GemmAccumulator &&
                 bl.kind == FragmentLayout::Kind::AccumulatorRows && bl.shape[0] == layout.shape[0] &&
                 bl.warps_m == layout.warps_m && bl.gemm.interleaved == layout.gemm.interleaved &&
                 layout.warps_n == 1) {
        // Register l of the tile is in row register (l / 4 / mma_n) * 2 + (l % 4) / 2.
        const std::int64_t mma_n = layout.shape[1] / 8;
        Expr block = make_binary(BinaryOp::Div, make_binary(BinaryOp::Div, l, make_int(4)), make_int(mma_n));
        Expr half = make_binary(BinaryOp::Div, make_binary(BinaryOp::Mod, l, make_int(4)), make_int(2));
        maps[b->id] = RegisterMap{
            {vars[0]}, make_binary(BinaryOp::Add, make_binary(BinaryOp::Mul, block, make_int(2)), half)};
      } else if (layout.kind == FragmentLayout::Kind::RowBlocked && bl.kind == FragmentLayout::Kind::RowOf &&
                 bl.shape[0] == layout.shape[0] && bl.lanes == layout.lanes &&
                 bl.rows_per_pass == layout.rows_per_pass) {
        Expr reg = make_binary(BinaryOp::Div, l, make_int(std::int64_t(layout.chunks) * layout.vec));
        maps[b->id] = RegisterMap{{vars[0]}, reg};
      } else if (layout.kind == FragmentLayout::Kind::FlatRows &&
                 bl.kind == FragmentLayout::Kind::FlatRowOf && bl.shape[0] == layout.shape[0] &&
                 bl.vec == layout.vec && bl.chunks == layout.chunks && bl.row_length == layout.row_length) {
        // Register l is element l of the thread's run, whose first row's value is row register 0
        // and second's 1: the first while l is inside the run's head (flat_word_head: cols - f0 %
        // cols elements, f0 the run's first element; one value per thread, hoisted).
        const std::int64_t run = std::int64_t(layout.chunks) * layout.vec, cols = layout.row_length;
        Expr f0 = make_binary(BinaryOp::Mul, ctx_.thread_index, make_int(run));
        Expr head = make_binary(BinaryOp::Sub, make_int(cols), make_binary(BinaryOp::Mod, f0, make_int(cols)));
        maps[b->id] = RegisterMap{{vars[0]}, make_int(0), make_binary(BinaryOp::LT, l, head), make_int(1)};
      } else {
        if (layout.kind == FragmentLayout::Kind::GemmAccumulator && bl.kind == layout.kind)
          TESSEL_USER_ERROR("Parallel", w,
                            "fragments " << lead->name << " and " << b->name << " are gemm tiles whose warps "
                                         << "split them differently (" << layout.describe() << "; "
                                         << bl.describe()
                                         << "); give their gemms one policy (FullRow when one "
                                         << "of them is a gemm's A operand in registers)");
        TESSEL_USER_ERROR("Parallel", w,
                          "fragments " << lead->name << " and " << b->name
                                       << " are spread over threads differently; a Parallel nest can "
                                       << "combine fragments of one layout, and a tile with the row "
                                       << "vectors reduced from it");
      }
    }
    Stmt inner = RegisterAccess(ctx_, maps, w).mutate(body);
    std::vector<Expr> coords = fragment_coordinates(layout, l, ctx_.thread_index, threads);
    // Beside a flat-rows tile's row vectors, where a warp's 32 runs are shorter than a row (so
    // that most warps hold no row boundary): a warp whose threads' runs each lie in one row takes
    // a copy of the nest that reads their first registers alone, without the per-element select
    // (decided per warp, tessel::warp_all, as the row copies decide). Shorter rows put a boundary
    // in every warp, and the copy would only cost code.
    Stmt uniform;
    Expr one_row;
    for (const auto& [id, m] : maps)
      if (m.first.defined() && 32 * std::int64_t(layout.per_thread) < layout.row_length) {
        uniform = RegisterAccess(ctx_, maps, w, true).mutate(body);
        const auto* lt = m.first.as<Binary>();
        one_row = make_binary(BinaryOp::GE, lt->b, make_int(layout.per_thread));  // head >= the run
      }
    for (int d = static_cast<int>(vars.size()) - 1; d >= 0; --d) {
      inner = make_let(vars[d], coords[d], inner, w);
      if (uniform.defined()) uniform = make_let(vars[d], coords[d], uniform, w);
    }
    // A flat-rows tile's registers past its run hold padding that no copy stores and no
    // reduction reads: a nest that touches only registers runs on them unguarded (the test was an
    // instruction or two per element).
    const bool flat = layout.kind == FragmentLayout::Kind::FlatRows || layout.kind == FragmentLayout::Kind::FlatRowOf;
    if (Expr valid = fragment_register_valid(layout, l, ctx_.thread_index, threads);
        valid.defined() && !(flat && registers_only(inner))) {
      inner = make_if(valid, inner, Stmt(), w);
      if (uniform.defined()) uniform = make_if(valid, uniform, Stmt(), w);
    }
    Stmt loop = make_for(l, make_int(0), make_int(layout.per_thread), ForKind::Unrolled, 0, inner, w);
    if (!uniform.defined()) return loop;
    return make_if(make_call("tessel::warp_all", {one_row}, DType::boolean),
                   make_for(l, make_int(0), make_int(layout.per_thread), ForKind::Unrolled, 0, uniform, w), loop, w);
  }

 private:
  PassContext& ctx_;
};

}  // namespace

Stmt lower_parallel_loops(const Stmt& body, PassContext& ctx) {
  return ParallelLowering(ctx).mutate(body);
}

}  // namespace tessel::passes
