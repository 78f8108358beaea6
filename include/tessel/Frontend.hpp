// The tile language as kernel authors write it: ordinary C++ calls that record IR. Every call
// that can be misused takes the caller's std::source_location, so errors name the author's line.
//
//   T::PrimFunc f("matmul");
//   auto A = f.tensor("A", {M, K}, T::f16);
//   f.body([&] { T::Kernel(gx, gy, 128, [&](T::Var bx, T::Var by) { ... }); });
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
#include <source_location>
#include <string>
#include <vector>

#include "tessel/DType.hpp"
#include "tessel/Error.hpp"
#include "tessel/ir/IR.hpp"

namespace tessel {

using ir::Expr;
using ir::GemmWarpPolicy;
using ir::Var;
using Loc = std::source_location;

class Buffer;

// An element access `buf(i, j)`. As a value it is a load; assigned to, it records a store; passed
// to copy it names the region that starts there.
class BufferRef : public ir::Expr {
 public:
  BufferRef(ir::Buffer b, std::vector<Expr> indices, Loc where);
  BufferRef(const BufferRef&) = default;
  BufferRef& operator=(const Expr& value);
  BufferRef& operator=(const BufferRef& value);
  BufferRef& operator=(double value) { return *this = Expr(value); }
  BufferRef& operator=(int value) { return *this = Expr(value); }
  BufferRef& operator+=(const Expr& v);
  BufferRef& operator-=(const Expr& v);
  BufferRef& operator*=(const Expr& v);
  const ir::Buffer& buffer() const { return buffer_; }
  const std::vector<Expr>& indices() const { return indices_; }

 private:
  ir::Buffer buffer_;
  std::vector<Expr> indices_;
  Loc where_;
};

// A buffer handle in the author's hands: a tensor parameter or an allocated tile.
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(ir::Buffer b) : b_(std::move(b)) {}
  // The first index carries the caller's line: a default argument of its constructor is
  // evaluated where the author wrote buf(i, j).
  struct FirstIndex {
    template <class T>
    FirstIndex(T v, Loc w = Loc::current()) : expr(Expr(v)), where(w) {}  // NOLINT: implicit by design
    Expr expr;
    Loc where;
  };
  template <class... I>
  BufferRef operator()(FirstIndex first, I... rest) const {
    return BufferRef(b_, std::vector<Expr>{first.expr, Expr(rest)...}, first.where);
  }
  BufferRef at(std::vector<Expr> idx, Loc where = Loc::current()) const {
    return BufferRef(b_, std::move(idx), where);
  }
  const ir::Buffer& ir() const { return b_; }
  const std::string& name() const { return b_->name; }
  DType dtype() const { return b_->dtype; }
  const std::vector<Expr>& shape() const { return b_->shape; }
  int ndim() const { return b_.ndim(); }

 private:
  ir::Buffer b_;
};

// What copy and fill accept: a whole buffer, `buf(i, j)` (a region starting there whose extents
// come from the other side), or an explicit region.
class RegionArg {
 public:
  RegionArg(const Buffer& b);                         // NOLINT: implicit by design
  RegionArg(const BufferRef& r);                      // NOLINT
  RegionArg(ir::Region r) : region_(std::move(r)) {}  // NOLINT
  const ir::Region& region() const { return region_; }

 private:
  ir::Region region_;
};

// An explicit region: region(A, {row0, col0}, {rows, cols}).
ir::Region region(const Buffer& b, std::vector<Expr> starts, std::vector<Expr> extents);

// ---- programs --------------------------------------------------------------------------------------

class PrimFunc {
 public:
  explicit PrimFunc(std::string name = "unnamed");
  // A global tensor parameter, in call order.
  Buffer tensor(const std::string& name, std::vector<Expr> shape, DType dtype, Loc where = Loc::current());
  // A tensor parameter with explicit element strides, one per dimension (positive constants).
  // The kernel is compiled for them and takes only tensors with these strides (dimensions of
  // size 1 aside): e.g. a [B, H, S, D] allocation seen as the logical [B, S, H, D] tensor
  // Q(b, s, h, d) has strides {H*S*D, D, S*D, 1}. Copies move tiles in 16-byte vectors (or with
  // TMA) along a dimension of stride 1.
  Buffer tensor(const std::string& name, std::vector<Expr> shape, DType dtype, std::vector<Expr> strides,
                Loc where = Loc::current());
  // Records the program body by running `fn` once.
  void body(const std::function<void()>& fn, Loc where = Loc::current());
  const ir::PrimFuncNode& ir() const { return *node_; }
  std::shared_ptr<const ir::PrimFuncNode> ir_ptr() const { return node_; }
  const std::string& name() const { return node_->name; }
  // The IR text (stable; see ir/Printer.hpp).
  std::string script() const;

