// The control block of a Simple ring in shared memory: the counters, the byte count and
// single-copy fields of each slot, and the doorbells, in the first page of the segment that
// both processes map (shm_transport.cc). The counters sit on their own cache lines so the
// sender's and the receiver's stores never share a line (no false sharing between the two
// cores that spin on them).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "transports/slot_ring.h"
#include "transports/wait.h"

namespace loom::transport::shm {

// The control block at the start of a shared ring. It must be lock-free to work between
// processes: a lock-based std::atomic would keep its lock in the process, not in the segment.
struct RingControl {
  alignas(kCacheLine) std::atomic<uint64_t> tail{0};  // written by the sender only
  alignas(kCacheLine) std::atomic<uint64_t> head{0};  // written by the receiver only
  // Byte count of each slot: written by the sender before it publishes tail, read by the
  // receiver after it loads tail (acquire), so the counter orders it like the data.
  alignas(kCacheLine) uint64_t bytes[kSlots] = {};
  // Non-zero: the slot's data is not in the slot but at this address in the sender's memory
  // (a single-copy step, shm/direct_read.h). Published by tail like bytes[].
  uint64_t direct[kSlots] = {};
  // Non-zero: the slot's data is in the sender's loomMemAlloc region with this id (never 0),
  // at offset direct[] of it; regionFd[] is the region's fd in the sender (shm/registered_read.h).
  uint64_t region[kSlots] = {};
  int32_t regionFd[kSlots] = {};
  // The receiver's verdict on registered steps, written once at setup: 0 not yet (the sender
  // copies through the ring meanwhile), 1 it maps the sender's regions, 2 it may not.
  std::atomic<uint32_t> registeredVerdict{0};
  // The same for CMA steps: the receiver reads the sender's memory, so only the receiver can
  // tell whether the kernel lets it (ptrace rules are not symmetric: a process that is not
  // dumpable may read others and not be read).
  std::atomic<uint32_t> cmaVerdict{0};
  // The receiver sleeps on dataBell until the sender posts, the sender on spaceBell until the
  // receiver releases (wait.h). Own lines: the flags are read by every post and release.
  alignas(kCacheLine) Doorbell dataBell;
  alignas(kCacheLine) Doorbell spaceBell;
};
static_assert(std::atomic<uint64_t>::is_always_lock_free);

// Slot data starts one page after the control block: page-aligned (so 64-byte aligned for
// vector loads) and never on a line the counters use.
inline constexpr size_t kRingDataOffset = kPageBytes;
static_assert(sizeof(RingControl) <= kRingDataOffset);

}  // namespace loom::transport::shm
