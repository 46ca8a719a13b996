#include "src/core/schedules.h"

#include "algorithms/hierarchical.h"
#include "algorithms/ring.h"

namespace loom {
namespace {

using algo::Prim;
using algo::Range;

// Primitives that produce final values (the post-op, e.g. SumPostDiv, applies to them).
bool producesFinal(Prim p) {
  return p == Prim::kRecvReduceCopySend || p == Prim::kRecvReduceCopy || p == Prim::kCopy;
}

// A lone rank still runs the op's pre/post-ops (avg, PreMulSum), even in place.
Prim loneRank(Prim p) { return p == Prim::kNone ? Prim::kCopy : p; }

class RingAllReduce : public StepSource {
 public:
  RingAllReduce(const RingPlace& ring, Range slice, size_t chunk, size_t align)
      : ring_(ring),
        slice_(slice),
        chunk_(chunk),
        align_(align),
        loops_(algo::ringLoopCount(slice, ring.nranks, chunk)),
        steps_(algo::ringAllReduceStepCount(ring.nranks)) {}
  bool next(PrimStep& out) override {
    while (loop_ < loops_) {
      algo::RingStep rs = algo::ringAllReduceStep(ring_.nranks, ring_.pos, step_);
      Range r = algo::ringChunk(slice_, ring_.nranks, chunk_, align_, loop_, rs.chunk);
      if (++step_ == steps_) {
        step_ = 0;
        ++loop_;
      }
      if (r.count == 0) continue;
      Prim p = loneRank(rs.prim);
      out = PrimStep{p, r.offset, r.offset, r.count, producesFinal(p)};
      return true;
    }
    return false;
  }

 private:
  RingPlace ring_;
  Range slice_;
  size_t chunk_, align_, loops_;
  int steps_;
  size_t loop_ = 0;
  int step_ = 0;
};

// AllGather and ReduceScatter: per loop one piece of every block, one step per block.
class RingBlocks : public StepSource {
 public:
  RingBlocks(bool gather, const RingPlace& ring, size_t blockCount, Range slice, size_t chunk,
             bool inPlace)
      : gather_(gather),
        ring_(ring),
        blockCount_(blockCount),
        slice_(slice),
        chunk_(chunk),
        inPlace_(inPlace),
        loops_(algo::pipelineLoopCount(slice, chunk)) {}
  bool next(PrimStep& out) override {
    if (loop_ >= loops_) return false;
    Range piece = algo::pipelineChunk(slice_, chunk_, loop_);
    algo::RingStep rs =
        gather_
            ? algo::ringAllGatherStep(ring_.order, ring_.nranks, ring_.pos, step_, inPlace_)
            : algo::ringReduceScatterStep(ring_.order, ring_.nranks, ring_.pos, step_, inPlace_);
    algo::BlockPlace place = gather_ ? algo::allGatherPlace(blockCount_, rs.chunk, piece)
                                     : algo::reduceScatterPlace(blockCount_, rs.chunk, piece);
    if (++step_ == ring_.nranks) {
      step_ = 0;
      ++loop_;
    }
    Prim p = loneRank(rs.prim);
    out = PrimStep{p, place.in, place.out, place.count, !gather_ && producesFinal(p)};
    return true;
  }

 private:
  bool gather_;
  RingPlace ring_;
  size_t blockCount_;
  Range slice_;
  size_t chunk_;
  bool inPlace_;
  size_t loops_;
  size_t loop_ = 0;
  int step_ = 0;
};

class Pipe : public StepSource {
 public:
  Pipe(Prim prim, size_t inOffset, size_t outOffset, size_t count, size_t chunk, bool final)
      : prim_(prim), in_(inOffset), out_(outOffset), count_(count), chunk_(chunk), final_(final) {}
  bool next(PrimStep& out) override {
    if (done_ >= count_) return false;
    size_t n = count_ - done_ < chunk_ ? count_ - done_ : chunk_;
    out = PrimStep{prim_, in_ + done_, out_ + done_, n, final_};
    done_ += n;
    return true;
  }

