// Records the author's calls as IR. The builder is a thread-local stack of statement lists: a
// call that opens a scope (PrimFunc::body, Kernel, a loop) pushes a list, runs the author's
// lambda, pops the list and emits one statement holding it.
#include "tessel/Frontend.hpp"

#include <limits>

#include "tessel/ir/Printer.hpp"

namespace tessel {

namespace {

struct Frame {
  std::vector<ir::Stmt> stmts;
};

struct BuilderState {
  std::vector<Frame> frames;
  int kernel_depth = 0;
  bool in_body = false;
  int next_buffer = 0;  // names shared_0, fragment_1, ... count from 0 in each program, so that
                        // the same program always generates the same source (and cache key)
};

thread_local BuilderState g_state;

void emit(ir::Stmt s, const char* op, Loc where) {
  if (g_state.frames.empty())
    TESSEL_USER_ERROR(op, where, "called outside a program body; call it inside PrimFunc::body([&] { ... })");
  g_state.frames.back().stmts.push_back(std::move(s));
}

void require_kernel(const char* op, Loc where) {
  if (g_state.kernel_depth == 0)
    TESSEL_USER_ERROR(op, where,
                      "called outside a kernel; call it inside T::Kernel(..., [&](T::Var bx, ...) { ... })");
}

// Runs fn inside a fresh frame and returns what it emitted as one statement.
template <class F>
ir::Stmt record(F&& fn, Loc where) {
  g_state.frames.emplace_back();
  try {
    fn();
  } catch (...) {
    g_state.frames.pop_back();
    throw;
  }
  ir::Stmt s = ir::make_seq(std::move(g_state.frames.back().stmts), where);
  g_state.frames.pop_back();
  return s;
}

Buffer alloc(std::vector<Expr> shape, DType dtype, ir::Scope scope, const char* op, const char* prefix,
             Loc where, int shared_tail = 0) {
  require_kernel(op, where);
  if (shape.empty()) TESSEL_USER_ERROR(op, where, "the shape is empty; give at least one dimension");
  for (size_t i = 0; i < shape.size(); ++i) {
    auto v = ir::as_const_int(shape[i]);
    if (!v)
      TESSEL_USER_ERROR(op, where,
                        "dimension " << i << " is " << ir::to_string(shape[i])
                                     << "; tile shapes must be compile-time constants");
    if (*v <= 0)
      TESSEL_USER_ERROR(op, where, "dimension " << i << " is " << *v << "; tile dimensions must be >= 1");
  }
  std::string name = std::string(prefix) + "_" + std::to_string(g_state.next_buffer++);
  ir::Buffer b = ir::Buffer::make(name, std::move(shape), dtype, scope, where, shared_tail);
  emit(ir::make_decl(b, where), op, where);
  return Buffer(b);
}

ir::Region whole(const ir::Buffer& b) {
  ir::Region r{b, {}, {}};
  for (const Expr& d : b->shape) {
    r.starts.push_back(Expr(0));
    r.extents.push_back(d);
  }
  return r;
}

void reduce(ir::ReduceOp op, const char* name, const Buffer& src, const Buffer& dst, int dim, bool clear,
            Loc where) {
  require_kernel(name, where);
  int nd = src.ndim();
  if (dim < 0) dim += nd;
  if (dim < 0 || dim >= nd)
    TESSEL_USER_ERROR(name, where,
                      "dim " << dim << " is out of range for " << src.name() << " with " << nd
                             << " dimensions; legal: -" << nd << " .. " << nd - 1);
  emit(ir::make_reduce(src.ir(), dst.ir(), op, dim, clear, where), name, where);
}

void loop_nest(ir::ForKind kind, const std::vector<Expr>& extents, const char* op, Loc where,
               const std::function<void(const std::vector<Var>&)>& fn) {
  require_kernel(op, where);
  static const char* names[] = {"i", "j", "k"};
  std::vector<Var> vars;
  for (size_t d = 0; d < extents.size(); ++d) {
    if (!is_integer(extents[d].dtype()))
      TESSEL_USER_ERROR(op, where, "extent " << d << " is not an integer expression");
    if (auto v = ir::as_const_int(extents[d]); v && *v <= 0)
      TESSEL_USER_ERROR(op, where,
                        "extent " << d << " is " << *v << "; a " << op
                                  << " extent is the size of a tile dimension and must be >= 1");
    vars.emplace_back(names[d]);
  }
  ir::Stmt body = record([&] { fn(vars); }, where);
  for (int d = static_cast<int>(extents.size()) - 1; d >= 0; --d)
    body = ir::make_for(vars[d], Expr(0), extents[d], kind, 0, body, where);
  emit(body, op, where);
}

void single_loop(ir::ForKind kind, int stages, Expr extent, const std::function<void(Var)>& fn,
                 const char* name, Loc where) {
  require_kernel(name, where);
  if (!is_integer(extent.dtype()))
    TESSEL_USER_ERROR(name, where,
                      "the extent " << ir::to_string(extent) << " has type " << dtype_name(extent.dtype())
                                    << "; loop extents must be integers");
  if (auto c = ir::as_const_int(extent); c && *c < 0)
    TESSEL_USER_ERROR(name, where, "the extent is " << *c << "; a loop's extent must be >= 0");
  Var v(kind == ir::ForKind::Pipelined ? "ko" : "k");
  ir::Stmt body = record([&] { fn(v); }, where);
  emit(ir::make_for(v, Expr(0), extent, kind, stages, body, where), name, where);
}

}  // namespace

// ---- BufferRef / RegionArg ----------------------------------------------------------------------------

BufferRef::BufferRef(ir::Buffer b, std::vector<Expr> indices, Loc where)
    : Expr([&] {
        if (static_cast<int>(indices.size()) != b.ndim())
          TESSEL_USER_ERROR("index", where,
                            b->name << " has " << b.ndim() << " dimensions but was indexed with "
                                    << indices.size() << " indices");
        return ir::make_load(b, indices);
      }()),
      buffer_(std::move(b)),
      indices_(std::move(indices)),
      where_(where) {}

BufferRef& BufferRef::operator=(const Expr& value) {
  require_kernel("store", where_);
  emit(ir::make_store(buffer_, indices_, value, where_), "store", where_);
  return *this;
}
BufferRef& BufferRef::operator=(const BufferRef& value) {
  return *this = static_cast<const Expr&>(value);
}
BufferRef& BufferRef::operator+=(const Expr& v) {
  return *this = ir::make_binary(ir::BinaryOp::Add, *this, v);
}
BufferRef& BufferRef::operator-=(const Expr& v) {
  return *this = ir::make_binary(ir::BinaryOp::Sub, *this, v);
}
BufferRef& BufferRef::operator*=(const Expr& v) {
  return *this = ir::make_binary(ir::BinaryOp::Mul, *this, v);
}

RegionArg::RegionArg(const Buffer& b) : region_(whole(b.ir())) {}
RegionArg::RegionArg(const BufferRef& r) : region_{r.buffer(), r.indices(), {}} {}

ir::Region region(const Buffer& b, std::vector<Expr> starts, std::vector<Expr> extents) {
  return ir::Region{b.ir(), std::move(starts), std::move(extents)};
}

// ---- PrimFunc ----------------------------------------------------------------------------------------

PrimFunc::PrimFunc(std::string name) : node_(std::make_shared<ir::PrimFuncNode>()) {
  node_->name = std::move(name);
}

Buffer PrimFunc::tensor(const std::string& name, std::vector<Expr> shape, DType dtype, Loc where) {
  if (node_->body.defined())
    TESSEL_USER_ERROR("tensor", where,
                      "parameter " << name << " declared after the body of " << node_->name
                                   << "; declare every tensor before calling body()");
  for (const auto& p : node_->params)
    if (p->name == name)
      TESSEL_USER_ERROR("tensor", where, "a parameter named " << name << " already exists");
  if (shape.empty()) TESSEL_USER_ERROR("tensor", where, "tensor " << name << " has no dimensions");
  for (size_t i = 0; i < shape.size(); ++i) {
    if (!is_integer(shape[i].dtype()))
      TESSEL_USER_ERROR("tensor", where, "dimension " << i << " of " << name << " is not an integer");
    if (auto v = ir::as_const_int(shape[i]); v && *v <= 0)
      TESSEL_USER_ERROR("tensor", where,
                        "dimension " << i << " of " << name << " is " << *v << "; must be >= 1");
  }
  ir::Buffer b = ir::Buffer::make(name, std::move(shape), dtype, ir::Scope::Global, where);
  node_->params.push_back(b);
  return Buffer(b);
}

Buffer PrimFunc::tensor(const std::string& name, std::vector<Expr> shape, DType dtype,
                        std::vector<Expr> strides, Loc where) {
  if (strides.size() != shape.size())
    TESSEL_USER_ERROR("tensor", where,
                      "tensor " << name << " has " << shape.size() << " dimensions but " << strides.size()
                                << " strides; give one stride (in elements) per dimension");
  for (size_t i = 0; i < strides.size(); ++i) {
    auto v = ir::as_const_int(strides[i]);
    if (!v || *v < 1)
      TESSEL_USER_ERROR("tensor", where,
                        "stride " << i << " of " << name << " is " << ir::to_string(strides[i])
                                  << "; strides must be constant integers >= 1 (elements)");
    strides[i] = ir::make_int(*v, DType::i64);
  }
  Buffer b = tensor(name, std::move(shape), dtype, where);
  ir::Buffer sb =
      ir::Buffer::make(b.ir()->name, b.ir()->shape, dtype, ir::Scope::Global, where, 0, std::move(strides));
  if (sb.row_major()) return b;  // the same as a row-major tensor: one kernel for both
  node_->params.back() = sb;
  return Buffer(sb);
}

void PrimFunc::body(const std::function<void()>& fn, Loc where) {
  if (node_->body.defined()) TESSEL_USER_ERROR("body", where, node_->name << " already has a body");
  if (g_state.in_body) TESSEL_USER_ERROR("body", where, "program bodies cannot nest");
  g_state.in_body = true;
  g_state.next_buffer = 0;
  try {
    node_->body = record(fn, where);
  } catch (...) {
    g_state.in_body = false;
    throw;
  }
  g_state.in_body = false;
}

std::string PrimFunc::script() const {
  return ir::to_string(*node_);
}

// ---- kernels and allocation --------------------------------------------------------------------------

namespace {
void kernel_impl(std::vector<Expr> grid, int threads, const std::function<void(const std::vector<Var>&)>& fn,
                 Loc where) {
  if (g_state.frames.empty())
    TESSEL_USER_ERROR("Kernel", where,
                      "called outside a program body; call it inside PrimFunc::body([&] { ... })");
  if (g_state.kernel_depth > 0) TESSEL_USER_ERROR("Kernel", where, "kernels cannot nest");
  if (threads <= 0 || threads > 1024 || threads % 32 != 0)
    TESSEL_USER_ERROR("Kernel", where,
                      "threads = " << threads << "; legal: a multiple of 32 from 32 to 1024");
  static const char* names[] = {"bx", "by", "bz"};
  std::vector<Var> vars;
  for (size_t d = 0; d < grid.size(); ++d) {
    if (!is_integer(grid[d].dtype()))
      TESSEL_USER_ERROR("Kernel", where, "grid dimension " << d << " is not an integer expression");
    if (auto v = ir::as_const_int(grid[d]); v && *v <= 0)
      TESSEL_USER_ERROR("Kernel", where, "grid dimension " << d << " is " << *v << "; must be >= 1");
    vars.emplace_back(names[d]);
  }
  ++g_state.kernel_depth;
  ir::Stmt body;
  try {
    body = record([&] { fn(vars); }, where);
  } catch (...) {
    --g_state.kernel_depth;
    throw;
  }
  --g_state.kernel_depth;
  emit(ir::make_kernel(std::move(grid), threads, vars, body, where), "Kernel", where);
}
}  // namespace

void Kernel(Expr gx, int threads, const std::function<void(Var)>& body, Loc where) {
  kernel_impl(
      {gx}, threads, [&](const std::vector<Var>& v) { body(v[0]); }, where);
}
void Kernel(Expr gx, Expr gy, int threads, const std::function<void(Var, Var)>& body, Loc where) {
  kernel_impl(
      {gx, gy}, threads, [&](const std::vector<Var>& v) { body(v[0], v[1]); }, where);
}
void Kernel(Expr gx, Expr gy, Expr gz, int threads, const std::function<void(Var, Var, Var)>& body,
            Loc where) {
  kernel_impl(
      {gx, gy, gz}, threads, [&](const std::vector<Var>& v) { body(v[0], v[1], v[2]); }, where);
}

Buffer alloc_shared(std::vector<Expr> shape, DType dtype, Loc where) {
  return alloc(std::move(shape), dtype, ir::Scope::Shared, "alloc_shared", "shared", where);
}
Buffer alloc_fragment(std::vector<Expr> shape, DType dtype, Loc where) {
  return alloc(std::move(shape), dtype, ir::Scope::Fragment, "alloc_fragment", "fragment", where);
}
Buffer alloc_fragment(std::vector<Expr> shape, DType dtype, FragmentStorage storage, Loc where) {
  if (storage.shared_tail < 0)
    TESSEL_USER_ERROR("alloc_fragment", where,
                      "shared_tail is " << storage.shared_tail
                                        << "; give the number of vectors (>= 0) per thread "
                                        << "kept in shared memory");
  return alloc(std::move(shape), dtype, ir::Scope::Fragment, "alloc_fragment", "fragment", where,
               storage.shared_tail);
}
Buffer alloc_local(std::vector<Expr> shape, DType dtype, Loc where) {
  return alloc(std::move(shape), dtype, ir::Scope::Local, "alloc_local", "local", where);
}

// ---- tile ops ----------------------------------------------------------------------------------------

void copy(const RegionArg& src, const RegionArg& dst, Loc where) {
  require_kernel("copy", where);
  emit(ir::make_copy(src.region(), dst.region(), Expr(), where), "copy", where);
}

void copy_window(const RegionArg& src, const RegionArg& dst, Expr pad, Loc where) {
  require_kernel("copy_window", where);
  emit(ir::make_copy(src.region(), dst.region(), pad, where, true), "copy", where);
}

void copy_padded(const RegionArg& src, const RegionArg& dst, Expr pad, Loc where) {
  require_kernel("copy", where);
  emit(ir::make_copy(src.region(), dst.region(), pad, where), "copy", where);
}

void gemm(const Buffer& A, const Buffer& B, const Buffer& C, bool transpose_A, bool transpose_B,
          GemmWarpPolicy policy, Loc where) {
  require_kernel("gemm", where);
  emit(ir::make_gemm(ir::whole_region(A.ir()), ir::whole_region(B.ir()), ir::whole_region(C.ir()),
                     transpose_A, transpose_B, policy, where),
       "gemm", where);
}

void fill(const RegionArg& dst, Expr value, Loc where) {
  require_kernel("fill", where);
  ir::Region r = dst.region();
  if (r.extents.empty()) {  // buf(i, j): from there to the end of each dimension
    for (size_t d = 0; d < r.starts.size(); ++d)
      r.extents.push_back(ir::make_binary(ir::BinaryOp::Sub, r.buffer->shape[d], r.starts[d]));
  }
  emit(ir::make_fill(r, value, where), "fill", where);
}

void clear(const RegionArg& dst, Loc where) {
  fill(dst, Expr(0), where);
}

void reduce_max(const Buffer& src, const Buffer& dst, int dim, bool clear, Loc where) {
  reduce(ir::ReduceOp::Max, "reduce_max", src, dst, dim, clear, where);
}
void reduce_min(const Buffer& src, const Buffer& dst, int dim, bool clear, Loc where) {
  reduce(ir::ReduceOp::Min, "reduce_min", src, dst, dim, clear, where);
}
void reduce_sum(const Buffer& src, const Buffer& dst, int dim, bool clear, Loc where) {
  reduce(ir::ReduceOp::Sum, "reduce_sum", src, dst, dim, clear, where);
}

void use_swizzle(int panel_size, bool enable, Loc where) {
  require_kernel("use_swizzle", where);
  if (!enable) return;
  if (panel_size < 1 || panel_size > 1 << 16)
    TESSEL_USER_ERROR("use_swizzle", where, "panel_size = " << panel_size << "; legal: 1 .. 65536");
  emit(ir::make_swizzle(panel_size, where), "use_swizzle", where);
}

void use_cluster(int x, int y, Loc where) {
  require_kernel("use_cluster", where);
  if (x < 1 || y < 1 || x * y > 2)
    TESSEL_USER_ERROR("use_cluster", where,
                      "cluster (" << x << ", " << y << "); legal: (1, 1), (2, 1) (blocks adjacent along x "
                                  << "share A tiles) or (1, 2) (along y, sharing B tiles)");
  if (x * y == 1) return;
  emit(ir::make_cluster(x, y, where), "use_cluster", where);
}

// ---- loops -------------------------------------------------------------------------------------------

void Pipelined(Expr extent, int num_stages, const std::function<void(Var)>& body, Loc where) {
  if (num_stages < 1 || num_stages > 8)
    TESSEL_USER_ERROR("Pipelined", where, "num_stages = " << num_stages << "; legal: 1 .. 8");
  single_loop(ir::ForKind::Pipelined, num_stages, extent, body, "Pipelined", where);
}
void Serial(Expr extent, const std::function<void(Var)>& body, Loc where) {
  single_loop(ir::ForKind::Serial, 0, extent, body, "Serial", where);
}
void Unroll(Expr extent, const std::function<void(Var)>& body, Loc where) {
  if (!ir::as_const_int(extent))
    TESSEL_USER_ERROR("Unroll", where,
                      "the extent " << ir::to_string(extent) << " is not a compile-time constant");
  single_loop(ir::ForKind::Unrolled, 0, extent, body, "Unroll", where);
}
void Parallel(Expr e0, const std::function<void(Var)>& body, Loc where) {
  loop_nest(ir::ForKind::Parallel, {e0}, "Parallel", where, [&](const std::vector<Var>& v) { body(v[0]); });
}
void Parallel(Expr e0, Expr e1, const std::function<void(Var, Var)>& body, Loc where) {
  loop_nest(ir::ForKind::Parallel, {e0, e1}, "Parallel", where,
            [&](const std::vector<Var>& v) { body(v[0], v[1]); });
}
void Parallel(Expr e0, Expr e1, Expr e2, const std::function<void(Var, Var, Var)>& body, Loc where) {
  loop_nest(ir::ForKind::Parallel, {e0, e1, e2}, "Parallel", where,
            [&](const std::vector<Var>& v) { body(v[0], v[1], v[2]); });
}
void If(Expr cond, const std::function<void()>& then_body, Loc where) {
  require_kernel("If", where);
  ir::Stmt body = record(then_body, where);
  emit(ir::make_if(cond, body, ir::Stmt(), where), "If", where);
}

// ---- expressions -------------------------------------------------------------------------------------

Expr ceildiv(Expr a, Expr b, Loc where) {
  using ir::BinaryOp;
  // A block count from a tile size: a divisor <= 0 (block_M = -128) would give a meaningless
  // grid or loop extent far from here.
  if (auto c = ir::as_const_int(b); c && *c <= 0)
    TESSEL_USER_ERROR("ceildiv", where,
                      "ceildiv(" << ir::to_string(a) << ", " << *c << "): the divisor is " << *c
                                 << "; it is a tile size and must be >= 1");
  return ir::make_binary(BinaryOp::Div,
                         ir::make_binary(BinaryOp::Sub, ir::make_binary(BinaryOp::Add, a, b), 1), b);
}
Expr min(Expr a, Expr b) {
  return ir::make_binary(ir::BinaryOp::Min, a, b);
}
Expr max(Expr a, Expr b) {
  return ir::make_binary(ir::BinaryOp::Max, a, b);
}
Expr select(Expr c, Expr t, Expr f) {
  return ir::make_select(c, t, f);
}
Expr cast(DType t, Expr v) {
  return ir::make_cast(t, v);
}

namespace {
// Math on 16-bit floats is done in f32, as on the GPU; the result keeps the wider type.
Expr math(const char* name, Expr v) {
  DType t = v.dtype();
  if (!is_float(t) || t == DType::f16 || t == DType::bf16) {
    v = ir::make_cast(DType::f32, v);
    t = DType::f32;
  }
  return ir::make_call(name, {v}, t);
}
// The exp2 forms that exist only in f32 (fast_exp2, poly_exp2): an f64 value is the author's error.
Expr f32_exp2(const char* name, Expr v, Loc where) {
  if (v.dtype() == DType::f64)
    TESSEL_USER_ERROR(name, where,
                      name << "(" << ir::to_string(v)
                           << ") takes an f32 value (16-bit floats and integers are "
                           << "widened to f32), not f64; use exp2 for f64");
  return math(name, v);
}
}  // namespace

Expr exp(Expr v) {
  return math("exp", v);
}
Expr exp2(Expr v) {
  return math("exp2", v);
}
Expr fast_exp2(Expr v, Loc where) {
  return f32_exp2("fast_exp2", v, where);
}
Expr poly_exp2(Expr v, Loc where) {
  return f32_exp2("poly_exp2", v, where);
}
Expr log(Expr v) {
  return math("log", v);
}
Expr log2(Expr v) {
  return math("log2", v);
}
Expr sqrt(Expr v) {
  return math("sqrt", v);
}
Expr rsqrt(Expr v) {
  return math("rsqrt", v);
}
Expr abs(Expr v) {
  if (is_integer(v.dtype())) return ir::make_call("abs", {v}, v.dtype());
  return math("abs", v);
}
Expr infinity(DType t) {
  return ir::make_float(std::numeric_limits<double>::infinity(), t);
}
Expr float_imm(double v, DType t) {
  return ir::make_float(v, t);
}
Expr int_imm(long long v, DType t) {
  return ir::make_int(v, t);
}

}  // namespace tessel

