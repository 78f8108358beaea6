// generate_case: random cases within the language's documented constraints.
//
// The constraints followed here are the ones docs/compiler.md and the compiler's error messages
// state: gemm tiles divide into m16n8k16 (BM % 16, BN % 8, BK % 16) and some split of the warps
// covers the C tile for the policy asked; shared tiles fit the smaller (sm_80) cap; fragments stay
// well inside the register budget; reductions take f32 fragments of 2-D tiles along dim 1. What
// else the compiler refuses with a CompileError is counted as "rejected" by the runner, so a rule
// missing here shows up as a rejection count, not as a failure.
#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "fuzz/FuzzCase.hpp"

namespace tessel::fuzz {

namespace {

// splitmix64: small, the same everywhere (std:: distributions are not portable across libraries).
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : s_(seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull) {}
  std::uint64_t next() {
    std::uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  int below(int n) { return static_cast<int>(next() % static_cast<std::uint64_t>(n)); }
  int range(int lo, int hi) { return lo + below(hi - lo + 1); }  // [lo, hi]
  bool chance(double p) { return static_cast<double>(next() >> 11) * 0x1p-53 < p; }
  template <class T>
  T pick(std::initializer_list<T> xs) {
    return *(xs.begin() + below(static_cast<int>(xs.size())));
  }

 private:
  std::uint64_t s_;
};

// Constants exact in every float dtype, so that no case depends on how a constant rounds.
double constant(Rng& r) {
  return r.pick({0.0, 0.5, -0.5, 1.0, -1.0, 2.0, 0.25, -0.75, 1.5, 3.0});
}

ExprTree random_expr(Rng& r, int depth, bool allow_r) {
  using Op = ExprTree::Op;
  if (depth == 0 || r.chance(0.3)) {
    ExprTree e;
    const int k = r.below(10);
    if (allow_r && k < 4) {
      e.op = Op::R;
    } else if (k < 8) {
      e.op = Op::X;
    } else {
      e.op = Op::Const;
      e.value = constant(r);
    }
    return e;
  }
  ExprTree e;
  e.op = r.pick({Op::Neg, Op::Abs, Op::Relu, Op::Expc, Op::Add, Op::Sub, Op::Mul, Op::Mul, Op::Max, Op::Min,
                 Op::Sdiv, Op::Add, Op::Exp2c});
  // Half the exp2s on the FMA pipe (session 30's op), drawn only for them: programs without an
  // exp2 are what they were before, seed for seed.
  if (e.op == Op::Exp2c && r.chance(0.5)) e.op = Op::PolyExp2c;
  for (int i = 0; i < expr_arity(e.op); ++i) e.args.push_back(random_expr(r, depth - 1, allow_r));
  return e;
}

bool reads_input(const ExprTree& e) {
  if (e.op == ExprTree::Op::X || e.op == ExprTree::Op::R) return true;
  for (const ExprTree& a : e.args)
    if (reads_input(a)) return true;
  return false;
}

// An expression that reads x or r: a constant one would leave the tile it replaces dead (the
// compiler then drops the gemm or the load that fed it, and the program tests nothing).
ExprTree live_expr(Rng& r, int depth, bool allow_r) {
  for (;;) {
    ExprTree e = random_expr(r, depth, allow_r);
    if (reads_input(e)) return e;
  }
}

// A problem size against a tile: whole tiles, a tail, something tiny, or anything up to `cap`.
int size_for(Rng& r, int tile, int cap) {
  int v = 1;
  switch (r.below(4)) {
    case 0:
      v = tile * r.range(1, 3);
      break;
    case 1:
      v = tile * r.range(0, 2) + r.range(1, tile - 1 > 0 ? tile - 1 : 1);
      break;
    case 2:
      v = r.range(1, 17);
      break;
    default:
      v = r.range(1, cap);
      break;
  }
  return std::clamp(v, 1, cap);
}

// Some warp count 1..8 that splits BM x BN into m16n8 tiles for the policy; 0 when none does.
int pick_warps(Rng& r, int BM, int BN, int policy) {
  std::vector<int> ok;
  for (int warps : {1, 2, 3, 4, 6, 8})
    for (int wm = 1; wm <= warps; ++wm) {
      if (warps % wm) continue;
      const int wn = warps / wm;
      if (BM % (16 * wm) || BN % (8 * wn)) continue;
      if ((policy == 1 && wn != 1) || (policy == 2 && wm != 1)) continue;
      ok.push_back(warps);
      break;
    }
  if (ok.empty()) return 0;
  return ok[static_cast<size_t>(r.below(static_cast<int>(ok.size())))];
}

// The row-blocked layout a reduction needs (infer_layouts' row_blocked): some power-of-two lanes
// per row whose vectors divide the row, with the remaining threads dividing the rows.
bool reducible(int R, int C, int threads, int vec) {
  while (vec > 1 && C % vec) vec /= 2;
  int max_lanes = 1;
  while (max_lanes * 2 <= threads && C % (max_lanes * 2 * vec) == 0) max_lanes *= 2;
  int target = 1;
  while (target * 2 <= C / (vec * 4)) target *= 2;
  int lanes = std::min(std::min(max_lanes, 32), target);
  while (lanes < max_lanes && R % (threads / lanes)) lanes *= 2;
  return threads % lanes == 0 && R % (threads / lanes) == 0;
}

constexpr int kSmemBudget = 96 * 1024;  // well inside sm_80's 164 KB, with room for padding
constexpr int kValuesPerThread = 320;   // the compiler's limit is 510

FuzzCase gemm_case(Rng& r, FuzzCase c) {
  c.family = Family::Gemm;
  c.dtype = r.pick({DType::f16, DType::bf16});
  c.out_dtype = r.chance(0.3) ? DType::f32 : c.dtype;
  c.epilogue = r.chance(0.6);
  c.bias = r.chance(0.3);
  c.row_sums = r.chance(0.2);
  // Often the tutorial's shape that sm_90a's persistent TMA + wgmma GEMM takes
  // (select_hopper_gemm): one or two consumer warpgroups of 64 rows each, BN a multiple of 64,
  // BK 32 or 64, two or more stages, K and N multiples of 8, no transposes; M may be ragged.
  if (r.chance(0.3)) {
    c.row_sums = false;
    c.trans_a = c.trans_b = false;
    for (;;) {
      const int consumers = r.range(1, 2);
      c.threads = 128 * consumers;
      c.BM = 64 * consumers * r.range(1, 2);
      c.BN = r.pick({64, 128, 256});
      c.BK = r.pick({32, 64});
      c.stages = r.range(2, 4);
      c.policy = 0;
      const int fragments = 1 + (c.epilogue || c.bias ? 1 : 0);
      const int smem = c.stages * (c.BM * c.BK + c.BK * c.BN) * 2;
      if (c.BM * c.BN * fragments / c.threads > kValuesPerThread || smem > kSmemBudget) continue;
      break;
    }
    c.swizzle = r.chance(0.3);
    c.cluster = r.chance(0.3) ? r.range(1, 2) : 0;
    // use_cluster(1, 2) splits B's 64-column panels between the two blocks.
    if (c.cluster == 2 && (c.BN / 64) % 2) c.cluster = 1;
    c.M = size_for(r, c.BM, 300);
    c.N = 8 * ((size_for(r, c.BN, 320) + 7) / 8);
    c.K = 8 * ((size_for(r, c.BK, 200) + 7) / 8);
    c.k_by_block = r.chance(0.15);
    if (c.epilogue) c.expr = live_expr(r, 3, false);
    return c;
  }
  for (int attempt = 0;; ++attempt) {
    c.BM = r.pick({16, 32, 48, 64, 64, 96, 128});
    c.BN = r.pick({16, 24, 32, 64, 64, 96, 128, 256});
    c.BK = r.pick({16, 32, 32, 48, 64});
    c.policy = r.chance(0.7) ? 0 : r.range(1, 2);
    // A row reduction of a gemm tile splits the warps along M alone (FullRow; FullCol is an error).
    if (c.row_sums) c.policy = r.chance(0.5) ? 0 : 1;
    const int split_policy = c.row_sums ? 1 : c.policy;
    c.stages = r.pick({-1, 0, 1, 2, 2, 3, 4});
    const int warps = pick_warps(r, c.BM, c.BN, split_policy);
    if (!warps) continue;
    c.threads = 32 * warps;
    const int fragments = 1 + (c.epilogue || c.bias ? 1 : 0);
    const int smem = std::max(1, c.stages) * (c.BM * c.BK + c.BK * c.BN) * 2;
    if (c.BM * c.BN * fragments / c.threads > kValuesPerThread || smem > kSmemBudget) continue;
    break;
  }
  c.trans_a = r.chance(0.25);
  c.trans_b = r.chance(0.35);
  c.swizzle = r.chance(0.2);
  c.cluster = r.chance(0.15) ? r.range(1, 2) : 0;
  if (c.cluster == 2 && c.BN % 128) c.cluster = 1;
  c.M = size_for(r, c.BM, 300);
  c.N = size_for(r, c.BN, 300);
  c.K = size_for(r, c.BK, 200);
  c.k_by_block = c.stages >= 0 && r.chance(0.15);
  if (c.epilogue) c.expr = live_expr(r, 3, false);
  return c;
}

FuzzCase tile_case(Rng& r, FuzzCase c) {
  c.family = Family::Tile;
  c.dtype = r.pick({DType::f32, DType::f16, DType::bf16});
  c.out_dtype = r.pick({c.dtype, c.dtype, DType::f32, DType::f16});
  c.reduce = r.pick({ReduceKind::None, ReduceKind::Sum, ReduceKind::Max, ReduceKind::Min});
  for (;;) {
    c.BM = r.pick({1, 2, 4, 8, 16, 32, 64});
    c.BN = r.pick({8, 16, 32, 64, 128, 256});
    c.threads = r.pick({32, 64, 128, 256});
    if (c.BM * c.BN * 2 / c.threads > kValuesPerThread) continue;
    if (c.reduce != ReduceKind::None && !reducible(c.BM, c.BN, c.threads, 16 / dtype_bytes(c.dtype)))
      continue;
    break;
  }
  c.M = size_for(r, c.BM, 200);
  c.N = size_for(r, c.BN, 300);
  c.row_off = r.chance(0.5) ? 0 : r.range(1, c.BM + 2);
  c.col_off = r.chance(0.5) ? 0 : r.range(1, c.BN + 3);
  c.via_shared = r.chance(0.3);
  c.store_via_shared = r.chance(0.25);
  c.padded = r.chance(0.3);
  if (c.padded) c.pad = r.pick({-1.5, 0.5, 2.0, -0.25});
  c.frag_in_dtype = c.reduce == ReduceKind::None && c.dtype != DType::f32 && r.chance(0.3);
  c.reduce_init = c.reduce != ReduceKind::None && r.chance(0.3);
  if (c.reduce_init) c.init_value = constant(r);
  c.expr = live_expr(r, 2, false);
  c.expr2 = live_expr(r, 3, c.reduce != ReduceKind::None);
  return c;
}

FuzzCase softmax_case(Rng& r, FuzzCase c) {
  c.family = Family::Softmax;
  c.dtype = r.pick({DType::f32, DType::f16, DType::bf16});
  c.out_dtype = c.dtype;
  const int vec = 16 / dtype_bytes(c.dtype);
  c.variant = r.pick({0, 0, 1, 2});
  // A fifth of the whole-row shapes: a tile exactly as wide as rows that are not whole vectors
  // (infer_layouts' flat-rows layout): BM rows whose run is whole vectors, each thread a run of
  // at most 8 of them and at most N + 1 elements.
  const bool flat = c.variant != 2 && r.chance(0.2);
  for (;;) {
    if (flat) {
      c.N = r.chance(0.3) ? r.range(vec + 1, 40) : r.range(vec + 1, 600);
      c.window = false;
      c.BN = c.N;
      c.BM = r.pick({4, 8, 16, 32, 64});
      c.threads = r.pick({32, 64, 128, 256});
      const int words = c.BM * c.N / vec, per_thread = (words + c.threads - 1) / c.threads;
      if (c.N % vec == 0 || (c.BM * c.N) % vec || per_thread > 8 || per_thread * vec > c.N + 1 ||
          c.BM * c.BN * 2 / c.threads > kValuesPerThread)
        continue;
      break;
    }
    c.N = r.chance(0.3) ? r.range(1, 20) : r.range(1, 600);
    const int granule = vec * r.pick({1, 2, 4, 8, 32});
    // Windows (copy_window) need vec - 1 more columns than the row.
    c.window = r.chance(0.35);
    c.BN = (c.N + (c.window ? vec - 1 : 0) + granule - 1) / granule * granule;
    if (c.variant == 2) c.BN = std::min(c.BN, granule * r.pick({1, 2, 4}));  // chunks of the row
    c.BM = r.pick({1, 2, 4, 8, 16});
    c.threads = r.pick({32, 64, 128, 256});
    if (c.BN > 1024 || c.BM * c.BN * 2 / c.threads > kValuesPerThread) continue;
    if (!reducible(c.BM, c.BN, c.threads, vec)) continue;
    break;
  }
  // The rows-as-loaded variant may keep up to every vector a thread holds in shared memory.
  const int vectors = c.BM * c.BN / (c.threads * vec);
  if (c.variant == 1 && !flat && vectors >= 1 && r.chance(0.6)) c.shared_tail = r.range(1, vectors);
  c.M = size_for(r, c.BM, 200);
  c.scale = r.pick({1.0, 0.5, 2.0, 0.125});
  return c;
}

FuzzCase attention_case(Rng& r, FuzzCase c) {
  c.family = Family::Attention;
  c.dtype = r.pick({DType::f16, DType::bf16});
  c.out_dtype = DType::f32;
  c.online = r.chance(0.7);
  c.causal = c.online && r.chance(0.3);
  c.skip_masked = c.causal && r.chance(0.5);
  c.p_via_copy = r.chance(0.3);
  // Often the shapes sm_90a's wgmma, TMA rings and warp roles take: 64 rows per warpgroup, key
  // blocks and head dimensions of 64 or 128.
  const bool hopper_shaped = r.chance(0.4);
  for (;;) {
    if (hopper_shaped) {
      c.K = r.pick({64, 128});
      c.BM = r.pick({64, 128});
      c.BN = r.pick({64, 128});
      c.threads = c.BM * 2;
      c.stages = r.pick({1, 2, 2, 3});
      const int values = (2 * c.BM * c.BN + c.BM * c.K) / c.threads;
      const int smem = (c.BM * c.K + 2 * c.stages * c.BN * c.K) * 2;
      if (values > kValuesPerThread || smem > kSmemBudget) continue;
      break;
    }
    c.K = r.pick({16, 32, 64, 64, 128});  // the head dimension
    c.BM = r.pick({16, 32, 64, 64, 128});
    c.BN = r.pick({16, 32, 64, 64, 128});
    c.stages = r.pick({-1, 0, 1, 2, 2, 3});
    const int warps = r.pick({1, 2, 4, 8});
    if (c.BM % (16 * warps) || c.BN % 8) continue;
    c.threads = 32 * warps;
    const int values = (2 * c.BM * c.BN + c.BM * c.K) / c.threads;
    const int smem = (c.BM * c.K + 2 * std::max(1, c.stages) * c.BN * c.K) * 2;
    if (values > kValuesPerThread || smem > kSmemBudget) continue;
    break;
  }
  c.M = size_for(r, c.BM, 200);
  c.N = size_for(r, c.BN, 260);
  c.scale = r.pick({1.0, 0.5}) / std::sqrt(static_cast<double>(c.K));
  return c;
}

}  // namespace

FuzzCase generate_case(std::uint64_t seed, int family) {
  Rng r(seed);
  FuzzCase c;
  c.seed = seed;
  const int f = family >= 0 ? family : r.pick({0, 0, 0, 1, 1, 1, 2, 3, 3});
  switch (f) {
    case 0:
      return gemm_case(r, c);
    case 1:
      return tile_case(r, c);
    case 2:
      return softmax_case(r, c);
    default:
      return attention_case(r, c);
  }
}

}  // namespace tessel::fuzz