 private:
  Prim prim_;
  size_t in_, out_, count_, chunk_;
  bool final_;
  size_t done_ = 0;
};

// Phase 1 or 3 of hierarchical AllReduce: per loop one piece of every block, one step per
// block; a block whose slice is shorter than others skips its empty pieces (every rank alike).
class HierLocal : public StepSource {
 public:
  HierLocal(bool gather, int localRanks, int pos, size_t count, int nchannels, int channel,
            size_t chunk, size_t align)
      : gather_(gather),
        localRanks_(localRanks),
        pos_(pos),
        count_(count),
        nchannels_(nchannels),
        channel_(channel),
        chunk_(chunk),
        align_(align),
        loops_(algo::hierLocalLoopCount(count, localRanks, nchannels, channel, chunk, align)) {}
  bool next(PrimStep& out) override {
    while (loop_ < loops_) {
      const algo::HierStep hs = gather_ ? algo::hierAllGatherStep(localRanks_, pos_, step_)
                                        : algo::hierReduceScatterStep(localRanks_, pos_, step_);
      const Range slice =
          algo::hierSlice(count_, localRanks_, hs.block, nchannels_, channel_, align_);
      const size_t loop = loop_;
      if (++step_ == localRanks_) {
        step_ = 0;
        ++loop_;
      }
      if (loop * chunk_ >= slice.count) continue;
      const Range piece = algo::pipelineChunk(slice, chunk_, loop);
      out = PrimStep{hs.prim, piece.offset, piece.offset, piece.count, false};
      return true;
    }
    return false;
  }

 private:
  bool gather_;
  int localRanks_, pos_;
  size_t count_;
  int nchannels_, channel_;
  size_t chunk_, align_, loops_;
  size_t loop_ = 0;
  int step_ = 0;
};

class AfterSteps : public StepSource {
 public:
  AfterSteps(size_t waits, std::unique_ptr<StepSource> inner)
      : waits_(waits), inner_(std::move(inner)) {}
  bool next(PrimStep& out) override {
    if (waits_ > 0) {
      --waits_;
      out = PrimStep{};  // no primitive, no data: only counts against the gate
      return true;
    }
    return inner_->next(out);
  }

 private:
  size_t waits_;
  std::unique_ptr<StepSource> inner_;
};

}  // namespace

std::unique_ptr<StepSource> hierLocalSteps(bool gather, int localRanks, int pos, size_t count,
                                           int nchannels, int channel, size_t chunk, size_t align) {
  return std::make_unique<HierLocal>(gather, localRanks, pos, count, nchannels, channel, chunk,
                                     align);
}

size_t countSteps(StepSource& source) {
  size_t n = 0;
  PrimStep s;
  while (source.next(s)) ++n;
  return n;
}

std::unique_ptr<StepSource> afterSteps(size_t gateSteps, std::unique_ptr<StepSource> inner) {
  return std::make_unique<AfterSteps>(gateSteps > 0 ? gateSteps - 1 : 0, std::move(inner));
}

std::unique_ptr<StepSource> ringAllReduceSteps(const RingPlace& ring, Range slice, size_t chunk,
                                               size_t align) {
  return std::make_unique<RingAllReduce>(ring, slice, chunk, align);
}

std::unique_ptr<StepSource> ringAllGatherSteps(const RingPlace& ring, size_t count, Range slice,
                                               size_t chunk, bool inPlace) {
  return std::make_unique<RingBlocks>(true, ring, count, slice, chunk, inPlace);
}

std::unique_ptr<StepSource> ringReduceScatterSteps(const RingPlace& ring, size_t recvcount,
                                                   Range slice, size_t chunk) {
  return std::make_unique<RingBlocks>(false, ring, recvcount, slice, chunk, false);
}

std::unique_ptr<StepSource> chainSteps(algo::ChainColl coll, const RingPlace& ring, int root,
                                       Range slice, size_t chunk, bool inPlace) {
  Prim p = loneRank(algo::chainPrim(coll, ring.order, ring.nranks, root, ring.rank, inPlace));
  return std::make_unique<Pipe>(p, slice.offset, slice.offset, slice.count, chunk,
                                producesFinal(p));
}

std::unique_ptr<StepSource> pipeSteps(Prim prim, size_t inOffset, size_t outOffset, size_t count,
                                      size_t chunk, bool final) {
  return std::make_unique<Pipe>(prim, inOffset, outOffset, count, chunk, final);
}

}  // namespace loom
