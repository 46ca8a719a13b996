// The topology ring order (algorithms/ring_order.h) and the tree over nodes with chains inside
// (algorithms/hierarchical.h): every rank once, minimal crossings whatever the numbering,
// valid double binary trees.
#include "algorithms/ring_order.h"

#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <vector>

#include "algorithms/hierarchical.h"
#include "algorithms/ring.h"

namespace loom::algo {
namespace {

// Ranks numbered interleaved over `nodes` hosts: rank r on host r % nodes.
std::vector<int> interleaved(int nodes, int perNode) {
  std::vector<std::uint64_t> host;
  for (int r = 0; r < nodes * perNode; ++r) host.push_back(1000 + r % nodes);
  return nodeIndices(host);
}

TEST(RingOrder, InterleavedTwoHostsCrossTwice) {
  const std::vector<int> nodeOf = interleaved(2, 3);
  const std::vector<int> order = topoRingOrder(nodeOf);
  EXPECT_EQ(order, (std::vector<int>{0, 2, 4, 1, 3, 5}));
  EXPECT_EQ(ringCrossings(order, nodeOf), 2);
  // Rank order would cross on every hop.
  EXPECT_EQ(ringCrossings({0, 1, 2, 3, 4, 5}, nodeOf), 6);
}

TEST(RingOrder, EveryRankOnceAndOneCrossingPerHost) {
  for (int nodes : {1, 2, 3, 5, 8}) {
    for (int perNode : {1, 2, 3, 4}) {
      for (bool inter : {true, false}) {
        std::vector<std::uint64_t> host;
        for (int r = 0; r < nodes * perNode; ++r) host.push_back(inter ? r % nodes : r / perNode);
        const std::vector<int> nodeOf = nodeIndices(host);
        const std::vector<int> order = topoRingOrder(nodeOf);
        ASSERT_TRUE(isRingOrder(order.data(), static_cast<int>(order.size())));
        EXPECT_EQ(ringCrossings(order, nodeOf), nodes == 1 ? 0 : nodes)
            << nodes << " nodes x " << perNode;
        EXPECT_EQ(order[0], 0) << "the ring starts at rank 0's node";
      }
    }
  }
}

TEST(RingOrder, NumaDomainsContiguousInsideANode) {
  // One node, ranks alternating between two NUMA domains.
  const std::vector<int> nodeOf(6, 0);
  const std::vector<int> numa{0, 1, 0, 1, 0, 1};
  const std::vector<int> order = topoRingOrder(nodeOf, numa);
  EXPECT_EQ(order, (std::vector<int>{0, 2, 4, 1, 3, 5}));
  EXPECT_EQ(ringCrossings(order, numa), 2);
}

TEST(RingOrder, NodesNumberedByLowestRank) {
  EXPECT_EQ(nodeIndices({9, 4, 9, 2, 4}), (std::vector<int>{0, 1, 0, 2, 1}));
  EXPECT_EQ(nodeCount({0, 1, 0, 2, 1}), 3);
}

// Checks that `links(r)` for every rank forms one tree over all ranks: a single root, every
// parent lists the child, at most 2 children, every rank reached once from the root.
void expectTree(int n, const std::function<TreeLinks(int)>& links) {
  int root = -1;
  for (int r = 0; r < n; ++r) {
    const TreeLinks l = links(r);
    if (l.isRoot()) {
      EXPECT_EQ(root, -1) << "two roots";
      root = r;
    } else {
      const TreeLinks p = links(l.parent);
      EXPECT_TRUE(p.child[0] == r || p.child[1] == r)
          << "rank " << l.parent << " does not list child " << r;
    }
    for (int c : l.child) {
      if (c >= 0) EXPECT_EQ(links(c).parent, r);
    }
  }
  ASSERT_GE(root, 0);
  std::set<int> seen;
  std::vector<int> todo{root};
  while (!todo.empty()) {
    const int r = todo.back();
    todo.pop_back();
    EXPECT_TRUE(seen.insert(r).second) << "rank " << r << " reached twice";
    for (int c : links(r).child)
      if (c >= 0) todo.push_back(c);
  }
  EXPECT_EQ(static_cast<int>(seen.size()), n);
}

TEST(NodeTree, TwoTreesOverAllRanks) {
  for (int nodes : {1, 2, 3, 4, 5, 7, 8, 13}) {
    for (int perNode : {1, 2, 4}) {
      const std::vector<int> nodeOf = interleaved(nodes, perNode);
      const std::vector<int> order = topoRingOrder(nodeOf);
      const auto byNode = ranksByNode(order, nodeOf);
      for (int t = 0; t < 2; ++t) {
        SCOPED_TRACE(testing::Message() << nodes << " nodes x " << perNode << " tree " << t);
        expectTree(nodes * perNode, [&](int r) { return nodeTreeLinks(byNode, nodeOf, t, r); });
      }
    }
  }
}

TEST(NodeTree, OnlyChainEndsCrossNodesAndNodesInteriorInOneTree) {
  for (int nodes : {2, 4, 6, 9}) {
    const int perNode = 3;
    const std::vector<int> nodeOf = interleaved(nodes, perNode);
    const auto byNode = ranksByNode(topoRingOrder(nodeOf), nodeOf);
    std::vector<int> interiorTrees(static_cast<std::size_t>(nodes), 0);
    for (int t = 0; t < 2; ++t) {
      int crossing = 0;
      for (int r = 0; r < nodes * perNode; ++r) {
        const TreeLinks l = nodeTreeLinks(byNode, nodeOf, t, r);
        if (l.parent >= 0 && nodeOf[l.parent] != nodeOf[r]) ++crossing;
      }
      EXPECT_EQ(crossing, nodes - 1) << "one network edge per non-root node";
      for (int k = 0; k < nodes; ++k) interiorTrees[k] += dtree(nodes, t, k).isLeaf() ? 0 : 1;
    }
    // NCCL's double binary tree over nodes (odd counts: node 0 is the one exception).
    for (int k = nodes % 2 == 1 ? 1 : 0; k < nodes; ++k) EXPECT_LE(interiorTrees[k], 1) << k;
  }
}

}  // namespace
}  // namespace loom::algo
