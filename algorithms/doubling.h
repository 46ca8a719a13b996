// Recursive doubling AllReduce (Thakur, Rabenseifner and Gropp, "Optimization of Collective
// Communication Operations in MPICH", 2005): the small-message AllReduce of MPI libraries.
//
// How it works: with a power of two p of ranks, in round k (0 <= k < log2 p) every rank swaps
// its whole current vector with rank ^ (1 << k) and folds the two, so after log2 p rounds every
// rank holds the reduction of all. Each rank sends and receives log2 p times the data in log2 p
// dependent steps, one message each way per step: fewer messages than the exchange AllReduce
// (n - 1 each way in one step) and fewer steps than the ring (2(n - 1)). Where a message costs
// system calls on both ends (TCP), that is what wins for small calls.
//
// Other rank counts: p is the largest power of two <= n; each of the n - p "extra" ranks
// (p <= r < n) first sends its input to its host r - p, which folds it in, and receives the
// result from its host at the end (two more steps on those pairs).
//
// The same bits everywhere: both ranks of a pair fold the same two vectors, the lower rank's
// first, so they get the same result even where the op is not symmetric (max of +0 and -0, NaN
// payloads); an extra rank gets a copy of its host's.
#pragma once

#include "algorithms/primitives.h"

namespace loom::algo {

struct DoublingPlace {
  int pow2 = 1;        // the largest power of two <= nranks
  int rounds = 0;      // log2(pow2)
  bool extra = false;  // rank >= pow2: sends its input to its host, receives the result
  int extraPeer = -1;  // an extra rank's host, a host's extra rank; -1: no such pair
};

LOOM_ALGO_HD constexpr DoublingPlace doublingPlace(int nranks, int rank) {
  DoublingPlace d;
  while (d.pow2 * 2 <= nranks) {
    d.pow2 *= 2;
    ++d.rounds;
  }
  d.extra = rank >= d.pow2;
  if (d.extra) {
    d.extraPeer = rank - d.pow2;
  } else if (rank + d.pow2 < nranks) {
    d.extraPeer = rank + d.pow2;
  }
  return d;
}

// The rank a non-extra rank swaps with in round `round`.
LOOM_ALGO_HD constexpr int doublingPartner(int rank, int round) { return rank ^ (1 << round); }

}  // namespace loom::algo
