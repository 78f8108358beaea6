// A program whose row copies start before column 0: block b reads row b + 1 of X through a tile
// that starts at column `col0` <= 0 (padding the columns before the row and past its end),
// computes 2x - 1 and stores the tile back to the same region of Y. Rows 0 and M - 1 are never
// a block's, so a store outside a row's columns shows up there (and as wrong values in the
// neighbours). Two windows: `aligned` starts each row's tile at the aligned 16-byte word at or
// before the row (col0 = -(row offset % vec), provably aligned: whole-word moves), otherwise a
// fixed col0 = -3 (not provably aligned: element by element). Shared by the cpu (interpreter),
// nvrtc (generated code) and gpu (numbers) tests of windowed row copies.
#pragma once

#include "tessel/tessel.hpp"

namespace tessel::test {

inline long long row_window_tile(long long N, DType t, int threads) {
  const long long vec = 16 / dtype_bytes(t), step = threads * vec;
  return (N + vec - 1 + 3 + step - 1) / step * step;  // room for either window
}

inline PrimFunc row_window_program(long long M, long long N, DType t, bool aligned, int threads = 128) {
  const long long vec = 16 / dtype_bytes(t);
  const int BN = static_cast<int>(row_window_tile(N, t, threads));
  PrimFunc f("row_window");
  auto X = f.tensor("X", {M, N}, t);
  auto Y = f.tensor("Y", {M, N}, t);
  f.body([&] {
    Kernel(Expr(M - 2), threads, [&](Var bx) {
      auto x = alloc_fragment({1, BN}, f32);
      const Expr row = bx + 1;
      const Expr col0 = aligned ? -((cast(i64, row) * N) % vec) : Expr(-3);
      copy_padded(X(row, col0), x, 0.0f);
      Parallel(1, BN, [&](Var i, Var j) { x(i, j) = x(i, j) * 2.0f - 1.0f; });
      copy(x, Y(row, col0));
    });
  });
  return f;
}

// Tiles that start before row 0 and column 0: block b covers rows [4b - 2, 4b + 2) and columns
// [-3, 61) of X, through a shared tile (the global -> shared copy) and a fragment (the row copy
// out), computing 2x - 1; every element of Y is some block's exactly once (N <= 61), and the
// parts of the tiles outside the tensor are neither read nor written.
inline PrimFunc shifted_tile_program(long long M, long long N, DType t) {
  PrimFunc f("shifted_tiles");
  auto X = f.tensor("X", {M, N}, t);
  auto Y = f.tensor("Y", {M, N}, t);
  f.body([&] {
    Kernel(Expr((M + 2 + 3) / 4), 128, [&](Var bx) {
      auto s = alloc_shared({4, 64}, t);
      auto x = alloc_fragment({4, 64}, f32);
      copy(X(bx * 4 - 2, -3), s);
      copy(s, x);
      Parallel(4, 64, [&](Var i, Var j) { x(i, j) = x(i, j) * 2.0f - 1.0f; });
      copy(x, Y(bx * 4 - 2, -3));
    });
  });
  return f;
}

// A fill of global regions that start before row 0 and column 0: block b fills row b - 1,
// columns [-3, 61), with 7 -- every element of Y (N <= 61) once, nothing outside it.
inline PrimFunc shifted_fill_program(long long M, long long N, DType t) {
  PrimFunc f("shifted_fill");
  auto Y = f.tensor("Y", {M, N}, t);
  f.body([&] {
    Kernel(Expr(M + 1), 128, [&](Var bx) { fill(region(Y, {bx - 1, Expr(-3)}, {Expr(1), Expr(64)}), 7.0f); });
  });
  return f;
}

}  // namespace tessel::test
