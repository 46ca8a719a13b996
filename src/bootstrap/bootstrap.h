// The bootstrap network of one communicator: every rank's authenticated listener, a ring of
// TCP connections (rank -> rank+1) kept open for small collectives (allGather, barrier), the
// control channel (a star through rank 0 that spreads failures and progress reports), and
// tagged point-to-point messages for connection setup. It carries control data only, never
// user buffers.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "src/bootstrap/control_channel.h"
#include "src/bootstrap/unique_id.h"
#include "src/net/auth_listener.h"
#include "src/net/socket.h"

namespace loom {

struct BootstrapOptions {
  Secret secret{};
  int rank = 0;
  int nranks = 1;
  std::chrono::milliseconds timeout{0};  // 0: wait forever
  AbortFlag abort = nullptr;
  std::string owner;  // for logs: "comm 'name' rank r"
  // Where the control channel records the job's failures (usually what `abort` points to);
  // nullptr: no control channel.
  Interrupt* failures = nullptr;
  ControlChannel::Hooks control;
};

class Bootstrap {
 public:
  // Opens this rank's listener on the bootstrap interface (LOOM_SOCKET_IFNAME), choosing
  // loopback when `toward` (the root) is a loopback address.
  static std::unique_ptr<AuthListener> openListener(const Secret& secret, const std::string& owner,
                                                    const SocketAddress* toward);
  // Registers with the root named in the unique id, learns every rank's listener and connects
  // the ring.
  static std::unique_ptr<Bootstrap> viaRoot(const UniqueIdContents& id,
                                            const BootstrapOptions& options);
  // Connects the ring directly, when every rank's listener is already known (split).
  static std::unique_ptr<Bootstrap> viaPeers(std::unique_ptr<AuthListener> listener,
                                             std::vector<SocketAddress> peers,
                                             const BootstrapOptions& options);

  int rank() const { return options_.rank; }
  int nranks() const { return options_.nranks; }
  const Secret& secret() const { return options_.secret; }

  // data holds nranks blocks of bytesPerRank; this rank's block is filled in; on return all are.
  void allGather(void* data, size_t bytesPerRank);
  void barrier();
  // One message to/from `peer`, matched by tag; recv checks the size.
  void send(int peer, uint32_t tag, const void* data, size_t size);
  // `whatFor` names the wait in a timeout (default: the peer and the tag).
  void recv(int peer, uint32_t tag, void* data, size_t size, const std::string& whatFor = "");
  // A long-lived authenticated TCP connection to/from `peer` for a transport, matched by tag
  // (the socket transport's data streams). Both return a non-blocking, connected socket.
  Socket connectData(int peer, uint32_t tag);
  Socket acceptData(int peer, uint32_t tag);
  AbortFlag abortFlag() const { return options_.abort; }
  // The control channel (control_channel.h); nullptr without options.failures.
  ControlChannel* control() { return control_.get(); }
  std::chrono::milliseconds timeout() const { return options_.timeout; }
  // This rank's listener and every rank's listener address, for an exchange that must not wait
  // on the ring or on ranks known to be dead (loomCommShrink reaches only the survivors).
  AuthListener& listener() { return *listener_; }
  const std::vector<SocketAddress>& peerAddresses() const { return peers_; }

 private:
  Bootstrap(std::unique_ptr<AuthListener> listener, std::vector<SocketAddress> peers,
            const BootstrapOptions& options);
  void connectRing();
  // Before the ring: every rank but 0 connects to rank 0 (control_channel.h), so a rank that
  // dies from then on is named to all by rank 0.
  void connectControl(Deadline deadline);
  // After a ring peer closed: waits briefly for the control channel to name the rank that
  // died, and throws that failure if it comes.
  void awaitVerdict() const;
  Socket connectPeer(int peer, Deadline deadline);
  Deadline deadline() const;

  std::unique_ptr<AuthListener> listener_;
  std::vector<SocketAddress> peers_;
  BootstrapOptions options_;
  Socket next_;  // to rank+1
  Socket prev_;  // from rank-1
  // Declared last: destroyed first, so its goodbye goes out while the ring is still open.
  std::unique_ptr<ControlChannel> control_;
};

}  // namespace loom
