// What every transport's slot ring shares: the slot size rule and the control block layout.
//
// A ring is kSlots slots of slotBytes each plus two counters (transport.h). tail counts slots
// the sender posted, head slots the receiver released; slot s lives at index s % kSlots. The
// counters sit on their own cache lines so the sender's and the receiver's stores never share
// a line (no false sharing between the two cores that spin on them).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "transports/transport.h"
#include "transports/wait.h"

namespace loom::transport {

inline constexpr size_t kCacheLine = 64;
inline constexpr size_t kPageBytes = 4096;

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

// LOOM_BUFFSIZE / kSlots rounded up to whole pages (at least one). Throws InvalidArgument for
// a value that is not a positive size or is too large to map (over 1 GiB per connection).
size_t slotBytesFromEnv();
// The same for LOOM_P2P_BUFFSIZE: connections that come one per peer (point-to-point,
// AlltoAll, trees), where a rank may hold many.
size_t p2pSlotBytesFromEnv();

inline constexpr size_t roundUp(size_t value, size_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

}  // namespace loom::transport

namespace loom::transport {

// Private memory for one side of a ring (the socket transport), mapped and faulted in once at
// setup: a page fault costs microseconds, more than a small message, so none may happen per
// message.
class PrivateMemory {
 public:
  PrivateMemory() = default;
  explicit PrivateMemory(size_t bytes);  // throws SystemError when it cannot be mapped
  ~PrivateMemory();
  PrivateMemory(PrivateMemory&& other) noexcept;
  PrivateMemory& operator=(PrivateMemory&& other) noexcept;
  PrivateMemory(const PrivateMemory&) = delete;
  PrivateMemory& operator=(const PrivateMemory&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace loom::transport
