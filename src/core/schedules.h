// Step sources for PrimTask: the algorithms of algorithms/ walked loop by loop for one rank
// and one channel, yielding only non-empty steps (slicing.h: an empty chunk is skipped by
// every rank alike, so no flow-control step is spent on it).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "algorithms/chain.h"
#include "algorithms/slicing.h"
#include "src/core/prim_task.h"

namespace loom {

struct RingPlace {
  const int* order;  // ring order (order[i] = rank at position i), outlives the source
  int nranks;
  int rank;
  int pos;  // ring position of `rank`
};

// `chunk` is the elements one slot holds (a multiple of `align`).
std::unique_ptr<StepSource> ringAllReduceSteps(const RingPlace& ring, algo::Range slice,
                                               size_t chunk, size_t align);
std::unique_ptr<StepSource> ringAllGatherSteps(const RingPlace& ring, size_t count,
                                               algo::Range slice, size_t chunk, bool inPlace);
std::unique_ptr<StepSource> ringReduceScatterSteps(const RingPlace& ring, size_t recvcount,
                                                   algo::Range slice, size_t chunk);
std::unique_ptr<StepSource> chainSteps(algo::ChainColl coll, const RingPlace& ring, int root,
                                       algo::Range slice, size_t chunk, bool inPlace);
// One primitive over [offset, offset + count) of input and output, in pieces of `chunk`
// (point-to-point send/recv, AlltoAll blocks, a lone rank's copy). `inOffset` and
// `outOffset` shift the two buffers independently.
std::unique_ptr<StepSource> pipeSteps(algo::Prim prim, size_t inOffset, size_t outOffset,
                                      size_t count, size_t chunk, bool final);

}  // namespace loom
