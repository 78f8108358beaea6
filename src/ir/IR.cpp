#include "tessel/ir/IR.hpp"

#include <atomic>
#include <cmath>

namespace tessel::ir {

const char* node_kind_name(NodeKind k) {
  switch (k) {
#define TESSEL_NODE_NAME(name) \
  case NodeKind::name:         \
    return #name;
    TESSEL_EXPR_NODES(TESSEL_NODE_NAME) TESSEL_STMT_NODES(TESSEL_NODE_NAME)
#undef TESSEL_NODE_NAME
  }
  return "?";
}

const char* scope_name(Scope s) {
  switch (s) {
    case Scope::Global:
      return "global";
    case Scope::Shared:
      return "shared";
    case Scope::Fragment:
      return "fragment";
    case Scope::Local:
      return "local";
  }
  return "?";
}

const char* binary_op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add:
      return "+";
    case BinaryOp::Sub:
      return "-";
    case BinaryOp::Mul:
      return "*";
    case BinaryOp::Div:
      return "/";
    case BinaryOp::Mod:
      return "%";
    case BinaryOp::FloorDiv:
      return "floordiv";
    case BinaryOp::FloorMod:
      return "floormod";
    case BinaryOp::Min:
      return "min";
    case BinaryOp::Max:
      return "max";
    case BinaryOp::EQ:
      return "==";
    case BinaryOp::NE:
      return "!=";
    case BinaryOp::LT:
      return "<";
    case BinaryOp::LE:
      return "<=";
    case BinaryOp::GT:
      return ">";
    case BinaryOp::GE:
      return ">=";
    case BinaryOp::And:
      return "&&";
    case BinaryOp::Or:
      return "||";
  }
  return "?";
}

bool is_comparison(BinaryOp op) {
  return op == BinaryOp::EQ || op == BinaryOp::NE || op == BinaryOp::LT || op == BinaryOp::LE ||
         op == BinaryOp::GT || op == BinaryOp::GE;
}

const char* for_kind_name(ForKind k) {
  switch (k) {
    case ForKind::Serial:
      return "serial";
    case ForKind::Unrolled:
      return "unrolled";
    case ForKind::Parallel:
      return "parallel";
    case ForKind::Pipelined:
      return "pipelined";
    case ForKind::Tiles:
      return "tiles";
  }
  return "?";
}

const char* gemm_warp_policy_name(GemmWarpPolicy p) {
  switch (p) {
    case GemmWarpPolicy::Square:
      return "square";
    case GemmWarpPolicy::FullRow:
      return "full_row";
    case GemmWarpPolicy::FullCol:
      return "full_col";
  }
  return "?";
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Max:
      return "max";
    case ReduceOp::Min:
      return "min";
    case ReduceOp::Sum:
      return "sum";
  }
  return "?";
}

// ---- handles -------------------------------------------------------------------------------------

Expr::Expr(int v) : Expr(make_int(v, DType::i32)) {}
Expr::Expr(long v) : Expr(make_int(v, DType::i64)) {}
Expr::Expr(long long v) : Expr(make_int(v, DType::i64)) {}
Expr::Expr(double v) : Expr(make_float(v, DType::f32)) {}
Expr::Expr(float v) : Expr(make_float(v, DType::f32)) {}

DType Expr::dtype() const {
  TESSEL_INTERNAL_CHECK(defined(), "dtype() of an undefined expression");
  return node_->dtype;
}

Var::Var(const std::string& name, DType t) : Expr(std::make_shared<const VarNode>(t, name)) {}
Var::Var(std::shared_ptr<const VarNode> n) : Expr(std::move(n)) {}
const std::string& Var::name() const {
  return as<VarNode>()->name;
}

Buffer Buffer::make(const std::string& name, std::vector<Expr> shape, DType dtype, Scope scope,
                    std::source_location where, int shared_tail, std::vector<Expr> strides) {
  static std::atomic<int> next_id{0};
  for (const Expr& e : shape)
    TESSEL_INTERNAL_CHECK(e.defined(), "buffer " << name << " has an undefined dim");
  TESSEL_INTERNAL_CHECK(strides.empty() || (scope == Scope::Global && strides.size() == shape.size()),
                        "buffer " << name << " has " << strides.size() << " strides for " << shape.size()
                                  << " dimensions in scope " << scope_name(scope));
  Buffer b;
  b.node_ = std::make_shared<const BufferNode>(
      BufferNode{name, std::move(shape), dtype, scope, where, next_id++, shared_tail, std::move(strides)});
  return b;
}

