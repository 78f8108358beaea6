// Tessel's intermediate representation: immutable expression and statement nodes, all kinds
// from one list (TESSEL_EXPR_NODES / TESSEL_STMT_NODES), built through make() functions that
// check invariants. Handles (Expr, Stmt, Buffer) are shared pointers to const nodes, so a pass
// that changes nothing returns the very node it was given.
//
// Two levels live in one IR:
//  - the tile level the frontend builds: tile ops (Copy, Gemm, Fill, Reduce) on whole buffers
//    and regions, Parallel/Pipelined loops, Kernel;
//  - the thread level the passes lower to: plain loops, loads/stores of per-thread registers,
//    DeviceCall (a call into a device template of device/tessel/), Barrier, async-copy groups.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <vector>

#include "tessel/DType.hpp"
#include "tessel/Error.hpp"

namespace tessel::ir {

#define TESSEL_EXPR_NODES(X) \
  X(IntImm)                  \
  X(FloatImm)                \
  X(VarNode)                 \
  X(Binary)                  \
  X(Unary)                   \
  X(Select)                  \
  X(Cast)                    \
  X(Call)                    \
  X(BufferLoad)

#define TESSEL_STMT_NODES(X) \
  X(SeqStmt)                 \
  X(ForStmt)                 \
  X(IfStmt)                  \
  X(LetStmt)                 \
  X(BufferStore)             \
  X(DeclBuffer)              \
  X(KernelStmt)              \
  X(CopyStmt)                \
  X(GemmStmt)                \
  X(FillStmt)                \
  X(ReduceStmt)              \
  X(SwizzleStmt)             \
  X(ClusterStmt)             \
  X(DeviceCall)              \
  X(BarrierStmt)             \
  X(AsyncCommit)             \
  X(AsyncWait)               \
  X(MbarrierStmt)            \
  X(TmaLoadStmt)             \
  X(ClusterReduceStmt)       \
  X(ProducerStmt)            \
  X(SpecializeStmt)          \
  X(AsyncGemmWait)

enum class NodeKind : std::uint8_t {
#define TESSEL_NODE_ENUM(name) name,
  TESSEL_EXPR_NODES(TESSEL_NODE_ENUM) TESSEL_STMT_NODES(TESSEL_NODE_ENUM)
#undef TESSEL_NODE_ENUM
};

const char* node_kind_name(NodeKind k);

// Forward declarations of every node type.
#define TESSEL_NODE_FWD(name) struct name;
TESSEL_EXPR_NODES(TESSEL_NODE_FWD)
TESSEL_STMT_NODES(TESSEL_NODE_FWD)
#undef TESSEL_NODE_FWD

struct Node {
  explicit Node(NodeKind k) : kind(k) {}
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  const NodeKind kind;
};

struct ExprNode : Node {
  ExprNode(NodeKind k, DType t) : Node(k), dtype(t) {}
  const DType dtype;
};

struct StmtNode : Node {
  StmtNode(NodeKind k, std::source_location w) : Node(k), where(w) {}
  const std::source_location where;  // the kernel author's line that produced this statement
};

// ---- handles -------------------------------------------------------------------------------------

class Expr {
 public:
  Expr() = default;
  explicit Expr(std::shared_ptr<const ExprNode> n) : node_(std::move(n)) {}
  Expr(int v);        // NOLINT: i32 literal
  Expr(long v);       // NOLINT: i64 literal
  Expr(long long v);  // NOLINT: i64 literal
  Expr(double v);     // NOLINT: f32 literal
  Expr(float v);      // NOLINT: f32 literal

  bool defined() const { return node_ != nullptr; }
  const ExprNode* get() const { return node_.get(); }
  const ExprNode* operator->() const { return node_.get(); }
  const std::shared_ptr<const ExprNode>& ptr() const { return node_; }
  DType dtype() const;
  template <class T>
  const T* as() const;
  bool same_as(const Expr& o) const { return node_ == o.node_; }

 private:
  std::shared_ptr<const ExprNode> node_;
};

class Stmt {
 public:
  Stmt() = default;
  explicit Stmt(std::shared_ptr<const StmtNode> n) : node_(std::move(n)) {}
  bool defined() const { return node_ != nullptr; }
  const StmtNode* get() const { return node_.get(); }
  const StmtNode* operator->() const { return node_.get(); }
  template <class T>
  const T* as() const;
  bool same_as(const Stmt& o) const { return node_ == o.node_; }

