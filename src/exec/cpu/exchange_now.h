// The executor's fast path for the latency-critical case: one small call outside a group, its
// connections made (every call after the first), run while nothing else runs on the
// communicator. It takes an AllReduce that goes in one exchange (a step per channel), and an
// AllGather, ReduceScatter, Broadcast or Reduce of up to kFastMaxBytes (its larger buffer) over
// the ring, the chain or the exchange: for these the general path's own work is a microsecond
// or more of a call of a few.
//
// It is a cached plan, not a second executor. The first call of a shape (collective, count,
// datatype, op, root, algorithm, protocol, in place or not) plans its tasks as the general
// path does (planner.h) and binds them to their connections once (bind_plan.h). Later calls of
// that shape restart the same PrimTasks on the call's buffers (PrimTask::restart) and drive
// them on the calling thread. What it skips is the general path's bookkeeping around the tasks:
// planning, allocating and binding them, ordering them by connection, and joining the progress
// engine. What it keeps is every choice the general path makes per call (CpuCallFlags): how its
// steps between processes move (the way policy), the staging of a send, and the cross-core
// copies. A training loop repeats a few shapes (FSDP: an AllGather and a ReduceScatter a layer,
// beside AllReduces); the cache holds the last kFastPlans.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "src/exec/cpu/prim_task.h"
#include "src/plan/coll.h"

namespace loom {

// The largest call (its larger buffer) other than the exchange AllReduce that takes the fast
// path. Larger calls cut their blocks into pieces or take seconds' worth of steps, and the
// general path's own costs are nothing beside them.
inline constexpr size_t kFastMaxBytes = size_t{1} << 20;

// Runs `op` if it is that case and returns true; false (nothing done) sends it down the
// general path. On failure the communicator is marked failed and the error thrown.
bool runExchangeNow(CollOp& op);

// A cached plan of a communicator (CpuExecutor::exchangeNowCache(), used while it drives
// alone: ProgressEngine::tryExclusive).
struct ExchangeNowPlan {
  bool valid = false;  // the fields below describe a shape
  bool fast = false;   // and its tasks run here (false: the shape takes the general path)
  // The shape the tasks were planned for.
  CollKind kind = CollKind::kAllReduce;
  Algorithm algorithm = Algorithm::kExchange;
  int root = 0;
  size_t count = 0;
  loomDataType_t type = loomFloat32;
  ReduceOpKind reduce = ReduceOpKind::kSum;
  transport::Protocol protocol = transport::Protocol::kSimple;
  bool inPlace = false;  // isInPlace
  size_t bytes = 0;      // count * the datatype's size
  size_t largest = 0;    // largestBufferBytes
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
    return valid && o.kind == kind && o.count == count && o.type == type && o.reduce == reduce &&
           o.algorithm == algorithm && o.root == root && o.protocol == protocol &&
           !o.inputOverwritten && isInPlace(o) == inPlace;
  }
  // In place as the planner reads it: the output is the input (AllReduce, Broadcast,
  // Reduce), the input is this rank's block of the output (AllGather), or the output this
  // rank's block of the input (ReduceScatter).
  static bool isInPlace(const CollOp& o);
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

// The plans of the last few shapes, one communicator's (CpuExecutor::exchangeNowCache()).
inline constexpr int kFastPlans = 4;
struct ExchangeNowCache {
  std::array<ExchangeNowPlan, kFastPlans> plans;
  unsigned next = 0;  // the plan the next new shape replaces: round robin, oldest first

  // The plan of `op`'s shape, or null.
  ExchangeNowPlan* find(const CollOp& op) {
    for (ExchangeNowPlan& p : plans)
      if (p.matches(op)) return &p;
    return nullptr;
  }
  ExchangeNowPlan& replaceOldest() { return plans[next++ % kFastPlans]; }
  void invalidate() {
    for (ExchangeNowPlan& p : plans) p.invalidate();
  }
};

namespace testing {
// Calls this thread ran down the fast path (tests prove it was taken).
uint64_t exchangeNowCallsOnThisThread();
}  // namespace testing

}  // namespace loom