std::vector<Expr> Buffer::strides() const {
  if (!node_->strides.empty()) return node_->strides;
  std::vector<Expr> out(node_->shape.size());
  Expr s = make_int(1, DType::i64);
  for (int d = static_cast<int>(out.size()) - 1; d >= 0; --d) {
    out[d] = s;
    auto a = as_const_int(s), b = as_const_int(node_->shape[d]);
    s = a && b ? make_int(*a * *b, DType::i64)
               : make_binary(BinaryOp::Mul, s, make_cast(DType::i64, node_->shape[d]));
  }
  return out;
}

bool Buffer::row_major() const {
  if (node_->strides.empty()) return true;
  const std::vector<Expr>& s = node_->strides;
  std::int64_t want = 1;
  for (int d = static_cast<int>(s.size()) - 1; d >= 0; --d) {
    auto v = as_const_int(s[d]), n = as_const_int(node_->shape[d]);
    if (!v || !n) return false;
    if (*n != 1 && *v != want) return false;
    want *= *n;
  }
  return true;
}

std::vector<std::int64_t> Buffer::const_shape() const {
  std::vector<std::int64_t> out;
  for (const Expr& e : node_->shape) {
    auto v = as_const_int(e);
    TESSEL_INTERNAL_CHECK(v.has_value(), "buffer " << node_->name << " has a non-constant dimension");
    out.push_back(*v);
  }
  return out;
}

std::int64_t Buffer::const_numel() const {
  std::int64_t n = 1;
  for (auto d : const_shape()) n *= d;
  return n;
}

// ---- expressions ---------------------------------------------------------------------------------

std::optional<std::int64_t> as_const_int(const Expr& e) {
  if (const auto* i = e.as<IntImm>()) return i->value;
  return std::nullopt;
}

bool is_const_int(const Expr& e, std::int64_t v) {
  auto c = as_const_int(e);
  return c && *c == v;
}

Expr make_int(std::int64_t v, DType t) {
  TESSEL_INTERNAL_CHECK(is_integer(t) || t == DType::boolean, "integer immediate of type " << dtype_name(t));
  return Expr(std::make_shared<const IntImm>(t, v));
}

Expr make_float(double v, DType t) {
  TESSEL_INTERNAL_CHECK(is_float(t), "float immediate of type " << dtype_name(t));
  return Expr(std::make_shared<const FloatImm>(t, v));
}

