// The interval analysis lowering uses to drop edge code that cannot run (src/passes/IntBounds).
#include <gtest/gtest.h>

#include "passes/IntBounds.hpp"
#include "passes/PassUtil.hpp"

namespace {

using namespace tessel::ir;
using tessel::passes::add;
using tessel::passes::int_bounds;
using tessel::passes::IntRange;
using tessel::passes::lt;
using tessel::passes::mul;
using tessel::passes::prove;
using tessel::passes::sub;
using tessel::passes::VarRanges;

Expr bin(BinaryOp op, Expr a, Expr b) {
  return make_binary(op, std::move(a), std::move(b));
}

TEST(IntBounds, RangesOfIndexArithmetic) {
  Var bx("bx"), tx("tx"), k("k");
  VarRanges r;
  r.set(bx, {0, 16383});
  r.set(tx, {0, 511});
  auto b =
      int_bounds(add(mul(bx, make_int(16384)), mul(bin(BinaryOp::Mod, tx, make_int(512)), make_int(8))), r);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->lo, 0);
  EXPECT_EQ(b->hi, 16383LL * 16384 + 511 * 8);
  auto d = int_bounds(bin(BinaryOp::Div, tx, make_int(512)), r);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->lo, 0);
  EXPECT_EQ(d->hi, 0);
  // k is unbounded: nothing is known.
  EXPECT_FALSE(int_bounds(add(k, tx), r));
  // A modulo whose dividend wraps covers [0, m).
  auto m = int_bounds(bin(BinaryOp::Mod, add(tx, make_int(1)), make_int(16)), r);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->lo, 0);
  EXPECT_EQ(m->hi, 15);
  // Division of a possibly negative value is not folded (C truncates toward zero).
  EXPECT_FALSE(int_bounds(bin(BinaryOp::Div, sub(tx, make_int(600)), make_int(8)), r));
}

TEST(IntBounds, ProvesOnlyWhatHoldsForEveryValue) {
  Var bx("bx"), tx("tx");
  VarRanges r;
  r.set(bx, {0, 99});
  r.set(tx, {0, 255});
  EXPECT_EQ(prove(lt(bx, make_int(100)), r), std::optional<bool>(true));
  EXPECT_EQ(prove(lt(bx, make_int(99)), r), std::nullopt);  // false for bx = 99
  EXPECT_EQ(prove(bin(BinaryOp::GE, tx, make_int(256)), r), std::optional<bool>(false));
  // (bx * 64 + tx / 32 * 8) % 8 == 0: 8 divides every term.
  Expr off = add(mul(bx, make_int(64)), mul(bin(BinaryOp::Div, tx, make_int(32)), make_int(8)));
  EXPECT_EQ(prove(bin(BinaryOp::EQ, bin(BinaryOp::Mod, off, make_int(8)), make_int(0)), r),
            std::optional<bool>(true));
  EXPECT_EQ(prove(bin(BinaryOp::EQ, bin(BinaryOp::Mod, add(off, tx), make_int(8)), make_int(0)), r),
            std::nullopt);
  // && needs both sides; || one.
  Expr yes = lt(tx, make_int(256)), unknown = lt(tx, make_int(100));
  EXPECT_EQ(prove(bin(BinaryOp::And, yes, unknown), r), std::nullopt);
  EXPECT_EQ(prove(bin(BinaryOp::Or, unknown, yes), r), std::optional<bool>(true));
  // A select whose condition is provable takes that arm's range.
  Expr valid = make_select(lt(bx, make_int(100)), sub(make_int(1000), mul(tx, make_int(2))), make_int(0));
  EXPECT_EQ(prove(bin(BinaryOp::GT, valid, make_int(0)), r), std::optional<bool>(true));
}

}  // namespace

namespace {

// "Whole or wholly past the end" holds for each chunk k of a row, not for the hull of all k.
TEST(IntBounds, CasesProveWhatHoldsPerIteration) {
  Var k("k"), tx("tx");
  VarRanges r;
  r.set(k, {0, 15});
  r.set(tx, {0, 255});
  Expr valid = sub(make_int(65536), add(mul(add(k, make_int(1)), make_int(4096)), mul(tx, make_int(8))));
  Expr ok = bin(BinaryOp::Or, bin(BinaryOp::GE, valid, make_int(8)), bin(BinaryOp::LE, valid, make_int(0)));
  EXPECT_EQ(prove(ok, r), std::nullopt);
  EXPECT_EQ(tessel::passes::prove_by_cases(ok, r), std::optional<bool>(true));
  // Not so for a row of 65532 over 512 threads: the last chunk's last vector (k = 15,
  // tx = 511) holds 4 elements.
  r.set(tx, {0, 511});
  Expr ragged = sub(make_int(65532), add(mul(k, make_int(4096)), mul(tx, make_int(8))));
  Expr ok2 =
      bin(BinaryOp::Or, bin(BinaryOp::GE, ragged, make_int(8)), bin(BinaryOp::LE, ragged, make_int(0)));
  EXPECT_EQ(tessel::passes::prove_by_cases(ok2, r), std::nullopt);
}

}  // namespace

namespace {

using tessel::passes::i64;
using tessel::passes::known_divisor;

// Sums are expanded and equal terms combined, and x % c counts as x minus a multiple of c: a
// row's offset minus its misalignment is a multiple of the vector (the start of a row window,
// tests/support/RowWindowProgram.hpp), through the casts the index arithmetic puts in.
TEST(KnownDivisor, OffsetMinusItsRemainder) {
  Var bx("bx"), tx("tx");
  Expr row = mul(i64(bx), make_int(8191, tessel::DType::i64));
  EXPECT_EQ(known_divisor(row), 1);
  EXPECT_GE(known_divisor(sub(row, bin(BinaryOp::Mod, row, make_int(8, tessel::DType::i64)))), 8);
  // As the frontend writes it: row + -(row % 8), the remainder over an i32 product.
  Expr narrow = mul(bx, make_int(8191));
  Expr start = add(row, make_unary(UnaryOp::Neg, bin(BinaryOp::Mod, i64(narrow), make_int(8, tessel::DType::i64))));
  EXPECT_GE(known_divisor(start), 8);
  // ... plus a thread's vector: still a multiple of 8.
  EXPECT_GE(known_divisor(add(start, i64(mul(tx, make_int(8))))), 8);
  // ... plus one: not even.
  EXPECT_EQ(known_divisor(add(start, make_int(1))), 1);
  // A remainder by 4 leaves only 4; a remainder of another expression leaves nothing.
  EXPECT_EQ(known_divisor(sub(row, bin(BinaryOp::Mod, row, make_int(4, tessel::DType::i64)))), 4);
  EXPECT_EQ(known_divisor(sub(row, bin(BinaryOp::Mod, mul(i64(tx), make_int(8191, tessel::DType::i64)),
                                       make_int(8, tessel::DType::i64)))),
            1);
  // What was known before stays known: products, constants, selects.
  EXPECT_EQ(known_divisor(mul(bx, make_int(48))), 16);
  EXPECT_EQ(known_divisor(add(mul(bx, make_int(64)), make_int(96))), 32);
  EXPECT_EQ(known_divisor(make_int(0)), 1 << 30);
}

}  // namespace
