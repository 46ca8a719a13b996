// What each benchmark measures: nccl-tests' per-collective rules (element counts from a byte
// size, in-place layouts, algorithm and bus bandwidth), how to call loom, and what every rank
// should hold afterwards. One table entry per binary; the runner does the rest.
#ifndef LOOM_PERF_HARNESS_COLLECTIVES_H_
#define LOOM_PERF_HARNESS_COLLECTIVES_H_

#include <cstddef>
#include <string_view>

#include "loom/loom.h"
#include "perf/harness/data_pattern.h"

namespace loomperf {

// Element counts for one size, as nccl-tests' getCollByteCount computes them. paramCount is
// the count argument of the call; the in-place offsets are per rank (multiplied by the rank).
struct CollCounts {
  size_t sendCount = 0, recvCount = 0, paramCount = 0;
  size_t sendInplaceOffset = 0, recvInplaceOffset = 0;
};

// Where call `iter` of a size starts in buffers of `bufferBytes`: as nccl-tests does, each call
// moves on by the larger of its input and output, so that caches do not flatter repeated calls,
// and starts over at the buffer's end. Every library of a table goes through the buffer alike
// (loom's Measurer and the baselines' loop), so a sweep compares like with like.
struct BufferShift {
  size_t bytes = 0;  // how far each call moves
  size_t steps = 1;  // and after how many calls it starts over
  BufferShift() = default;
  BufferShift(const CollCounts& c, size_t typeSize, size_t bufferBytes)
      : bytes((c.sendCount > c.recvCount ? c.sendCount : c.recvCount) * typeSize),
        steps(bytes ? bufferBytes / bytes : 1) {}
  // Worked out per size: a division per call is all it adds to the timed loop.
  size_t at(int iter) const { return steps > 1 ? bytes * (static_cast<size_t>(iter) % steps) : 0; }
};

// Algorithm and bus bandwidth in GB/s (1e9 bytes) for a call of paramCount elements.
struct Bandwidth {
  double alg = 0, bus = 0;
};

// Which rank is which in one call.
struct CallSite {
  int rank = 0, nranks = 1, root = 0;
};

struct CollSpec {
  const char* name;  // "all_reduce": the binary is <name>_perf
  bool hasOp;        // false: redop column prints "none" and only sum data is used
  bool hasRoot;      // false: root column prints -1
  CollCounts (*counts)(size_t count, int nranks);
  // Bytes moved per second over the elapsed time, and the busbw factor nccl-tests applies.
  Bandwidth (*bandwidth)(size_t paramCount, size_t typeSize, double seconds, int nranks);
  loomResult_t (*run)(const void* send, void* recv, size_t paramCount, loomDataType_t type,
                      loomRedOp_t op, const CallSite& site, loomComm_t comm, loomStream_t stream);
  // Writes rank site.rank's input (sendCount elements) into `send`.
  void (*fillInput)(const Pattern& p, const CallSite& site, const CollCounts& c, void* send);
  // Writes what rank site.rank must hold (recvCount elements); false if nothing is checked on
  // this rank (Reduce and Gather on non-roots).
  bool (*fillExpected)(const Pattern& p, const CallSite& site, const CollCounts& c, void* want);
};

const CollSpec& allReduceSpec();
const CollSpec& allGatherSpec();
const CollSpec& reduceScatterSpec();
const CollSpec& broadcastSpec();
const CollSpec& reduceSpec();
const CollSpec& allToAllSpec();
const CollSpec& sendRecvSpec();
const CollSpec& gatherSpec();
const CollSpec& scatterSpec();

// nullptr when unknown; names as in CollSpec::name.
const CollSpec* collSpecByName(std::string_view name);

}  // namespace loomperf

#endif  // LOOM_PERF_HARNESS_COLLECTIVES_H_
