// A byte copy for data that crosses between cores through shared memory: out of a slot another
// core has just written, or into a slot another core reads next.
//
// Why. Such a copy waits on the other core's cache for every line: a load of a line still dirty
// there, or a store that must first take the line back from it. memcpy walks one page at a
// time; walking 8 pages at once, one line of each in turn (as Intel MPI's copy out of its cells
// does), likely gives the hardware prefetchers 8 streams to keep in flight instead of one, so more
// of those waits overlap. On lines this core already holds, or that are clean in the other core's
// cache, nothing waits and the walk only costs more than memcpy, so it is for copies that cross
// and no others (prim_task.cc decides). Whether it wins depends on the CPU: on an Intel Xeon VM
// it did, on an AMD EPYC VM it loses, so it is a way the communicator measures
// (src/exec/cpu/shm_way_policy.h). docs/performance.md ("Medium transfers", "The page walk")
// has the figures.
#pragma once

#include <cstddef>

namespace loom {

// Copies `bytes` from `src` to `dst` (no overlap, any alignment), kCrossCoreBlockBytes at a
// time, one line of each of its pages in turn; the tail that fills no block goes through memcpy.
void crossCoreCopy(void* dst, const void* src, size_t bytes);

// The walk's shape, shared with reduceCopy's pair path (ReduceCopyArgs::crossCorePages).
inline constexpr size_t kCrossCorePages = 8, kCrossCorePageBytes = 4096, kCrossCoreLineBytes = 64;
inline constexpr size_t kCrossCoreBlockBytes = kCrossCorePages * kCrossCorePageBytes;

}  // namespace loom
