// The double binary tree: NCCL's shapes, tree validity, the interior/leaf balance, and tree
// AllReduce run in the simulator.
#include "algorithms/tree.h"

#include <gtest/gtest.h>

#include <vector>

#include "algorithms/walker.h"
#include "tests/algorithms/sim.h"

namespace loom::algo::test {
namespace {

// Checks that `tree` of the double tree over n is one valid binary tree; returns the failure.
std::string checkTree(int n, int tree) {
  int roots = 0;
  for (int i = 0; i < n; ++i) {
    const TreeLinks l = dtree(n, tree, i);
    if (l.isRoot()) {
      ++roots;
      if (i != dtreeRoot(n, tree)) return "unexpected root " + std::to_string(i);
    }
    if (l.child[0] < 0 && l.child[1] >= 0) return "children not packed at " + std::to_string(i);
    if (l.child[1] >= 0 && l.child[0] == l.child[1])
      return "same child twice at " + std::to_string(i);
    for (int c : l.child) {
      if (c < 0) continue;
      if (c >= n || c == i) return "bad child of " + std::to_string(i);
      if (dtree(n, tree, c).parent != i) return "child/parent disagree at " + std::to_string(i);
    }
    if (!l.isRoot()) {
      const TreeLinks p = dtree(n, tree, l.parent);
      if (p.child[0] != i && p.child[1] != i) return "parent does not list " + std::to_string(i);
    }
    // Walking up reaches the root in fewer than n hops: no cycles.
    int hops = 0;
    for (int at = i; dtree(n, tree, at).parent >= 0; at = dtree(n, tree, at).parent) {
      if (++hops >= n) return "cycle through " + std::to_string(i);
    }
  }
  return roots == 1 ? "" : "root count " + std::to_string(roots);
}

TEST(DoubleTree, BothTreesAreValidBinaryTrees) {
  for (int n = 1; n <= 300; ++n) {
    for (int tree : {0, 1}) ASSERT_EQ(checkTree(n, tree), "") << "n=" << n << " tree=" << tree;
  }
}

// Interior in at most one tree; the one exception (odd n: rank 0, a one-child node in both
// trees, see tree.h) is pinned down. Every rank has at most two children over both trees, so
// the per-rank load is balanced.
TEST(DoubleTree, EachRankIsInteriorInAtMostOneTree) {
  for (int n = 1; n <= 300; ++n) {
    for (int i = 0; i < n; ++i) {
      const TreeLinks t0 = dtree(n, 0, i), t1 = dtree(n, 1, i);
      EXPECT_LE(t0.childCount() + t1.childCount(), 2) << n << " " << i;
      const bool both = !t0.isLeaf() && !t1.isLeaf();
      if (n % 2 == 0 || i != 0 || n == 1) {
        EXPECT_FALSE(both) << "n=" << n << " rank " << i;
      } else {
        EXPECT_TRUE(both && t0.childCount() == 1 && t1.childCount() == 1) << "n=" << n;
      }
    }
  }
}

// The picture in NCCL's trees.cc (and tree.h) for n = 13, and its shifted second tree.
TEST(DoubleTree, MatchesNcclForThirteen) {
  auto kids = [](TreeLinks l) { return std::vector<int>{l.child[0], l.child[1]}; };
  EXPECT_EQ(kids(btree(13, 0)), (std::vector<int>{8, -1}));
  EXPECT_EQ(kids(btree(13, 8)), (std::vector<int>{4, 12}));
  EXPECT_EQ(kids(btree(13, 12)), (std::vector<int>{10, -1}));
  EXPECT_EQ(kids(btree(13, 10)), (std::vector<int>{9, 11}));
  EXPECT_EQ(btree(13, 12).parent, 8);
  EXPECT_EQ(btree(13, 11).parent, 10);
  EXPECT_EQ(dtreeRoot(13, 1), 1);
  EXPECT_EQ(kids(dtree(13, 1, 1)), (std::vector<int>{9, -1}));
  EXPECT_EQ(kids(dtree(13, 1, 9)), (std::vector<int>{5, 0}));
  EXPECT_EQ(kids(dtree(13, 1, 0)), (std::vector<int>{11, -1}));
}

// n = 12: the second tree is the mirror, rooted at 11 (NCCL's picture).
TEST(DoubleTree, MatchesNcclMirrorForTwelve) {
  EXPECT_EQ(dtreeRoot(12, 1), 11);
  EXPECT_EQ(dtree(12, 1, 11).child[0], 3);
  const TreeLinks three = dtree(12, 1, 3);
  EXPECT_EQ(three.child[0], 7);  // mirror of 4
  EXPECT_EQ(three.child[1], 1);  // mirror of 10
  EXPECT_EQ(dtree(12, 1, 0).parent, 1);
}

// Builds tree AllReduce: each tree takes its half, each half is cut into channels and pieces;
// per (tree, channel) a rank runs the up phase over every piece, then the down phase.
void buildTreeAllReduce(Sim& sim, int n, std::size_t count, int nch, std::size_t chunk,
                        bool inPlace) {
  for (int rank = 0; rank < n; ++rank) {
    RankState& st = sim.rank(rank);
    st.mem.assign(inPlace ? count : 2 * count, kUntouched);
    st.outBase = inPlace ? 0 : count;
    for (std::size_t i = 0; i < count; ++i) st.mem[i] = inputValue(rank, i);
    for (int tree : {0, 1}) {
      const TreeLinks links = dtree(n, tree, rank);
      const TreePrims prims = treeAllReducePrims(links, inPlace);
      std::vector<int> children;
      for (int c : links.child) {
        if (c >= 0) children.push_back(c);
      }
      const std::vector<int> parent =
          links.isRoot() ? std::vector<int>{} : std::vector<int>{links.parent};
      const Range half = treeAllReduceHalf(count, tree, 4);
      for (int ch = 0; ch < nch; ++ch) {
        const Range slice = splitEven(half, nch, ch, 4);
        const TreePrograms programs = treeAllReducePrograms(prims, slice, chunk);
        // Up and down use the two directions of each link.
        const int channel = tree * nch + ch;
        addProgram(sim, rank, channel, programs.up, children, parent, tagByOutput);
        addProgram(sim, rank, channel, programs.down, parent, children, tagByOutput);
      }
    }
  }
}

class TreeSim : public ::testing::TestWithParam<int> {};

TEST_P(TreeSim, AllReduce) {
  const int n = GetParam();
  const std::size_t chunk = 8;
  for (std::size_t count : testCounts(n, 4 * chunk)) {
    for (int nch : {1, 2, 3}) {
      for (bool inPlace : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "n=" << n << " count=" << count << " nch=" << nch
                                          << " inPlace=" << inPlace);
        Sim sim(n);
        buildTreeAllReduce(sim, n, count, nch, chunk, inPlace);
        ASSERT_EQ(sim.run(), "");
        for (int r = 0; r < n; ++r) {
          for (std::size_t i = 0; i < count; ++i) {
            Value want = 0;
            for (int q = 0; q < n; ++q) want += inputValue(q, i);
            ASSERT_EQ(sim.rank(r).mem[sim.rank(r).outBase + i], want) << r << " " << i;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, TreeSim, ::testing::ValuesIn(kRankCounts), rankCountName);

}  // namespace
}  // namespace loom::algo::test
