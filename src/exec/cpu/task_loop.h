// The executor's progress loop: a thread submits its runs (progress_engine.h: one per
// communicator of its call) and, while it is the driver of a communicator, pumps the
// connections and steps every task of every active run there that may step; it waits
// (Backoff) while nothing moves, throws on abort and after the communicators' timeout without
// progress, and retires each run once its tasks are done and its sends drained. A thread that
// drives nothing waits for its runs to be finished by the driver or for the role to be handed
// over. Shared by every call of the general path (executor.cc: any group, planned tasks).
#pragma once

#include <chrono>
#include <cstddef>
#include <span>
#include <string>

#include "src/exec/cpu/progress_engine.h"

namespace loom {

class Comm;

// The communicators' timeout for a call over `comms`: the smallest non-zero one, 0 (wait
// forever) when all are 0.
std::chrono::milliseconds callTimeout(std::span<Comm* const> comms);
// Throws TimeoutError: nothing moved for `timeout`; `waiting` lists what each part waits for.
[[noreturn]] void throwStalled(std::chrono::milliseconds timeout, const std::string& waiting);

// Called with the engine of comms[i] locked as runs[i] registers (alone: no other run there).
struct RegisterHook {
  void (*call)(void* context, size_t index, bool alone) = nullptr;
  void* context = nullptr;
};

// Registers runs[i] on comms[i]'s engine (comms sorted, distinct) and returns once every one
// is finished. Throws the first run's error: a TimeoutError naming what each unfinished task
// of the communicator waits for, an abort's error, or what a task or connection threw. A
// failure while driving fails every active run of that communicator with the same error.
void driveRuns(std::span<Comm* const> comms, std::span<Run* const> runs, RegisterHook hook = {});

}  // namespace loom
