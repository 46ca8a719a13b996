// The arguments of reduceCopy, the fused primitive behind every step of a collective:
// read `count` elements from each of `nsrc` sources, reduce them element by element (sources
// in index order), and write the result to each of `ndst` destinations, in one pass.
//
// Plain data only, outside the per-ISA namespace (host_device.h): the dispatcher builds it and
// the CPU variants and CUDA kernels of every ISA read the same layout. C++17-clean for nvcc.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "src/kernels/host_device.h"

namespace loom {

// Sources: a ring step reduces its own input with at most a few peers' data; a tree node
// with its children; an exchange AllReduce every rank's input (up to 8 ranks). Destinations:
// the local output plus the peers' receive slots (an exchange sends to up to 7 peers).
inline constexpr int kMaxSources = 8;
inline constexpr int kMaxDests = 8;

// Internal reduction kinds (reduce_op_table.def). loomAvg maps onto kSumPostDiv with divisor n
// for every type (see reduceOpKindFor); kPreMulSum is the user's loomRedOpCreatePreMulSum.
enum class ReduceOpKind : int {
#define LOOM_REDUCE_OP(kind, Func, name) kind,
#include "src/kernels/reduce_op_table.def"
  kCount
};
inline constexpr int kNumReduceOps = static_cast<int>(ReduceOpKind::kCount);

// The ops that change a value outside the reduction itself: PreMulSum multiplies each input
// (its pre-op), SumPostDiv divides the result (its post-op). reduce_ops.h checks these against
// each op's kHasPreOp and kHasPostOp.
LOOM_HOST_DEVICE constexpr bool reduceOpHasPreOp(ReduceOpKind op) {
  return op == ReduceOpKind::kPreMulSum;
}
LOOM_HOST_DEVICE constexpr bool reduceOpHasPostOp(ReduceOpKind op) {
  return op == ReduceOpKind::kSumPostDiv;
}

// The op's scalar: the PreMulSum factor or the SumPostDiv divisor. Floating-point types read
// `f`, converted once to the accumulator type (float for 16- and 8-bit floats); integer types
// read `i` (a PreMulSum factor wraps to the element type; a divisor must be >= 1).
struct ReduceScalar {
  double f = 1.0;
  int64_t i = 1;
};

struct ReduceCopyArgs {
  int nsrc = 0;  // 1..kMaxSources
  int ndst = 0;  // 1..kMaxDests
  // Any byte alignment on the CPU (element alignment on CUDA). A destination may be exactly
  // a source (in place) but must not partially overlap any source or other destination.
  const void* src[kMaxSources] = {};
  void* dst[kMaxDests] = {};
  size_t count = 0;  // elements; 0 does nothing
  ReduceScalar scalar;
  // Bit s set: apply the op's pre-op (PreMulSum's multiply) to src[s]. In a ring AllReduce
  // only the local input is pre-multiplied; data from a peer already was.
  uint32_t preOpOnSource = 0;
  // Apply the op's post-op (SumPostDiv's divide) to the result: only the final step does.
  bool postOp = false;
  // Bit d set: write dst[d] with non-temporal (streaming) stores: no read-for-ownership of
  // its lines, no cache pollution, and a peer reading a slot gets it from memory instead of
  // from the writer's cache (slow between cores on some machines). For large calls, and for
  // slots a peer reads where that measures faster; a call with any bit set ends with a store
  // fence, so a post after it publishes the data. CPU only.
  uint32_t streamDestinations = 0;
  // Walk 8 pages at once, one 64-byte line of each in turn (cross_core_copy.h), where a source
  // is a slot another core wrote or a destination a slot another core reads. Honoured on the
  // CPU by steps of two sources that need neither pre- nor post-op; ignored elsewhere.
  bool crossCorePages = false;
};

}  // namespace loom
