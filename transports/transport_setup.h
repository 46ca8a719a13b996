// How a transport is set up: the interface the registry (registry.h) drives through the three
// phases that transport.h describes. One stateless object per transport; the registry asks
// them in order of preference and the first whose canConnect accepts a pair wins (NCCL's
// transport selection, as C++ interfaces).
//
// Phase 1 runs on the receiver (setupRecv), phase 2 on the sender (connectSend), phase 3 on
// the receiver again (PendingRecv::finish). The blobs travel through the bootstrap; a
// transport only fills and reads them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>

#include "src/base/logging.h"
#include "src/mem/region_registry.h"
#include "transports/peers.h"
#include "transports/transport.h"

namespace loom::transport {

// Everything a transport needs to know about the connection it sets up.
struct SetupContext {
  Peers& peers;
  int peer;
  int channel;
  uint32_t batchTag;  // data connections use dataTag(batchTag, channel, stream) (tags.h)
  Protocol protocol = Protocol::kSimple;  // a transport without LL ignores it (registry.h)
  size_t slotBytes = 0;                   // Simple slot size (ConnectionRequest::slotBytes)
  // Where the ring's buffers live and for which device: host memory for CPU communicators;
  // a CUDA communicator's transports put them in device or host-mapped memory.
  MemoryKind memory = MemoryKind::kHost;
  int device = -1;  // LOOM_DEVICE_CPU, or the CUDA ordinal of this rank
};

// A receiver between phases 1 and 3: holds what it created until the sender has attached.
class PendingRecv {
 public:
  virtual ~PendingRecv() = default;
  // Phase 3: the sender's acknowledgement arrived; finish and hand out the connection.
  virtual std::unique_ptr<RecvConnection> finish(const ConnectBlob& ack) = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  // "shm", "socket": the LOOM_TRANSPORT value that forces it, and the name in logs.
  virtual const char* name() const = 0;
  // The logging subsystem of its messages (LOOM_DEBUG_SUBSYS).
  virtual LogSubsys logSubsys() const = 0;
  // Whether this transport can carry data between the pair (two ranks of one communicator and
  // their path class: a CUDA IPC transport takes NVLink and PCIe paths, shm one host). Pure:
  // reads the pair and the environment only.
  virtual bool canConnect(const PeerPair& pair) const = 0;
  // Why canConnect refuses a pair, for the error when the user forced this transport.
  virtual std::string whyNot(const PeerPair& pair) const = 0;
  // Questions the planner asks instead of knowing a transport's internals:
  // The largest slot this transport gives a connection of `protocol` (SIZE_MAX: whatever
  // LOOM_BUFFSIZE asks for). Every rank of a ring cuts the data into the same pieces, so a
  // call's pieces fit the smallest slot of any transport (commonSlotBytes in registry.h).
  virtual size_t maxSlotBytes(Protocol protocol) const {
    (void)protocol;
    return SIZE_MAX;
  }
  // Whether the two ends share the memory of the ring (a store is seen by the peer; no
  // progress() moves data): what makes the LL protocol and single-copy steps pay.
  virtual bool sharesMemory() const { return false; }
  // The smallest step this transport may pull from the peer's memory with a system call
  // (CMA), or 0 when it never pulls; the executor's pull policy decides per call.
  virtual size_t pullThreshold() const { return 0; }
  bool canPull() const { return pullThreshold() > 0; }
  // Phase 1 (receiver): create this side; describe it to the sender in `blob`.
  virtual std::unique_ptr<PendingRecv> setupRecv(const SetupContext& ctx, ConnectBlob* blob) = 0;
  // Phase 2 (sender): attach to the receiver's side described by `blob`; fill `ack`.
  virtual std::unique_ptr<SendConnection> connectSend(const SetupContext& ctx,
                                                      const ConnectBlob& blob,
                                                      ConnectBlob* ack) = 0;
};

// Typed views of a ConnectBlob's bytes: a transport's blob struct must fit in it and be
// trivially copyable (it crosses process boundaries as bytes).
template <typename T>
void toBlob(const T& value, ConnectBlob* blob) {
  static_assert(sizeof(T) <= sizeof(ConnectBlob::bytes) && std::is_trivially_copyable_v<T>);
  *blob = ConnectBlob{};
  std::memcpy(blob->bytes, &value, sizeof(T));
}
template <typename T>
T fromBlob(const ConnectBlob& blob) {
  static_assert(sizeof(T) <= sizeof(ConnectBlob::bytes) && std::is_trivially_copyable_v<T>);
  T value;
  std::memcpy(&value, blob.bytes, sizeof(T));
  return value;
}

}  // namespace loom::transport