namespace {

bool is_imm(const Expr& e) {
  return e.as<IntImm>() || e.as<FloatImm>();
}

int float_rank(DType t) {
  switch (t) {
    case DType::f16:
    case DType::bf16:
      return 1;
    case DType::f32:
      return 2;
    case DType::f64:
      return 3;
    default:
      return 0;
  }
}

// The type two operands are computed in. An immediate adopts the other side's type when that
// keeps its kind (x * 2 stays i64 for an i64 x, y * 0.5f stays f16 for an f16 y); otherwise the
// usual promotion: int with float gives the float; two 16-bit floats of different kinds give f32.
DType promote(const Expr& a, const Expr& b) {
  DType ta = a.dtype(), tb = b.dtype();
  if (ta == tb) return ta;
  if (is_imm(a) && !is_imm(b) && (is_float(tb) || !is_float(ta))) return tb;
  if (is_imm(b) && !is_imm(a) && (is_float(ta) || !is_float(tb))) return ta;
  if (is_float(ta) || is_float(tb)) {
    if (!is_float(ta)) return tb;
    if (!is_float(tb)) return ta;
    int ra = float_rank(ta), rb = float_rank(tb);
    if (ra == rb) return DType::f32;  // f16 with bf16
    return ra > rb ? ta : tb;
  }
  if (ta == DType::i64 || tb == DType::i64) return DType::i64;
  return DType::i32;
}

Expr convert(const Expr& e, DType t) {
  if (e.dtype() == t) return e;
  if (const auto* i = e.as<IntImm>())
    return is_float(t) ? make_float(double(i->value), t) : make_int(i->value, t);
  if (const auto* f = e.as<FloatImm>(); f && is_float(t)) return make_float(f->value, t);
  return make_cast(t, e);
}

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  std::int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

std::optional<Expr> fold(BinaryOp op, const Expr& a, const Expr& b, DType t) {
  auto ca = as_const_int(a), cb = as_const_int(b);
  if (ca && cb && is_integer(t)) {
    std::int64_t x = *ca, y = *cb;
    switch (op) {
      case BinaryOp::Add:
        return make_int(x + y, t);
      case BinaryOp::Sub:
        return make_int(x - y, t);
      case BinaryOp::Mul:
        return make_int(x * y, t);
      case BinaryOp::Div:
        if (y != 0) return make_int(x / y, t);
        break;
      case BinaryOp::Mod:
        if (y != 0) return make_int(x % y, t);
        break;
      case BinaryOp::FloorDiv:
        if (y != 0) return make_int(floor_div(x, y), t);
        break;
      case BinaryOp::FloorMod:
        if (y != 0) return make_int(x - floor_div(x, y) * y, t);
        break;
      case BinaryOp::Min:
        return make_int(std::min(x, y), t);
      case BinaryOp::Max:
        return make_int(std::max(x, y), t);
      default:
        break;
    }
  }
  if (is_integer(t)) {
    if ((op == BinaryOp::Add || op == BinaryOp::Sub) && cb && *cb == 0) return a;
    if (op == BinaryOp::Add && ca && *ca == 0) return b;
    if ((op == BinaryOp::Mul || op == BinaryOp::Div || op == BinaryOp::FloorDiv) && cb && *cb == 1) return a;
    if (op == BinaryOp::Mul && ca && *ca == 1) return b;
    if (op == BinaryOp::Mul && ((ca && *ca == 0) || (cb && *cb == 0))) return make_int(0, t);
  }
  return std::nullopt;
}

}  // namespace

Expr make_binary(BinaryOp op, Expr a, Expr b) {
  TESSEL_INTERNAL_CHECK(a.defined() && b.defined(),
                        "binary " << binary_op_name(op) << " on undefined operand");
  if (op == BinaryOp::And || op == BinaryOp::Or) {
    a = convert(a, DType::boolean);
    b = convert(b, DType::boolean);
    return Expr(std::make_shared<const Binary>(DType::boolean, op, a, b));
  }
  DType t = promote(a, b);
  a = convert(a, t);
  b = convert(b, t);
  if (is_comparison(op)) {
    auto ca = as_const_int(a), cb = as_const_int(b);
    if (ca && cb) {
      bool r = false;
      switch (op) {
        case BinaryOp::EQ:
          r = *ca == *cb;
          break;
        case BinaryOp::NE:
          r = *ca != *cb;
          break;
        case BinaryOp::LT:
          r = *ca < *cb;
          break;
        case BinaryOp::LE:
          r = *ca <= *cb;
          break;
        case BinaryOp::GT:
          r = *ca > *cb;
          break;
        default:
          r = *ca >= *cb;
          break;
      }
      return make_int(r ? 1 : 0, DType::boolean);
    }
    return Expr(std::make_shared<const Binary>(DType::boolean, op, a, b));
  }
  if (auto f = fold(op, a, b, t)) return *f;
  return Expr(std::make_shared<const Binary>(t, op, a, b));
}

Expr make_unary(UnaryOp op, Expr a) {
  TESSEL_INTERNAL_CHECK(a.defined(), "unary on undefined operand");
  if (op == UnaryOp::Not) {
    a = convert(a, DType::boolean);
    if (auto c = as_const_int(a)) return make_int(*c ? 0 : 1, DType::boolean);
    return Expr(std::make_shared<const Unary>(DType::boolean, op, a));
  }
  if (auto c = as_const_int(a)) return make_int(-*c, a.dtype());
  if (const auto* f = a.as<FloatImm>()) return make_float(-f->value, a.dtype());
  return Expr(std::make_shared<const Unary>(a.dtype(), op, a));
}

