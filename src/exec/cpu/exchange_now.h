// The executor's fast path for the latency-critical case: one small exchange AllReduce
// outside a group, its connections made (every call after the first).
#pragma once

#include <cstdint>

#include "algorithms/slicing.h"
#include "src/exec/cpu/prim_task.h"
#include "src/plan/coll.h"

namespace loom {

// Runs `op` if it is that case and returns true; false (nothing done) sends it down the
// general path. What goes over the wire is exactly what the planner's exchange tasks send
// (planner.h, exchangeChannel: the same channels, steps and signatures), so a peer may take
// either path. On failure the communicator is marked failed and the error thrown.
bool runExchangeNow(CollOp& op);

// A small call has data on one or two channels (two ranks spread it over the ring's).
inline constexpr int kMaxExchangeNowLanes = 2;

// What the fast path works out from a call's shape (count, datatype, op, protocol): the
// connections, slices and signature of each channel with data. A training loop repeats the
// same few shapes, and working them out again on every call (looking connections up, zeroing
// the links) was a fifth of an 8 B call's own work, so each communicator keeps the last one
// (Comm::exchangeNowPlan(), used while it drives alone: ProgressEngine::tryExclusive). Connections
// live as long as the communicator, except that releasing its resources drops them: that clears the
// plan too.
struct ExchangeNowPlan {
  struct Lane {
    TaskLinks out, in;
    int channel = 0;
    algo::Range slice;  // the one step of this channel's send and fold
  };
  bool valid = false;
  size_t count = 0;
  loomDataType_t type = loomFloat32;
  ReduceOpKind reduce = ReduceOpKind::kSum;
  transport::Protocol protocol = transport::Protocol::kSimple;
  uint32_t signature = 0;
  int nlanes = 0;
  Lane lanes[kMaxExchangeNowLanes];

  bool matches(const CollOp& op) const {
    return valid && op.kind == CollKind::kAllReduce && op.count == count && op.type == type &&
           op.reduce == reduce && op.protocol == protocol;
  }
};

namespace testing {
// Calls this thread ran down the fast path (tests prove it was taken).
uint64_t exchangeNowCallsOnThisThread();
}  // namespace testing

}  // namespace loom
