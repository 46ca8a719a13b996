// Rank arithmetic for several hosts: the double binary tree over nodes with a chain inside each
// node (NCCL's tree), and the three phases of hierarchical AllReduce.
//
// ---- Tree over nodes, chains inside -------------------------------------------------------
// A binary tree over ranks would cross the network on most of its edges. Instead the double
// binary tree (tree.h) is built over the N nodes, and the ranks of each node form a chain in
// ring order: only the tree's edges cross the network, and each node has the minimum number
// of ranks talking to other nodes. The chain's head talks to the parent node, its tail to the
// children nodes, so no rank has more than two children (the executor's limit):
//   head    parent = tail of the parent node (none at the root node); child = next in chain
//   middle  parent = previous in chain;                               child = next in chain
//   tail    parent = previous in chain;  children = heads of the children nodes
// (a one-rank node is head and tail at once). Tree 1 runs each chain backwards, so the ranks
// that talk to other nodes differ between the two trees, like the two trees' interior nodes.
// The reduction flows up (children to parent) and the result down, as in tree.h. One node:
// the plain double binary tree over ranks, which has log2(n) hops where a chain has n.
//
// ---- Hierarchical AllReduce ---------------------------------------------------------------
// N nodes of L ranks each (every node the same L), local position p = place in the node's
// chain. The data is cut into L blocks (splitEven on `align`); channel ch moves its slice of
// every block (splitEven of the block):
//   1. reduce-scatter inside the node (ring over its L ranks, shared memory): block p of the
//      node's sum lands in the output of the rank at local position p;
//   2. AllReduce of block p across nodes, by the N ranks at local position p (a ring over one
//      rank per node, over the network): L rings in parallel, each on 1/L of the data;
//   3. all-gather inside the node: every rank gets every block.
// Per node the network carries 2(N-1)/N of the data instead of the flat ring's 2(nL-1)/(nL),
// and in 2(N-1) network steps instead of 2(NL-1).
// Phase 1 and 3 steps, for the rank at local position p, step s in [0, L), per pipeline piece:
//   reduce-scatter  block (p-1-s) mod L: s = 0 send input, then recvReduceSend, and at
//                   s = L-1 recvReduceCopy into the output (the block is complete)
//   all-gather      block (p-s) mod L: s = 0 send (from the output), then recvCopySend, and
//                   at s = L-1 recv
#pragma once

#include <cstddef>
#include <vector>

#include "algorithms/primitives.h"
#include "algorithms/slicing.h"
#include "algorithms/tree.h"

namespace loom::algo {

// Links of `rank` in tree `tree` (0 or 1). `nodes[k]` lists node k's ranks in ring order,
// `nodeOf[r]` is rank r's node and `nranks` the total.
inline TreeLinks nodeTreeLinks(const std::vector<std::vector<int>>& nodes,
                               const std::vector<int>& nodeOf, int tree, int rank) {
  const int nnodes = static_cast<int>(nodes.size());
  if (nnodes == 1) return dtree(static_cast<int>(nodeOf.size()), tree, rank);
  const int node = nodeOf[static_cast<std::size_t>(rank)];
  const std::vector<int>& chain = nodes[static_cast<std::size_t>(node)];
  const int len = static_cast<int>(chain.size());
  // Position in this tree's chain (tree 1 walks it backwards) and the chain's ends.
  auto at = [&](const std::vector<int>& c, int i) {
    return tree == 0 ? c[static_cast<std::size_t>(i)]
                     : c[c.size() - 1 - static_cast<std::size_t>(i)];
  };
  int pos = 0;
  while (at(chain, pos) != rank) ++pos;
  const TreeLinks nodeLinks = dtree(nnodes, tree, node);
  TreeLinks links;
  if (pos == 0) {
    if (nodeLinks.parent >= 0) {
      const std::vector<int>& up = nodes[static_cast<std::size_t>(nodeLinks.parent)];
      links.parent = at(up, static_cast<int>(up.size()) - 1);
    }
  } else {
    links.parent = at(chain, pos - 1);
  }
  if (pos < len - 1) {
    links.child[0] = at(chain, pos + 1);
  } else {
    int k = 0;
    for (int childNode : nodeLinks.child) {
      if (childNode >= 0) links.child[k++] = at(nodes[static_cast<std::size_t>(childNode)], 0);
    }
  }
  return links;
}

// Block `block` of L of a hierarchical AllReduce of `count` elements.
LOOM_ALGO_HD constexpr Range hierBlock(std::size_t count, int localRanks, int block,
                                       std::size_t align) {
  return splitEven(Range{0, count}, localRanks, block, align);
}

// Channel `channel`'s part of block `block`.
LOOM_ALGO_HD constexpr Range hierSlice(std::size_t count, int localRanks, int block, int nchannels,
                                       int channel, std::size_t align) {
  return splitEven(hierBlock(count, localRanks, block, align), nchannels, channel, align);
}

// Loops of phase 1 or 3 on one channel: every block is walked in pieces of `chunk`, and a loop
// takes one piece of each block (blocks differ in size by up to `align`).
LOOM_ALGO_HD constexpr std::size_t hierLocalLoopCount(std::size_t count, int localRanks,
                                                      int nchannels, int channel, std::size_t chunk,
                                                      std::size_t align) {
  std::size_t loops = 0;
  for (int b = 0; b < localRanks; ++b) {
    const std::size_t l =
        pipelineLoopCount(hierSlice(count, localRanks, b, nchannels, channel, align), chunk);
    loops = l > loops ? l : loops;
  }
  return loops;
}

struct HierStep {
  Prim prim = Prim::kNone;
  int block = 0;
};

// Phase 1 (reduce-scatter inside the node), step `step` of the rank at local position `pos`.
LOOM_ALGO_HD constexpr HierStep hierReduceScatterStep(int localRanks, int pos, int step) {
  const int block = modRank(pos - 1 - step, localRanks);
  if (step == 0) return HierStep{Prim::kSend, block};
  return HierStep{step == localRanks - 1 ? Prim::kRecvReduceCopy : Prim::kRecvReduceSend, block};
}

// Phase 3 (all-gather inside the node). Reads its own block from the output (the caller
// points the input at the output buffer).
LOOM_ALGO_HD constexpr HierStep hierAllGatherStep(int localRanks, int pos, int step) {
  const int block = modRank(pos - step, localRanks);
  if (step == 0) return HierStep{Prim::kSend, block};
  return HierStep{step == localRanks - 1 ? Prim::kRecv : Prim::kRecvCopySend, block};
}

}  // namespace loom::algo
