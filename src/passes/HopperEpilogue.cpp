// Element-wise epilogues for the sm_90a GEMM (HopperEpilogue.hpp). Each Parallel(BM, BN) nest
// touches element (i, j) of its fragments only, so the nests fuse into one function of a single
// element: every fragment becomes one Local scalar, the nests' bodies run in order, and the
// stored fragment's scalar is the result. The kernel calls it per accumulator register with
// that register's (i, j) (hopper_gemm.cuh, apply_epilogue), which is how the wgmma accumulator
// layout reaches the author's code without a layout table: the template knows where each of its
// registers lives.
#include "passes/HopperEpilogue.hpp"

#include <map>

#include "passes/PassUtil.hpp"
#include "tessel/ir/Printer.hpp"

namespace tessel::passes {

using namespace ir;

namespace {

bool is_float_type(DType t) {
  return t == DType::f32 || t == DType::f16 || t == DType::bf16;
}

// Rewrites one nest's body onto scalars; `error` says why when it cannot.
class Scalarize : public IRMutator {
 public:
  Scalarize(const Buffer& acc, std::int64_t bm, std::int64_t bn, std::map<int, Buffer>& scalars,
            std::vector<Buffer>& order, std::map<int, bool>& written)
      : acc_(acc), bm_(bm), bn_(bn), scalars_(scalars), order_(order), written_(written) {}

  Stmt run(const Var& i, const Var& j, const Stmt& body) {
    i_ = i, j_ = j;
    return mutate(body);
  }
  std::string error;

 protected:
  Expr mutate_node(const BufferLoad* op, const Expr& self) override {
    if (op->buffer->scope == Scope::Global) return IRMutator::mutate_node(op, self);
    if (op->buffer->scope != Scope::Fragment) {
      fail("it reads " + op->buffer->name + ", a " + scope_name(op->buffer->scope) + " buffer");
      return self;
    }
    const Buffer s = scalar(op->buffer, op->indices);
    if (!s.defined()) return self;
    if (!op->buffer.same_as(acc_) && !written_[op->buffer->id]) {
      fail("it reads fragment " + op->buffer->name + " before writing it");
      return self;
    }
    return make_load(s, {make_int(0)});
  }
  Stmt mutate_node(const BufferStore* op, const Stmt& self) override {
    if (op->buffer->scope != Scope::Fragment) {
      fail("it stores to " + op->buffer->name + ", a " + scope_name(op->buffer->scope) + " buffer");
      return self;
    }
    Expr v = mutate(op->value);  // reads before the write
    const Buffer s = scalar(op->buffer, op->indices);
    if (!s.defined()) return self;
    written_[op->buffer->id] = true;
    return make_store(s, {make_int(0)}, v, op->where);
  }
  Stmt mutate_node(const ForStmt*, const Stmt& self) override {
    fail("a loop inside a Parallel nest");
    return self;
  }
#define TESSEL_EPILOGUE_REJECT(name)                                         \
  Stmt mutate_node(const name*, const Stmt& self) override {                 \
    fail(std::string("a ") + node_kind_name(NodeKind::name) + " inside it"); \
    return self;                                                             \
  }
  TESSEL_EPILOGUE_REJECT(DeclBuffer)
  TESSEL_EPILOGUE_REJECT(KernelStmt)
  TESSEL_EPILOGUE_REJECT(CopyStmt)
  TESSEL_EPILOGUE_REJECT(GemmStmt)
  TESSEL_EPILOGUE_REJECT(FillStmt)
  TESSEL_EPILOGUE_REJECT(ReduceStmt)
  TESSEL_EPILOGUE_REJECT(SwizzleStmt)
  TESSEL_EPILOGUE_REJECT(ClusterStmt)
  TESSEL_EPILOGUE_REJECT(DeviceCall)
  TESSEL_EPILOGUE_REJECT(BarrierStmt)
  TESSEL_EPILOGUE_REJECT(AsyncCommit)
  TESSEL_EPILOGUE_REJECT(AsyncWait)
#undef TESSEL_EPILOGUE_REJECT

