// How one step's primitive maps onto reduceCopy: which sources, in which order, with which
// pre-op bits, and which destinations. One rule for every executor: the CPU tasks
// (src/exec/cpu/prim_task.cc), the exchange fast path (src/exec/cpu/exchange_now.cc) and the CUDA
// kernels, so they produce the same bits.
//   - Sources: what arrived from each peer, in link order, with the rank's own input placed at
//     `inputPosition` (after the received data by default) when the primitive reads its input.
//     Ranks that reduce the same inputs in the same order get the same bits, whatever the op.
//     The input gets the op's pre-op (PreMulSum's multiply) unless it already carries it
//     (a later phase reading partial results); a peer's data always does.
//     kSendFromOutput sends what the output already holds (a tree root's result).
//   - Destinations: the output when the primitive writes it, then every send slot that is to
//     be filled (a link that posts the data by address has no slot to fill: nullptr).
//   - The post-op (SumPostDiv's divide) applies only to a step that produces final values.
// C++17 and host/device: nvcc compiles it.
#pragma once

#include "algorithms/primitives.h"
#include "src/kernels/host_device.h"
#include "src/kernels/reduce_copy_args.h"

namespace loom {

struct StepBuffers {
  const void* input = nullptr;  // this step's part of the input
  bool inputHasPreOp = false;
  int inputPosition = -1;  // among the received sources; -1 (or past them): after them
  const void* const* received = nullptr;
  int nrecv = 0;
  void* output = nullptr;  // this step's part of the output
  void* const* slots = nullptr;
  int nslots = 0;
};

// Whether a step of a reduction changes the values it moves: it folds sources together, or
// the op's pre-op applies (to an input that does not carry it yet) or its post-op (on a step
// that produces final values). Any other step moves bytes unchanged, whatever the op, and
// executors copy them as bytes: on the CPU a large memcpy writes whole lines without first
// reading them, which saves a round trip per line where the line sits in a peer's cache (a
// send slot the peer read last), where a reduction's vector stores pay it.
LOOM_HOST_DEVICE inline bool stepAppliesOp(algo::Prim prim, bool final, bool inputHasPreOp,
                                           ReduceOpKind op) {
  return algo::primReduces(prim) ||
         (algo::primReadsInput(prim) && !inputHasPreOp && reduceOpHasPreOp(op)) ||
         (final && reduceOpHasPostOp(op));
}

// Fills args' sources, destinations, pre-op bits and post-op flag for `prim`; the caller sets
// count, scalar and streamDestinations.
LOOM_HOST_DEVICE inline void stepOperands(algo::Prim prim, bool final, const StepBuffers& b,
                                          ReduceCopyArgs& args) {
  args.nsrc = 0;
  args.ndst = 0;
  args.preOpOnSource = 0;
  args.postOp = final;
  const int nrecv = algo::primRecvs(prim) ? b.nrecv : 0;
  const int inputAt = b.inputPosition < 0 || b.inputPosition > nrecv ? nrecv : b.inputPosition;
  const bool readsInput = algo::primReadsInput(prim);
  for (int i = 0; i <= nrecv; ++i) {
    if (i == inputAt && readsInput) {
      if (!b.inputHasPreOp) args.preOpOnSource |= 1u << args.nsrc;
      args.src[args.nsrc++] = b.input;
    }
    if (i < nrecv) args.src[args.nsrc++] = b.received[i];
  }
  if (prim == algo::Prim::kSendFromOutput) args.src[args.nsrc++] = b.output;
  if (algo::primWritesOutput(prim)) args.dst[args.ndst++] = b.output;
  if (algo::primSends(prim))
    for (int i = 0; i < b.nslots; ++i)
      if (b.slots[i] != nullptr) args.dst[args.ndst++] = b.slots[i];
}

}  // namespace loom