 private:
  std::shared_ptr<ir::PrimFuncNode> node_;
};

// A launch of grid blocks of `threads` threads each; the body receives the block indices.
void Kernel(Expr gx, int threads, const std::function<void(Var)>& body, Loc where = Loc::current());
void Kernel(Expr gx, Expr gy, int threads, const std::function<void(Var, Var)>& body,
            Loc where = Loc::current());
void Kernel(Expr gx, Expr gy, Expr gz, int threads, const std::function<void(Var, Var, Var)>& body,
            Loc where = Loc::current());

Buffer alloc_shared(std::vector<Expr> shape, DType dtype, Loc where = Loc::current());
Buffer alloc_fragment(std::vector<Expr> shape, DType dtype, Loc where = Loc::current());
// Where a fragment's per-thread elements live. shared_tail = k: the last k vectors each thread
// holds stay in shared memory, in slots only that thread reads and writes (no barriers), so a
// tile larger than the register budget still needs no second read of its source: the softmax
// keeps a 64 K-wide row this way with two blocks per SM. Only for row-wise fragments (the layout
// that copies move in vectors); the element values are the same either way.
struct FragmentStorage {
  int shared_tail = 0;
};
Buffer alloc_fragment(std::vector<Expr> shape, DType dtype, FragmentStorage storage,
                      Loc where = Loc::current());
Buffer alloc_local(std::vector<Expr> shape, DType dtype, Loc where = Loc::current());

// ---- tile ops -------------------------------------------------------------------------------------

void copy(const RegionArg& src, const RegionArg& dst, Loc where = Loc::current());
// A copy whose reads past a global tensor's edge give `pad` instead of zero.
void copy_padded(const RegionArg& src, const RegionArg& dst, Expr pad, Loc where = Loc::current());
// A copy between rows of a global tensor and a fragment, each row through a window that starts
// at the aligned 16-byte word at or before the row's first element (that element's offset mod
// 16 bytes is the row's shift s, 0 to 16 / element size - 1): the fragment's column j holds the
// row's column c0 + j - s, where c0 is the region's start column; its first s columns and those
// past the row's end are `pad` on the way in (zero unless given) and are not written on the way
// out. Every 16-byte vector then moves as one aligned word, whatever the row length: for
// programs that do not care which column an element sits in (a softmax, a row sum), with a tile
// at least 16 / element size - 1 columns wider than the rows. Both sides of a row's round trip
// shift alike when their row offsets agree mod 16 bytes (one tensor, or two of one shape).
void copy_window(const RegionArg& src, const RegionArg& dst, Expr pad = Expr(), Loc where = Loc::current());
// C += op(A) * op(B): C an f32 fragment [M, N]; B a shared tile, [K, N] ([N, K] when
// transpose_B); A a shared tile, [M, K] ([K, M] when transpose_A), or a 16-bit fragment [M, K]
// held in registers (no transpose), the form FlashAttention's P * V takes: a fragment computed
// element by element from another gemm's accumulator (a Parallel cast, or a copy) is already laid
// out as an A operand. A gemm with A in registers, and one whose accumulator becomes such an
// operand, split their warps along M only (policy Square becomes FullRow; FullCol is an error).
// On sm_90a the gemm uses wgmma when the warps stack 64 rows per warpgroup (BM = 16 * warps; under
// JitOptions::gemm_from_passes also several such m64 blocks a warpgroup, within 128 accumulator
// registers a thread) and 64 <= N <= 256 is a multiple of 16, mma.sync otherwise -- and for the
// sole gemm of a cp.async Pipelined loop that fills both its operands, whose mma.sync main loop
// measured faster (the tutorial GEMM itself has its own sm_90a kernel). A gemm kept on mma.sync
// says why in KernelInfo::declined.
void gemm(const Buffer& A, const Buffer& B, const Buffer& C, bool transpose_A = false,
          bool transpose_B = false, GemmWarpPolicy policy = GemmWarpPolicy::Square,
          Loc where = Loc::current());
void fill(const RegionArg& dst, Expr value, Loc where = Loc::current());
void clear(const RegionArg& dst, Loc where = Loc::current());
void reduce_max(const Buffer& src, const Buffer& dst, int dim = -1, bool clear = true,
                Loc where = Loc::current());
void reduce_min(const Buffer& src, const Buffer& dst, int dim = -1, bool clear = true,
                Loc where = Loc::current());
void reduce_sum(const Buffer& src, const Buffer& dst, int dim = -1, bool clear = true,
                Loc where = Loc::current());
