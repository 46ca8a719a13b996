// Step programs and the one walker that turns them into steps.
//
// How it works. A StepProgram is one rank's part of one algorithm on one channel, as plain
// values: which schedule (ring AllReduce, ring AllGather, ring ReduceScatter, a pipe of one
// primitive, a phase of hierarchical AllReduce), the rank's place in it, the elements it covers
// and the chunk one step carries. It holds no owning pointer and calls nothing virtual, so a
// plan made of programs can be cached, copied, and read by a CUDA kernel as well as by the CPU
// executor. nextStep() walks a program loop by loop, step by step, as the schedule headers
// (ring.h, chain.h, hierarchical.h) define them, and yields only the steps with data:
//
//   for each loop:  for each step of the schedule:  s = schedule step; if chunk empty: skip
//
// An empty chunk is skipped by every rank alike (slicing.h), so no flow-control step is spent
// on it. Two rules apply to every program:
//   - a lone rank (a ring of one) copies its input even in place, so the op's pre- and
//     post-ops (average, PreMulSum) still run;
//   - a step that produces final values (the last reduction, a copy) is marked `final`: the
//     op's post-op (SumPostDiv) applies to it.
// A program may start with `leadingWaits` empty steps: a task gated on another task of n steps
// (a later phase on other connections) then starts its real work only once the gate finished.
//
// The CPU executor (src/exec/cpu/prim_task.cc), the schedule simulator of the tests
// (tests/algorithms/sim.h) and the CUDA kernels all walk programs with this function, so what
// the simulator proves about a schedule holds for every executor.
#pragma once

#include <cstddef>
#include <cstdint>

#include "algorithms/chain.h"
#include "algorithms/hierarchical.h"
#include "algorithms/primitives.h"
#include "algorithms/ring.h"
#include "algorithms/slicing.h"
#include "algorithms/tree.h"

