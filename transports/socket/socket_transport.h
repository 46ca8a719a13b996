// The TCP transport: connects any two ranks, on one host or not. Each connection is
// LOOM_SOCKET_NSTREAMS authenticated TCP streams from Bootstrap::connectData/acceptData, plus
// a private slot ring on each side; socket_connection.h has the wire format and flow control.
//
// Setup: the receiver maps its ring and says how big the slots are and how many streams it
// wants (phase 1); the sender adopts both, maps its ring, opens the streams to the receiver's
// listener and acknowledges (phase 2); the receiver takes the streams off its listener, where
// they have been waiting (phase 3). No phase waits on a peer that is waiting itself: the
// connects complete against the listener's backlog before the receiver accepts.
//
// Every connection is Simple: an LL request (ctx.protocol) gets the same socket connection.
// LL saves the counter round trip of a receiver polling shared memory; over TCP each slot is
// one message anyway, and a flag per 4 bytes would only double the bytes on the wire.
#pragma once

#include "transports/transport_setup.h"

namespace loom::transport {

class SocketTransport final : public Transport {
 public:
  const char* name() const override { return "socket"; }
  LogSubsys logSubsys() const override { return kLogNet; }
  bool canConnect(const PeerPair&) const override { return true; }
  std::string whyNot(const PeerPair&) const override { return ""; }
  std::unique_ptr<PendingRecv> setupRecv(const SetupContext& ctx, ConnectBlob* blob) override;
  std::unique_ptr<SendConnection> connectSend(const SetupContext& ctx, const ConnectBlob& blob,
                                              ConnectBlob* ack) override;
};

}  // namespace loom::transport
