// Chain Broadcast and Reduce from every root: the chain's shape, and the data in the simulator.
#include "algorithms/chain.h"

#include <gtest/gtest.h>

#include <vector>

#include "algorithms/walker.h"
#include "tests/algorithms/sim.h"

namespace loom::algo::test {
namespace {

// Builds every rank's program; inputs are inputValue(rank, i) on every rank.
void buildChain(Sim& sim, ChainColl coll, const std::vector<int>& order, int root,
                std::size_t count, int nch, std::size_t chunk, bool inPlace) {
  const int n = static_cast<int>(order.size());
  for (int rank = 0; rank < n; ++rank) {
    RankState& st = sim.rank(rank);
    // In place means recvbuff == sendbuff; only the root's flag changes the schedule.
    st.mem.assign(inPlace ? count : 2 * count, kUntouched);
    st.outBase = inPlace ? 0 : count;
    for (std::size_t i = 0; i < count; ++i) st.mem[i] = inputValue(rank, i);
    const ChainPeers peers = chainPeers(coll, order.data(), n, root, rank);
    std::vector<int> recvFrom, sendTo;
    if (peers.recvFrom >= 0) recvFrom = {peers.recvFrom};
    if (peers.sendTo >= 0) sendTo = {peers.sendTo};
    for (int ch = 0; ch < nch; ++ch) {
      const Range slice = channelSlice(count, nch, ch, 1);
      addProgram(sim, rank, ch,
                 chainProgram(coll, order.data(), n, root, rank, slice, chunk, inPlace), recvFrom,
                 sendTo, tagByOutput);
    }
  }
}

class ChainSim : public ::testing::TestWithParam<int> {};

TEST_P(ChainSim, BroadcastAndReduceFromEveryRoot) {
  const int n = GetParam();
  const std::size_t chunk = 5;
  for (const auto& order : testRingOrders(n)) {
    // Every root for small n; for n = 64 the ends, the middle and a neighbour of 0 (the shape
    // test below still covers every root).
    std::vector<int> roots;
    for (int root = 0; root < n; ++root) {
      if (n <= 16 || root <= 1 || root == n / 2 || root == n - 1) roots.push_back(root);
    }
    for (int root : roots) {
      for (std::size_t count : testCounts(n, 4 * chunk)) {
        for (int nch : {1, 2, 3}) {
          for (bool inPlace : {false, true}) {
            SCOPED_TRACE(::testing::Message() << "n=" << n << " root=" << root << " count=" << count
                                              << " nch=" << nch << " inPlace=" << inPlace);
            Sim bcast(n);
            buildChain(bcast, ChainColl::kBroadcast, order, root, count, nch, chunk, inPlace);
            ASSERT_EQ(bcast.run(), "");
            for (int r = 0; r < n; ++r) {
              const RankState& st = bcast.rank(r);
              for (std::size_t i = 0; i < count; ++i) {
                ASSERT_EQ(st.mem[st.outBase + i], inputValue(root, i)) << r << " " << i;
              }
            }
            Sim reduce(n);
            buildChain(reduce, ChainColl::kReduce, order, root, count, nch, chunk, inPlace);
            ASSERT_EQ(reduce.run(), "");
            for (int r = 0; r < n; ++r) {
              const RankState& st = reduce.rank(r);
              for (std::size_t i = 0; i < count; ++i) {
                Value want = 0;
                for (int q = 0; q < n; ++q) want += inputValue(q, i);
                // Non-roots' receive buffers stay untouched (or keep their input, in place).
                if (r != root) want = inPlace ? inputValue(r, i) : kUntouched;
                ASSERT_EQ(st.mem[st.outBase + i], want) << r << " " << i;
              }
            }
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, ChainSim, ::testing::ValuesIn(kRankCounts), rankCountName);

// Broadcast starts at the root, Reduce ends at it; both follow the ring through every rank once,
// and the peers agree with the chain order.
TEST(Chain, ShapeForEveryRoot) {
  for (int n : kRankCounts) {
    for (const auto& order : testRingOrders(n)) {
      for (int root = 0; root < n; ++root) {
        for (ChainColl coll : {ChainColl::kBroadcast, ChainColl::kReduce}) {
          const bool bcast = coll == ChainColl::kBroadcast;
          EXPECT_EQ(chainRankAt(coll, order.data(), n, root, bcast ? 0 : n - 1), root);
          std::vector<int> seen(static_cast<std::size_t>(n), 0);
          for (int i = 0; i < n; ++i) {
            const int r = chainRankAt(coll, order.data(), n, root, i);
            ++seen[static_cast<std::size_t>(r)];
            const ChainPeers p = chainPeers(coll, order.data(), n, root, r);
            EXPECT_EQ(p.recvFrom, i == 0 ? -1 : chainRankAt(coll, order.data(), n, root, i - 1));
            EXPECT_EQ(p.sendTo, i == n - 1 ? -1 : chainRankAt(coll, order.data(), n, root, i + 1));
            if (i > 0) {
              EXPECT_EQ(p.recvFrom, ringPrev(order.data(), n, r));  // ring links only
            }
          }
          for (int c : seen) EXPECT_EQ(c, 1);
          if (n == 1) continue;
          // The root's primitive: it injects (broadcast) or finishes the sum (reduce).
          const Prim rootPrim = chainPrim(coll, order.data(), n, root, root, false);
          EXPECT_EQ(rootPrim, bcast ? Prim::kCopySend : Prim::kRecvReduceCopy);
          const int tail = chainRankAt(coll, order.data(), n, root, n - 1);
          EXPECT_EQ(chainPrim(coll, order.data(), n, root, tail, false),
                    bcast ? Prim::kRecv : Prim::kRecvReduceCopy);
        }
      }
    }
  }
}

}  // namespace
}  // namespace loom::algo::test
