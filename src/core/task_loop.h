// The executor's progress loop: pump the connections, step every task that may step, and
// wait (Backoff) while nothing moves; throw on abort and after the communicators' timeout
// without progress; then drain the sends. Shared by the general path (runLocked: any group,
// planned tasks) and the fast path for one small call (executor.cc: tasks on the stack).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <span>
#include <string>

#include "src/core/prim_task.h"

namespace loom {

class Comm;

// Per task: the tasks just before it on each of its connections (nullptr: none). A task may
// step only once all of them are done.
using TasksBefore = std::array<const PrimTask*, 2 * kMaxTaskPeers>;

struct TaskLoop {
  std::span<PrimTask* const> tasks;
  std::span<const TasksBefore> before;                // empty: every task may always step
  std::span<transport::SendConnection* const> sends;  // every connection the tasks use, once
  std::span<transport::RecvConnection* const> recvs;
  std::span<Comm* const> comms;  // their aborts and timeouts apply
};

// The communicators' timeout for a call over `comms`: the smallest non-zero one, 0 (wait
// forever) when all are 0.
std::chrono::milliseconds callTimeout(std::span<Comm* const> comms);
// Throws TimeoutError: nothing moved for `timeout`; `waiting` lists what each part waits for.
[[noreturn]] void throwStalled(std::chrono::milliseconds timeout, const std::string& waiting);

// Runs until every task is done and every send drained. Throws TimeoutError (naming what
// each unfinished task waits for), an abort's error, or what a task or connection throws.
void runTaskLoop(const TaskLoop& loop);

}  // namespace loom