 private:
  std::shared_ptr<const StmtNode> node_;
};

template <class T>
const T* Expr::as() const {
  return node_ && node_->kind == T::kKind ? static_cast<const T*>(node_.get()) : nullptr;
}
template <class T>
const T* Stmt::as() const {
  return node_ && node_->kind == T::kKind ? static_cast<const T*>(node_.get()) : nullptr;
}

// A variable: a loop index, a block index, a let binding. Identity is the node, not the name.
class Var : public Expr {
 public:
  Var() = default;
  explicit Var(const std::string& name, DType t = DType::i32);
  explicit Var(std::shared_ptr<const VarNode> n);
  const std::string& name() const;
};

// Where a buffer lives. Global buffers are the kernel's tensor parameters; fragment buffers are
// block-wide register tiles whose spread over threads the compiler decides (infer_layouts);
// local buffers are per-thread arrays; shared buffers are in shared memory.
enum class Scope : std::uint8_t { Global, Shared, Fragment, Local };
const char* scope_name(Scope s);

struct BufferNode {
  std::string name{};
  std::vector<Expr> shape{};
  DType dtype{};
  Scope scope{};
  std::source_location where{};
  int id{};  // unique per process, for stable identity in maps
  // Fragment only: the last `shared_tail` vectors of each thread's registers live in shared
  // memory, in slots only that thread touches (alloc_fragment's FragmentStorage). 0: all in
  // registers.
  int shared_tail = 0;
  // Global only: element strides per dimension, set when the tensor is not row-major (a view
  // such as a BHSD tensor seen as [B, S, H, D]); empty means row-major over `shape`.
  std::vector<Expr> strides{};
};

class Buffer {
 public:
  Buffer() = default;
  static Buffer make(const std::string& name, std::vector<Expr> shape, DType dtype, Scope scope,
                     std::source_location where, int shared_tail = 0, std::vector<Expr> strides = {});
  bool defined() const { return node_ != nullptr; }
  const BufferNode* operator->() const { return node_.get(); }
  const BufferNode* get() const { return node_.get(); }
  bool same_as(const Buffer& o) const { return node_ == o.node_; }
  int ndim() const { return static_cast<int>(node_->shape.size()); }
  // The shape as integers; InternalError if a dimension is not a constant.
  std::vector<std::int64_t> const_shape() const;
  std::int64_t const_numel() const;
  // Element strides per dimension: the global tensor's own, or row-major over the shape.
  std::vector<Expr> strides() const;
  // Whether the strides are row-major over the shape (always true of tiles).
  bool row_major() const;

