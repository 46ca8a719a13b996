// Ring arithmetic and the ring schedules of AllReduce, AllGather and ReduceScatter.
//
// How it works: the ranks sit on a ring given as a permutation, order[i] = the rank at position
// i (the topology code reorders it so the ring crosses slow links as few times as possible).
// Data always flows from a rank to the next one on the ring, so each rank needs exactly two
// connections: receive from prev, send to next. A collective is moved per channel (its own
// ring connections and its own slice, see slicing.h), and per channel in loops; within a loop
// every rank walks the same step list below, one primitive per step, each step on one chunk:
//
//   for each loop of the channel's slice:
//     for step in [0, stepCount):  s = xxxStep(...); run s.prim on chunk s.chunk of this loop
//
// Every step except a rank's first receives from prev, and every step except its last sends to
// next; a chunk sent at step k is the chunk the next rank receives at step k + 1, so the walk
// needs no other synchronisation than the connections' own flow control.
//
// AllReduce = ReduceScatter then AllGather, NCCL's runRing: 2n-1 steps moving 2(n-1) chunks.
//   step 0            send                 chunk pos-1   (start the partial sum of pos-1)
//   steps 1..n-2      recvReduceSend       chunk pos-1-s (add own input, pass it on)
//   step n-1          recvReduceCopySend   chunk pos     (last addition: the result; keep it and
//                                                         start circulating it)
//   steps n..2n-3     recvCopySend         chunk pos-1-s (keep a finished chunk, pass it on)
//   step 2n-2         recv                 chunk pos+1   (the last finished chunk; no forward)
// i.e. step s always touches chunk (pos - 1 - s) mod n. AllReduce chunks are numbered by ring
// position, not rank: which rank finishes which chunk does not matter, only that it is fixed.
// A lone rank (n == 1) has the single step copy (input -> output; none when in place).
#pragma once

#include <cstddef>
#include <vector>

#include "algorithms/primitives.h"
#include "algorithms/slicing.h"

