#include "passes/FragmentCoordinates.hpp"

#include "passes/PassUtil.hpp"

namespace tessel::passes {

using namespace ir;

namespace {
Expr div(Expr a, std::int64_t b) {
  return b == 1 ? a : make_binary(BinaryOp::Div, std::move(a), make_int(b));
}
Expr mod(Expr a, std::int64_t b) {
  return make_binary(BinaryOp::Mod, std::move(a), make_int(b));
}
}  // namespace

std::vector<Expr> fragment_coordinates(const FragmentLayout& f, const Expr& l, const Expr& tx, int threads) {
  switch (f.kind) {
    case FragmentLayout::Kind::GemmAccumulator:
      return {make_call(f.gemm.device_type() + "::acc_row", {l}, DType::i32),
              make_call(f.gemm.device_type() + "::acc_col", {l}, DType::i32)};
    case FragmentLayout::Kind::RowBlocked: {
      Expr row =
          add(mul(div(l, std::int64_t(f.chunks) * f.vec), make_int(f.rows_per_pass)), div(tx, f.lanes));
      Expr chunk = f.chunks == 1 ? make_int(0) : mod(div(l, f.vec), f.chunks);
      Expr col = add(mul(add(mul(chunk, make_int(f.lanes)), f.lanes == 1 ? make_int(0) : mod(tx, f.lanes)),
                         make_int(f.vec)),
                     f.vec == 1 ? make_int(0) : mod(l, f.vec));
      return {row, col};
    }
    case FragmentLayout::Kind::RowOf:
      return {add(mul(l, make_int(f.rows_per_pass)), div(tx, f.lanes))};
    case FragmentLayout::Kind::AccumulatorRows:
      return {make_call(f.gemm.device_type() + "::row_of_register", {l}, DType::i32)};
    case FragmentLayout::Kind::FlatRows: {
      Expr flat = add(mul(tx, make_int(std::int64_t(f.chunks) * f.vec)), l);
      return {div(flat, f.shape[1]), mod(flat, f.shape[1])};
    }
    case FragmentLayout::Kind::FlatRowOf:
      return {add(div(mul(tx, make_int(std::int64_t(f.chunks) * f.vec)), f.row_length), l)};
    case FragmentLayout::Kind::Strided: {
      Expr flat = add(mul(l, make_int(threads)), tx);
      std::vector<Expr> coords(f.shape.size());
      std::int64_t stride = 1;
      for (int d = static_cast<int>(f.shape.size()) - 1; d >= 0; --d) {
        Expr c = div(flat, stride);
        if (d > 0) c = mod(c, f.shape[d]);
        coords[d] = c;
        stride *= f.shape[d];
      }
      return coords;
    }
  }
  throw_internal_error("unknown fragment layout kind");
}

Expr fragment_register_valid(const FragmentLayout& f, const Expr& l, const Expr& tx, int threads) {
  if (f.kind == FragmentLayout::Kind::FlatRows) {
    // Whole words (infer_layouts takes rows * cols a multiple of vec): a test of the word.
    const std::int64_t words = f.shape[0] * f.shape[1] / f.vec;
    if (std::int64_t(f.chunks) * threads == words) return Expr();
    return make_binary(BinaryOp::LT, add(mul(tx, make_int(f.chunks)), div(l, f.vec)), make_int(words));
  }
  if (f.kind == FragmentLayout::Kind::FlatRowOf)
    return make_binary(BinaryOp::LT, fragment_coordinates(f, l, tx, threads)[0], make_int(f.shape[0]));
  if (f.kind != FragmentLayout::Kind::Strided) return Expr();
  std::int64_t numel = 1;
  for (auto s : f.shape) numel *= s;
  if (numel % threads == 0) return Expr();
  return make_binary(BinaryOp::LT, add(mul(l, make_int(threads)), tx), make_int(numel));
}

bool same_fragment_layout(const FragmentLayout& a, const FragmentLayout& b) {
  if (a.kind != b.kind || a.shape != b.shape) return false;
  if (a.kind == FragmentLayout::Kind::GemmAccumulator || a.kind == FragmentLayout::Kind::AccumulatorRows)
    return a.warps_m == b.warps_m && a.warps_n == b.warps_n && a.gemm.interleaved == b.gemm.interleaved;
  if (a.kind == FragmentLayout::Kind::FlatRows || a.kind == FragmentLayout::Kind::FlatRowOf)
    return a.vec == b.vec && a.chunks == b.chunks && a.row_length == b.row_length;
  return a.vec == b.vec && a.lanes == b.lanes && a.rows_per_pass == b.rows_per_pass;
}

}  // namespace tessel::passes
