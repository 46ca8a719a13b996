// Pipelined chain Broadcast and Reduce, rooted at any rank, laid over a ring order.
//
// How it works: the ranks form a chain that follows the ring (so it reuses the ring's
// connections and its topology-aware order); data always flows head -> tail, from each rank
// to the next one on the ring. The data is cut into pieces (channelSlice + pipelineChunk, see
// slicing.h) and every rank runs one primitive per piece, so with k pieces in flight a chain of
// n ranks finishes in about (n - 1 + k) piece times instead of (n - 1) * k.
//   Broadcast: the chain starts at the root and ends at the rank before it (prev(root)).
//     head (root)  send (in place) / copySend (out of place: the root's output gets it too)
//     middle       recvCopySend
//     tail         recv
//   Reduce: the chain starts at next(root) and ends at the root, so the sum is complete
//   exactly where it is wanted and no one forwards the result.
//     head         send its input
//     middle       recvReduceSend (partial sums are never stored)
//     tail (root)  recvReduceCopy into the root's output
// Only the root's output is written by Reduce; other ranks' receive buffers are untouched.
// A lone rank copies input to output (nothing in place).
#pragma once

#include "algorithms/primitives.h"
#include "algorithms/ring.h"

namespace loom::algo {

enum class ChainColl : std::uint8_t { kBroadcast, kReduce };

// The chain position (0 = head, nranks - 1 = tail) of the rank at ring position `ringPos`.
LOOM_ALGO_HD constexpr int chainIndex(ChainColl coll, int nranks, int rootRingPos, int ringPos) {
  const int head = coll == ChainColl::kBroadcast ? rootRingPos : rootRingPos + 1;
  return modRank(ringPos - head, nranks);
}

// The rank at chain position `index` (0 = head).
LOOM_ALGO_HD constexpr int chainRankAt(ChainColl coll, const int* order, int nranks, int root,
                                       int index) {
  const int rootPos = ringPosition(order, nranks, root);
  const int head = coll == ChainColl::kBroadcast ? rootPos : rootPos + 1;
  return ringRankAt(order, nranks, head + index);
}

// A rank's neighbours on the chain, in the direction data flows. For Broadcast the parent (the
// side nearer the root) is recvFrom; for Reduce it is sendTo.
struct ChainPeers {
  int recvFrom = -1;  // -1 at the head
  int sendTo = -1;    // -1 at the tail
};

LOOM_ALGO_HD constexpr ChainPeers chainPeers(ChainColl coll, const int* order, int nranks, int root,
                                             int rank) {
  const int pos = ringPosition(order, nranks, rank);
  const int index = chainIndex(coll, nranks, ringPosition(order, nranks, root), pos);
  ChainPeers peers;
  if (index > 0) peers.recvFrom = ringRankAt(order, nranks, pos - 1);
  if (index < nranks - 1) peers.sendTo = ringRankAt(order, nranks, pos + 1);
  return peers;
}

// The primitive `rank` runs on every piece. Every piece of the range is handled the same way,
// input and output at the same element offsets.
LOOM_ALGO_HD constexpr Prim chainPrim(ChainColl coll, const int* order, int nranks, int root,
                                      int rank, bool inPlace) {
  if (nranks == 1) return inPlace ? Prim::kNone : Prim::kCopy;
  const int index = chainIndex(coll, nranks, ringPosition(order, nranks, root),
                               ringPosition(order, nranks, rank));
  const bool head = index == 0;
  const bool tail = index == nranks - 1;
  if (coll == ChainColl::kBroadcast) {
    // The root's data enters the chain (and its own output when that is a different buffer).
    if (head) return inPlace ? Prim::kSend : Prim::kCopySend;
    return tail ? Prim::kRecv : Prim::kRecvCopySend;
  }
  // Reduce: partial sums grow along the chain; the root adds the last contribution and keeps it.
  if (head) return Prim::kSend;
  return tail ? Prim::kRecvReduceCopy : Prim::kRecvReduceSend;
}

}  // namespace loom::algo