Expr make_select(Expr c, Expr t, Expr f) {
  TESSEL_INTERNAL_CHECK(c.defined() && t.defined() && f.defined(), "select with an undefined operand");
  c = convert(c, DType::boolean);
  DType ty = promote(t, f);
  t = convert(t, ty);
  f = convert(f, ty);
  if (auto cc = as_const_int(c)) return *cc ? t : f;
  return Expr(std::make_shared<const Select>(ty, c, t, f));
}

Expr make_cast(DType t, Expr v) {
  TESSEL_INTERNAL_CHECK(v.defined(), "cast of an undefined expression");
  if (v.dtype() == t) return v;
  if (const auto* i = v.as<IntImm>(); i && is_integer(t)) return make_int(i->value, t);
  return Expr(std::make_shared<const Cast>(t, v));
}

Expr make_call(const std::string& name, std::vector<Expr> args, DType t) {
  for (const Expr& a : args)
    TESSEL_INTERNAL_CHECK(a.defined(), "call " << name << " with an undefined argument");
  return Expr(std::make_shared<const Call>(t, name, std::move(args)));
}

Expr make_load(Buffer b, std::vector<Expr> indices) {
  TESSEL_INTERNAL_CHECK(b.defined(), "load from an undefined buffer");
  TESSEL_INTERNAL_CHECK(static_cast<int>(indices.size()) == b.ndim(),
                        "load from " << b->name << " with " << indices.size() << " indices, buffer has "
                                     << b.ndim() << " dims");
  return Expr(std::make_shared<const BufferLoad>(std::move(b), std::move(indices)));
}

// ---- statements ----------------------------------------------------------------------------------

Stmt make_seq(std::vector<Stmt> stmts, std::source_location w) {
  std::vector<Stmt> flat;
  for (Stmt& s : stmts) {
    if (!s.defined()) continue;
    if (const auto* seq = s.as<SeqStmt>()) {
      flat.insert(flat.end(), seq->stmts.begin(), seq->stmts.end());
    } else {
      flat.push_back(std::move(s));
    }
  }
  if (flat.size() == 1) return flat[0];
  return Stmt(std::make_shared<const SeqStmt>(std::move(flat), w));
}

Stmt make_for(Var v, Expr min, Expr extent, ForKind k, int num_stages, Stmt body, std::source_location w) {
  TESSEL_INTERNAL_CHECK(v.defined() && min.defined() && extent.defined(), "for with undefined var or bounds");
  TESSEL_INTERNAL_CHECK(is_integer(extent.dtype()), "for extent must be an integer");
  TESSEL_INTERNAL_CHECK(k == ForKind::Pipelined || num_stages == 0, "num_stages on a non-pipelined loop");
  if (!body.defined()) body = make_seq({}, w);
  return Stmt(std::make_shared<const ForStmt>(std::move(v), std::move(min), std::move(extent), k, num_stages,
                                              std::move(body), w));
}

Stmt make_if(Expr c, Stmt t, Stmt e, std::source_location w) {
  TESSEL_INTERNAL_CHECK(c.defined() && t.defined(), "if with undefined condition or body");
  return Stmt(std::make_shared<const IfStmt>(convert(c, DType::boolean), std::move(t), std::move(e), w));
}

Stmt make_let(Var v, Expr value, Stmt body, std::source_location w) {
  TESSEL_INTERNAL_CHECK(v.defined() && value.defined() && body.defined(), "let with undefined parts");
  return Stmt(std::make_shared<const LetStmt>(std::move(v), std::move(value), std::move(body), w));
}

Stmt make_store(Buffer b, std::vector<Expr> indices, Expr value, std::source_location w) {
  TESSEL_INTERNAL_CHECK(b.defined() && value.defined(), "store with undefined buffer or value");
  TESSEL_INTERNAL_CHECK(
      static_cast<int>(indices.size()) == b.ndim(),
      "store to " << b->name << " with " << indices.size() << " indices, buffer has " << b.ndim() << " dims");
  return Stmt(
      std::make_shared<const BufferStore>(std::move(b), std::move(indices), convert(value, b->dtype), w));
}

Stmt make_decl(Buffer b, std::source_location w) {
  TESSEL_INTERNAL_CHECK(b.defined() && b->scope != Scope::Global, "declaration of a global buffer");
  return Stmt(std::make_shared<const DeclBuffer>(std::move(b), w));
}

