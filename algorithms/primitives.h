// The vocabulary every loom schedule is written in: one primitive per (rank, step, chunk).
//
// How it works: an algorithm (ring, chain, tree, pairwise) says, for each step of one rank, which
// primitive to run and on which chunk; the algorithm's own header says where the chunk lives and
// which peers the step receives from / sends to. An executor (CPU threads or one CUDA kernel)
// walks that list and maps each primitive onto the fused reduceCopy of src/kernels: N sources
// (received data, and the rank's own input when the primitive reduces) to M destinations (the
// output buffer, and the send slots of the peers). The names are NCCL's (src/device/prims_*.h)
// so schedules can be compared with NCCL's runRing/runTreeUpDown line by line.
//
// Everything under algorithms/ is pure integer arithmetic with no allocation on the walk, C++17
// and constexpr, so the same headers compile into CUDA kernels (docs/architecture.md,
// "Decisions": one code path per idea).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define LOOM_ALGO_HD __host__ __device__
#else
#define LOOM_ALGO_HD
#endif

namespace loom::algo {

// What one step does with one chunk. "input" is the rank's send buffer, "output" its receive
// buffer (they may alias for in-place calls; every schedule here reads a chunk's input before
// it writes that chunk's output, so aliasing is safe).
enum class Prim : std::uint8_t {
  kNone,                // nothing (e.g. a lone rank's in-place copy)
  kCopy,                // output = input; local only (a lone rank)
  kSend,                // send input
  kSendFromOutput,      // send output (tree root broadcasting what it reduced)
  kCopySend,            // output = input; send it (out-of-place root / own AllGather block)
  kRecv,                // output = received
  kRecvCopySend,        // output = received; forward it
  kRecvReduceSend,      // send input (+) received; the partial sum is not stored
  kRecvReduceCopy,      // output = input (+) received
  kRecvReduceCopySend,  // output = input (+) received; forward it (ring AllReduce turning point)
};

// The properties an executor needs to map a primitive onto reduceCopy. Kept beside the enum so
// a new primitive cannot be added without deciding all of them.
LOOM_ALGO_HD constexpr bool primRecvs(Prim p) {
  return p == Prim::kRecv || p == Prim::kRecvCopySend || p == Prim::kRecvReduceSend ||
         p == Prim::kRecvReduceCopy || p == Prim::kRecvReduceCopySend;
}
LOOM_ALGO_HD constexpr bool primSends(Prim p) {
  return p == Prim::kSend || p == Prim::kSendFromOutput || p == Prim::kCopySend ||
         p == Prim::kRecvCopySend || p == Prim::kRecvReduceSend || p == Prim::kRecvReduceCopySend;
}
LOOM_ALGO_HD constexpr bool primReduces(Prim p) {
  return p == Prim::kRecvReduceSend || p == Prim::kRecvReduceCopy || p == Prim::kRecvReduceCopySend;
}
// Reads the input buffer: every reduction, and the primitives that start data on its way.
LOOM_ALGO_HD constexpr bool primReadsInput(Prim p) {
  return primReduces(p) || p == Prim::kCopy || p == Prim::kSend || p == Prim::kCopySend;
}
LOOM_ALGO_HD constexpr bool primWritesOutput(Prim p) {
  return p == Prim::kCopy || p == Prim::kCopySend || p == Prim::kRecv || p == Prim::kRecvCopySend ||
         p == Prim::kRecvReduceCopy || p == Prim::kRecvReduceCopySend;
}

LOOM_ALGO_HD constexpr const char* primName(Prim p) {
  switch (p) {
    case Prim::kNone:
      return "none";
    case Prim::kCopy:
      return "copy";
    case Prim::kSend:
      return "send";
    case Prim::kSendFromOutput:
      return "sendFromOutput";
    case Prim::kCopySend:
      return "copySend";
    case Prim::kRecv:
      return "recv";
    case Prim::kRecvCopySend:
      return "recvCopySend";
    case Prim::kRecvReduceSend:
      return "recvReduceSend";
    case Prim::kRecvReduceCopy:
      return "recvReduceCopy";
    case Prim::kRecvReduceCopySend:
      return "recvReduceCopySend";
  }
  return "?";
}

// Python-style modulo for rank arithmetic: the result is in [0, n) for any a, n > 0.
LOOM_ALGO_HD constexpr int modRank(int a, int n) { return ((a % n) + n) % n; }

}  // namespace loom::algo