 private:
  void fail(const std::string& why) {
    if (error.empty()) error = why;
  }
  // The scalar standing for fragment f at (i, j); undefined (and `error` set) if f is not a
  // BM x BN float tile indexed by exactly the nest's variables.
  Buffer scalar(const Buffer& f, const std::vector<Expr>& idx) {
    std::vector<std::int64_t> shape = f.const_shape();
    if (shape != std::vector<std::int64_t>{bm_, bn_}) {
      fail("fragment " + f->name + " is " + shape_text(shape) + ", not the " + shape_text({bm_, bn_}) +
           " tile");
      return Buffer();
    }
    if (idx.size() != 2 || idx[0].get() != i_.get() || idx[1].get() != j_.get()) {
      std::string at;
      for (size_t d = 0; d < idx.size(); ++d) at += (d ? ", " : "") + to_string(idx[d]);
      fail("fragment " + f->name + " is indexed (" + at + "), not by the nest's own (" + i_.name() + ", " +
           j_.name() + ")");
      return Buffer();
    }
    if (!is_float_type(f->dtype)) {
      fail("fragment " + f->name + " is " + std::string(dtype_name(f->dtype)) + ", not a float type");
      return Buffer();
    }
    auto it = scalars_.find(f->id);
    if (it != scalars_.end()) return it->second;
    Buffer s = Buffer::make(f->name, {make_int(1)}, f->dtype, Scope::Local, f->where);
    order_.push_back(s);
    return scalars_.emplace(f->id, s).first->second;
  }

  const Buffer& acc_;
  std::int64_t bm_, bn_;
  std::map<int, Buffer>& scalars_;
  std::vector<Buffer>& order_;
  std::map<int, bool>& written_;
  Var i_, j_;
};

}  // namespace

std::string fuse_hopper_epilogue(const std::vector<Stmt>& nests, const Buffer& acc, const Buffer& stored,
                                 const std::vector<Var>& block_vars, HopperEpilogue& out) {
  out = HopperEpilogue{};
  auto shape = acc.const_shape();
  const std::int64_t BM = shape[0], BN = shape[1];
  if (nests.empty()) {
    if (!stored.same_as(acc)) return "the stored fragment " + stored->name + " is not the accumulator";
    return "";
  }
  std::map<int, Buffer> scalars;
  std::vector<Buffer> order;
  std::map<int, bool> written;
  Scalarize scalarize(acc, BM, BN, scalars, order, written);
  Var vi("i"), vj("j");
  std::vector<Stmt> bodies;
  for (const Stmt& s : nests) {
    const auto* outer = s.as<ForStmt>();
    const auto* inner = outer ? outer->body.as<ForStmt>() : nullptr;
    const std::string line = " (line " + std::to_string(s->where.line()) + ")";
    if (!outer || !inner || outer->kind != ForKind::Parallel || inner->kind != ForKind::Parallel)
      return std::string("the epilogue has a ") + node_kind_name(s->kind) +
             " that is not a 2-D Parallel nest" + line;
    if (!is_const_int(outer->min, 0) || !is_const_int(inner->min, 0) || as_const_int(outer->extent) != BM ||
        as_const_int(inner->extent) != BN)
      return "an epilogue Parallel nest is not over the whole " + shape_text({BM, BN}) + " tile" + line;
    Stmt body = scalarize.run(outer->var, inner->var, inner->body);
    if (!scalarize.error.empty()) return "the epilogue is not element-wise: " + scalarize.error + line;
    bodies.push_back(substitute(body, {{outer->var, vi}, {inner->var, vj}}));
  }
  auto st = scalars.find(stored->id);
  if (!stored.same_as(acc) && st == scalars.end())
    return "the stored fragment " + stored->name + " is not written by the epilogue";
  if (!is_float_type(stored->dtype)) return "the stored fragment " + stored->name + " is not a float type";

  Var value("acc", DType::f32);
  auto acc_scalar = scalars.find(acc->id);
  std::vector<Stmt> body;
  for (const Buffer& s : order) body.push_back(make_decl(s, s->where));
  if (acc_scalar != scalars.end())
    body.push_back(make_store(acc_scalar->second, {make_int(0)}, value, acc->where));
  for (Stmt& b : bodies) body.push_back(std::move(b));
  out.lambda.lambda_params = {value, block_vars[0], block_vars[1], vi, vj};
  out.lambda.lambda_body = make_seq(std::move(body), nests.front()->where);
  out.lambda.lambda_result = stored.same_as(acc) && acc_scalar == scalars.end()
                                 ? Expr(value)
                                 : make_load(scalars.at(stored->id), {make_int(0)});
  out.empty = false;
  return "";
}

}  // namespace tessel::passes
