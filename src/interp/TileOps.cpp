// The tile ops by their definitions: copy (masked at global tensors' edges), fill, gemm,
// reduce. Each checks the regions it touches in shared, fragment and local buffers and reports
// an overrun with the op, the author's line, the block and the offending index.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "Elements.hpp"
#include "Machine.hpp"
#include "tessel/runtime/HostFloat.hpp"

namespace tessel::interp::detail {

using namespace tessel::ir;

namespace {

struct RegionFn {
  size_t slot = 0;
  std::vector<IntFn> starts, extents;  // extents empty: "as large as the other side"
  bool has_extents = false;
};

struct RegionValue {
  Storage* st = nullptr;
  std::vector<std::int64_t> starts, extents;
};

RegionFn compile_region(const Region& r, Symbols& sym, std::string_view op) {
  RegionFn out;
  out.slot = static_cast<size_t>(sym.buffer_slot(r.buffer, op));
  const size_t rank = r.buffer->shape.size();
  if (r.starts.size() != rank || (!r.extents.empty() && r.extents.size() != rank))
    sym.fail(op, "a region of " + r.buffer->name + " has " + std::to_string(r.starts.size()) +
                     " starts and " + std::to_string(r.extents.size()) + " extents; the buffer has " +
                     std::to_string(rank) + " dimensions");
  for (const Expr& e : r.starts) out.starts.push_back(compile_int(e, sym));
  for (const Expr& e : r.extents) out.extents.push_back(compile_int(e, sym));
  out.has_extents = !r.extents.empty();
  return out;
}

RegionValue eval_region(Machine& m, const RegionFn& r) {
  RegionValue v;
  v.st = &m.buffers[r.slot];
  for (const IntFn& f : r.starts) v.starts.push_back(f(m));
  for (const IntFn& f : r.extents) v.extents.push_back(f(m));
  return v;
}

void check_extents(Machine& m, const RegionValue& r, std::string_view op, const std::string& role) {
  for (std::int64_t e : r.extents)
    if (e < 0)
      m.fail(op, "the " + role + " region " + region_string(*r.st, r.starts, r.extents) +
                     " has a negative extent " + index_string(r.extents));
}

// A region of a shared, fragment or local buffer must lie inside it: the GPU would read or write
// someone else's memory.
void check_inside(Machine& m, const RegionValue& r, std::string_view op, const std::string& role) {
  for (std::int64_t e : r.extents)
    if (e == 0) return;
  const Storage& st = *r.st;
  for (size_t d = 0; d < r.starts.size(); ++d) {
    if (r.starts[d] >= 0 && r.starts[d] + r.extents[d] <= st.shape[d]) continue;
    std::vector<std::int64_t> bad = r.starts;
    bad[d] = r.starts[d] < 0 ? r.starts[d] : st.shape[d];
    m.fail(op, "the " + role + " region " + region_string(st, r.starts, r.extents) + " overruns " +
                   buffer_string(st) + ": index " + index_string(bad) + " is outside it");
  }
}

std::vector<std::int64_t> squeeze(const std::vector<std::int64_t>& extents) {
  std::vector<std::int64_t> out;
  for (std::int64_t e : extents)
    if (e != 1) out.push_back(e);
  return out;
}

// The extents a side written buf(i, j) takes from the other side, aligned at the trailing dims.
std::vector<std::int64_t> take_extents(Machine& m, const std::vector<std::int64_t>& from,
                                       const RegionValue& r, const std::string& role) {
  const size_t rank = r.starts.size();
  if (from.size() == rank) return from;
  if (from.size() < rank) {
    std::vector<std::int64_t> out(rank - from.size(), 1);
    out.insert(out.end(), from.begin(), from.end());
    return out;
  }
  const size_t extra = from.size() - rank;
  for (size_t d = 0; d < extra; ++d)
    if (from[d] != 1)
      m.fail("copy", "the " + role + " region " + region_string(*r.st, r.starts, {}) + " has " +
                         std::to_string(rank) + " dimensions and cannot take the extents " +
                         index_string(from) + " of the other side");
  return std::vector<std::int64_t>(from.begin() + static_cast<std::ptrdiff_t>(extra), from.end());
}

// One side of a copy, walked row by row over the common (squeezed) shape.
struct CopySide {
  const RegionValue* r = nullptr;
  bool masked = false;          // a global tensor: out-of-range elements are skipped / padded
  bool window = false;          // copy_window: each row shifted to start at an aligned 16-byte word
  std::vector<int> common_dim;  // per buffer dim: the common dim it follows, or -1 (extent 1)
  int last_dim = -1;            // the buffer dim following the innermost common dim, or -1