namespace loom::algo {

// ---- Ring positions -----------------------------------------------------------------------

// The position of `rank` in `order`, or -1 when it is absent. Linear: call it once per
// communicator and keep the answer, not per step.
LOOM_ALGO_HD constexpr int ringPosition(const int* order, int nranks, int rank) {
  for (int i = 0; i < nranks; ++i) {
    if (order[i] == rank) return i;
  }
  return -1;
}

LOOM_ALGO_HD constexpr int ringRankAt(const int* order, int nranks, int pos) {
  return order[modRank(pos, nranks)];
}
LOOM_ALGO_HD constexpr int ringNext(const int* order, int nranks, int rank) {
  return ringRankAt(order, nranks, ringPosition(order, nranks, rank) + 1);
}
LOOM_ALGO_HD constexpr int ringPrev(const int* order, int nranks, int rank) {
  return ringRankAt(order, nranks, ringPosition(order, nranks, rank) - 1);
}

// True when `order` holds every rank in [0, nranks) exactly once. Host-side validation of a
// ring built by the topology code or loaded from a file.
inline bool isRingOrder(const int* order, int nranks) {
  if (nranks < 1) return false;
  std::vector<bool> seen(static_cast<std::size_t>(nranks), false);
  for (int i = 0; i < nranks; ++i) {
    const int r = order[i];
    if (r < 0 || r >= nranks || seen[static_cast<std::size_t>(r)]) return false;
    seen[static_cast<std::size_t>(r)] = true;
  }
  return true;
}

// One step of a ring schedule: the primitive and the chunk of the current loop it acts on.
struct RingStep {
  Prim prim = Prim::kNone;
  int chunk = 0;
};

// ---- AllReduce ----------------------------------------------------------------------------

LOOM_ALGO_HD constexpr int ringAllReduceStepCount(int nranks) {
  return nranks == 1 ? 1 : 2 * nranks - 1;
}

// Step `step` of the rank at ring position `pos`. The chunk is an index in [0, nranks) into the
// current loop: its elements are ringChunk(slice, nranks, chunk, align, loop, s.chunk), the same
// range in the input and the output buffer.
LOOM_ALGO_HD constexpr RingStep ringAllReduceStep(int nranks, int pos, int step,
                                                  bool inPlace = false) {
  if (nranks == 1) return RingStep{inPlace ? Prim::kNone : Prim::kCopy, 0};
  const int chunk = modRank(pos - 1 - step, nranks);
  // Reduce-scatter phase: start a partial sum, then add own input to the sums passing by.
  if (step == 0) return RingStep{Prim::kSend, chunk};
  if (step < nranks - 1) return RingStep{Prim::kRecvReduceSend, chunk};
  // The last addition completes the chunk: keep the result and start circulating it.
  if (step == nranks - 1) return RingStep{Prim::kRecvReduceCopySend, chunk};
  // All-gather phase: keep each finished chunk and pass it on; the last one goes no further.
  return RingStep{step == 2 * nranks - 2 ? Prim::kRecv : Prim::kRecvCopySend, chunk};
}

// ---- AllGather ----------------------------------------------------------------------------
// NCCL's layout: rank r contributes `count` elements; the output holds nranks blocks of `count`,
// block r from rank r. In place when sendbuff == recvbuff + rank * count (elements).
// Each channel slices [0, count) (channelSlice) and walks its slice with pipelineChunk; a loop
// moves that piece of every block. Step chunks are ranks (= block indices):
//   step 0        send own block (copySend when out of place: it also lands in the output)
//   steps 1..n-2  recvCopySend the block of the rank s positions upstream
//   step n-1      recv the block of the rank n-1 positions upstream (= next), no forward

LOOM_ALGO_HD constexpr std::size_t allGatherInPlaceOffset(int rank, std::size_t count) {
  return static_cast<std::size_t>(rank) * count;
}

LOOM_ALGO_HD constexpr int ringAllGatherStepCount(int nranks) { return nranks; }

LOOM_ALGO_HD constexpr RingStep ringAllGatherStep(const int* order, int nranks, int pos, int step,
                                                  bool inPlace) {
  const int block = ringRankAt(order, nranks, pos - step);
  if (nranks == 1) return RingStep{inPlace ? Prim::kNone : Prim::kCopy, block};
  if (step == 0) return RingStep{inPlace ? Prim::kSend : Prim::kCopySend, block};
  return RingStep{step == nranks - 1 ? Prim::kRecv : Prim::kRecvCopySend, block};
}

// ---- ReduceScatter ------------------------------------------------------------------------
// NCCL's layout: the input holds nranks blocks of `recvcount`, block r destined for rank r; the
// output is one block. In place when recvbuff == sendbuff + rank * recvcount (elements).
// Slicing as for AllGather, over [0, recvcount). Step chunks are ranks (= block indices); the
// partial sum of block b starts at the rank after b and ends, complete, at b itself:
//   step 0        send input block of the rank at pos-1
//   steps 1..n-2  recvReduceSend block of the rank at pos-1-s
//   step n-1      recvReduceCopy own block into the output

LOOM_ALGO_HD constexpr std::size_t reduceScatterInPlaceOffset(int rank, std::size_t recvcount) {
  return static_cast<std::size_t>(rank) * recvcount;
}

LOOM_ALGO_HD constexpr int ringReduceScatterStepCount(int nranks) { return nranks; }

LOOM_ALGO_HD constexpr RingStep ringReduceScatterStep(const int* order, int nranks, int pos,
                                                      int step, bool inPlace) {
  const int block = ringRankAt(order, nranks, pos - 1 - step);
  if (nranks == 1) return RingStep{inPlace ? Prim::kNone : Prim::kCopy, block};
  if (step == 0) return RingStep{Prim::kSend, block};
  return RingStep{step == nranks - 1 ? Prim::kRecvReduceCopy : Prim::kRecvReduceSend, block};
}

// Where a piece of block `block` lives for AllGather / ReduceScatter. `piece` is a range of
// [0, blockCount) from channelSlice + pipelineChunk. Only one side is meaningful per step: the
// input for primitives that read input, the output for those that write it (primitives.h).
struct BlockPlace {
  std::size_t in = 0;   // element offset in the send buffer
  std::size_t out = 0;  // element offset in the receive buffer
  std::size_t count = 0;
};

LOOM_ALGO_HD constexpr BlockPlace allGatherPlace(std::size_t count, int block, Range piece) {
  return BlockPlace{piece.offset, static_cast<std::size_t>(block) * count + piece.offset,
                    piece.count};
}
LOOM_ALGO_HD constexpr BlockPlace reduceScatterPlace(std::size_t recvcount, int block,
                                                     Range piece) {
  return BlockPlace{static_cast<std::size_t>(block) * recvcount + piece.offset, piece.offset,
                    piece.count};
}

}  // namespace loom::algo
