// What every transport's slot ring shares: the slot size rule and the control block layout.
//
// A ring is kSlots slots of slotBytes each plus two counters (transport.h). tail counts slots
// the sender posted, head slots the receiver released; slot s lives at index s % kSlots. Where
// the counters live is the transport's: in memory both sides map (shm/ring_control.h), or on
// each side of a wire (socket/socket_connection.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "transports/transport.h"
#include "transports/wait.h"

namespace loom::transport {

inline constexpr size_t kCacheLine = 64;
inline constexpr size_t kPageBytes = 4096;

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