  void init(const RegionValue& region, int common_rank) {
    r = &region;
    masked = region.st->scope() == Scope::Global;
    int k = 0;
    for (std::int64_t e : region.extents) {
      common_dim.push_back(e != 1 ? k++ : -1);
      if (e != 1 && k == common_rank) last_dim = static_cast<int>(common_dim.size()) - 1;
    }
  }

  // For the row at common index `row` (innermost dim excluded): its offset, whether its
  // non-innermost indices are inside the tensor, and the range [lo, hi) of innermost positions
  // that are.
  void row(const std::vector<std::int64_t>& idx, std::int64_t n, std::int64_t* offset, bool* ok,
           std::int64_t* lo, std::int64_t* hi) const {
    const Storage& st = *r->st;
    *offset = 0;
    *ok = true;
    for (size_t d = 0; d < common_dim.size(); ++d) {
      std::int64_t i = r->starts[d];
      if (static_cast<int>(d) != last_dim && common_dim[d] >= 0) i += idx[static_cast<size_t>(common_dim[d])];
      *offset += i * st.strides[d];
      if (static_cast<int>(d) != last_dim && (i < 0 || i >= st.shape[d])) *ok = false;
    }
    *lo = 0, *hi = n;
    if (masked && last_dim >= 0) {
      const std::int64_t s = r->starts[static_cast<size_t>(last_dim)],
                         size = st.shape[static_cast<size_t>(last_dim)];
      // copy_window: the row's start (at column s) moves back to the aligned word at or before
      // it; the positions before it are padding, like the columns past the row's end.
      std::int64_t shift = 0;
      if (window) {
        const std::int64_t vec = 16 / static_cast<std::int64_t>(dtype_bytes(st.dtype()));
        shift = ((*offset % vec) + vec) % vec;
        *offset -= shift;
      }
      *lo = std::clamp<std::int64_t>(shift + std::max<std::int64_t>(0, -s), 0, n);
      *hi = std::clamp<std::int64_t>(size - s + shift, 0, n);
    }
    if (!masked) *ok = true;
  }
  std::int64_t stride() const { return last_dim >= 0 ? r->st->strides[static_cast<size_t>(last_dim)] : 0; }
};

void run_copy(Machine& m, const RegionValue& s, const RegionValue& d, std::vector<std::int64_t> common,
              const unsigned char* pad, bool window = false) {
  if (common.empty()) common.push_back(1);
  for (std::int64_t e : common)
    if (e == 0) return;
  const int rank = static_cast<int>(common.size());
  CopySide src, dst;
  src.init(s, rank);
  dst.init(d, rank);
  src.window = dst.window = window;
  const DType st = s.st->dtype(), dt = d.st->dtype();
  const auto elem = static_cast<std::int64_t>(dtype_bytes(dt));
  const std::int64_t n = common.back(), ss = src.stride(), ds = dst.stride();
  const bool contiguous = st == dt && ss == 1 && ds == 1;
  std::vector<std::int64_t> idx(common.size(), 0);
  for (;;) {
    std::int64_t so, dof, slo, shi, dlo, dhi;
    bool sok, dok;
    src.row(idx, n, &so, &sok, &slo, &shi);
    dst.row(idx, n, &dof, &dok, &dlo, &dhi);
    if (dok) {
      if (!sok) slo = shi = 0;
      unsigned char* out = d.st->data;
      const unsigned char* in = s.st->data;
      // Shared memory read before anything wrote it is reported (InterpOptions); what is
      // written is marked.
      const bool check_src = !s.st->written.empty(), mark_dst = !d.st->written.empty();
      for (std::int64_t j = dlo; j < dhi;) {
        if (j >= slo && j < shi) {
          if (contiguous) {
            const std::int64_t end = std::min(dhi, shi);
            if (check_src)
              for (std::int64_t x = j; x < end; ++x) check_written(m, *s.st, so + x, "copy");
            std::memmove(out + (dof + j) * elem, in + (so + j) * elem, static_cast<size_t>((end - j) * elem));
            if (mark_dst) mark_written(*d.st, dof + j, end - j);
            j = end;
            continue;
          }
          if (check_src) check_written(m, *s.st, so + j * ss, "copy");
          convert_element(in, st, so + j * ss, out, dt, dof + j * ds);
        } else {
          std::memcpy(out + (dof + j * ds) * elem, pad, static_cast<size_t>(elem));
        }
        if (mark_dst) mark_written(*d.st, dof + j * ds);
        ++j;
      }
    }
    int k = rank - 2;
    for (; k >= 0; --k) {
      if (++idx[static_cast<size_t>(k)] < common[static_cast<size_t>(k)]) break;
      idx[static_cast<size_t>(k)] = 0;
    }
    if (k < 0) return;
  }
}

// One element of dtype t holding a float or integer value, as a store would write it.
struct ValueFn {
  FloatFn f;
  IntFn i;
  void to_bytes(Machine& m, DType t, unsigned char* out) const {
    if (f) {
      store_float(out, t, 0, f(m));
    } else if (i) {
      store_int(out, t, 0, i(m));
    } else {
      store_int(out, t, 0, 0);
    }
  }
};

ValueFn compile_value(const Expr& e, Symbols& sym) {
  ValueFn v;
  if (!e.defined()) return v;
  if (is_float_expr(e)) {
    v.f = compile_float(e, sym);
  } else {
    v.i = compile_int(e, sym);
  }
  return v;
}

// ---- gemm ---------------------------------------------------------------------------------------

// The matrix a gemm operand region names: its trailing two extents, leading extents 1.
struct Matrix {
  const Storage* st = nullptr;
  std::int64_t base = 0, row_stride = 0, col_stride = 0, rows = 0, cols = 0;
  std::int64_t at(std::int64_t r, std::int64_t c) const { return base + r * row_stride + c * col_stride; }
};

Matrix eval_matrix(Machine& m, const RegionFn& fn, const char* role) {
  RegionValue r = eval_region(m, fn);
  const std::string name = std::string("operand ") + role;
  if (r.extents.empty()) {  // a bare buf(i, j): the rest of the buffer
    for (size_t d = 0; d < r.starts.size(); ++d) r.extents.push_back(r.st->shape[d] - r.starts[d]);
  }
  const size_t rank = r.extents.size();
  if (rank < 2)
    m.fail("gemm", name + " " + r.st->buffer->name + " has " + std::to_string(rank) +
                       " dimension; gemm operands are matrices");
  for (size_t d = 0; d + 2 < rank; ++d)
    if (r.extents[d] != 1)
      m.fail("gemm", name + " region " + region_string(*r.st, r.starts, r.extents) +
                         " is not a matrix: its leading extents must be 1");
  check_extents(m, r, "gemm", name);
  check_inside(m, r, "gemm", name);
  Matrix mat;
  mat.st = r.st;
  for (size_t d = 0; d < rank; ++d) mat.base += r.starts[d] * r.st->strides[d];
  mat.row_stride = r.st->strides[rank - 2];
  mat.col_stride = r.st->strides[rank - 1];
  mat.rows = r.extents[rank - 2];
  mat.cols = r.extents[rank - 1];
  return mat;
}

std::string dims(const Matrix& x) {
  return std::to_string(x.rows) + "x" + std::to_string(x.cols);
}

// C += A * B over row-major M x K, K x N, M x N arrays. Per (i, j) the products are added in
// k order; rounding_step > 0 rounds C to `round` after every rounding_step values of k (an
// f16/bf16 accumulator, rounded after each mma k16 step).
template <class Acc>
void multiply_accumulate(const std::vector<Acc>& a, const std::vector<Acc>& b, std::vector<Acc>& c,
                         std::int64_t M, std::int64_t N, std::int64_t K, std::int64_t rounding_step,
                         DType round) {
  const std::int64_t step = rounding_step > 0 ? rounding_step : std::max<std::int64_t>(K, 1);
  for (std::int64_t k0 = 0; k0 < K; k0 += step) {
    const std::int64_t k1 = std::min(K, k0 + step);
    for (std::int64_t i = 0; i < M; ++i) {
      Acc* crow = c.data() + i * N;
      for (std::int64_t k = k0; k < k1; ++k) {
        const Acc av = a[static_cast<size_t>(i * K + k)];
        const Acc* brow = b.data() + k * N;
        for (std::int64_t j = 0; j < N; ++j) crow[j] += av * brow[j];
      }
    }
    if (rounding_step > 0)
      for (Acc& x : c) x = static_cast<Acc>(round_to_dtype(static_cast<double>(x), round));
  }
}

template <class Acc, class Load, class Store>
void run_gemm(const Matrix& A, const Matrix& B, const Matrix& C, bool ta, bool tb, std::int64_t M,
              std::int64_t N, std::int64_t K, std::int64_t rounding_step, Load load, Store store) {
  std::vector<Acc> a(static_cast<size_t>(M * K)), b(static_cast<size_t>(K * N)),
      c(static_cast<size_t>(M * N));
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t k = 0; k < K; ++k)
      a[static_cast<size_t>(i * K + k)] = load(A, ta ? A.at(k, i) : A.at(i, k));
  for (std::int64_t k = 0; k < K; ++k)
    for (std::int64_t j = 0; j < N; ++j)
      b[static_cast<size_t>(k * N + j)] = load(B, tb ? B.at(j, k) : B.at(k, j));
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) c[static_cast<size_t>(i * N + j)] = load(C, C.at(i, j));
  multiply_accumulate(a, b, c, M, N, K, rounding_step, C.st->dtype());
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) store(C, C.at(i, j), c[static_cast<size_t>(i * N + j)]);
}

