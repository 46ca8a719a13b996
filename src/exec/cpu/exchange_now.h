// The executor's fast path for the latency-critical case: one small exchange AllReduce (a step
// per channel) outside a group, its connections made (every call after the first), run while
// nothing else runs on the communicator.
//
// It is a cached plan, not a second executor. The first call of a shape (count, datatype, op,
// protocol, in place or not) plans its tasks as the general path does (planner.h's exchange: a
// send of this rank's slice to every other rank and a fold of all slices in rank order, per
// channel) and binds them to their connections once (bind_plan.h). Later calls of that shape
// restart the same PrimTasks on the call's buffers (PrimTask::restart) and drive them on the
// calling thread. What it skips is the general path's bookkeeping around the tasks: planning,
// allocating and binding them, ordering them by connection, and joining the progress engine.
// What it keeps is every choice the general path makes per call (CpuCallFlags): how its
// steps between processes move (the way policy), the staging of an in-place send, and the
// cross-core copies. A training loop repeats a few shapes; the cache holds the last one.
#pragma once

#include <chrono>
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
  bool valid = false;  // the fields below describe a shape
  bool fast = false;   // and its tasks run here (false: the shape takes the general path)
  // The shape the tasks were planned for.
  size_t count = 0;
  loomDataType_t type = loomFloat32;
  ReduceOpKind reduce = ReduceOpKind::kSum;
  transport::Protocol protocol = transport::Protocol::kSimple;
  bool inPlace = false;
  size_t bytes = 0;  // count * the datatype's size
  // The communicator's, read once with the plan: a call's own time is a few hundred
  // nanoseconds, and each lookup on its way to the first post adds to it.
  std::chrono::milliseconds timeout{0};  // callTimeout
  bool oversubscribed = false;           // PlannerState::oversubscribed
  // Every task of the plan (gates point between them); a task keeps a pointer to the op of
  // the call it runs, set by restart for each call. Their steps call the datatype's and op's
  // reduceCopy kernel straight (PrimTask::setKernel): its checks hold by construction for
  // the shape, except partly overlapping buffers, which runExchangeNow sends down the
  // general path.
  std::vector<std::unique_ptr<PrimTask>> tasks;
  // The tasks with steps (a small call leaves most channels without data: their tasks are
  // skipped by every rank alike), and the distinct connections those tasks use.
  std::vector<PrimTask*> live;
  std::vector<transport::SendConnection*> sends;
  std::vector<transport::RecvConnection*> recvs;
  // The call's flags, as the general path decides them (executor.cc): the tasks point at
  // them. The way (CpuExecutor::takeWay) and the staging region are set per call;
  // the rest holds for the shape.
  CpuCallFlags flags;
  bool stages = false;  // a task stages its sends (TaskPlan::stagesSends)

  bool matches(const CollOp& o) const {
    return valid && o.kind == CollKind::kAllReduce && o.count == count && o.type == type &&
           o.reduce == reduce && o.protocol == protocol && !o.inputOverwritten &&
           (o.sendbuff == o.recvbuff) == inPlace;
  }
  // Connections live as long as the communicator, except that releasing its resources drops
  // them: the tasks that point at them go too.
  void invalidate() {
    valid = false;
    fast = false;
    live.clear();
    sends.clear();
    recvs.clear();
    tasks.clear();
    flags = CpuCallFlags{};
    stages = false;
  }
};

namespace testing {
// Calls this thread ran down the fast path (tests prove it was taken).
uint64_t exchangeNowCallsOnThisThread();
}  // namespace testing

}  // namespace loom
