// Broadcast and Reduce: every type (and every op for Reduce), every root, in and out of place,
// at odd offsets, for 1 to 8 ranks. Reduce must leave the non-roots' recvbuff untouched (it is
// poisoned and checked byte for byte); Broadcast must not read the non-roots' sendbuff.
#include <gtest/gtest.h>

#include "tests/coll/coll_harness.h"

namespace loom::colltest {
namespace {

Matrix matrix(Kind kind, Style style = Style::kThreads) {
  Matrix m;
  m.kind = kind;
  m.style = style;
  m.salt = kind == Kind::kBroadcast ? 1000 : 2000;
  return m;
}

class BroadcastRanks : public ::testing::TestWithParam<int> {};

TEST_P(BroadcastRanks, EveryTypeEveryRoot) {
  Matrix m = matrix(Kind::kBroadcast);
  m.counts = {1, 7, 301, 4099};
  checkMatrix(GetParam(), Transport::kDefault, m);
}

TEST_P(BroadcastRanks, EveryTypeEveryRootGroupStyle) {
  Matrix m = matrix(Kind::kBroadcast, Style::kGroup);
  m.counts = {1, 7, 301, 4099};
  checkMatrix(GetParam(), Transport::kDefault, m);
}

INSTANTIATE_TEST_SUITE_P(Shm, BroadcastRanks, ::testing::Values(1, 2, 3, 4, 5, 7, 8), ranksName);

class ReduceRanks : public ::testing::TestWithParam<int> {};

TEST_P(ReduceRanks, EveryTypeOpAndRoot) {
  checkMatrix(GetParam(), Transport::kDefault, matrix(Kind::kReduce));
}

INSTANTIATE_TEST_SUITE_P(Shm, ReduceRanks, ::testing::Values(1, 2, 3, 4, 5, 7, 8), ranksName);

TEST(ReduceGroupStyle, EveryTypeOpAndRootOneThread) {
  checkMatrix(4, Transport::kDefault, matrix(Kind::kReduce, Style::kGroup));
}

TEST(BroadcastReduceSocket, SubsetOverTcp) {
  Matrix b = matrix(Kind::kBroadcast);
  b.types = {loomUint8, loomInt64, loomBfloat16, loomFloat8e4m3};
  checkMatrix(3, Transport::kSocket, b);
  Matrix r = matrix(Kind::kReduce);
  r.types = {loomInt8, loomUint32, loomFloat16, loomFloat64, loomFloat8e5m2};
  r.ops = {Op::kSum, Op::kAvg, Op::kMin, Op::kPreMulDev};
  checkMatrix(3, Transport::kSocket, r);
}

Case large(Kind kind, loomDataType_t type, Op op, int root, int placement) {
  Case c;
  c.kind = kind;
  c.type = type;
  c.op = op;
  c.count = 1000003;
  c.root = root;
  c.salt = 2500 + placement;
  return placed(c, placement);
}

TEST(BroadcastLarge, Int32FromLastRankUnaligned) {
  checkCase(3, Transport::kDefault, large(Kind::kBroadcast, loomInt32, Op::kSum, 2, 2));
}

TEST(BroadcastLarge, Float32InPlaceSocket) {
  checkCase(2, Transport::kSocket, large(Kind::kBroadcast, loomFloat32, Op::kSum, 1, 3));
}

TEST(ReduceLarge, Float32SumToMiddleRankInPlace) {
  checkCase(4, Transport::kDefault, large(Kind::kReduce, loomFloat32, Op::kSum, 1, 1));
}

TEST(ReduceLarge, Int32MinToLastRankOneElementOff) {
  checkCase(3, Transport::kDefault, large(Kind::kReduce, loomInt32, Op::kMin, 2, 4));
}

}  // namespace
}  // namespace loom::colltest
