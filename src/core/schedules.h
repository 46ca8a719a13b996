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

// Hierarchical AllReduce (algorithms/hierarchical.h): phase 1 (gather = false: reduce-scatter
// inside the node) or phase 3 (gather = true: all-gather inside the node) for the rank at
// local position `pos` of `localRanks`, on channel `channel` of `nchannels`. Never final: the
// op's post-op belongs to phase 2.
std::unique_ptr<StepSource> hierLocalSteps(bool gather, int localRanks, int pos, size_t count,
                                           int nchannels, int channel, size_t chunk, size_t align);

// The number of steps `source` yields (it is consumed).
size_t countSteps(StepSource& source);

// `inner`, after `gateSteps` - 1 empty steps. A task gated (PrimTask's gate) on a task of
// `gateSteps` steps then starts its real work only once the gate task has finished all of
// them: a full dependency between phases that use different connections. Over-counting
// `gateSteps` is safe (a finished gate releases every step).
std::unique_ptr<StepSource> afterSteps(size_t gateSteps, std::unique_ptr<StepSource> inner);

// A step source that owns the CollOp its task runs on: hierarchical phases run on variants of
// the caller's op (input read from the output buffer, no second pre-op). The PrimTask is made
// with op() and takes ownership of this source, which keeps the op alive as long as the task.
class OpOwningSteps : public StepSource {
 public:
  OpOwningSteps(const CollOp& op, std::unique_ptr<StepSource> inner)
      : op_(op), inner_(std::move(inner)) {}
  const CollOp& op() const { return op_; }
  bool next(PrimStep& step) override { return inner_->next(step); }

 private:
  CollOp op_;
  std::unique_ptr<StepSource> inner_;
};

}  // namespace loom
