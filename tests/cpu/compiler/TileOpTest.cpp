// The tile-op interface (src/ops/): each op names itself and the regions it reads and writes;
// statements that are not tile ops have none.
#include <gtest/gtest.h>

#include <source_location>

#include "ops/TileOp.hpp"
#include "tessel/Error.hpp"

namespace {

using namespace tessel::ir;
namespace ops = tessel::ops;

Buffer buffer(const char* name, Scope scope) {
  return Buffer::make(name, {make_int(64), make_int(64)}, tessel::DType::f16, scope, std::source_location::current());
}

std::vector<std::string> names(const std::vector<Region>& regions) {
  std::vector<std::string> out;
  for (const Region& r : regions) out.push_back(r.buffer->name);
  return out;
}

TEST(TileOps, EachOpReportsWhatItReadsAndWrites) {
  const auto w = std::source_location::current();
  Buffer g = buffer("G", Scope::Global), s = buffer("S", Scope::Shared), f = buffer("F", Scope::Fragment),
         acc = buffer("C", Scope::Fragment), row = buffer("R", Scope::Fragment);
  using V = std::vector<std::string>;

  Stmt copy = make_copy(ops::whole(g), ops::whole(s), Expr(), w);
  ASSERT_NE(ops::tile_op(copy), nullptr);
  EXPECT_STREQ(ops::tile_op(copy)->name(), "copy");
  EXPECT_EQ(names(ops::access(copy).reads), V{"G"});
  EXPECT_EQ(names(ops::access(copy).writes), V{"S"});
  EXPECT_TRUE(ops::is_global_to_shared_copy(copy));
  EXPECT_TRUE(ops::writes_scope(copy, Scope::Shared));
  EXPECT_FALSE(ops::writes_scope(copy, Scope::Global));

  Stmt gemm = make_gemm(ops::whole(s), ops::whole(s), ops::whole(acc), false, false, GemmWarpPolicy::Square, w);
  EXPECT_STREQ(ops::tile_op(gemm)->name(), "gemm");
  EXPECT_EQ(names(ops::access(gemm).reads), (V{"S", "S", "C"}));
  EXPECT_EQ(names(ops::access(gemm).writes), V{"C"});
  EXPECT_FALSE(ops::is_global_to_shared_copy(gemm));

  Stmt fill = make_fill(ops::whole(s), make_float(0.0), w);
  EXPECT_TRUE(ops::access(fill).reads.empty());
  EXPECT_EQ(names(ops::access(fill).writes), V{"S"});

  // A reduction that clears its destination does not read it; one that combines does.
  Stmt cleared = make_reduce(f, row, ReduceOp::Max, 1, true, w);
  EXPECT_EQ(names(ops::access(cleared).reads), V{"F"});
  EXPECT_EQ(names(ops::access(cleared).writes), V{"R"});
  Stmt combined = make_reduce(f, row, ReduceOp::Sum, 1, false, w);
  EXPECT_EQ(names(ops::access(combined).reads), (V{"F", "R"}));
  EXPECT_EQ(ops::access(combined).writes[0].extents.size(), 2u) << "the whole buffer";

  // Not tile ops.
  EXPECT_EQ(ops::tile_op(make_barrier(w)), nullptr);
  EXPECT_TRUE(ops::access(make_barrier(w)).writes.empty());
  EXPECT_EQ(ops::tile_op(Stmt()), nullptr);
}

TEST(TileOps, VerifyFillsACopysExtentsAndRefusesMisuse) {
  const auto w = std::source_location::current();
  Buffer g = buffer("G", Scope::Global), s = buffer("S", Scope::Shared), acc = buffer("C", Scope::Fragment);
  // copy(G(0, 0), S): the source's extents come from the destination.
  Stmt copy = make_copy(Region{g, {make_int(0), make_int(0)}, {}}, ops::whole(s), Expr(), w);
  Stmt checked = ops::tile_op(copy)->verify(copy);
  ASSERT_EQ(checked.as<CopyStmt>()->src.extents.size(), 2u);
  EXPECT_TRUE(is_const_int(checked.as<CopyStmt>()->src.extents[1], 64));
  // A global -> global copy and an f16 accumulator are the author's mistakes.
  Stmt g2g = make_copy(ops::whole(g), ops::whole(buffer("H", Scope::Global)), Expr(), w);
  try {
    (void)ops::tile_op(g2g)->verify(g2g);
    FAIL() << "no error for a global -> global copy";
  } catch (const tessel::CompileError& e) {
    EXPECT_NE(std::string(e.what()).find("copies from global G to global H"), std::string::npos) << e.what();
  }
  Stmt gemm = make_gemm(ops::whole(s), ops::whole(s), ops::whole(acc), false, false, GemmWarpPolicy::Square, w);
  EXPECT_THROW((void)ops::tile_op(gemm)->verify(gemm), tessel::CompileError);
}

}  // namespace
