// The executor's fast path for the latency-critical case: one small exchange AllReduce
// outside a group, its connections made (every call after the first).
#pragma once

#include <cstdint>

#include "src/core/coll.h"

namespace loom {

// Runs `op` if it is that case and returns true; false (nothing done) sends it down the
// general path. What goes over the wire is exactly what the planner's exchange tasks send
// (planner.h, exchangeChannel: the same channels, steps and signatures), so a peer may take
// either path. On failure the communicator is marked failed and the error thrown.
bool runExchangeNow(CollOp& op);

namespace testing {
// Calls this thread ran down the fast path (tests prove it was taken).
uint64_t exchangeNowCallsOnThisThread();
}  // namespace testing

}  // namespace loom
