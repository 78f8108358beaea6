// The softmax's tuning space: its three variants with the threads, rows per block and tile widths
// that make sense for one row length, every point a program the compiler accepts.
#include <algorithm>
#include <limits>
#include <numeric>
#include <optional>

#include "Lower.hpp"
#include "tessel/autotune/Autotune.hpp"

namespace tessel::autotune {

namespace {

long long round_up(long long x, long long m) {
  return (x + m - 1) / m * m;
}

long long vector_elements(DType dtype) {
  return 16 / dtype_bytes(dtype);  // the 16-byte vectors softmax tiles move in
}

// The tile width softmax_program uses: the config's, or the row rounded up to a vector per thread.
long long tile_columns(const Config& c, long long N, DType dtype) {
  const int bn = get(c, "block_N");
  return bn ? bn : round_up(N, get(c, "threads") * vector_elements(dtype));
}

int sm_number(const std::string& arch) {
  int v = 0;
  for (char ch : arch)
    if (ch >= '0' && ch <= '9') v = v * 10 + (ch - '0');
  return v;
}

}  // namespace

Config softmax_point(const kernels::SoftmaxConfig& c) {
  return {{"variant", static_cast<int>(c.variant)},
          {"threads", c.threads},
          {"rows_per_block", c.variant == kernels::SoftmaxVariant::Rows ? c.rows_per_block : 1},
          {"block_N", c.block_N},
          {"shared_vectors", c.variant == kernels::SoftmaxVariant::Rows ? c.shared_vectors : 0},
          {"window", c.variant == kernels::SoftmaxVariant::Rows && c.window ? 1 : 0}};
}

kernels::SoftmaxConfig softmax_config(const Config& c) {
  kernels::SoftmaxConfig s;
  const int variant = get(c, "variant", static_cast<int>(s.variant));
  s.variant = variant == 1   ? kernels::SoftmaxVariant::Row
              : variant == 2 ? kernels::SoftmaxVariant::Online
                             : kernels::SoftmaxVariant::Rows;
  s.threads = get(c, "threads", s.threads);
  s.rows_per_block =
      s.variant == kernels::SoftmaxVariant::Rows ? get(c, "rows_per_block", s.rows_per_block) : 1;
  s.block_N = get(c, "block_N", s.block_N);
  s.shared_vectors = s.variant == kernels::SoftmaxVariant::Rows ? get(c, "shared_vectors", 0) : 0;
  s.window = s.variant == kernels::SoftmaxVariant::Rows && get(c, "window", 0) != 0;
  return s;
}

Space softmax_space(const std::string& arch, long long M, long long N, DType dtype) {
  const long long vec = vector_elements(dtype);
  const long long row = round_up(N, vec);  // the row in whole vectors
  Space s("softmax " + arch + " N=" + std::to_string(N) + " " + std::string(dtype_name(dtype)));
  auto point = [&](kernels::SoftmaxVariant v, int threads, int rows, long long block_N, int shared_vectors = 0,
                   bool window = false) {
    kernels::SoftmaxConfig c;
    c.variant = v;
    c.threads = threads;
    c.rows_per_block = rows;
    c.block_N = static_cast<int>(block_N);
    c.shared_vectors = shared_vectors;
    c.window = window;
    s.point(softmax_point(c));
  };
  // Rows: a few lanes per row (a power of two, no more lanes than the row has vectors, at most a
  // warp), the row padded to a multiple of them; many rows per block.
  for (int threads : {128, 256, 512, 1024})
    for (int rows = 2; rows <= 1024; rows *= 2)
      for (long long lanes = 1; lanes <= 32 && lanes * vec <= row; lanes *= 2)
        point(kernels::SoftmaxVariant::Rows, threads, rows, round_up(N, lanes * vec));
  // One row over a whole block of warps that is not a power of two (3 to 8 vectors a thread),
  // where the dispatcher's rule takes one because every power of two pads the row by more than a
  // tenth (8193 f16: 352 lanes x 3 against 256 x 5): its neighbours too.
  const long long lanes = kernels::softmax_row_lanes(N, dtype);
  const bool uneven_warps = lanes > 0 && (lanes & (lanes - 1)) != 0;
  for (int threads = 160; threads <= 1024 && uneven_warps; threads += 32) {
    if ((threads & (threads - 1)) == 0) continue;
    const long long v = (row / vec + threads - 1) / threads;
    if (v >= 3 && v <= 8) point(kernels::SoftmaxVariant::Rows, threads, 1, round_up(N, threads * vec));
  }
  // Rows that start unaligned through windows (w) on the lanes the windowed row needs (N + vec
  // - 1 columns), the dispatcher's choice where it pads at most 5 % more than the realigned
  // tile, and the neighbouring blocks of warps that are not a power of two.
  if (N % vec != 0) {
    const long long cols = N + vec - 1, vectors = (cols + vec - 1) / vec;
    const long long lanes_w = kernels::softmax_row_lanes(cols, dtype);
    if (lanes_w > 0 && lanes_w < 128) {
      point(kernels::SoftmaxVariant::Rows, 128, static_cast<int>(128 / lanes_w),
            round_up(cols, lanes_w * vec), 0, true);
    } else if (lanes_w > 0) {
      for (int threads = 128; threads <= 1024; threads += 32) {
        const long long v = (vectors + threads - 1) / threads;
        if (v >= 3 && v <= 8)
          point(kernels::SoftmaxVariant::Rows, threads, 1, round_up(cols, threads * vec), 0, true);
      }
    }
  }
  // Rows that are not whole vectors in a tile exactly as wide as the row (block_N = N): the
  // compiler holds them as the flat run they are in memory (infer_layouts' flat-rows layout),
  // each thread 2 to 8 consecutive aligned vectors of it; the rows a block takes keep its run a
  // whole number of vectors.
  if (N % vec != 0 && N > vec) {
    const long long step = vec / std::gcd(N, vec);  // rows whose run is whole vectors
    for (int threads : {128, 256, 512})
      for (long long words = 2; words <= 8; ++words) {
        const long long rows = words * threads * vec / N / step * step;
        if (rows >= step && rows <= 1024) point(kernels::SoftmaxVariant::Rows, threads, static_cast<int>(rows), N);
      }
  }
  // Rows with a shared tail: one row per block, 2 to 6 of each thread's vectors in registers and
  // the rest in shared memory (rows longer than the registers hold); rows that start unaligned
  // through windows (w, room for the shift), as the dispatcher does.
  const bool unaligned = N % vec != 0;
  const long long cols = unaligned ? N + vec - 1 : N;
  for (int threads : {256, 512, 1024}) {
    const long long vectors = (cols + threads * vec - 1) / (threads * vec);
    for (long long in_registers = 2; in_registers <= 6; in_registers += 2)
      if (vectors > in_registers)
        point(kernels::SoftmaxVariant::Rows, threads, 1, round_up(cols, threads * vec),
              static_cast<int>(vectors - in_registers), unaligned);
  }
  // Row: one row per block, staged whole in shared memory, then in register chunks of block_N:
  // one chunk where that pads the row by less than half, and chunks of one to four vectors per
  // thread for longer rows (as far as shared memory holds the row).
  for (int threads : {128, 256, 512, 1024})
    if (round_up(N, threads * vec) < 2 * row)
      point(kernels::SoftmaxVariant::Row, threads, 1, round_up(N, threads * vec));
  // Online: rows longer than one tile, read twice in tiles of one to four vectors per thread.
  for (auto variant : {kernels::SoftmaxVariant::Row, kernels::SoftmaxVariant::Online})
    for (int threads : {256, 512, 1024})
      for (int vectors = 1; vectors <= 4; vectors *= 2)
        if (threads * vec * vectors < N) point(variant, threads, 1, threads * vec * vectors);
  // The dispatcher's own choice, whatever the grid above holds.
  s.point(softmax_point(kernels::default_softmax_config(M, N, dtype)));

  s.constraint("the rows variant's tile holds the whole row (block_N >= N)", [=](const Config& c) {
    return get(c, "variant") != static_cast<int>(kernels::SoftmaxVariant::Rows) ||
           tile_columns(c, N, dtype) >= N;
  });
  // The row's values live in registers. At most 64 f32 values per thread; and at most 4096
  // 16-byte vectors per block (4 per thread at 1024 threads, 32 at 128): a vector's values and
  // its address both take registers, and a large block leaves each thread fewer of them (65536
  // per block). Measured on sm_90a, past these limits candidates mostly spill.
  s.constraint("at most 64 f32 values and 4096 / threads 16-byte vectors per thread", [=](const Config& c) {
    const long long threads = get(c, "threads");
    // Elements of a shared tail (Rows with shared_vectors) are not in registers.
    const long long elements = 1LL * get(c, "rows_per_block", 1) * tile_columns(c, N, dtype) -
                               1LL * get(c, "shared_vectors", 0) * vec * threads;
    return elements <= kMaxSoftmaxValuesPerThread * threads && elements / vec <= kMaxSoftmaxVectorsPerBlock;
  });
  // The compiler's layout rule (InferLayouts' row-blocked tiles: whole vectors per lane, a power
  // of two of lanes per row or one row over all of a block of warps, the rows dividing evenly
  // over the block) decides; asking it by
  // lowering the program (no NVRTC, about a millisecond) keeps this in step with the rule. The
  // shared-memory cap is lifted here so that shared memory is pruned below, by the GPU's limit,
  // with its own reason.
  const passes::Target target{arch, sm_number(arch), std::numeric_limits<int>::max()};
  auto lowered_smem = [=](const Config& c) -> std::optional<long long> {
    try {
      return lower(*kernels::softmax_program(M, N, dtype, softmax_config(c)).ir_ptr(), target).ctx.smem_bytes;
    } catch (const std::exception&) {
      return std::nullopt;
    }
  };
  s.constraint("the compiler lays the tile out over the threads",
               [=](const Config& c) { return lowered_smem(c).has_value(); });
  // What the compiler plans (the Row variant's staged row, reduction scratch).
  s.smem_bytes([=](const Config& c) { return lowered_smem(c).value_or(0); });
  s.threads([](const Config& c) { return get(c, "threads"); });
  return s;
}

Factory softmax_factory(long long M, long long N, DType dtype, JitOptions options) {
  return [=](const Config& c) { return kernels::make_softmax(M, N, dtype, softmax_config(c), options); };
}

}  // namespace tessel::autotune
