// Which transport connects each pair of ranks, and the batch setup of many connections.
//
// Selection is NCCL's: the transports stand in order of preference (cuda_ipc, shm, ib, then
// socket) and the first whose canConnect accepts the pair wins. LOOM_TRANSPORT forces one for
// every pair; forcing one that cannot connect a pair is an InvalidArgument that says why. Both ends
// of a connection choose on their own from the same rank information, and the sender checks
// that the receiver chose the same (their environments may differ).
//
// connectAll runs the three phases of transport.h for a whole batch, so each rank sends all its
// phase-1 blobs before it waits for anything, and no rank waits on a peer that waits on it.
// Every bootstrap message of it is one SetupEnvelope (exact size): a status, the transport's
// name and its ConnectBlob, or the error text when that side failed, so the peer fails at once
// with the reason instead of waiting for its deadline. Tags: tags.h.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "transports/peers.h"
#include "transports/transport.h"
#include "transports/transport_setup.h"

namespace loom::transport {

// send = true: this rank sends to `peer` on `channel`; false: it receives from `peer`. The
// requests of the two ends must match (A sends to B on c <-> B receives from A on c); a
// request without its match shows up as a bootstrap timeout naming the peer.
//
// `protocol` must match too; a mismatch fails on both ends with a message naming both choices.
// A transport without LL (socket) carries an LL request as an ordinary connection: LL only
// pays off where the receiver can poll the sender's stores directly, i.e. in shared memory.
// The protocol is not part of a connection's identity (nor of its bootstrap tags, tags.h):
// a Simple and an LL connection between the same pair need different channel ids, e.g. LL on
// channel kMaxChannels / 2 + c. Reusing (peer, channel, send) is a duplicate request.
struct ConnectionRequest {
  int peer;
  int channel;
  bool send;
  Protocol protocol = Protocol::kSimple;
  // Simple slot size the receiver allocates (0: LOOM_BUFFSIZE / kSlots). Both ends of a pair
  // must ask for the same (the communicator derives it from the channel).
  size_t slotBytes = 0;
};

// The connections of a batch: sends[i] is the i-th send request in the order given, recvs[i]
// the i-th receive request; *Transport[i] names the transport that carries it.
struct Connections {
  std::vector<std::unique_ptr<SendConnection>> sends;
  std::vector<std::unique_ptr<RecvConnection>> recvs;
  std::vector<const char*> sendTransport;
  std::vector<const char*> recvTransport;
  // Receive sides whose setup did not finish (only in what a failed batch leaves).
  std::vector<std::unique_ptr<PendingRecv>> unfinished;
};

// The transports, in order of preference.
const std::vector<Transport*>& transports();

// The transport for (self, peer): LOOM_TRANSPORT if set, else the first that can connect them.
// Throws InvalidArgument for an unknown LOOM_TRANSPORT or a forced one that cannot connect them.
Transport& selectTransport(const PeerPair& pair);

// The smallest slot any transport gives `protocol`, and the largest pull threshold any
// transport has (0: no transport pulls). Asked by the planner and the pull policy.
size_t commonSlotBytes(Protocol protocol);
size_t pullThreshold();

// Connects every request through the communicator's bootstrap (`peers`); collective over the peers
// named. `batchTag` (0 to kMaxBatchTag in tags.h) must differ between batches that may overlap; a
// caller numbers them and wraps. Throws InvalidArgument for bad requests, RemoteError when a
// peer failed its side (with its message), TimeoutError when a peer does not answer.
// On failure, what the batch had made (connections, and receive sides a peer may have attached
// to) goes to `leftover` when given: a peer whose side is complete must not see this rank's
// side vanish, which reads as this rank's death, because this rank's own wait failed.
Connections connectAll(Peers& peers, const std::vector<ConnectionRequest>& requests,
                       uint32_t batchTag, Connections* leftover = nullptr);

}  // namespace loom::transport
