// Matmul's staging copies (matmul_staging_copy_program) on the CPU interpreter: each row's
// first min(src, dst) columns copied bit for bit, a wider destination's columns past the source
// zeros, for rows that are not 16-byte aligned on either side, pieces of long rows (several
// blocks a row) and rows shorter than a block; the errors for illegal tiles.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <stdexcept>

#include "tessel/interp/Interpreter.hpp"
#include "tessel/kernels/gemm/Matmul.hpp"

namespace {

using tessel::DType;
using tessel::interp::HostTensor;
using tessel::kernels::MatmulStagingCopy;

void check(int rows, int src_cols, int dst_cols, DType t, const MatmulStagingCopy& c) {
  SCOPED_TRACE(std::to_string(rows) + " rows, " + std::to_string(src_cols) + " -> " +
               std::to_string(dst_cols) + " columns, " + std::string(tessel::dtype_name(t)) + ", block_N " +
               std::to_string(c.block_N) + ", " + std::to_string(c.threads) + " threads");
  std::mt19937_64 seeds(std::random_device{}());
  auto src = HostTensor::random(t, {rows, src_cols}, seeds());
  // The destination as the interpreter's output, with every element poisoned first: only an
  // element the program writes can hold a copied value or zero.
  auto out = tessel::interp::run_on_cpu(
      tessel::kernels::matmul_staging_copy_program(rows, src_cols, dst_cols, t, c), {src}, {-1});
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].shape, (std::vector<std::int64_t>{rows, dst_cols}));
  const std::vector<double> s = src.to_values(), d = out[0].to_values();
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < dst_cols; ++j) {
      const double want = j < src_cols ? s[static_cast<size_t>(r) * src_cols + j] : 0.0;
      const double got = d[static_cast<size_t>(r) * dst_cols + j];
      if (got != want) {
        ADD_FAILURE() << "Dst[" << r << ", " << j << "] = " << got << ", expected " << want;
        return;
      }
    }
}

TEST(MatmulStagingCopyInterpreter, RowsOfAnyAlignmentCopyExactly) {
  for (DType t : {DType::f16, DType::bf16}) {
    // Staging in: unaligned rows into whole-line rows (zeros past the source's columns).
    check(5, 1011, 1024, t, tessel::kernels::default_staging_copy(1024, t));
    check(3, 4095, 4096, t, tessel::kernels::default_staging_copy(4096, t));
    // Copying back: aligned rows into unaligned ones (the padding's columns dropped).
    check(5, 1024, 1011, t, tessel::kernels::default_staging_copy(1024, t));
    check(3, 6848, 6789, t, tessel::kernels::default_staging_copy(6848, t));
    // Short rows, a tile wider than the row (one block a row).
    check(9, 7, 64, t, tessel::kernels::default_staging_copy(64, t));
    check(9, 64, 7, t, tessel::kernels::default_staging_copy(64, t));
  }
  // Long rows in pieces: several blocks a row, the last piece ragged, on both sides.
  MatmulStagingCopy pieces{.block_N = 1024, .threads = 128};
  check(3, 5001, 5056, DType::f16, pieces);
  check(3, 5056, 5001, DType::bf16, pieces);
  check(2, 3000, 3001, DType::f32, MatmulStagingCopy{.block_N = 512, .threads = 128});
}

TEST(MatmulStagingCopyInterpreter, DefaultTilesCoverTheRow) {
  EXPECT_EQ(tessel::kernels::default_staging_copy(64, DType::f16).threads, 128);
  EXPECT_EQ(tessel::kernels::default_staging_copy(64, DType::f16).block_N, 1024);
  EXPECT_EQ(tessel::kernels::default_staging_copy(4096, DType::bf16).block_N, 4096);
  EXPECT_EQ(tessel::kernels::default_staging_copy(50304, DType::f16).block_N, 8192);  // four vectors a thread
}

TEST(MatmulStagingCopyInterpreter, IllegalTilesSayWhatIsLegal) {
  auto message = [](auto&& make) {
    try {
      make();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(message([] {
              (void)tessel::kernels::matmul_staging_copy_program(
                  4, 100, 104, DType::f16, MatmulStagingCopy{.block_N = 1000, .threads = 128});
            }).find("block_N a positive multiple of threads * 8 = 1024"),
            std::string::npos);
  EXPECT_NE(
      message([] { (void)tessel::kernels::matmul_staging_copy_program(0, 100, 104, DType::f16, {}); })
          .find(
              "matmul_staging_copy_program(0 rows, 100 -> 104 columns, f16, block_N 2048, 256 threads): rows "
              "and columns must be positive"),
      std::string::npos);
  EXPECT_NE(message([] {
              (void)tessel::kernels::matmul_staging_copy_program(
                  1 << 30, 4096, 4096, DType::f16, MatmulStagingCopy{.block_N = 1024, .threads = 128});
            }).find("4294967296 blocks, more than a grid's 2^31 - 1"),
            std::string::npos);
}

}  // namespace