// ---- reduce -------------------------------------------------------------------------------------

template <class Acc>
Acc combine(ReduceOp op, Acc x, Acc y) {
  if constexpr (std::is_floating_point_v<Acc>) {
    if (op == ReduceOp::Max) return std::fmax(x, y);
    if (op == ReduceOp::Min) return std::fmin(x, y);
    return x + y;
  } else {
    if (op == ReduceOp::Max) return std::max(x, y);
    if (op == ReduceOp::Min) return std::min(x, y);
    return static_cast<Acc>(static_cast<std::uint64_t>(x) + static_cast<std::uint64_t>(y));
  }
}

template <class Acc>
Acc identity(ReduceOp op) {
  if (op == ReduceOp::Sum) return Acc(0);
  if constexpr (std::is_floating_point_v<Acc>) {
    const Acc inf = std::numeric_limits<Acc>::infinity();
    return op == ReduceOp::Max ? -inf : inf;
  } else {
    return op == ReduceOp::Max ? std::numeric_limits<Acc>::min() : std::numeric_limits<Acc>::max();
  }
}

template <class Acc, class Load, class Store>
void run_reduce(const Storage& s, Storage& d, ReduceOp op, bool clear, std::int64_t outer, std::int64_t len,
                std::int64_t inner, Load load, Store store) {
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i) {
      const std::int64_t out = o * inner + i;
      Acc acc = clear ? identity<Acc>(op) : load(d, out);
      for (std::int64_t r = 0; r < len; ++r) acc = combine(op, acc, load(s, (o * len + r) * inner + i));
      store(d, out, acc);
    }
}

}  // namespace