namespace loom::algo {

// One step: a primitive and the elements it touches, as offsets from the start of the input
// and output buffers.
struct Step {
  Prim prim = Prim::kNone;
  std::size_t inOffset = 0;
  std::size_t outOffset = 0;
  std::size_t count = 0;
  bool final = false;  // produces final values: the op's post-op applies
};

enum class ProgramKind : std::uint8_t {
  kRingAllReduce,      // ring.h: 2n-1 steps per loop over ringChunk pieces of `slice`
  kRingAllGather,      // ring.h: n steps per loop, one piece of every block of `blockCount`
  kRingReduceScatter,  // likewise, reducing
  kPipe,               // one primitive over `slice`, in pieces of `chunk`
  kHierLocal,          // hierarchical.h: phase 1 (reduce-scatter) or 3 (all-gather) in a node
};

struct StepProgram {
  ProgramKind kind = ProgramKind::kPipe;
  // The ring, for the ring kinds: order[i] = rank at ring position i (read by the block walks
  // only; not owned, it lives as long as the communicator), its size and this rank's position.
  // kHierLocal: the node's ranks and this rank's position among them.
  const int* order = nullptr;
  int nranks = 1;
  int pos = 0;
  // The elements walked: the channel's slice (ring kinds), or the pipe's [offset, count).
  Range slice;
  std::size_t blockCount = 0;  // AllGather count, ReduceScatter recvcount, hier's whole count
  std::size_t chunk = 1;       // elements one step carries at most (a multiple of align)
  std::size_t align = 1;
  bool inPlace = false;
  // kPipe: the primitive, where input and output start (the walk adds its progress to both)
  // and whether its steps are final.
  Prim prim = Prim::kNone;
  std::size_t inOffset = 0;
  std::size_t outOffset = 0;
  bool final = false;
  // kHierLocal: all-gather (phase 3) or reduce-scatter (phase 1), and the channel.
  bool gather = false;
  int nchannels = 1;
  int channel = 0;
  std::size_t leadingWaits = 0;  // empty steps first (see the top of this file)
};

// Where a walk stands. Starts zeroed; nextStep() advances it.
struct StepCursor {
  std::size_t waited = 0;
  std::size_t loop = 0;
  int step = 0;
  std::size_t done = 0;  // kPipe: elements walked
};

// ---- The walk rules, shared by every program ---------------------------------------------

// Primitives that produce final values (the post-op applies to them).
LOOM_ALGO_HD constexpr bool producesFinal(Prim p) {
  return p == Prim::kRecvReduceCopySend || p == Prim::kRecvReduceCopy || p == Prim::kCopy;
}

// A lone rank still runs the op's pre/post-ops (avg, PreMulSum), even in place.
LOOM_ALGO_HD constexpr Prim loneRankPrim(Prim p) { return p == Prim::kNone ? Prim::kCopy : p; }

// ---- Programs ----------------------------------------------------------------------------

LOOM_ALGO_HD constexpr StepProgram ringAllReduceProgram(int nranks, int pos, Range slice,
                                                        std::size_t chunk, std::size_t align) {
  StepProgram p;
  p.kind = ProgramKind::kRingAllReduce;
  p.nranks = nranks;
  p.pos = pos;
  p.slice = slice;
  p.chunk = chunk;
  p.align = align;
  return p;
}

LOOM_ALGO_HD constexpr StepProgram ringBlocksProgram(bool gather, const int* order, int nranks,
                                                     int pos, std::size_t blockCount, Range slice,
                                                     std::size_t chunk, bool inPlace) {
  StepProgram p;
  p.kind = gather ? ProgramKind::kRingAllGather : ProgramKind::kRingReduceScatter;
  p.order = order;
  p.nranks = nranks;
  p.pos = pos;
  p.blockCount = blockCount;
  p.slice = slice;
  p.chunk = chunk;
  p.inPlace = inPlace;
  return p;
}

// One primitive over [inOffset, inOffset + count) of the input and [outOffset, ...) of the
// output: point-to-point, AlltoAll blocks, tree phases, chains, a lone rank's copy.
LOOM_ALGO_HD constexpr StepProgram pipeProgram(Prim prim, std::size_t inOffset,
                                               std::size_t outOffset, std::size_t count,
                                               std::size_t chunk, bool final) {
  StepProgram p;
  p.kind = ProgramKind::kPipe;
  p.prim = prim;
  p.inOffset = inOffset;
  p.outOffset = outOffset;
  p.slice = Range{0, count};
  p.chunk = chunk;
  p.final = final;
  return p;
}

// Broadcast or Reduce along the ring as a chain (chain.h): every piece of the slice the same.
LOOM_ALGO_HD constexpr StepProgram chainProgram(ChainColl coll, const int* order, int nranks,
                                                int root, int rank, Range slice, std::size_t chunk,
                                                bool inPlace) {
  const Prim prim = loneRankPrim(chainPrim(coll, order, nranks, root, rank, inPlace));
  return pipeProgram(prim, slice.offset, slice.offset, slice.count, chunk, producesFinal(prim));
}

// Double binary tree AllReduce (tree.h), one tree and channel of a rank: the up phase reduces
// the children's data toward the root (which keeps the result, final), the down phase sends
// the result back to the leaves. `down` has no steps (kNone) at a lone rank.
struct TreePrograms {
  StepProgram up;
  StepProgram down;
};
LOOM_ALGO_HD constexpr TreePrograms treeAllReducePrograms(TreePrims prims, Range slice,
                                                          std::size_t chunk) {
  const Prim up = loneRankPrim(prims.up);
  return TreePrograms{
      pipeProgram(up, slice.offset, slice.offset, slice.count, chunk, producesFinal(up)),
      pipeProgram(prims.down, slice.offset, slice.offset,
                  prims.down == Prim::kNone ? 0 : slice.count, chunk, false)};
}

// Phase 1 (gather = false) or 3 (gather = true) of hierarchical AllReduce for the rank at
// local position `pos` of `localRanks`. Never final: the op's post-op belongs to phase 2.
LOOM_ALGO_HD constexpr StepProgram hierLocalProgram(bool gather, int localRanks, int pos,
                                                    std::size_t count, int nchannels, int channel,
                                                    std::size_t chunk, std::size_t align) {
  StepProgram p;
  p.kind = ProgramKind::kHierLocal;
  p.gather = gather;
  p.nranks = localRanks;
  p.pos = pos;
  p.blockCount = count;
  p.nchannels = nchannels;
  p.channel = channel;
  p.chunk = chunk;
  p.align = align;
  return p;
}

// `inner`, after `gateSteps` - 1 empty steps: gated on a task of `gateSteps` steps, it starts
// its real work only once that task has finished. Over-counting is safe (a finished gate
// releases every step).
LOOM_ALGO_HD constexpr StepProgram afterSteps(std::size_t gateSteps, StepProgram inner) {
  inner.leadingWaits = gateSteps > 0 ? gateSteps - 1 : 0;
  return inner;
}

// ---- The walker --------------------------------------------------------------------------

namespace detail {

LOOM_ALGO_HD constexpr bool ringAllReduceNext(const StepProgram& p, StepCursor& c, Step& out) {
  const std::size_t loops = ringLoopCount(p.slice, p.nranks, p.chunk);
  const int steps = ringAllReduceStepCount(p.nranks);
  while (c.loop < loops) {
    const RingStep rs = ringAllReduceStep(p.nranks, p.pos, c.step);
    const Range r = ringChunk(p.slice, p.nranks, p.chunk, p.align, c.loop, rs.chunk);
    if (++c.step == steps) {
      c.step = 0;
      ++c.loop;
    }
    if (r.count == 0) continue;
    const Prim prim = loneRankPrim(rs.prim);
    out = Step{prim, r.offset, r.offset, r.count, producesFinal(prim)};
    return true;
  }
  return false;
}

// AllGather and ReduceScatter: per loop one piece of every block, one step per block.
LOOM_ALGO_HD constexpr bool ringBlocksNext(const StepProgram& p, StepCursor& c, Step& out) {
  const bool gather = p.kind == ProgramKind::kRingAllGather;
  if (c.loop >= pipelineLoopCount(p.slice, p.chunk)) return false;
  const Range piece = pipelineChunk(p.slice, p.chunk, c.loop);
  const RingStep rs = gather ? ringAllGatherStep(p.order, p.nranks, p.pos, c.step, p.inPlace)
                             : ringReduceScatterStep(p.order, p.nranks, p.pos, c.step, p.inPlace);
  const BlockPlace place = gather ? allGatherPlace(p.blockCount, rs.chunk, piece)
                                  : reduceScatterPlace(p.blockCount, rs.chunk, piece);
  if (++c.step == p.nranks) {
    c.step = 0;
    ++c.loop;
  }
  const Prim prim = loneRankPrim(rs.prim);
  out = Step{prim, place.in, place.out, place.count, !gather && producesFinal(prim)};
  return true;
}

LOOM_ALGO_HD constexpr bool pipeNext(const StepProgram& p, StepCursor& c, Step& out) {
  if (c.done >= p.slice.count) return false;
  const std::size_t n = minSize(p.slice.count - c.done, p.chunk);
  out = Step{p.prim, p.inOffset + c.done, p.outOffset + c.done, n, p.final};
  c.done += n;
  return true;
}

// A block whose slice is shorter than the others skips its empty pieces (every rank alike).
LOOM_ALGO_HD constexpr bool hierLocalNext(const StepProgram& p, StepCursor& c, Step& out) {
  const std::size_t loops =
      hierLocalLoopCount(p.blockCount, p.nranks, p.nchannels, p.channel, p.chunk, p.align);
  while (c.loop < loops) {
    const HierStep hs = p.gather ? hierAllGatherStep(p.nranks, p.pos, c.step)
                                 : hierReduceScatterStep(p.nranks, p.pos, c.step);
    const Range slice =
        hierSlice(p.blockCount, p.nranks, hs.block, p.nchannels, p.channel, p.align);
    const std::size_t loop = c.loop;
    if (++c.step == p.nranks) {
      c.step = 0;
      ++c.loop;
    }
    if (loop * p.chunk >= slice.count) continue;
    const Range piece = pipelineChunk(slice, p.chunk, loop);
    out = Step{hs.prim, piece.offset, piece.offset, piece.count, false};
    return true;
  }
  return false;
}

}  // namespace detail

// The next step of `program` with data, or false when the walk is over.
LOOM_ALGO_HD constexpr bool nextStep(const StepProgram& program, StepCursor& cursor, Step& out) {
  if (cursor.waited < program.leadingWaits) {
    ++cursor.waited;
    out = Step{};  // no primitive, no data: it only counts against the gate
    return true;
  }
  switch (program.kind) {
    case ProgramKind::kRingAllReduce:
      return detail::ringAllReduceNext(program, cursor, out);
    case ProgramKind::kRingAllGather:
    case ProgramKind::kRingReduceScatter:
      return detail::ringBlocksNext(program, cursor, out);
    case ProgramKind::kPipe:
      return detail::pipeNext(program, cursor, out);
    case ProgramKind::kHierLocal:
      return detail::hierLocalNext(program, cursor, out);
  }
  return false;
}

// The number of steps `program` yields.
LOOM_ALGO_HD constexpr std::size_t stepCount(const StepProgram& program) {
  StepCursor cursor;
  Step step;
  std::size_t n = 0;
  while (nextStep(program, cursor, step)) ++n;
  return n;
}

}  // namespace loom::algo
