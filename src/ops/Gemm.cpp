// gemm(A, B, C): C += op(A) op(B); reads A, B and the accumulator C, writes C. verify: A a shared
// tile or a whole 2-D fragment (not transposed), B a shared tile, C an f32 fragment, A and B both
// f16 or both bf16, 2-D tiles whose shapes chain.
#include "ops/TileOp.hpp"

#include "ops/Checks.hpp"
#include "ops/Lowering.hpp"
#include "tessel/Error.hpp"
#include "tessel/ir/Printer.hpp"

namespace tessel::ops {

namespace {

using namespace ir;

class GemmOp final : public TileOp {
 public:
  const char* name() const override { return "gemm"; }
  Access access(const StmtNode& s) const override {
    const auto* g = static_cast<const GemmStmt*>(&s);
    return {{g->A, g->B, g->C}, {g->C}};
  }

  Stmt lower(const Stmt& s, LowerContext& lc) const override {
    const auto* op = s.as<GemmStmt>();
    PassContext& ctx_ = lc.ctx;
    const FragmentLayout& l = ctx_.fragment_layouts.at(op->C.buffer->id);
    const bool a_in_registers = op->A.buffer->scope == Scope::Fragment;
    DeviceCallArg a = a_in_registers ? DeviceCallArg{Expr(), ctx_.registers_of(op->A.buffer), Expr()}
                                     : DeviceCallArg{Expr(), op->A.buffer, linear_offset(op->A)};
    std::vector<DeviceCallArg> args{
        a, {Expr(), op->B.buffer, linear_offset(op->B)}, {Expr(), ctx_.registers_of(op->C.buffer), Expr()}};
    const std::string run = std::string(a_in_registers ? "::run_rs" : "::run") + (op->async ? "_async" : "");
    return make_device_call(l.gemm.device_type() + run, {}, args, op->where);
  }

  Stmt verify(const Stmt& s) const override {
    const auto* op = s.as<GemmStmt>();
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
};

}  // namespace

const TileOp& gemm_op() {
  static const GemmOp op;
  return op;
}

}  // namespace tessel::ops
