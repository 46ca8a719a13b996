// The registry of memory regions that peers can reach without a copy through a ring:
// loomMemAlloc's regions (NCCL's ncclMemAlloc plus buffer registration, in one call). It is
// transport-neutral: a region says what memory it is and carries the handle a peer imports it
// by; which transport imports it, and how, is the transport's business.
//
// Why. Between processes the shm transport copies every byte twice: the sender into a slot of
// the shared ring, the receiver out of it. When a step's data lies in a region from
// loomMemAlloc, the sender posts only (region id, offset); the receiver maps the region once
// (transports/shm/registered_read.h) and its fused reduceCopy reads the data in place, as
// threads of one process already do (transports/shm/direct_read.h).
//
// How. Each region is a memfd (anonymous shared memory with an fd) mapped MAP_SHARED here; its
// size is sealed, so a peer that maps it can never fault on a page that vanished. The registry
// below is process-wide - regions are a property of the process's memory, not of one
// communicator - and maps each region's base to {id, size, fd}. Ids count up from 1 and are
// never reused, so a peer that still maps a freed region (its mapping keeps the pages alive
// until it evicts it) never mistakes it for a newer one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "src/mem/memory_kind.h"

namespace loom {

// Host regions are memfds; CUDA regions (device memory with an IPC handle, host memory mapped
// for a device) are the CUDA data path's to add.

struct MemRegion {
  uint64_t id = 0;  // 1, 2, ...; never reused in this process
  uintptr_t base = 0;
  size_t size = 0;  // the mapped size (the request rounded up to whole pages)
  int fd = -1;      // kHost: the memfd; peers duplicate it with pidfd_getfd
  MemoryKind kind = MemoryKind::kHost;
  int device = -1;  // LOOM_DEVICE_CPU for host regions, else the CUDA ordinal
};

// Creates and maps a region of at least `size` bytes (> 0). Throws InvalidArgument for size 0,
// SystemError when the kernel refuses (out of memory, no memfd).
MemRegion allocRegion(size_t size);

// Unmaps and closes the region starting at `base`. Throws InvalidArgument for a pointer that is
// not the start of a live region.
void freeRegion(void* base);

// The region that holds all of [data, data + bytes), if any. Thread-safe; cheap enough to ask
// once per step.
std::optional<MemRegion> findRegion(const void* data, size_t bytes);

}  // namespace loom