Stmt make_kernel(std::vector<Expr> grid, int threads, std::vector<Var> block_vars, Stmt body,
                 std::source_location w) {
  TESSEL_INTERNAL_CHECK(!grid.empty() && grid.size() <= 3 && grid.size() == block_vars.size(),
                        "kernel grid must have 1 to 3 dims, one block var each");
  return Stmt(std::make_shared<const KernelStmt>(std::move(grid), threads, std::move(block_vars),
                                                 std::move(body), w));
}

Stmt make_copy(Region src, Region dst, Expr pad, std::source_location w, bool row_window) {
  TESSEL_INTERNAL_CHECK(src.buffer.defined() && dst.buffer.defined(), "copy with an undefined buffer");
  return Stmt(std::make_shared<const CopyStmt>(std::move(src), std::move(dst), std::move(pad), w, row_window));
}

Region whole_region(const Buffer& b) {
  Region r{b, {}, {}};
  for (const Expr& d : b->shape) {
    r.starts.push_back(make_int(0));
    r.extents.push_back(d);
  }
  return r;
}

Stmt make_gemm(Region a, Region b, Region c, bool ta, bool tb, GemmWarpPolicy p, std::source_location w,
               bool async) {
  TESSEL_INTERNAL_CHECK(a.buffer.defined() && b.buffer.defined() && c.buffer.defined(),
                        "gemm with an undefined buffer");
  return Stmt(
      std::make_shared<const GemmStmt>(std::move(a), std::move(b), std::move(c), ta, tb, p, w, async));
}

Stmt make_fill(Region dst, Expr value, std::source_location w) {
  TESSEL_INTERNAL_CHECK(dst.buffer.defined() && value.defined(), "fill with undefined parts");
  return Stmt(std::make_shared<const FillStmt>(std::move(dst), std::move(value), w));
}

Stmt make_reduce(Buffer src, Buffer dst, ReduceOp op, int dim, bool clear, std::source_location w) {
  TESSEL_INTERNAL_CHECK(src.defined() && dst.defined(), "reduce with an undefined buffer");
  return Stmt(std::make_shared<const ReduceStmt>(std::move(src), std::move(dst), op, dim, clear, w));
}

Stmt make_swizzle(int panel, std::source_location w) {
  return Stmt(std::make_shared<const SwizzleStmt>(panel, w));
}

Stmt make_cluster(int x, int y, std::source_location w) {
  return Stmt(std::make_shared<const ClusterStmt>(x, y, w));
}

Stmt make_device_call(std::string callee, std::vector<std::string> template_args,
                      std::vector<DeviceCallArg> args, std::source_location w) {
  for (const auto& a : args)
    TESSEL_INTERNAL_CHECK(int(a.expr.defined()) + int(a.buffer.defined()) + int(a.lambda_body.defined()) == 1,
                          "device call arg must be one of a value, a buffer or a lambda");
  return Stmt(
      std::make_shared<const DeviceCall>(std::move(callee), std::move(template_args), std::move(args), w));
}

Stmt make_barrier(std::source_location w, int id, int threads) {
  TESSEL_INTERNAL_CHECK(
      (id == 0 && threads == 0) || (id >= 1 && id <= 15 && threads > 0 && threads % 32 == 0),
      "barrier " << id << " over " << threads << " threads");
  return Stmt(std::make_shared<const BarrierStmt>(w, id, threads));
}

const char* mbarrier_op_name(MbarrierOp op) {
  switch (op) {
    case MbarrierOp::Init:
      return "init";
    case MbarrierOp::Arrive:
      return "arrive";
    case MbarrierOp::WarpArrive:
      return "warp_arrive";
    case MbarrierOp::ArriveExpectTx:
      return "arrive_expect_tx";
    case MbarrierOp::Wait:
      return "wait";
  }
  return "?";
}