namespace tessel::ir {
Expr operator+(Expr a, Expr b) {
  return make_binary(BinaryOp::Add, a, b);
}
Expr operator-(Expr a, Expr b) {
  return make_binary(BinaryOp::Sub, a, b);
}
Expr operator*(Expr a, Expr b) {
  return make_binary(BinaryOp::Mul, a, b);
}
Expr operator/(Expr a, Expr b) {
  return make_binary(BinaryOp::Div, a, b);
}
Expr operator%(Expr a, Expr b) {
  return make_binary(BinaryOp::Mod, a, b);
}
Expr operator-(Expr a) {
  return make_unary(UnaryOp::Neg, a);
}
Expr operator==(Expr a, Expr b) {
  return make_binary(BinaryOp::EQ, a, b);
}
Expr operator!=(Expr a, Expr b) {
  return make_binary(BinaryOp::NE, a, b);
}
Expr operator<(Expr a, Expr b) {
  return make_binary(BinaryOp::LT, a, b);
}
Expr operator<=(Expr a, Expr b) {
  return make_binary(BinaryOp::LE, a, b);
}
Expr operator>(Expr a, Expr b) {
  return make_binary(BinaryOp::GT, a, b);
}
Expr operator>=(Expr a, Expr b) {
  return make_binary(BinaryOp::GE, a, b);
}
Expr operator&&(Expr a, Expr b) {
  return make_binary(BinaryOp::And, a, b);
}
Expr operator||(Expr a, Expr b) {
  return make_binary(BinaryOp::Or, a, b);
}
Expr operator!(Expr a) {
  return make_unary(UnaryOp::Not, a);
}
}  // namespace tessel::ir
