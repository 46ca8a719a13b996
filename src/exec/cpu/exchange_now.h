// The executor's fast path for the latency-critical case: one exchange AllReduce outside a
// group, its connections made (every call after the first), run while nothing else runs on the
// communicator.
//
// It is a cached plan, not a second executor. The first call of a shape (count, datatype, op,
// protocol, in place or not) plans and binds its tasks as the general path does (planner.h's
// exchange: a send of this rank's slice to every other rank and a fold of all slices in rank
// order, per channel); later calls of that shape restart the same PrimTasks on the new
// buffers and drive them on the calling thread. What it skips is the general path's
// bookkeeping around the tasks: planning, allocating and binding them, ordering them by
// connection and registering them with the progress engine. A training loop repeats a few
// shapes, so the cache holds the last one.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "src/exec/cpu/prim_task.h"
#include "src/plan/coll.h"

namespace loom {

// Runs `op` if it is that case and returns true; false (nothing done) sends it down the
// general path. On failure the communicator is marked failed and the error thrown.
bool runExchangeNow(CollOp& op);

// The cached plan of a communicator (CpuExecutor::exchangeNowPlan(), used while it drives
// alone: ProgressEngine::tryExclusive).
struct ExchangeNowPlan {
  bool valid = false;
  // The shape the tasks were planned for.
  size_t count = 0;
  loomDataType_t type = loomFloat32;
  ReduceOpKind reduce = ReduceOpKind::kSum;
  transport::Protocol protocol = transport::Protocol::kSimple;
  bool inPlace = false;
  // The call the tasks read (PrimTask keeps a reference to its op). It holds a call's op,
  // communicator included, only while the call runs: a communicator's executor must not own
  // the communicator.
  CollOp op;
  std::vector<std::unique_ptr<PrimTask>> tasks;  // bound to `op` and the connections

  bool matches(const CollOp& o) const {
    return valid && o.kind == CollKind::kAllReduce && o.count == count && o.type == type &&
           o.reduce == reduce && o.protocol == protocol && (o.sendbuff == o.recvbuff) == inPlace;
  }
  // Connections live as long as the communicator, except that releasing its resources drops
  // them: the tasks that point at them go too.
  void invalidate() {
    valid = false;
    tasks.clear();
  }
};

namespace testing {
// Calls this thread ran down the fast path (tests prove it was taken).
uint64_t exchangeNowCallsOnThisThread();
}  // namespace testing

}  // namespace loom
