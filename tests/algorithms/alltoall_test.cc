// Pairwise exchange: the order's invariants, and AllToAll run in the simulator.
#include "algorithms/alltoall.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/algorithms/sim.h"

namespace loom::algo::test {
namespace {

// At each step the send map is a permutation and matches the receive map; over all steps every
// ordered pair (r, p) is used exactly once, the rank with itself at step 0.
TEST(Pairwise, EveryPairOnceAndNoIncast) {
  for (int n : kRankCounts) {
    std::vector<int> pairs(static_cast<std::size_t>(n * n), 0);
    for (int s = 0; s < pairwiseStepCount(n); ++s) {
      std::vector<int> targeted(static_cast<std::size_t>(n), 0);
      for (int r = 0; r < n; ++r) {
        const int to = pairwiseSendPeer(n, r, s);
        ASSERT_TRUE(to >= 0 && to < n);
        ++targeted[static_cast<std::size_t>(to)];
        ++pairs[static_cast<std::size_t>(r * n + to)];
        EXPECT_EQ(pairwiseRecvPeer(n, to, s), r) << "n=" << n << " s=" << s;
        EXPECT_EQ(allToAllStep(n, r, s, 1).local, s == 0);
      }
      for (int t : targeted) EXPECT_EQ(t, 1) << "n=" << n << " s=" << s;
    }
    for (int c : pairs) EXPECT_EQ(c, 1) << "n=" << n;
  }
}

class AllToAllSim : public ::testing::TestWithParam<int> {};

// Each step is a send of one block and a receive of another (two ops in the simulator: the
// connections buffer, as real ones do within their slots); step 0 is a local copy.
TEST_P(AllToAllSim, MatchesTranspose) {
  const int n = GetParam();
  const std::size_t un = static_cast<std::size_t>(n);
  for (std::size_t count :
       {std::size_t{0}, std::size_t{1}, std::size_t{7}, un + 1, std::size_t{100}}) {
    SCOPED_TRACE(::testing::Message() << "n=" << n << " count=" << count);
    Sim sim(n);
    for (int r = 0; r < n; ++r) {
      RankState& st = sim.rank(r);
      st.mem.assign(2 * un * count, kUntouched);
      st.outBase = un * count;
      for (std::size_t i = 0; i < un * count; ++i) st.mem[i] = inputValue(r, i);
      for (int s = 0; s < pairwiseStepCount(n); ++s) {
        const AllToAllStep step = allToAllStep(n, r, s, count);
        Op send, recv;
        if (step.local) {
          send.prim = Prim::kCopy;
        } else {
          send.prim = Prim::kSend;
          send.sendTo = {step.sendPeer};
          recv.prim = Prim::kRecv;
          recv.recvFrom = {step.recvPeer};
        }
        send.in = step.sendOffset;
        send.out = step.recvOffset;  // used by the local copy only
        // Tag: the element offset of the block in the global (sender, block) matrix.
        send.tag = static_cast<std::size_t>(r) * un * count + step.sendOffset;
        recv.out = step.recvOffset;
        recv.tag =
            static_cast<std::size_t>(step.recvPeer) * un * count + allToAllBlockOffset(r, count);
        send.count = recv.count = step.count;
        sim.add(r, send);
        if (!step.local) sim.add(r, recv);
      }
    }
    ASSERT_EQ(sim.run(), "");
    // Block p of rank r's output is block r of rank p's input.
    for (int r = 0; r < n; ++r) {
      for (int p = 0; p < n; ++p) {
        for (std::size_t i = 0; i < count; ++i) {
          ASSERT_EQ(sim.rank(r).mem[un * count + allToAllBlockOffset(p, count) + i],
                    inputValue(p, allToAllBlockOffset(r, count) + i));
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, AllToAllSim, ::testing::ValuesIn(kRankCounts), rankCountName);

}  // namespace
}  // namespace loom::algo::test
