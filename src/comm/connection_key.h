// Which of the connections between two ranks a task uses: what the connection is for (a
// ring channel, a tree, point-to-point, a ring of hierarchical AllReduce), its index among
// those (the channel) and the protocol whose memory layout it has. The planner names every
// connection of a plan this way; both ends of a pair derive the same key from the same call.
//
// Each key has a dense wire id, the only place the fields are packed into one number: the
// bootstrap tags of the connection's setup carry it (transports/tags.h, 8 bits), and the
// communicator indexes its connection table by it.
#pragma once

#include <cstdint>

#include "transports/transport.h"

namespace loom {

enum class LinkPurpose : uint8_t {
  kRing,       // ring algorithms and chains; channel `index`
  kTree0,      // the first tree of the double binary tree; channel `index`
  kTree1,      // the second tree
  kP2p,        // Send/Recv; index 0
  kHierInter,  // hierarchical AllReduce: the ring across nodes; channel `index`
  kHierIntra,  // hierarchical AllReduce: the ring inside a node; channel `index`
  // Collectives that talk to every peer directly (AlltoAll, the exchange and doubling
  // AllReduce); index 0. Not kP2p: Send/Recv on one stream and a collective on another may
  // run at once, in either order, and a connection's slots match in order.
  kDirect,
};
inline constexpr int kLinkPurposes = 7;
// Channels per purpose (LOOM_NCHANNELS is at most this).
inline constexpr int kMaxKeyIndex = 16;

struct ConnectionKey {
  LinkPurpose purpose = LinkPurpose::kRing;
  uint8_t index = 0;
  transport::Protocol protocol = transport::Protocol::kSimple;

  static constexpr int kWireIds = 2 * kLinkPurposes * kMaxKeyIndex;
  constexpr int wireId() const {
    return (static_cast<int>(protocol) * kLinkPurposes + static_cast<int>(purpose)) * kMaxKeyIndex +
           index;
  }
  // Rings and chains stream a whole call through two connections per channel and get
  // LOOM_BUFFSIZE; trees and point-to-point (up to one per peer) get LOOM_P2P_BUFFSIZE.
  constexpr bool ringBuffers() const {
    return purpose == LinkPurpose::kRing || purpose == LinkPurpose::kHierInter ||
           purpose == LinkPurpose::kHierIntra;
  }
  constexpr bool operator==(const ConnectionKey& o) const = default;
};
static_assert(ConnectionKey::kWireIds <= 256, "wire ids must fit the 8-bit tag field");

inline constexpr ConnectionKey treeKey(int tree, int channel, transport::Protocol protocol) {
  return ConnectionKey{tree == 0 ? LinkPurpose::kTree0 : LinkPurpose::kTree1,
                       static_cast<uint8_t>(channel), protocol};
}

// One direction of a connection to a peer: what a plan asks the communicator to connect.
struct LinkRequest {
  int peer = -1;
  ConnectionKey key;
  bool send = false;
  // A stable order (both ends of a pair sort their requests the same way).
  bool operator<(const LinkRequest& o) const {
    const int a = key.wireId(), b = o.key.wireId();
    return peer != o.peer ? peer < o.peer : a != b ? a < b : send < o.send;
  }
};

}  // namespace loom
