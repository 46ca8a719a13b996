// The ibverbs transport: RDMA over InfiniBand or RoCE, between any two ranks whose processes
// have a usable RDMA port (ib_devices.h). One RC queue pair per connection and direction;
// ib_connection.h has the data path (RDMA writes with immediate into the peer's ring, credits
// back as zero-byte writes with immediate).
//
// Setup, through the bootstrap's three phases (transport.h):
//   1. the receiver registers its ring, creates its QP, moves it to INIT, posts its receives
//      and sends {QP address, ring address, rkey, slot size};
//   2. the sender registers its ring, creates its QP, posts its receives, moves it to INIT,
//      RTR (toward the receiver) and RTS, and acknowledges with its QP address;
//   3. the receiver moves its QP to RTR and RTS and grants the first credits; the sender
//      writes nothing before them, so nothing reaches a QP that is not ready.
// A GPU rank's side registers a GPUDirect ring instead of a host ring where it can (ib_gdr.h),
// and logs which it chose and why; a receiver's blob then also carries the address and rkey of
// its step words.
//
// Choice. After shm in the registry's order: ranks of one host share memory; others use RDMA
// when this process has a usable port. Where some hosts have RDMA and others do not, the two
// ends of a pair choose differently and setup says so; set LOOM_TRANSPORT=socket (or
// LOOM_IB_DISABLE=1) on every rank then. Every connection is Simple (an LL request gets the
// same connection, as with socket).
#pragma once

#include "transports/transport_setup.h"

namespace loom::transport::ib {

class IbTransport final : public Transport {
 public:
  const char* name() const override { return "ib"; }
  LogSubsys logSubsys() const override { return kLogNet; }
  // True when this process has a usable RDMA port (discovered once, on first call).
  bool canConnect(const PeerPair& pair) const override;
  std::string whyNot(const PeerPair& pair) const override;
  std::unique_ptr<PendingRecv> setupRecv(const SetupContext& ctx, ConnectBlob* blob) override;
  std::unique_ptr<SendConnection> connectSend(const SetupContext& ctx, const ConnectBlob& blob,
                                              ConnectBlob* ack) override;
};

}  // namespace loom::transport::ib
