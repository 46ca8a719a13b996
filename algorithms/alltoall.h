// Pairwise exchange order for AllToAll and grouped Send/Recv, and NCCL's AllToAll layout.
//
// How it works: in n steps every rank exchanges with every peer once. At step s rank r sends to
// (r + s) mod n and receives from (r - s) mod n. Step 0 is the rank with itself (a local copy).
// At every step the "send to" map is a permutation, so every rank sends exactly one block and
// receives exactly one block per step: no rank is the target of two senders at once (no
// incast), and the peer r sends to at step s is the peer that receives from r at the same step,
// so a blocking executor that posts the send and the receive of a step together cannot
// deadlock. Grouped Send/Recv (loomGroupStart/End) uses the same order to decide which pending
// operations to progress first.
//
// Layout (NCCL's AllToAll, no counts per peer): the send buffer holds n blocks of `count`
// elements, block p goes to rank p; the receive buffer holds n blocks, block p came from rank p.
#pragma once

#include <cstddef>

#include "algorithms/primitives.h"

namespace loom::algo {

LOOM_ALGO_HD constexpr int pairwiseStepCount(int nranks) { return nranks; }

// The peer `rank` sends to at step `step`.
LOOM_ALGO_HD constexpr int pairwiseSendPeer(int nranks, int rank, int step) {
  return modRank(rank + step, nranks);
}
// The peer `rank` receives from at step `step`.
LOOM_ALGO_HD constexpr int pairwiseRecvPeer(int nranks, int rank, int step) {
  return modRank(rank - step, nranks);
}

// One AllToAll step of one rank: send block `sendPeer` of the send buffer to sendPeer and
// receive from recvPeer into block `recvPeer` of the receive buffer. Step 0 has sendPeer ==
// recvPeer == rank: copy locally, no transport. (sendPeer == recvPeer alone does not mean local:
// for n == 2 both peers of step 1 are the other rank.)
struct AllToAllStep {
  int sendPeer = 0;
  int recvPeer = 0;
  std::size_t sendOffset = 0;  // elements into the send buffer
  std::size_t recvOffset = 0;  // elements into the receive buffer
  std::size_t count = 0;       // elements each way
  bool local = false;          // step 0, the rank with itself
};

// Block `peer` of an AllToAll buffer: its element offset.
LOOM_ALGO_HD constexpr std::size_t allToAllBlockOffset(int peer, std::size_t count) {
  return static_cast<std::size_t>(peer) * count;
}

LOOM_ALGO_HD constexpr AllToAllStep allToAllStep(int nranks, int rank, int step,
                                                 std::size_t count) {
  AllToAllStep s;
  s.sendPeer = pairwiseSendPeer(nranks, rank, step);
  s.recvPeer = pairwiseRecvPeer(nranks, rank, step);
  s.sendOffset = allToAllBlockOffset(s.sendPeer, count);
  s.recvOffset = allToAllBlockOffset(s.recvPeer, count);
  s.count = count;
  s.local = step == 0;
  return s;
}

}  // namespace loom::algo