StmtFn compile_copy(const CopyStmt* op, Symbols& sym) {
  RegionFn src = compile_region(op->src, sym, "copy"), dst = compile_region(op->dst, sym, "copy");
  ValueFn pad = compile_value(op->pad, sym);
  return [where = sym.where, src, dst, pad, window = op->row_window](Machine& m) {
    m.where = where;
    RegionValue s = eval_region(m, src), d = eval_region(m, dst);
    if (!src.has_extents && !dst.has_extents)
      m.fail("copy", "neither side gives extents (" + region_string(*s.st, s.starts, {}) + " to " +
                         region_string(*d.st, d.starts, {}) +
                         "); pass one side as a whole buffer or as an explicit region");
    if (!src.has_extents) s.extents = take_extents(m, d.extents, s, "source");
    if (!dst.has_extents) d.extents = take_extents(m, s.extents, d, "destination");
    check_extents(m, s, "copy", "source");
    check_extents(m, d, "copy", "destination");
    std::vector<std::int64_t> common = squeeze(s.extents);
    if (common != squeeze(d.extents))
      m.fail("copy", "the regions have different extents: source " +
                         region_string(*s.st, s.starts, s.extents) + " is " + index_string(s.extents) +
                         ", destination " + region_string(*d.st, d.starts, d.extents) + " is " +
                         index_string(d.extents) +
                         "; a copy needs equal extents (dimensions of extent 1 aside)");
    if (s.st->scope() != Scope::Global) check_inside(m, s, "copy", "source");
    if (d.st->scope() != Scope::Global) check_inside(m, d, "copy", "destination");
    unsigned char pad_bytes[8] = {};
    pad.to_bytes(m, d.st->dtype(), pad_bytes);
    run_copy(m, s, d, common, pad_bytes, window);
  };
}

