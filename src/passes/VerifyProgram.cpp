// verify_program
//   Does:     checks the program as the author wrote it and reports misuse as CompileError at the
//             author's line: one Kernel at the top; buffers used only inside the kernel that
//             declares them; copies between regions of equal extents that stay inside their
//             tiles; gemm operands in the right scopes (A shared or a whole fragment, B shared),
//             dtypes and chained shapes; no integer division or remainder by a constant zero.
//             Fills in the
//             extents of copy regions written as `buf(i, j)` from the other side.
//   Requires: a program straight from the frontend.
//   Ensures:  every Region has as many extents as its buffer has dimensions; ctx.threads,
//             ctx.grid and ctx.block_vars are set.
#include "passes/Passes.hpp"

#include <set>

#include "tessel/ir/Mutator.hpp"
#include "tessel/ir/Printer.hpp"

namespace tessel::passes {

using namespace ir;

namespace {

std::string shape_str(const std::vector<Expr>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + to_string(v[i]);
  return s + "]";
}

std::string buffer_desc(const Buffer& b) {
  return b->name + " (" + scope_name(b->scope) + " " + std::string(dtype_name(b->dtype)) +
         shape_str(b->shape) + ")";
}

// Extents without leading 1s: [1, 128, 32] and [128, 32] describe the same tile.
std::vector<Expr> squeeze(const std::vector<Expr>& e) {
  size_t i = 0;
  while (i + 1 < e.size() && is_const_int(e[i], 1)) ++i;
  return {e.begin() + static_cast<long>(i), e.end()};
}

// Extents without any 1s: a [1, 128, 1, 64] region of a [B, S, H, D] tensor and a [128, 64]
// tile have the same extents.
std::vector<Expr> drop_ones(const std::vector<Expr>& e) {
  std::vector<Expr> out;
  for (const Expr& x : e)
    if (!is_const_int(x, 1)) out.push_back(x);
  return out;
}

bool same_extents(const std::vector<Expr>& a, const std::vector<Expr>& b) {
  auto sa = drop_ones(a), sb = drop_ones(b);
  if (sa.size() != sb.size()) return false;
  for (size_t i = 0; i < sa.size(); ++i) {
    auto x = as_const_int(sa[i]), y = as_const_int(sb[i]);
    if (!x || !y || *x != *y) return false;
  }
  return true;
}

// Fits `extents` (taken from the other side of a copy) to a region of `ndim` dimensions.
std::optional<std::vector<Expr>> fit_extents(std::vector<Expr> extents, size_t ndim) {
  extents = squeeze(extents);
  if (extents.size() > ndim) return std::nullopt;
  std::vector<Expr> out(ndim - extents.size(), make_int(1));
  out.insert(out.end(), extents.begin(), extents.end());
  return out;
}

class ProgramVerifier : public IRMutator {
 public:
  explicit ProgramVerifier(PassContext& ctx) : ctx_(ctx) {
    for (const Buffer& p : ctx.params) visible_.insert(p->id);
  }

  // Every statement, so that an expression's error can name the statement's line.
  Stmt mutate(const Stmt& s) override {
    if (!s.defined()) return s;
    const std::source_location outer = where_;
    where_ = s->where;
    Stmt out = IRMutator::mutate(s);
    where_ = outer;
    return out;
  }
  using IRMutator::mutate;

 protected:
  // i / 0 and i % 0 are undefined behaviour in the generated C++ (and the interpreter would trap):
  // the author's mistake, at their line.
  Expr mutate_node(const Binary* op, const Expr& self) override {
    const bool division = op->op == BinaryOp::Div || op->op == BinaryOp::Mod ||
                          op->op == BinaryOp::FloorDiv || op->op == BinaryOp::FloorMod;
    if (division && is_integer(op->dtype) && is_const_int(op->b, 0))
      TESSEL_USER_ERROR(
          "expression", where_,
          "integer " << (op->op == BinaryOp::Div || op->op == BinaryOp::FloorDiv ? "division" : "remainder")
                     << " by zero in " << to_string(self) << "; the divisor must not be 0");
    return IRMutator::mutate_node(op, self);
  }

  Stmt mutate_node(const KernelStmt* op, const Stmt& self) override {
    if (in_kernel_) TESSEL_USER_ERROR("Kernel", op->where, "kernels cannot nest");
    if (++kernels_ > 1)
      TESSEL_USER_ERROR(
          "Kernel", op->where,
          ctx_.func_name << " launches more than one Kernel; this version supports one Kernel per PrimFunc");
    ctx_.threads = op->threads;
    ctx_.grid = op->grid;
    ctx_.block_vars = op->block_vars;
    in_kernel_ = true;
    Stmt out = IRMutator::mutate_node(op, self);
    in_kernel_ = false;
    return out;
  }

  Stmt mutate_node(const DeclBuffer* op, const Stmt& self) override {
    visible_.insert(op->buffer->id);
    return self;
  }

  Buffer mutate_buffer(const Buffer& b) override {
    if (!visible_.count(b->id))
      TESSEL_USER_ERROR("kernel", b->where,
                        b->name << " is used outside the kernel that allocates it; "
                                << "allocate it inside the Kernel body that uses it");
    return b;
  }

