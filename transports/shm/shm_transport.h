// The shared-memory transport: ranks on one host share the slot ring itself.
//
// The receiver creates the ring in a memfd (shm_segment.h) and describes it in the ConnectBlob;
// the sender imports the fd (fd_passing.h), maps it and acknowledges; the receiver then
// withdraws the fd's offer. No name exists at any moment. Both sides then work on the same
// memory: the sender writes a slot's data and byte count, then publishes tail with a release
// store; the receiver loads tail with acquire, reads the slot, then publishes head with a
// release store, which the sender loads with acquire before it reuses the slot. Nothing else is
// shared and nothing is copied: progress() has no work to do. Works the same between threads of one
// process and between processes.
//
// A dead peer cannot be detected from the ring: a sender that died simply stops posting, a
// receiver that died stops releasing. During a long wait the executor asks the connection's
// checkPeer(), which sees that the peer no longer holds its lock byte on the segment
// (shm_segment.h); its deadline and abort checks cover the rest (docs/architecture.md,
// "Errors, timeouts and dead peers").
#pragma once

#include "transports/transport_setup.h"

namespace loom::transport {

class ShmTransport final : public Transport {
 public:
  const char* name() const override { return "shm"; }
  LogSubsys logSubsys() const override { return kLogShm; }
  // Both ranks on one host (same host hash) and LOOM_SHM_DISABLE is not 1.
  bool canConnect(const PeerPair& pair) const override;
  std::string whyNot(const PeerPair& pair) const override;
  // LL slots are small (ll_connection.h); Simple slots are LOOM_BUFFSIZE's.
  size_t maxSlotBytes(Protocol protocol) const override;
  bool sharesMemory() const override { return true; }
  // LOOM_SHM_CMA_THRESHOLD (direct_read.h).
  size_t pullThreshold() const override;
  std::unique_ptr<PendingRecv> setupRecv(const SetupContext& ctx, ConnectBlob* blob) override;
  std::unique_ptr<SendConnection> connectSend(const SetupContext& ctx, const ConnectBlob& blob,
                                              ConnectBlob* ack) override;
};

// Whether LOOM_SHM_DISABLE asks for no shared memory.
bool shmDisabled();

}  // namespace loom::transport
