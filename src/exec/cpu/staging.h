// The staging region of a thread's calls: where a task that stages its sends
// (TaskPlan::stagesSends) copies a step once for every peer process, which maps the region and
// reads the step in place (transports/shm/registered_read.h), instead of one copy into each
// peer's slot.
//
// Why per thread. A thread runs one call (or group) at a time, and the call returns only once
// every peer has released what it posted (its sends drained), so the next call of the thread
// may overwrite the region; calls of other threads (host streams, other callers) have their own.
// The region grows to the largest input staged so far and stays, so peers keep its mapping
// cached; it is freed when the thread ends (a peer that still maps it keeps those pages only).
#pragma once

#include <cstddef>

#include "src/mem/region_registry.h"

namespace loom {

// This thread's staging region, at least `bytes` (> 0) large. A larger request replaces the
// region. Null when the kernel refuses the memory (logged at INFO; requests that large are not
// tried again on this thread): the caller then fills each peer's slot.
const MemRegion* threadStagingRegion(size_t bytes);

}  // namespace loom