Stmt make_mbarrier(MbarrierOp op, Buffer bars, Expr index, Expr value, std::source_location w) {
  TESSEL_INTERNAL_CHECK(bars.defined() && bars->scope == Scope::Shared && bars->dtype == DType::i64,
                        "mbarrier on something other than a shared i64 array");
  TESSEL_INTERNAL_CHECK(index.defined(), "mbarrier without an index");
  const bool needs_value =
      op == MbarrierOp::Init || op == MbarrierOp::ArriveExpectTx || op == MbarrierOp::Wait;
  // WarpArrive's value, when there is one, is the cluster's CTAs it arrives in.
  TESSEL_INTERNAL_CHECK(value.defined() == needs_value || op == MbarrierOp::WarpArrive,
                        "mbarrier " << mbarrier_op_name(op) << " value");
  return Stmt(
      std::make_shared<const MbarrierStmt>(op, std::move(bars), std::move(index), std::move(value), w));
}

Stmt make_tma_load(Region src, Region dst, Var map, Buffer bars, Expr index, std::source_location w,
                   int multicast) {
  TESSEL_INTERNAL_CHECK(
      src.buffer->scope == Scope::Global && dst.buffer->scope == Scope::Shared,
      "TMA load from " << scope_name(src.buffer->scope) << " to " << scope_name(dst.buffer->scope));
  TESSEL_INTERNAL_CHECK(bars.defined() == index.defined(), "TMA load barrier without index");
  TESSEL_INTERNAL_CHECK(multicast == 1 || multicast == 2, "TMA load multicast over " << multicast << " CTAs");
  return Stmt(std::make_shared<const TmaLoadStmt>(std::move(src), std::move(dst), std::move(map),
                                                  std::move(bars), std::move(index), multicast, w));
}

Stmt make_cluster_reduce(Buffer acc, Buffer scratch, Buffer bars, Expr rank, int ranks,
                         std::source_location w) {
  TESSEL_INTERNAL_CHECK(acc->scope == Scope::Fragment && scratch->scope == Scope::Shared &&
                            bars->scope == Scope::Shared && bars->dtype == DType::i64,
                        "cluster_reduce of a " << scope_name(acc->scope) << " buffer through "
                                               << scope_name(scratch->scope) << " scratch");
  TESSEL_INTERNAL_CHECK(ranks == 2 || ranks == 4 || ranks == 8, "cluster_reduce over " << ranks << " CTAs");
  return Stmt(std::make_shared<const ClusterReduceStmt>(std::move(acc), std::move(scratch), std::move(bars),
                                                        std::move(rank), ranks, w));
}

Stmt make_producer(Stmt body, std::source_location w) {
  return Stmt(std::make_shared<const ProducerStmt>(std::move(body), w));
}

Stmt make_specialize(int consumer_threads, int producer_threads, int consumer_regs, int producer_regs,
                     Stmt producer, Stmt consumer, std::source_location w) {
  TESSEL_INTERNAL_CHECK(consumer_threads % 128 == 0 && producer_threads % 32 == 0 && producer_threads > 0,
                        "warp roles of " << consumer_threads << " and " << producer_threads
                                         << " threads (whole consumer warpgroups, whole producer warps needed)");
  TESSEL_INTERNAL_CHECK(producer_regs == 0 || producer_threads % 128 == 0,
                        "setmaxnreg for a producer that is not whole warpgroups");
  TESSEL_INTERNAL_CHECK(
      consumer_regs % 8 == 0 && producer_regs % 8 == 0 && consumer_regs <= 256 && producer_regs <= 256,
      "register budgets " << consumer_regs << " / " << producer_regs);
  return Stmt(std::make_shared<const SpecializeStmt>(consumer_threads, producer_threads, consumer_regs,
                                                     producer_regs, std::move(producer), std::move(consumer),
                                                     w));
}

Stmt make_async_gemm_wait(int pending, std::vector<Buffer> fence, std::source_location w,
                          std::vector<Buffer> pinned) {
  TESSEL_INTERNAL_CHECK(pending >= 0 && pending <= 7, "wgmma wait for " << pending << " groups");
  return Stmt(std::make_shared<const AsyncGemmWait>(pending, std::move(fence), std::move(pinned), w));
}
Stmt make_async_commit(std::source_location w) {
  return Stmt(std::make_shared<const AsyncCommit>(w));
}
Stmt make_async_wait(int pending, std::source_location w) {
  TESSEL_INTERNAL_CHECK(pending >= 0, "async wait for a negative number of groups");
  return Stmt(std::make_shared<const AsyncWait>(pending, w));
}

}  // namespace tessel::ir
