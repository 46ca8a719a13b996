// AllReduce: every type x every op (PreMulSum with the scalar read at creation and at run time)
// x counts 0, 1, 7, 301, in and out of place, at odd offsets, for 1 to 8 ranks; both calling
// styles (a thread per rank, one thread with a group) and host streams; over shared memory and
// TCP; large odd counts; many channels with small slots.
#include <gtest/gtest.h>

#include "tests/coll/coll_harness.h"

namespace loom::colltest {
namespace {

class AllReduceRanks : public ::testing::TestWithParam<int> {};

TEST_P(AllReduceRanks, EveryTypeAndOpThreads) {
  checkMatrix(GetParam(), Transport::kDefault, Matrix{});
}

INSTANTIATE_TEST_SUITE_P(Shm, AllReduceRanks, ::testing::Values(1, 2, 3, 4, 5, 7, 8), ranksName);

class AllReduceGroupStyle : public ::testing::TestWithParam<int> {};

// One thread drives every rank inside loomGroupStart/End.
TEST_P(AllReduceGroupStyle, EveryTypeAndOpOneThread) {
  Matrix m;
  m.style = Style::kGroup;
  m.salt = 100;
  checkMatrix(GetParam(), Transport::kDefault, m);
}

INSTANTIATE_TEST_SUITE_P(Shm, AllReduceGroupStyle, ::testing::Values(2, 5), ranksName);

TEST(AllReduceStreams, EveryTypeOnHostStreams) {
  Matrix m;
  m.style = Style::kStreams;
  m.ops = {Op::kSum, Op::kAvg, Op::kMin, Op::kPreMulDev};
  m.salt = 200;
  checkMatrix(3, Transport::kDefault, m);
}

class AllReduceSocket : public ::testing::TestWithParam<int> {};

TEST_P(AllReduceSocket, EveryTypeSubsetOfOps) {
  Matrix m;
  m.ops = {Op::kSum, Op::kAvg, Op::kMax, Op::kPreMulImm};
  m.salt = 300;
  checkMatrix(GetParam(), Transport::kSocket, m);
}

INSTANTIATE_TEST_SUITE_P(Socket, AllReduceSocket, ::testing::Values(2, 3), ranksName);

TEST(AllReduceNoShm, ShmDisabledFallsBackToTcp) {
  Matrix m;
  m.ops = {Op::kSum, Op::kProd, Op::kMin};
  m.types = {loomInt8, loomUint64, loomFloat16, loomFloat32, loomFloat8e5m2};
  m.salt = 400;
  checkMatrix(4, Transport::kShmDisabled, m);
}

Case large(loomDataType_t type, Op op, size_t count, int placement) {
  Case c;
  c.kind = Kind::kAllReduce;
  c.type = type;
  c.op = op;
  c.count = count;
  c.salt = 500 + placement;
  return placed(c, placement);
}

TEST(AllReduceLarge, Float32SumTwoRanksUnaligned) {
  checkCase(2, Transport::kDefault, large(loomFloat32, Op::kSum, 1000003, 2));
}

TEST(AllReduceLarge, Int32AvgFiveRanksInPlace) {
  checkCase(5, Transport::kDefault, large(loomInt32, Op::kAvg, 1000003, 3));
}

TEST(AllReduceLarge, Float32MaxThreeRanksSocket) {
  checkCase(3, Transport::kSocket, large(loomFloat32, Op::kMax, 1000003, 0));
}

TEST(AllReduceLarge, Float16PreMulSumGroupStyle) {
  checkCase(4, Transport::kDefault, large(loomFloat16, Op::kPreMulDev, 250001, 1), Style::kGroup);
}

// Several channels and small slots: many steps per rank, split over parallel rings.
TEST(AllReduceLarge, ManyChannelsSmallSlots) {
  test::ScopedEnv channels("LOOM_NCHANNELS", "3");
  test::ScopedEnv slots("LOOM_BUFFSIZE", "65536");
  Matrix m;
  m.ops = {Op::kSum, Op::kAvg};
  m.counts = {70001};
  m.zeroCount = false;
  m.salt = 600;
  checkMatrix(3, Transport::kDefault, m);
}

// Recursive doubling with two and three rounds (4 and 8 ranks, no extra ranks) and with
// extra ranks (6: four ranks in two rounds and two extra ranks), over TCP where it is the default
// for small calls; every type and op, every placement, count 0 and 1.
class AllReduceDoubling : public ::testing::TestWithParam<int> {};

TEST_P(AllReduceDoubling, EveryTypeAndOpOverTcp) {
  test::ScopedEnv algo("LOOM_ALGO", "doubling");
  Matrix m;
  m.salt = 650 + GetParam();
  checkMatrix(GetParam(), Transport::kSocket, m);
}

INSTANTIATE_TEST_SUITE_P(Socket, AllReduceDoubling, ::testing::Values(4, 6, 8), ranksName);

// Many pieces per round (small slots): each round's send waits for the fold before it piece by
// piece, and in place each fold for its own round's send.
TEST(AllReduceDoubling, ManyPiecesPerRoundInPlaceAndNot) {
  test::ScopedEnv algo("LOOM_ALGO", "doubling");
  test::ScopedEnv slots("LOOM_P2P_BUFFSIZE", "65536");
  Matrix m;
  m.types = {loomFloat32, loomInt64, loomBfloat16};
  m.ops = {Op::kSum, Op::kAvg, Op::kPreMulImm, Op::kMin};
  m.counts = {70001};
  m.zeroCount = false;
  m.salt = 660;
  checkMatrix(5, Transport::kDefault, m);
}

}  // namespace
}  // namespace loom::colltest
