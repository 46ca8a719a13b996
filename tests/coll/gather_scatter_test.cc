// AllGather, ReduceScatter and AlltoAll: every type (and op), NCCL's in-place layouts
// (AllGather: sendbuff = recvbuff + rank * count; ReduceScatter: recvbuff = sendbuff + rank *
// count), odd offsets, 1 to 8 ranks, both calling styles, both transports, large odd counts.
#include <gtest/gtest.h>

#include "tests/coll/coll_harness.h"

namespace loom::colltest {
namespace {

Matrix matrix(Kind kind, Style style = Style::kThreads) {
  Matrix m;
  m.kind = kind;
  m.style = style;
  m.salt = 3000 + 100 * static_cast<uint32_t>(kind);
  if (!reduces(kind)) m.counts = {1, 7, 301, 4099};
  return m;
}

class GatherScatterRanks : public ::testing::TestWithParam<int> {};

TEST_P(GatherScatterRanks, AllGatherEveryType) {
  checkMatrix(GetParam(), Transport::kDefault, matrix(Kind::kAllGather));
}

TEST_P(GatherScatterRanks, ReduceScatterEveryTypeAndOp) {
  checkMatrix(GetParam(), Transport::kDefault, matrix(Kind::kReduceScatter));
}

TEST_P(GatherScatterRanks, AlltoAllEveryType) {
  checkMatrix(GetParam(), Transport::kDefault, matrix(Kind::kAlltoAll));
}

INSTANTIATE_TEST_SUITE_P(Shm, GatherScatterRanks, ::testing::Values(1, 2, 3, 4, 5, 7, 8),
                         ranksName);

class GatherScatterGroupStyle : public ::testing::TestWithParam<int> {};

TEST_P(GatherScatterGroupStyle, AllThreeOneThread) {
  checkMatrix(GetParam(), Transport::kDefault, matrix(Kind::kAllGather, Style::kGroup));
  Matrix rs = matrix(Kind::kReduceScatter, Style::kGroup);
  rs.ops = {Op::kSum, Op::kProd, Op::kMax, Op::kAvg, Op::kPreMulImm};
  checkMatrix(GetParam(), Transport::kDefault, rs);
  checkMatrix(GetParam(), Transport::kDefault, matrix(Kind::kAlltoAll, Style::kGroup));
}

INSTANTIATE_TEST_SUITE_P(Shm, GatherScatterGroupStyle, ::testing::Values(3, 4), ranksName);

TEST(GatherScatterSocket, SubsetOverTcp) {
  Matrix ag = matrix(Kind::kAllGather);
  ag.types = {loomInt8, loomUint32, loomFloat16, loomFloat64};
  checkMatrix(3, Transport::kSocket, ag);
  Matrix rs = matrix(Kind::kReduceScatter);
  rs.types = {loomUint8, loomInt64, loomBfloat16, loomFloat32, loomFloat8e4m3};
  rs.ops = {Op::kSum, Op::kMin, Op::kAvg, Op::kPreMulDev};
  checkMatrix(3, Transport::kSocket, rs);
  Matrix a2a = matrix(Kind::kAlltoAll);
  a2a.types = {loomUint8, loomInt32, loomFloat8e5m2, loomFloat64};
  checkMatrix(4, Transport::kSocket, a2a);
}

Case large(Kind kind, loomDataType_t type, Op op, size_t count, int placement) {
  Case c;
  c.kind = kind;
  c.type = type;
  c.op = op;
  c.count = count;
  c.salt = 3900 + placement;
  return placed(c, placement);
}

TEST(GatherScatterLarge, AllGatherInt32InPlace) {
  checkCase(3, Transport::kDefault, large(Kind::kAllGather, loomInt32, Op::kSum, 1000003, 3));
}

TEST(GatherScatterLarge, AllGatherFloat32Socket) {
  checkCase(2, Transport::kSocket, large(Kind::kAllGather, loomFloat32, Op::kSum, 1000003, 2));
}

TEST(GatherScatterLarge, ReduceScatterFloat32SumInPlace) {
  checkCase(4, Transport::kDefault, large(Kind::kReduceScatter, loomFloat32, Op::kSum, 1000003, 1));
}

TEST(GatherScatterLarge, ReduceScatterInt32AvgUnaligned) {
  checkCase(5, Transport::kDefault, large(Kind::kReduceScatter, loomInt32, Op::kAvg, 250001, 2));
}

TEST(GatherScatterLarge, AlltoAllFloat32) {
  checkCase(3, Transport::kDefault, large(Kind::kAlltoAll, loomFloat32, Op::kSum, 333337, 4));
}

}  // namespace
}  // namespace loom::colltest
