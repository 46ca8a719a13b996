// NCCL's double binary tree, and the tree AllReduce schedule over it.
//
// How it works: a binary tree gives log(n) latency, but a single tree wastes half the
// bandwidth: the leaves (half the ranks) only ever send up and receive down once. Two trees
// fix that when every rank that is interior (has children) in one tree is a leaf in the other;
// each tree then carries half of the data, and every rank moves about the same number of bytes.
//
// Tree 0 (btree): rooted at 0, built from the binary representation of the index. For index
// i > 0 let b be its lowest set bit: i's children are i - b/2 and the first of i + b/2,
// i + b/4, ..., i + 1 that exists; its parent is (i ^ b) | 2b, or i ^ b when that is out of
// range. Index 0 has the single child P/2, P the smallest power of two >= n. Odd indices are
// exactly the leaves; even ones are interior (0 as a one-child root):
//     0---------------8
//              ______/ \______
//             4               12
//           /   \            /
//         2       6       10
//        / \     / \     /  \    (n = 13)
//       1   3   5   7   9   11
// Tree 1: for even n, tree 0 mirrored (i -> n-1-i), which swaps odd and even, so the roles
// swap exactly. For odd n a mirror would keep the parity, so tree 0 is shifted by one instead
// (i -> i+1 mod n): every odd rank becomes interior and every even rank >= 2 a leaf; rank 0
// lands on the index n-1 of tree 0, an interior node with one child. So for odd n >= 3 rank 0
// is a one-child node in both trees (the root of tree 0, with one child, and an inner node of
// tree 1): the only exception to "interior in at most one tree"; it still has at most two
// children in total, the bound every rank meets.
//
// Indices may be ranks, or node indices when the trees span nodes (chains inside a node); the
// caller maps them. Children are returned packed: child[0] is filled first.
#pragma once

#include <cstddef>

#include "algorithms/primitives.h"
#include "algorithms/slicing.h"

namespace loom::algo {

struct TreeLinks {
  int parent = -1;          // -1 at the root
  int child[2] = {-1, -1};  // packed; -1 where absent
  LOOM_ALGO_HD constexpr int childCount() const { return (child[0] >= 0) + (child[1] >= 0); }
  LOOM_ALGO_HD constexpr bool isRoot() const { return parent < 0; }
  LOOM_ALGO_HD constexpr bool isLeaf() const { return child[0] < 0; }
};

// Tree 0: the binary tree over [0, n) rooted at 0 (see the comment at the top).
LOOM_ALGO_HD constexpr TreeLinks btree(int n, int index) {
  TreeLinks links;
  int bit = 1;  // lowest set bit of index; for index 0 the smallest power of two >= n
  while (bit < n && (bit & index) == 0) bit <<= 1;
  if (index == 0) {
    if (n > 1) links.child[0] = bit >> 1;
    return links;
  }
  int up = (index ^ bit) | (bit << 1);
  if (up >= n) up = index ^ bit;  // the right-hand spine: hang on the grandparent level
  links.parent = up;
  int k = 0;
  const int low = bit >> 1;
  if (low > 0) links.child[k++] = index - low;  // always in range: it is below index
  // The right child is the largest i + low/2^j still in range: n need not be a power of two.
  for (int b = low; b > 0; b >>= 1) {
    if (index + b < n) {
      links.child[k] = index + b;
      break;
    }
  }
  return links;
}

LOOM_ALGO_HD constexpr int dtreeRoot(int n, int tree) {
  if (tree == 0) return 0;
  return (n % 2 == 1 && n > 1) ? 1 : n - 1;
}

// Links of `index` in tree `tree` (0 or 1) of the double binary tree over n indices.
LOOM_ALGO_HD constexpr TreeLinks dtree(int n, int tree, int index) {
  if (tree == 0) return btree(n, index);
  // Tree 1 is tree 0 relabelled: `index` plays the part of tree 0's `source`, and to() maps
  // tree 0's indices to the indices that play them in tree 1.
  const bool shift = n % 2 == 1;
  const int source = shift ? modRank(index - 1, n) : n - 1 - index;
  const TreeLinks t0 = btree(n, source);
  TreeLinks links;
  auto to = [n, shift](int i) { return i < 0 ? -1 : (shift ? (i + 1) % n : n - 1 - i); };
  links.parent = to(t0.parent);
  links.child[0] = to(t0.child[0]);
  links.child[1] = to(t0.child[1]);
  return links;
}

// ---- Tree AllReduce -----------------------------------------------------------------------
// Each tree reduces and broadcasts one half of the data (treeAllReduceHalf, cut on `align`
// like channels). Within a half, each channel's slice (splitEven) is walked in pipelineChunk
// pieces, twice:
//   up phase, every piece: receive from every child, add own input, pass the sum to the parent;
//     leaf send; interior recvReduceSend; root recvReduceCopy (the result lands in its output)
//   down phase, every piece: the result flows back from the root to every leaf;
//     root sendFromOutput; interior recvCopySend; leaf recv
// Pieces pipeline within each phase, and the down phase of a piece cannot overtake its up
// phase because the root only sends what it has finished. A lone rank: up copy, down none.

LOOM_ALGO_HD constexpr Range treeAllReduceHalf(std::size_t count, int tree, std::size_t align = 1) {
  return splitEven(Range{0, count}, 2, tree, align);
}

struct TreePrims {
  Prim up = Prim::kNone;    // recv from children (all of them), send to parent
  Prim down = Prim::kNone;  // recv from parent, send to children (all of them)
};

LOOM_ALGO_HD constexpr TreePrims treeAllReducePrims(const TreeLinks& links, bool inPlace) {
  if (links.isRoot() && links.isLeaf()) return TreePrims{inPlace ? Prim::kNone : Prim::kCopy};
  if (links.isRoot()) return TreePrims{Prim::kRecvReduceCopy, Prim::kSendFromOutput};
  if (links.isLeaf()) return TreePrims{Prim::kSend, Prim::kRecv};
  return TreePrims{Prim::kRecvReduceSend, Prim::kRecvCopySend};
}

}  // namespace loom::algo
