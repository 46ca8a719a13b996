// How a collective's elements are cut into channel slices, pipeline loops and chunks.
//
// How it works (NCCL's shape, with the edge cases pinned down):
//  1. Channels. `count` elements are cut into `nchannels` contiguous slices, one per channel
//     (each channel has its own connections and runs in parallel). Every slice starts on a
//     multiple of `align` elements (so vector loads stay aligned); the count / align whole units
//     are dealt out as evenly as possible, the first channels taking the spare units, and the
//     last channel also takes the count % align tail. Slice sizes therefore differ by at most
//     `align` elements. A slice may be empty (count < nchannels * align): every rank computes
//     the same slicing, so every rank skips that channel and no peer waits for it.
//  2. Loops. A channel moves its slice in loops so that data is in flight on every link at once.
//     Ring AllReduce: one loop is nranks chunks of `chunk` elements, chunk c of a loop is the
//     c-th contiguous piece. In the final, partial loop the chunk length shrinks to
//     roundUp(ceil(rest / nranks), align) (never above `chunk`), so the tail is spread over the
//     ring instead of being carried by one chunk; trailing chunks can then be short or empty.
//     Everything else (chain, tree, each block of AllGather/ReduceScatter) just walks its range
//     in pieces of `chunk` elements, the last piece shorter.
//  3. Empty chunks. Whether a chunk is empty depends only on (count, nranks, nchannels, chunk,
//     align), which all ranks share, so the sender and the receiver of an empty chunk both know
//     it. The rule: a step whose chunk is empty is skipped entirely by every rank (no data, no
//     flow-control step). count == 0 gives no loops at all.
// Preconditions: nchannels >= 1, nranks >= 1, align >= 1, chunk >= 1 and a multiple of align.
#pragma once

#include <cassert>
#include <cstddef>

#include "algorithms/primitives.h"

namespace loom::algo {

// A contiguous element range [offset, offset + count).
struct Range {
  std::size_t offset = 0;
  std::size_t count = 0;
  LOOM_ALGO_HD constexpr std::size_t end() const { return offset + count; }
  LOOM_ALGO_HD constexpr bool empty() const { return count == 0; }
};

LOOM_ALGO_HD constexpr bool operator==(Range a, Range b) {
  return a.offset == b.offset && a.count == b.count;
}

LOOM_ALGO_HD constexpr std::size_t minSize(std::size_t a, std::size_t b) { return a < b ? a : b; }
LOOM_ALGO_HD constexpr std::size_t divUp(std::size_t a, std::size_t b) { return (a + b - 1) / b; }
LOOM_ALGO_HD constexpr std::size_t roundUp(std::size_t a, std::size_t b) { return divUp(a, b) * b; }

// Part `part` of `nparts` contiguous pieces of `whole`, cut on multiples of `align` counted from
// whole.offset (step 1 above). Used for channels, and for the two halves of tree AllReduce.
LOOM_ALGO_HD constexpr Range splitEven(Range whole, int nparts, int part, std::size_t align = 1) {
  assert(nparts >= 1 && part >= 0 && part < nparts && align >= 1);
  const std::size_t units = whole.count / align;
  const std::size_t base = units / static_cast<std::size_t>(nparts);
  const std::size_t extra = units % static_cast<std::size_t>(nparts);
  const std::size_t p = static_cast<std::size_t>(part);
  // Parts before `part` each hold `base` units, plus one for each of the first `extra` of them.
  const std::size_t startUnits = p * base + minSize(p, extra);
  std::size_t count = (base + (p < extra ? 1 : 0)) * align;
  if (part == nparts - 1) count += whole.count % align;  // the unaligned tail
  return Range{whole.offset + startUnits * align, count};
}

// The slice of [0, count) that channel `channel` of `nchannels` moves.
LOOM_ALGO_HD constexpr Range channelSlice(std::size_t count, int nchannels, int channel,
                                          std::size_t align = 1) {
  return splitEven(Range{0, count}, nchannels, channel, align);
}

// ---- Ring loops: nranks chunks per loop (ring AllReduce) ----------------------------------

LOOM_ALGO_HD constexpr std::size_t ringLoopCount(Range slice, int nranks, std::size_t chunk) {
  return divUp(slice.count, static_cast<std::size_t>(nranks) * chunk);
}

// Chunk `c` (0 <= c < nranks) of loop `loop` of a ring slice, in absolute elements.
LOOM_ALGO_HD constexpr Range ringChunk(Range slice, int nranks, std::size_t chunk,
                                       std::size_t align, std::size_t loop, int c) {
  assert(chunk >= align && chunk % align == 0 && c >= 0 && c < nranks);
  const std::size_t n = static_cast<std::size_t>(nranks);
  const std::size_t loopBase = loop * n * chunk;
  assert(loopBase < slice.count);
  const std::size_t loopLen = minSize(n * chunk, slice.count - loopBase);
  // Equal to `chunk` for every full loop; smaller for the tail loop (step 2 above).
  const std::size_t chunkLen = minSize(chunk, roundUp(divUp(loopLen, n), align));
  const std::size_t begin = minSize(static_cast<std::size_t>(c) * chunkLen, loopLen);
  const std::size_t end = minSize(begin + chunkLen, loopLen);
  return Range{slice.offset + loopBase + begin, end - begin};
}

// ---- Plain pipelines: one piece per loop (chain, tree, AllGather/ReduceScatter blocks) ----

LOOM_ALGO_HD constexpr std::size_t pipelineLoopCount(Range slice, std::size_t chunk) {
  return divUp(slice.count, chunk);
}

LOOM_ALGO_HD constexpr Range pipelineChunk(Range slice, std::size_t chunk, std::size_t loop) {
  assert(loop * chunk < slice.count);
  const std::size_t begin = loop * chunk;
  return Range{slice.offset + begin, minSize(chunk, slice.count - begin)};
}

}  // namespace loom::algo