 private:
  std::shared_ptr<const BufferNode> node_;
};

// A rectangular piece of a buffer: starts per dimension and extents per dimension. Extents may be
// left empty by the frontend ("as large as the other side of the copy"); verify fills them in.
struct Region {
  Buffer buffer{};
  std::vector<Expr> starts{};
  std::vector<Expr> extents{};
};

// ---- expressions ---------------------------------------------------------------------------------

struct IntImm : ExprNode {
  static constexpr NodeKind kKind = NodeKind::IntImm;
  IntImm(DType t, std::int64_t v) : ExprNode(kKind, t), value(v) {}
  const std::int64_t value;
};

struct FloatImm : ExprNode {
  static constexpr NodeKind kKind = NodeKind::FloatImm;
  FloatImm(DType t, double v) : ExprNode(kKind, t), value(v) {}
  const double value;
};

struct VarNode : ExprNode {
  static constexpr NodeKind kKind = NodeKind::VarNode;
  VarNode(DType t, std::string n) : ExprNode(kKind, t), name(std::move(n)) {}
  const std::string name;
};

enum class BinaryOp : std::uint8_t {
  Add,
  Sub,
  Mul,
  Div,
  Mod,
  FloorDiv,
  FloorMod,
  Min,
  Max,
  EQ,
  NE,
  LT,
  LE,
  GT,
  GE,
  And,
  Or
};
const char* binary_op_name(BinaryOp op);  // "+", "min", "==" ...
bool is_comparison(BinaryOp op);

struct Binary : ExprNode {
  static constexpr NodeKind kKind = NodeKind::Binary;
  Binary(DType t, BinaryOp o, Expr l, Expr r) : ExprNode(kKind, t), op(o), a(std::move(l)), b(std::move(r)) {}
  const BinaryOp op;
  const Expr a, b;
};

enum class UnaryOp : std::uint8_t { Neg, Not };

struct Unary : ExprNode {
  static constexpr NodeKind kKind = NodeKind::Unary;
  Unary(DType t, UnaryOp o, Expr v) : ExprNode(kKind, t), op(o), a(std::move(v)) {}
  const UnaryOp op;
  const Expr a;
};

struct Select : ExprNode {
  static constexpr NodeKind kKind = NodeKind::Select;
  Select(DType t, Expr c, Expr x, Expr y)
      : ExprNode(kKind, t), cond(std::move(c)), true_value(std::move(x)), false_value(std::move(y)) {}
  const Expr cond, true_value, false_value;
};

struct Cast : ExprNode {
  static constexpr NodeKind kKind = NodeKind::Cast;
  Cast(DType t, Expr v) : ExprNode(kKind, t), value(std::move(v)) {}
  const Expr value;
};

// A pure math intrinsic: exp, exp2, log, log2, sqrt, rsqrt, abs, infinity (no args), ...
struct Call : ExprNode {
  static constexpr NodeKind kKind = NodeKind::Call;
  Call(DType t, std::string n, std::vector<Expr> a)
      : ExprNode(kKind, t), name(std::move(n)), args(std::move(a)) {}
  const std::string name;
  const std::vector<Expr> args;
};

struct BufferLoad : ExprNode {
  static constexpr NodeKind kKind = NodeKind::BufferLoad;
  BufferLoad(Buffer b, std::vector<Expr> i)
      : ExprNode(kKind, b->dtype), buffer(std::move(b)), indices(std::move(i)) {}
  const Buffer buffer;
  const std::vector<Expr> indices;
};

// ---- statements ----------------------------------------------------------------------------------

struct SeqStmt : StmtNode {
  static constexpr NodeKind kKind = NodeKind::SeqStmt;
  SeqStmt(std::vector<Stmt> s, std::source_location w) : StmtNode(kKind, w), stmts(std::move(s)) {}
  const std::vector<Stmt> stmts;
};

// Serial: an ordinary loop. Unrolled: fully unrolled. Parallel: an element-wise nest over a tile
// (the frontend's T::Parallel), distributed over threads by lower_parallel_loops. Pipelined: a
// loop whose global->shared copies plan_pipelines overlaps with compute over num_stages buffers.
// Tiles: a persistent kernel's loop over the output tiles of its block (persist_tiles; made by
// the compiler, not by programs): run like Serial.
enum class ForKind : std::uint8_t { Serial, Unrolled, Parallel, Pipelined, Tiles };
const char* for_kind_name(ForKind k);

struct ForStmt : StmtNode {
  static constexpr NodeKind kKind = NodeKind::ForStmt;
  ForStmt(Var v, Expr mn, Expr ext, ForKind k, int stages, Stmt b, std::source_location w)
      : StmtNode(kKind, w),
        var(std::move(v)),
        min(std::move(mn)),
        extent(std::move(ext)),
        kind(k),
        num_stages(stages),
        body(std::move(b)) {}
  const Var var;
  const Expr min, extent;
  const ForKind kind;
  const int num_stages;  // Pipelined only; 0 otherwise
  const Stmt body;
};

struct IfStmt : StmtNode {
  static constexpr NodeKind kKind = NodeKind::IfStmt;
  IfStmt(Expr c, Stmt t, Stmt e, std::source_location w)
      : StmtNode(kKind, w), cond(std::move(c)), then_case(std::move(t)), else_case(std::move(e)) {}
  const Expr cond;
  const Stmt then_case, else_case;  // else_case may be undefined
};

struct LetStmt : StmtNode {
  static constexpr NodeKind kKind = NodeKind::LetStmt;
  LetStmt(Var v, Expr val, Stmt b, std::source_location w)
      : StmtNode(kKind, w), var(std::move(v)), value(std::move(val)), body(std::move(b)) {}
  const Var var;
  const Expr value;
  const Stmt body;
};

struct BufferStore : StmtNode {
  static constexpr NodeKind kKind = NodeKind::BufferStore;
  BufferStore(Buffer b, std::vector<Expr> i, Expr v, std::source_location w)
      : StmtNode(kKind, w), buffer(std::move(b)), indices(std::move(i)), value(std::move(v)) {}
  const Buffer buffer;
  const std::vector<Expr> indices;
  const Expr value;
};

// Declares a shared, fragment or local buffer at this point of a kernel body.
struct DeclBuffer : StmtNode {
  static constexpr NodeKind kKind = NodeKind::DeclBuffer;
  DeclBuffer(Buffer b, std::source_location w) : StmtNode(kKind, w), buffer(std::move(b)) {}
  const Buffer buffer;
};

// One launch: a grid of blocks of `threads` threads; block_vars[d] is blockIdx along d.
struct KernelStmt : StmtNode {
  static constexpr NodeKind kKind = NodeKind::KernelStmt;
  KernelStmt(std::vector<Expr> g, int t, std::vector<Var> bv, Stmt b, std::source_location w)
      : StmtNode(kKind, w), grid(std::move(g)), threads(t), block_vars(std::move(bv)), body(std::move(b)) {}
  const std::vector<Expr> grid;  // 1 to 3 extents
  const int threads;
  const std::vector<Var> block_vars;
  const Stmt body;
};

// Tile op: dst = src, element by element, over regions of equal extents. Reads past a global
// tensor's edge give `pad` (zero unless given); writes past it are dropped.
// row_window: between a global tensor's rows and a fragment, each row shifted so that the tile
// starts at the aligned 16-byte word at or before the row's first element: tile column j is
// the tensor's column c0 + j - s, s = (the element offset of the row's start at c0) mod (16 /
// element size); columns before c0 or past the row's end are `pad` on the way in and not
// written on the way out (frontend: copy_window).
struct CopyStmt : StmtNode {
  static constexpr NodeKind kKind = NodeKind::CopyStmt;
  CopyStmt(Region s, Region d, Expr p, std::source_location w, bool window = false)
      : StmtNode(kKind, w), src(std::move(s)), dst(std::move(d)), pad(std::move(p)), row_window(window) {}
  const Region src, dst;
  const Expr pad;  // may be undefined (zero)
  const bool row_window;
};

// How gemm spreads its warps over the block tile.
enum class GemmWarpPolicy : std::uint8_t { Square, FullRow, FullCol };
const char* gemm_warp_policy_name(GemmWarpPolicy p);

// Tile op: C += op(A) * op(B); A, B in shared memory, C a fragment accumulator. Operands are
// regions so that a pipelined loop can point the gemm at one stage of a multi-buffered tile; the
// frontend passes whole buffers. A region's trailing two extents are the matrix; leading
// extents are 1.
struct GemmStmt : StmtNode {
  static constexpr NodeKind kKind = NodeKind::GemmStmt;
  GemmStmt(Region a, Region b, Region c, bool ta, bool tb, GemmWarpPolicy p, std::source_location w,
           bool as = false)
      : StmtNode(kKind, w),
        A(std::move(a)),
        B(std::move(b)),
        C(std::move(c)),
        trans_a(ta),
        trans_b(tb),
        policy(p),
        async(as) {}
  const Region A, B, C;
  const bool trans_a, trans_b;
  const GemmWarpPolicy policy;
  // Set by place_gemm_waits on a wgmma gemm: the statement only issues the gemm (one commit
  // group); an AsyncGemmWait placed after it retires it before anything touches its operands.
  const bool async;
};

// Tile op: every element of dst = value.
struct FillStmt : StmtNode {
  static constexpr NodeKind kKind = NodeKind::FillStmt;
  FillStmt(Region d, Expr v, std::source_location w)
      : StmtNode(kKind, w), dst(std::move(d)), value(std::move(v)) {}
  const Region dst;
  const Expr value;
};

enum class ReduceOp : std::uint8_t { Max, Min, Sum };
const char* reduce_op_name(ReduceOp op);

// Tile op: dst = reduce(src, along dim) (combined with dst's old values when !clear).
struct ReduceStmt : StmtNode {
  static constexpr NodeKind kKind = NodeKind::ReduceStmt;
  ReduceStmt(Buffer s, Buffer d, ReduceOp o, int dm, bool c, std::source_location w)
      : StmtNode(kKind, w), src(std::move(s)), dst(std::move(d)), op(o), dim(dm), clear(c) {}
  const Buffer src, dst;
  const ReduceOp op;
  const int dim;
  const bool clear;
};

// Block rasterization for L2 reuse: remaps the kernel's block indices in panels of panel_size.
struct SwizzleStmt : StmtNode {
  static constexpr NodeKind kKind = NodeKind::SwizzleStmt;
  SwizzleStmt(int p, std::source_location w) : StmtNode(kKind, w), panel_size(p) {}
  const int panel_size;
};

// Thread-block clusters: cluster_x blocks adjacent along the grid's x axis and cluster_y along
// y form a cluster. A scheduling hint with no effect on results: the sm_90a GEMM shares operand
// tiles inside a cluster through TMA multicast (A along x, B along y); elsewhere it is ignored.
struct ClusterStmt : StmtNode {
  static constexpr NodeKind kKind = NodeKind::ClusterStmt;
  ClusterStmt(int x, int y, std::source_location w) : StmtNode(kKind, w), cluster_x(x), cluster_y(y) {}
  const int cluster_x, cluster_y;
};

// Thread level: a call into a device template, `callee<template_args>(args...)`. Buffers named in
// args are passed as pointers to their first element (a shared or global buffer) or as the
// register array (fragment/local). A lambda argument is code the callee runs when it chooses
// (a main loop's copies, a fused epilogue per output element): its parameters are bound for its
// body, each of its Var's type (ints, floats computed in f32); with a result it returns it.
struct DeviceCallArg {
  Expr expr{};      // a value, or
  Buffer buffer{};  // a buffer (then `offset` is an element offset into it, may be undefined), or
  Expr offset{};
  std::vector<Var> lambda_params{};  // a lambda: [&](int p0, float p1, ...) { lambda_body
  Stmt lambda_body{};                //              return lambda_result; }
  Expr lambda_result{};              // may be undefined (the lambda returns nothing)
};

struct DeviceCall : StmtNode {
  static constexpr NodeKind kKind = NodeKind::DeviceCall;
  DeviceCall(std::string c, std::vector<std::string> ta, std::vector<DeviceCallArg> a, std::source_location w)
      : StmtNode(kKind, w), callee(std::move(c)), template_args(std::move(ta)), args(std::move(a)) {}
  const std::string callee;
  const std::vector<std::string> template_args;
  const std::vector<DeviceCallArg> args;
};

// A block barrier (threads 0: __syncthreads), or named barrier `id` (1..15) over `threads`
// threads: the consumer warpgroups of a warp-specialized kernel synchronize among themselves.
struct BarrierStmt : StmtNode {
  static constexpr NodeKind kKind = NodeKind::BarrierStmt;
  explicit BarrierStmt(std::source_location w, int i = 0, int t = 0)
      : StmtNode(kKind, w), id(i), threads(t) {}
  const int id, threads;
};

// cp.async group bookkeeping, placed by plan_pipelines.
struct AsyncCommit : StmtNode {
  static constexpr NodeKind kKind = NodeKind::AsyncCommit;
  explicit AsyncCommit(std::source_location w) : StmtNode(kKind, w) {}
};
struct AsyncWait : StmtNode {
  static constexpr NodeKind kKind = NodeKind::AsyncWait;
  AsyncWait(int n, std::source_location w) : StmtNode(kKind, w), pending(n) {}
  const int pending;  // wait until at most this many groups are in flight
};

// ---- Hopper asynchrony (introduced by passes, never by the frontend) -------------------------

// mbarriers: `bars` is a shared i64 array, one barrier per element; the statement acts on
// bars[index]. Init: `value` arrivals complete a phase (one thread initializes; a block
// barrier follows). Arrive: each executing thread arrives once. WarpArrive: each executing
// warp arrives once, after all its threads got there (the consumers' release of a ring stage);
// with a `value` R (a ring that multicast_cluster_loads' loads fill), once on bars[index] of each
// of the R CTAs of the cluster.
// ArriveExpectTx: one arrival that also expects `value` bytes of TMA transactions. Wait: blocks
// until the phase of parity `value` (0 or 1) has completed.
enum class MbarrierOp : std::uint8_t { Init, Arrive, WarpArrive, ArriveExpectTx, Wait };
const char* mbarrier_op_name(MbarrierOp op);

struct MbarrierStmt : StmtNode {
  static constexpr NodeKind kKind = NodeKind::MbarrierStmt;
  MbarrierStmt(MbarrierOp o, Buffer b, Expr i, Expr v, std::source_location w)
      : StmtNode(kKind, w), op(o), bars(std::move(b)), index(std::move(i)), value(std::move(v)) {}
  const MbarrierOp op;
  const Buffer bars;
  const Expr index;
  const Expr value;  // Init: arrival count; ArriveExpectTx: bytes; Wait: parity; else undefined
};

// dst = src through the tensor memory accelerator: a bulk copy of a global region (2-D tile of
// an N-D tensor, as copy takes it) into a shared tile laid out with the TMA swizzle, issued by
// one thread, completing `bytes` of transactions on bars[index]. `map` is the kernel parameter
// holding the tensor map (ctx.tma_params says its box).
struct TmaLoadStmt : StmtNode {
  static constexpr NodeKind kKind = NodeKind::TmaLoadStmt;
  TmaLoadStmt(Region s, Region d, Var m, Buffer b, Expr i, int mc, std::source_location w)
      : StmtNode(kKind, w),
        src(std::move(s)),
        dst(std::move(d)),
        map(std::move(m)),
        bars(std::move(b)),
        index(std::move(i)),
        multicast(mc) {}
  const Region src, dst;
  const Var map;
  const Buffer bars;  // undefined until plan_pipelines gives the load its ring barrier
  const Expr index;
  // multicast_cluster_loads: the tile is the same for the `multicast` CTAs of a cluster (1: this
  // CTA's own). Each CTA then loads its 1/multicast share of the box's rows (the map's box says
  // the share) into that place of every CTA's tile, completing on each CTA's bars[index].
  const int multicast = 1;
};

// acc += the same fragment of the other CTAs of a cluster of `ranks` CTAs (2, 4 or 8), in the CTA
// of cluster rank 0 (split_k_clusters: each CTA of the cluster computed a share of one output
// tile's K loop). `rank` is this CTA's cluster rank. The partial sums meet along a binary tree
// (log2(ranks) rounds), each round's sender storing into its receiver's `scratch` (a shared tile
// the CTA has finished with: its ring) through distributed shared memory; round i uses the two
// mbarriers bars[2i] (in the sender: the receiver's scratch is free) and bars[2i + 1] (in the
// receiver: the sums have arrived), initialized at the kernel's start with the block's threads as
// their arrival counts (device/tessel/cluster_reduce.cuh). Afterwards the other ranks' acc are
// unspecified.
struct ClusterReduceStmt : StmtNode {
  static constexpr NodeKind kKind = NodeKind::ClusterReduceStmt;
  ClusterReduceStmt(Buffer a, Buffer s, Buffer b, Expr r, int n, std::source_location w)
      : StmtNode(kKind, w),
        acc(std::move(a)),
        scratch(std::move(s)),
        bars(std::move(b)),
        rank(std::move(r)),
        ranks(n) {}
  const Buffer acc;      // a fragment
  const Buffer scratch;  // a shared buffer of at least acc's bytes
  const Buffer bars;     // shared i64[2 log2(ranks)]
  const Expr rank;
  const int ranks;
};

// The producer's share of a ring's work (issuing its loads). Until specialize_warps gives the
// producer warps of its own, one thread of the block runs it (thread 0) while the others wait at
// the warp's reconvergence.
struct ProducerStmt : StmtNode {
  static constexpr NodeKind kKind = NodeKind::ProducerStmt;
  ProducerStmt(Stmt b, std::source_location w) : StmtNode(kKind, w), body(std::move(b)) {}
  const Stmt body;
};

// Warp roles: threads [0, consumer_threads) run `consumer`, the next producer_threads (a warp,
// or whole warpgroups when it sets a register budget) run `producer` (its first thread issues;
// the others idle); each role sets its per-thread register budget (setmaxnreg) first when the
// budget is non-zero.
struct SpecializeStmt : StmtNode {
  static constexpr NodeKind kKind = NodeKind::SpecializeStmt;
  SpecializeStmt(int ct, int pt, int cr, int pr, Stmt p, Stmt c, std::source_location w)
      : StmtNode(kKind, w),
        consumer_threads(ct),
        producer_threads(pt),
        consumer_regs(cr),
        producer_regs(pr),
        producer(std::move(p)),
        consumer(std::move(c)) {}
  const int consumer_threads, producer_threads, consumer_regs, producer_regs;
  const Stmt producer, consumer;
};

// wgmma.wait_group: until at most `pending` async gemm groups of this warpgroup are in flight;
// `fence` names the accumulators the retired gemms wrote, whose registers the code after the
// wait may touch; `pinned` names registers the code before the wait computed, which must be
// computed before it (the work meant to overlap the gemms: without the pin the CUDA compiler
// may sink register arithmetic past the wait).
struct AsyncGemmWait : StmtNode {
  static constexpr NodeKind kKind = NodeKind::AsyncGemmWait;
  AsyncGemmWait(int p, std::vector<Buffer> f, std::vector<Buffer> pin, std::source_location w)
      : StmtNode(kKind, w), pending(p), fence(std::move(f)), pinned(std::move(pin)) {}
  const int pending;
  const std::vector<Buffer> fence;
  const std::vector<Buffer> pinned;
};

// ---- constructors that check invariants ------------------------------------------------------

Expr make_int(std::int64_t v, DType t = DType::i32);
Expr make_float(double v, DType t = DType::f32);
Expr make_binary(BinaryOp op, Expr a, Expr b);
Expr make_unary(UnaryOp op, Expr a);
Expr make_select(Expr c, Expr t, Expr f);
Expr make_cast(DType t, Expr v);
Expr make_call(const std::string& name, std::vector<Expr> args, DType t);
Expr make_load(Buffer b, std::vector<Expr> indices);

Stmt make_seq(std::vector<Stmt> stmts, std::source_location w = {});
Stmt make_for(Var v, Expr min, Expr extent, ForKind k, int num_stages, Stmt body, std::source_location w);
Stmt make_if(Expr c, Stmt t, Stmt e, std::source_location w);
Stmt make_let(Var v, Expr value, Stmt body, std::source_location w);
Stmt make_store(Buffer b, std::vector<Expr> indices, Expr value, std::source_location w);
Stmt make_decl(Buffer b, std::source_location w);
Stmt make_kernel(std::vector<Expr> grid, int threads, std::vector<Var> block_vars, Stmt body,
                 std::source_location w);
Stmt make_copy(Region src, Region dst, Expr pad, std::source_location w, bool row_window = false);
Stmt make_gemm(Region a, Region b, Region c, bool ta, bool tb, GemmWarpPolicy p, std::source_location w,
               bool async = false);
// The region covering all of b.
Region whole_region(const Buffer& b);
Stmt make_fill(Region dst, Expr value, std::source_location w);
Stmt make_reduce(Buffer src, Buffer dst, ReduceOp op, int dim, bool clear, std::source_location w);
Stmt make_swizzle(int panel, std::source_location w);
Stmt make_cluster(int x, int y, std::source_location w);
Stmt make_device_call(std::string callee, std::vector<std::string> template_args,
                      std::vector<DeviceCallArg> args, std::source_location w);
Stmt make_barrier(std::source_location w, int id = 0, int threads = 0);
Stmt make_mbarrier(MbarrierOp op, Buffer bars, Expr index, Expr value, std::source_location w);
Stmt make_tma_load(Region src, Region dst, Var map, Buffer bars, Expr index, std::source_location w,
                   int multicast = 1);
Stmt make_cluster_reduce(Buffer acc, Buffer scratch, Buffer bars, Expr rank, int ranks,
                         std::source_location w);
Stmt make_producer(Stmt body, std::source_location w);
Stmt make_specialize(int consumer_threads, int producer_threads, int consumer_regs, int producer_regs,
                     Stmt producer, Stmt consumer, std::source_location w);
Stmt make_async_gemm_wait(int pending, std::vector<Buffer> fence, std::source_location w,
                          std::vector<Buffer> pinned = {});
Stmt make_async_commit(std::source_location w);
Stmt make_async_wait(int pending, std::source_location w);

// Constant folding helpers used everywhere.
std::optional<std::int64_t> as_const_int(const Expr& e);
bool is_const_int(const Expr& e, std::int64_t v);

// A whole program: named global tensor parameters and the statement that runs them.
struct PrimFuncNode {
  std::string name{};
  std::vector<Buffer> params{};
  Stmt body{};
};

}  // namespace tessel::ir