StmtFn compile_fill(const FillStmt* op, Symbols& sym) {
  RegionFn dst = compile_region(op->dst, sym, "fill");
  ValueFn value = compile_value(op->value, sym);
  return [where = sym.where, dst, value](Machine& m) {
    m.where = where;
    RegionValue d = eval_region(m, dst);
    if (!dst.has_extents)
      for (size_t i = 0; i < d.starts.size(); ++i) d.extents.push_back(d.st->shape[i] - d.starts[i]);
    check_extents(m, d, "fill", "destination");
    if (d.st->scope() != Scope::Global) check_inside(m, d, "fill", "destination");
    unsigned char bytes[8] = {};
    value.to_bytes(m, d.st->dtype(), bytes);
    // Masked at a global tensor's edge, like copy.
    Storage& st = *d.st;
    const bool masked = st.scope() == Scope::Global;
    const auto elem = static_cast<size_t>(dtype_bytes(st.dtype()));
    std::vector<std::int64_t> idx(d.extents.size(), 0);
    for (std::int64_t e : d.extents)
      if (e == 0) return;
    for (;;) {
      std::int64_t offset = 0;
      bool inside = true;
      for (size_t k = 0; k < idx.size(); ++k) {
        const std::int64_t i = d.starts[k] + idx[k];
        inside = inside && i >= 0 && i < st.shape[k];
        offset += i * st.strides[k];
      }
      if (inside || !masked) {
        std::memcpy(st.data + offset * static_cast<std::int64_t>(elem), bytes, elem);
        mark_written(st, offset);
      }
      int k = static_cast<int>(idx.size()) - 1;
      for (; k >= 0; --k) {
        if (++idx[static_cast<size_t>(k)] < d.extents[static_cast<size_t>(k)]) break;
        idx[static_cast<size_t>(k)] = 0;
      }
      if (k < 0) return;
    }
  };
}

