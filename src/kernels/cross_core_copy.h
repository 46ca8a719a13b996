// A byte copy for data that crosses between cores through shared memory: out of a slot another
// core has just written, or into a slot another core reads next.
//
// Why. Such a copy waits on the other core's cache for every line: a load of a line still dirty
// there, or a store that must first take the line back from it. A plain memcpy walks one page
// at a time; walking 8 pages at once, one line of each in turn (as Intel MPI's copy out of its
// cells does), likely gives the hardware prefetchers 8 streams to keep in flight instead of one
// (the VM it was measured on has no counters to confirm it). Two threads on two cores
// exchanging 128-256 KiB through two buffers took 1.3-1.4x less time with it on both sides
// (3.2-3.5 ns a line against 4.3-4.8, far state; docs/performance.md, "Medium transfers").
// On lines this core already holds, or clean in the other core's cache, it measured slower
// than memcpy (0.7-0.9x), so it is only for copies that cross (prim_task.cc decides).
#pragma once

#include <cstddef>

namespace loom {

// Copies `bytes` from `src` to `dst` (no overlap, any alignment), kCrossCoreBlockBytes at a
// time, one line of each of its pages in turn; the tail that fills no block goes through memcpy.
void crossCoreCopy(void* dst, const void* src, size_t bytes);

inline constexpr size_t kCrossCorePages = 8;
inline constexpr size_t kCrossCoreBlockBytes = kCrossCorePages * 4096;

}  // namespace loom