// Rasterizes blocks in panels of `panel_size` for L2 reuse.
void use_swizzle(int panel_size, bool enable = true, Loc where = Loc::current());
// Groups blocks into thread-block clusters of x blocks along the grid's x axis by y along y —
// (2, 1) or (1, 2); (1, 1) is no cluster. A hint that never changes results: on sm_90a the GEMM
// path loads each operand tile the cluster's blocks share once and multicasts it with TMA (the A
// tile along x, where blocks share rows; the B tile along y); other kernels ignore it.
void use_cluster(int x, int y = 1, Loc where = Loc::current());

// ---- loops ------------------------------------------------------------------------------------------

// A loop the compiler software-pipelines: global->shared copies of iteration k + num_stages - 1
// overlap the compute of iteration k over num_stages shared buffers.
void Pipelined(Expr extent, int num_stages, const std::function<void(Var)>& body, Loc where = Loc::current());
void Serial(Expr extent, const std::function<void(Var)>& body, Loc where = Loc::current());
void Unroll(Expr extent, const std::function<void(Var)>& body, Loc where = Loc::current());
// An element-wise nest over a tile, spread over the block's threads by the compiler.
void Parallel(Expr e0, const std::function<void(Var)>& body, Loc where = Loc::current());
void Parallel(Expr e0, Expr e1, const std::function<void(Var, Var)>& body, Loc where = Loc::current());
void Parallel(Expr e0, Expr e1, Expr e2, const std::function<void(Var, Var, Var)>& body,
              Loc where = Loc::current());
void If(Expr cond, const std::function<void()>& then_body, Loc where = Loc::current());

// ---- expressions ------------------------------------------------------------------------------------

// (a + b - 1) / b; a constant b <= 0 is a CompileError at the caller's line.
Expr ceildiv(Expr a, Expr b, Loc where = Loc::current());
Expr min(Expr a, Expr b);
Expr max(Expr a, Expr b);
Expr select(Expr cond, Expr if_true, Expr if_false);
inline Expr if_then_else(Expr c, Expr t, Expr f) {
  return select(std::move(c), std::move(t), std::move(f));
}
Expr cast(DType t, Expr v);
Expr exp(Expr v);
Expr exp2(Expr v);
// 2^v by the GPU's approximate instruction (ex2.approx.ftz.f32: one MUFU.EX2, where exp2 adds a
// range check and two multiplies to keep results below 2^-126 as denormals): results below
// 2^-126 are 0, denormal inputs count as 0; relative error about 2^-22 otherwise, as exp2's. For
// exponentials whose tiny results do not matter (softmax and attention probabilities, where
// every value is at most 1 and a sum of them is at least 1). f32 only: an f64 value is an error.
Expr fast_exp2(Expr v, Loc where = Loc::current());
// 2^v on the FMA pipe, not the MUFU unit: a degree-3 polynomial of v's fraction times 2^floor(v)
// built in the exponent field (ten FMA-pipe and ALU instructions). Relative error below 8.6e-5
// (about 2^-13.5: finer than a 16-bit float's rounding, coarser than f32's); results below 2^-126
// are 0 and -inf gives 0, as fast_exp2's; v >= 128 gives infinity, NaN gives NaN. For kernels
// whose exponentials queue on the MUFU unit (attention at small head dimensions), which can move a
// share of them here. The interpreter computes the same bits as the GPU. f32 only, as fast_exp2.
Expr poly_exp2(Expr v, Loc where = Loc::current());
Expr log(Expr v);
Expr log2(Expr v);
Expr sqrt(Expr v);
Expr rsqrt(Expr v);
Expr abs(Expr v);
Expr infinity(DType t);
Expr float_imm(double v, DType t);
Expr int_imm(long long v, DType t = DType::i32);

}  // namespace tessel

namespace tessel::ir {
// Operators live beside Expr so argument-dependent lookup finds them for Var and BufferRef too.
Expr operator+(Expr a, Expr b);
Expr operator-(Expr a, Expr b);
Expr operator*(Expr a, Expr b);
Expr operator/(Expr a, Expr b);
Expr operator%(Expr a, Expr b);
Expr operator-(Expr a);
Expr operator==(Expr a, Expr b);
Expr operator!=(Expr a, Expr b);
Expr operator<(Expr a, Expr b);
Expr operator<=(Expr a, Expr b);
Expr operator>(Expr a, Expr b);
Expr operator>=(Expr a, Expr b);
Expr operator&&(Expr a, Expr b);
Expr operator||(Expr a, Expr b);
Expr operator!(Expr a);
}  // namespace tessel::ir