StmtFn compile_gemm(const GemmStmt* op, Symbols& sym) {
  RegionFn a = compile_region(op->A, sym, "gemm"), b = compile_region(op->B, sym, "gemm"),
           c = compile_region(op->C, sym, "gemm");
  return [op, where = sym.where, a, b, c](Machine& m) {
    m.where = where;
    const Matrix A = eval_matrix(m, a, "A"), B = eval_matrix(m, b, "B"), C = eval_matrix(m, c, "C");
    const std::int64_t M = op->trans_a ? A.cols : A.rows, K = op->trans_a ? A.rows : A.cols;
    const std::int64_t KB = op->trans_b ? B.cols : B.rows, N = op->trans_b ? B.rows : B.cols;
    if (K != KB || C.rows != M || C.cols != N) {
      std::ostringstream os;
      os << "the operand shapes do not chain: A " << A.st->buffer->name << " is " << dims(A)
         << (op->trans_a ? " (transposed: K x M)" : " (M x K)") << ", B " << B.st->buffer->name << " is "
         << dims(B) << (op->trans_b ? " (transposed: N x K)" : " (K x N)") << ", C " << C.st->buffer->name
         << " is " << dims(C) << " (M x N); C[M, N] += A[M, K] * B[K, N] needs one M (" << M << " vs "
         << C.rows << "), one N (" << N << " vs " << C.cols << ") and one K (" << K << " vs " << KB << ")";
      m.fail("gemm", os.str());
    }
    // Shared operands read before anything wrote them are reported (InterpOptions).
    for (const Matrix* x : {&A, &B})
      if (!x->st->written.empty())
        for (std::int64_t r = 0; r < x->rows; ++r)
          for (std::int64_t c = 0; c < x->cols; ++c) check_written(m, *x->st, x->at(r, c), "gemm");
    const DType ct = C.st->dtype();
    auto load_f = [](const Matrix& x, std::int64_t i) { return load_float(x.st->data, x.st->dtype(), i); };
    auto store_f = [](const Matrix& x, std::int64_t i, auto v) {
      store_float(x.st->data, x.st->dtype(), i, static_cast<double>(v));
    };
    if (ct == DType::f64) {
      run_gemm<double>(A, B, C, op->trans_a, op->trans_b, M, N, K, 0, load_f, store_f);
    } else if (is_float_path(ct)) {
      const std::int64_t step = (ct == DType::f16 || ct == DType::bf16) ? 16 : 0;
      run_gemm<float>(
          A, B, C, op->trans_a, op->trans_b, M, N, K, step,
          [](const Matrix& x, std::int64_t i) {
            return static_cast<float>(load_float(x.st->data, x.st->dtype(), i));
          },
          store_f);
    } else {
      run_gemm<std::int64_t>(
          A, B, C, op->trans_a, op->trans_b, M, N, K, 0,
          [](const Matrix& x, std::int64_t i) { return load_int(x.st->data, x.st->dtype(), i); },
          [](const Matrix& x, std::int64_t i, std::int64_t v) {
            store_int(x.st->data, x.st->dtype(), i, v);
          });
    }
  };
}

StmtFn compile_reduce(const ReduceStmt* op, Symbols& sym) {
  const std::string name = std::string("reduce_") + reduce_op_name(op->op);
  const auto src = static_cast<size_t>(sym.buffer_slot(op->src, name));
  const auto dst = static_cast<size_t>(sym.buffer_slot(op->dst, name));
  return [op, where = sym.where, name, src, dst](Machine& m) {
    m.where = where;
    const Storage& s = m.buffers[src];
    Storage& d = m.buffers[dst];
    const int rank = static_cast<int>(s.shape.size());
    if (op->dim < 0 || op->dim >= rank)
      m.fail(name, "dim " + std::to_string(op->dim) + " is out of range for " + buffer_string(s));
    const auto dim = static_cast<size_t>(op->dim);
    std::vector<std::int64_t> dropped = s.shape, kept = s.shape;
    dropped.erase(dropped.begin() + op->dim);
    kept[dim] = 1;
    if (d.shape != dropped && d.shape != kept)
      m.fail(name, "the destination is " + buffer_string(d) + "; reducing " + buffer_string(s) +
                       " along dim " + std::to_string(op->dim) + " gives shape " +
                       index_string(dropped.empty() ? kept : dropped));
    std::int64_t outer = 1, inner = 1;
    for (size_t k = 0; k < dim; ++k) outer *= s.shape[k];
    for (size_t k = dim + 1; k < s.shape.size(); ++k) inner *= s.shape[k];
    const std::int64_t len = s.shape[dim];
    const DType dt = d.dtype();
    auto store_f = [](Storage& x, std::int64_t i, auto v) {
      store_float(x.data, x.dtype(), i, static_cast<double>(v));
    };
    if (dt == DType::f64) {
      run_reduce<double>(
          s, d, op->op, op->clear, outer, len, inner,
          [](const Storage& x, std::int64_t i) { return load_float(x.data, x.dtype(), i); }, store_f);
    } else if (is_float_path(dt)) {
      run_reduce<float>(
          s, d, op->op, op->clear, outer, len, inner,
          [](const Storage& x, std::int64_t i) {
            return static_cast<float>(load_float(x.data, x.dtype(), i));
          },
          store_f);
    } else {
      run_reduce<std::int64_t>(
          s, d, op->op, op->clear, outer, len, inner,
          [](const Storage& x, std::int64_t i) { return load_int(x.data, x.dtype(), i); },
          [](Storage& x, std::int64_t i, std::int64_t v) { store_int(x.data, x.dtype(), i, v); });
    }
  };
}

}  // namespace tessel::interp::detail
