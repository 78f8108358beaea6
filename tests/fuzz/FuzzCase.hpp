// One fuzzed tile program, as data: which family of program (a GEMM, a tile of element-wise work
// and a row reduction, a softmax, an attention-like gemm chain), its sizes, tiles and knobs, and
// the element-wise expressions its Parallel nests compute. A case is what the generator draws,
// what the builder turns into a Tessel program (Program.hpp), what the float64 evaluator computes
// (Reference.hpp), what the minimizer shrinks, and what a regression file stores (a compact text,
// `to_text` / `parse_case`).
//
//   tessel-fuzz 1
//   family gemm
//   seed 42
//   dtype f16
//   ...
//   expr (max (mul x 0.5) 0)
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessel/DType.hpp"

namespace tessel::fuzz {

// An element-wise expression over the leaves `x` (the element the nest is at) and `r` (its row's
// reduction result, where there is one), constants, and a few operators. Every operator is
// defined and bounded on any finite input the families feed it, so a case never divides by zero
// or overflows: `expc a` is exp(min(a, 2)), `exp2c a` is fast_exp2(min(a, 2)) (the hardware's
// ex2.approx.ftz), `pexp2c a` is poly_exp2(min(a, 2)) (FMA-pipe arithmetic), `sdiv a b` is
// a / (1 + |b|).
struct ExprTree {
  enum class Op { X, R, Const, Neg, Abs, Relu, Expc, Add, Sub, Mul, Max, Min, Sdiv, Exp2c, PolyExp2c };
  Op op = Op::X;
  double value = 0;  // Const
  std::vector<ExprTree> args;

  static ExprTree leaf_x() { return {}; }
  int size() const;  // nodes
  bool uses_r() const;
  // "(max (mul x 0.5) 0)"
  std::string to_text() const;
};
// Parses ExprTree::to_text's form; throws std::invalid_argument naming what is wrong.
ExprTree parse_expr(const std::string& text);
const char* expr_op_name(ExprTree::Op op);
int expr_arity(ExprTree::Op op);

enum class Family { Gemm, Tile, Softmax, Attention };
const char* family_name(Family f);

// What a reduction does to a row of a tile.
enum class ReduceKind { None, Sum, Max, Min };
const char* reduce_name(ReduceKind r);

struct FuzzCase {
  Family family = Family::Gemm;
  std::uint64_t seed = 0;        // the input data's seed
  DType dtype = DType::f16;      // inputs
  DType out_dtype = DType::f16;  // the main output
  // Problem sizes. Gemm: C[M, N] = A[M, K] B[K, N]. Tile and softmax: X[M, N]. Attention:
  // Q[M, K] (K is the head dimension), K and V [N, K].
  int M = 64, N = 64, K = 64;
  // Tiles: BM x BN (x BK for the gemm's K step).
  int BM = 64, BN = 64, BK = 32;
  int threads = 128;
  int stages = 2;  // Pipelined(..., stages); 0: a Serial loop instead, -1: an Unroll loop
  bool trans_a = false, trans_b = false;
  int policy = 0;         // GemmWarpPolicy: 0 Square, 1 FullRow, 2 FullCol
  bool swizzle = false;   // use_swizzle(4)
  int cluster = 0;        // gemm: use_cluster(2, 1) when 1, use_cluster(1, 2) when 2
  bool bias = false;      // gemm: a bias[N] added in the epilogue (a guarded global read)
  bool epilogue = false;  // gemm: a Parallel nest computing `expr` before the store
  bool row_sums = false;  // gemm: also the accumulator's row sums per block (reduce_sum of a gemm tile)
  // Tile: the input tile is read at (by * BM + row_off, bx * BN + col_off): offsets and edges.
  int row_off = 0, col_off = 0;
  bool via_shared = false;        // tile: global -> shared -> fragment instead of global -> fragment
  bool store_via_shared = false;  // tile: the result fragment -> shared -> global
  bool padded = false;            // tile: reads past the edge give `pad` (copy_padded) instead of 0
  double pad = 0;
  bool frag_in_dtype = false;  // tile without a reduction: the work fragment in dtype, not f32
  ReduceKind reduce = ReduceKind::None;
  bool reduce_init = false;  // tile: fill the result with init_value, then reduce without clearing
  double init_value = 0;
  // Softmax: 0 one pass over a masked f32 tile; 1 the rows kept as loaded (16-bit), the last
  // `shared_tail` vectors of each thread's share in shared memory (FragmentStorage); 2 two passes
  // over BN-wide chunks of longer rows (running max and sum, the next chunk's load in flight).
  int variant = 0;
  int shared_tail = 0;
  // Softmax: rows through windows from the aligned 16-byte word before each (copy_window in
  // variants 0 and 1; in variant 2 the chunks start at the first row's shift, a column <= 0),
  // the tile at least 16 / element size - 1 columns wider than the row.
  bool window = false;
  // Attention: online softmax (FlashAttention's recurrence) or a plain chain (P = S * scale).
  bool online = true;
  bool causal = false;
  // Gemm: row block `by` sums only the first by + 1 tiles of K (a K loop whose trip count depends
  // on the block: a persistent ring -- such a GEMM on sm_90a -- carries its position); not with Unroll
  // (whose trip count must be a constant).
  bool k_by_block = false;
  // Causal: the key loop stops at the last block the query block's rows see (its trip count
  // depends on the block index: under persistent_rings a persistent ring carries its position).
  bool skip_masked = false;
  double scale = 0.125;
  bool p_via_copy = false;  // attention: P made by copy(S, P) rather than a Parallel cast
  ExprTree expr;            // gemm epilogue, tile's pre-reduction nest
  ExprTree expr2;           // tile's post-reduction nest (may read r)

  std::string to_text() const;
  // One line: "gemm f16->f16 100x72x40 tile 64x64x32 s2 t128 ..." for logs.
  std::string summary() const;
};

// Parses FuzzCase::to_text's form (unknown keys and malformed values are errors; missing keys
// keep their defaults); throws std::invalid_argument.
FuzzCase parse_case(const std::string& text);

// A random case from the language's grammar, within its documented constraints (tiles the
// instructions divide, register and shared-memory budgets), most of them legal; the same seed
// gives the same case. `family` < 0: any family.
FuzzCase generate_case(std::uint64_t seed, int family = -1);

}  // namespace tessel::fuzz
