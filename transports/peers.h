// What a transport may ask of the communicator whose connections it sets up. The
// communicator (class Comm) implements it; transports see nothing else of it, so they
// depend only on this interface, the base utilities and the sockets below them.
//   - who the ranks are: this rank, the group's size, what each rank said about itself, and
//     how the topology connects this rank to each peer (the path class, src/topo);
//   - blob exchange: exact-size, tagged messages over the authenticated bootstrap
//     (the three setup phases of transport.h travel this way);
//   - data sockets: long-lived authenticated TCP connections to a peer, for wire transports.
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/net/socket.h"
#include "src/topo/path_class.h"

namespace loom {

// What each rank tells the others at init; later subsystems append their fields.
struct RankInfo {
  uint64_t hostHash = 0;
  int32_t rank = -1;
  int32_t device = -1;  // LOOM_DEVICE_CPU, or a CUDA device ordinal
  int32_t pid = 0;
  int32_t version = 0;
  // A CUDA rank's GPU (src/comm/device.h): its UUID (the same for every process that shares
  // it), PCI bus id ("0000:3b:00.0") and what it can share (cuda::DeviceCap bits); zero for a
  // CPU rank.
  uint8_t gpuUuid[16] = {};
  char gpuBusId[16] = {};
  uint32_t gpuCaps = 0;
  int32_t reserved = 0;
};

namespace transport {

// A pair of ranks as a transport judges it (Transport::canConnect): what each said about
// itself, and the class of the path between them in the communicator's topology.
struct PeerPair {
  const RankInfo& self;
  const RankInfo& peer;
  topo::PathClass path = topo::PathClass::kNetwork;
};

class Peers {
 public:
  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  virtual const RankInfo& rankInfo(int rank) const = 0;
  // How the topology connects this rank and `peer` (kSameProcess ... kNetwork).
  virtual topo::PathClass pathClass(int peer) const = 0;
  // The NIC the topology gives this rank's traffic (paired with its GPU, else nearest its
  // NUMA node; src/topo/system.h), or null when the topology shows none.
  virtual const topo::Nic* localNic() const { return nullptr; }
  // One message to or from `peer`, matched by tag (tags.h); receiving checks the size.
  virtual void sendBlob(int peer, uint32_t tag, const void* data, size_t size) = 0;
  virtual void recvBlob(int peer, uint32_t tag, void* data, size_t size) = 0;
  // A non-blocking, connected, authenticated socket to or from `peer`, matched by tag.
  virtual Socket connectData(int peer, uint32_t tag) = 0;
  virtual Socket acceptData(int peer, uint32_t tag) = 0;

 protected:
  ~Peers() = default;
};

}  // namespace transport
}  // namespace loom