  Stmt mutate_node(const CopyStmt* op, const Stmt& self) override {
    Stmt s = IRMutator::mutate_node(op, self);
    const auto* c = s.as<CopyStmt>();
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
    return make_copy(src, dst, c->pad, op->where);
  }

  Stmt mutate_node(const GemmStmt* op, const Stmt& self) override {
    Stmt s = IRMutator::mutate_node(op, self);
    const Buffer &A = op->A.buffer, &B = op->B.buffer, &C = op->C.buffer;
    const char* name = "gemm";
    if ((A->scope != Scope::Shared && A->scope != Scope::Fragment) || B->scope != Scope::Shared)
      TESSEL_USER_ERROR(
          name, op->where,
          "A must be a shared-memory tile or a fragment (registers) and B a shared-memory tile; got "
              << buffer_desc(A) << " and " << buffer_desc(B));
    if (A->scope == Scope::Fragment && op->trans_a)
      TESSEL_USER_ERROR(name, op->where,
                        "A " << A->name << " is a fragment, held in registers as [M, K]; transpose_A "
                             << "applies to shared-memory tiles only");
    if (C->scope != Scope::Fragment)
      TESSEL_USER_ERROR(name, op->where, "C must be a fragment (T::alloc_fragment); got " << buffer_desc(C));
    if (A->dtype != B->dtype || (A->dtype != DType::f16 && A->dtype != DType::bf16))
      TESSEL_USER_ERROR(name, op->where,
                        "A and B must both be f16 or both bf16; got " << dtype_name(A->dtype) << " and "
                                                                      << dtype_name(B->dtype));
    if (C->dtype != DType::f32)
      TESSEL_USER_ERROR(name, op->where,
                        "the accumulator " << C->name << " is " << dtype_name(C->dtype) << "; legal: f32");
    auto a = squeeze(op->A.extents), b = squeeze(op->B.extents), c = squeeze(op->C.extents);
    if (a.size() != 2 || b.size() != 2 || c.size() != 2)
      TESSEL_USER_ERROR(name, op->where,
                        "operands must be 2-D tiles; got A " << shape_str(a) << ", B " << shape_str(b)
                                                             << ", C " << shape_str(c));
    std::int64_t M = *as_const_int(op->trans_a ? a[1] : a[0]), KA = *as_const_int(op->trans_a ? a[0] : a[1]);
    std::int64_t KB = *as_const_int(op->trans_b ? b[1] : b[0]), N = *as_const_int(op->trans_b ? b[0] : b[1]);
    std::int64_t CM = *as_const_int(c[0]), CN = *as_const_int(c[1]);
    if (KA != KB || CM != M || CN != N)
      TESSEL_USER_ERROR(name, op->where,
                        "tile shapes do not chain: A" << (op->trans_a ? "^T" : "") << " is " << M << "x" << KA
                                                      << ", B" << (op->trans_b ? "^T" : "") << " is " << KB
                                                      << "x" << N << ", C is " << CM << "x" << CN
                                                      << "; need A MxK, B KxN, C MxN");
    if (A->scope == Scope::Fragment && (A.ndim() != 2 || A.const_shape() != std::vector<std::int64_t>{M, KA}))
      TESSEL_USER_ERROR(
          name, op->where,
          "A " << A->name << " is a fragment of shape " << shape_str(A->shape) << "; a gemm takes "
               << "a fragment A whole, as a 2-D [M, K] tile (here [" << M << ", " << KA << "])");
    return s;
  }

 private:
  // A region of a tile must stay inside it; a region of a global tensor may run past the edge
  // (the copy masks it).
  void check_inside(const Region& r, const char* op, std::source_location where) {
    if (r.buffer->scope == Scope::Global) return;
    for (size_t d = 0; d < r.starts.size(); ++d) {
      auto s = as_const_int(r.starts[d]), e = as_const_int(r.extents[d]),
           n = as_const_int(r.buffer->shape[d]);
      if (e && n && *e > *n)
        TESSEL_USER_ERROR(op, where,
                          "the region " << to_string(r) << " is " << shape_str(r.extents) << " but "
                                        << buffer_desc(r.buffer) << " is smaller in dimension " << d);
      if (s && e && n && (*s < 0 || *s + *e > *n))
        TESSEL_USER_ERROR(
            op, where,
            "the region " << to_string(r) << " overruns " << buffer_desc(r.buffer) << " in dimension " << d);
    }
  }

  PassContext& ctx_;
  std::source_location where_;
  std::set<int> visible_;
  bool in_kernel_ = false;
  int kernels_ = 0;
};

}  // namespace

Stmt verify_program(const Stmt& body, PassContext& ctx) {
  Stmt out = ProgramVerifier(ctx).mutate(body);
  if (ctx.threads == 0)
    TESSEL_USER_ERROR("PrimFunc", std::source_location(),
                      ctx.func_name << " has no Kernel; call T::Kernel(...) in its body");
  return out;
}

}  // namespace tessel::passes
