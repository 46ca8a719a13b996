// Groups of different collectives (and point-to-point) launched together, from a thread per
// rank and from one thread; and communicators from loomCommSplit running collectives at the
// same time from different threads.
#include <gtest/gtest.h>

#include <memory>

#include "tests/coll/coll_harness.h"

namespace loom::colltest {
namespace {

// The cases of one mixed group: AllReduce, AllGather (in place), Broadcast from the last rank,
// ReduceScatter, Reduce (in place) and AlltoAll, each with its own type and op.
std::vector<Case> mixedCases(int nranks, uint32_t salt) {
  std::vector<Case> cases;
  auto add = [&](Kind kind, loomDataType_t type, Op op, size_t count, int placement) {
    Case c;
    c.kind = kind;
    c.type = type;
    c.op = op;
    c.count = count;
    c.root = nranks - 1;
    c.salt = salt + static_cast<uint32_t>(cases.size());
    cases.push_back(placed(c, placement));
  };
  add(Kind::kAllReduce, loomFloat32, Op::kSum, 1001, 0);
  add(Kind::kAllGather, loomUint8, Op::kSum, 77, 1);
  add(Kind::kBroadcast, loomBfloat16, Op::kSum, 4099, 2);
  add(Kind::kReduceScatter, loomInt64, Op::kAvg, 33, 4);
  add(Kind::kReduce, loomFloat16, Op::kPreMulImm, 129, 3);
  add(Kind::kAlltoAll, loomFloat8e4m3, Op::kSum, 9, 2);
  add(Kind::kAllReduce, loomInt8, Op::kMax, 7, 3);
  return cases;
}

void mixedGroup(int nranks, Style style, Transport transport) {
  CommSet comms(nranks, transport);
  ASSERT_TRUE(comms.ok());
  for (uint32_t round = 0; round < 3; ++round) {
    std::vector<Case> cases = mixedCases(nranks, 8000 + 100 * round);
    std::vector<std::vector<std::unique_ptr<RankData>>> data(nranks);
    for (int r = 0; r < nranks; ++r) {
      for (const Case& c : cases) {
        data[r].push_back(std::make_unique<RankData>(c, nranks, r));
        ASSERT_LOOM_OK(data[r].back()->setup(comms[r]));
      }
    }
    if (style == Style::kThreads) {
      test::runThreads(nranks, [&](int r) {
        ASSERT_LOOM_OK(loomGroupStart());
        for (auto& d : data[r]) EXPECT_EQ(d->issue(comms[r], nullptr), loomSuccess);
        ASSERT_LOOM_OK(loomGroupEnd());
      });
    } else {
      ASSERT_LOOM_OK(loomGroupStart());
      for (int r = 0; r < nranks; ++r)
        for (auto& d : data[r]) EXPECT_EQ(d->issue(comms[r], nullptr), loomSuccess);
      ASSERT_LOOM_OK(loomGroupEnd());
    }
    for (int r = 0; r < nranks; ++r) {
      for (auto& d : data[r]) {
        EXPECT_EQ(d->verify(), "") << styleName(style);
        EXPECT_EQ(d->teardown(comms[r]), loomSuccess);
      }
    }
  }
}

TEST(MixedGroup, ThreadPerRank) { mixedGroup(4, Style::kThreads, Transport::kDefault); }
TEST(MixedGroup, OneThread) { mixedGroup(3, Style::kGroup, Transport::kDefault); }
TEST(MixedGroup, OneThreadOddRanks) { mixedGroup(5, Style::kGroup, Transport::kDefault); }
TEST(MixedGroup, ThreadPerRankSocket) { mixedGroup(3, Style::kThreads, Transport::kSocket); }

// Nested groups launch at the outermost loomGroupEnd.
TEST(MixedGroup, NestedGroups) {
  CommSet comms(3);
  ASSERT_TRUE(comms.ok());
  std::vector<Case> cases = mixedCases(3, 8500);
  std::vector<std::unique_ptr<RankData>> data;
  ASSERT_LOOM_OK(loomGroupStart());
  for (int r = 0; r < 3; ++r) {
    ASSERT_LOOM_OK(loomGroupStart());
    for (const Case& c : cases) {
      data.push_back(std::make_unique<RankData>(c, 3, r));
      ASSERT_LOOM_OK(data.back()->setup(comms[r]));
      EXPECT_EQ(data.back()->issue(comms[r], nullptr), loomSuccess);
    }
    ASSERT_LOOM_OK(loomGroupEnd());  // inner: nothing may run yet (it would deadlock)
  }
  ASSERT_LOOM_OK(loomGroupEnd());
  for (size_t i = 0; i < data.size(); ++i) {
    EXPECT_EQ(data[i]->verify(), "");
    EXPECT_EQ(data[i]->teardown(comms[static_cast<int>(i / cases.size())]), loomSuccess);
  }
}

// Two communicators split from one job (all ranks in reverse order; pairs by parity) run
// collectives at the same time, each from its own thread per rank.
TEST(SplitComms, ConcurrentCollectivesOnTwoCommunicators) {
  CommSet parent(4);
  ASSERT_TRUE(parent.ok());
  std::vector<loomComm_t> reversed(4, nullptr), halves(4, nullptr);
  test::runThreads(4, [&](int r) {
    EXPECT_EQ(loomCommSplit(parent[r], 0, -r, &reversed[r], nullptr), loomSuccess);
    EXPECT_EQ(loomCommSplit(parent[r], r % 2, r, &halves[r], nullptr), loomSuccess);
  });
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(reversed[r] != nullptr && halves[r] != nullptr);
  // Thread i runs rank i % 4 on `reversed` (i < 4) or on `halves`.
  test::runThreads(8, [&](int i) {
    loomComm_t comm = i < 4 ? reversed[i % 4] : halves[i % 4];
    int me = -1, n = 0;
    ASSERT_LOOM_OK(loomCommUserRank(comm, &me));
    ASSERT_LOOM_OK(loomCommCount(comm, &n));
    EXPECT_EQ(n, i < 4 ? 4 : 2);
    for (int k = 0; k < 40; ++k) {
      Case c;
      c.kind = k % 3 == 0 ? Kind::kAllGather : Kind::kAllReduce;
      c.type = allTypes()[(k + i / 4) % allTypes().size()];
      c.op = allOps()[k % allOps().size()];
      c.count = 1 + (k * 97) % 5003;
      c.salt = 9000 + k + (i < 4 ? 0 : 1000 + 100 * (i % 2));  // one per communicator
      RankData d(placed(c, k % 5), n, me);
      ASSERT_LOOM_OK(d.setup(comm));
      ASSERT_LOOM_OK(d.issue(comm, nullptr));
      EXPECT_EQ(d.verify(), "") << (i < 4 ? "reversed" : "halves");
      ASSERT_LOOM_OK(d.teardown(comm));
    }
  });
  test::runThreads(4, [&](int r) {
    for (loomComm_t c : {halves[r], reversed[r]}) {
      EXPECT_EQ(loomCommFinalize(c), loomSuccess) << loomGetLastError(c);
      EXPECT_EQ(loomCommDestroy(c), loomSuccess);
    }
  });
}

}  // namespace
}  // namespace loom::colltest
