// Collectives composed from loomSend/loomRecv inside groups, for p2p_vs_coll: the same
// operation as the native call, built the textbook way, to show what loom's collective
// algorithms add over plain point-to-point on the same machine.
//
//   ring:   n-1 steps, each a group of one send to the next rank and one receive from the
//           previous (AllReduce = ring ReduceScatter then ring AllGather; Broadcast is a
//           pipelined chain; AlltoAll is pairwise exchange, step s sending to rank + s).
//   direct: one group in which every rank sends to and receives from every other at once
//           (Broadcast: the root sends to everyone).
// Reductions between steps run on the host (sum only; integer and float32/64 types).
#ifndef LOOM_PERF_HARNESS_P2P_COMPOSE_H_
#define LOOM_PERF_HARNESS_P2P_COMPOSE_H_

#include <string_view>

#include "perf/harness/collectives.h"

namespace loomperf {

enum class Composition { kRing, kDirect };

// The native spec with its call replaced by the composed one (same counts, bandwidth and
// expected results). Supports all_reduce, all_gather, broadcast, reduce_scatter, alltoall.
const CollSpec& composedSpec(std::string_view name, Composition how);

// Whether the composed reductions support `type` (sum of integers, float32, float64).
bool composedSupports(loomDataType_t type);

}  // namespace loomperf

#endif  // LOOM_PERF_HARNESS_P2P_COMPOSE_H_
