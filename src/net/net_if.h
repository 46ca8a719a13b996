// Network interfaces and the choice of the one loom binds to (LOOM_SOCKET_IFNAME, as NCCL's
// NCCL_SOCKET_IFNAME: comma list of name prefixes, '^' excludes, '=' matches exact names).
#pragma once

#include <string>
#include <vector>

#include "src/net/socket.h"

namespace loom {

struct NetInterface {
  std::string name;
  SocketAddress address;  // port 0
};

// Every interface that is up and has an IPv4 or IPv6 address (link-local IPv6 skipped).
std::vector<NetInterface> listInterfaces();

class InterfaceFilter {
 public:
  // Parses a LOOM_SOCKET_IFNAME value; an empty one matches everything.
  explicit InterfaceFilter(const std::string& spec);
  bool matches(const std::string& name) const;
  bool empty() const { return items_.empty(); }

 private:
  bool exclude_ = false;
  bool exact_ = false;
  std::vector<std::string> items_;
};

// Chooses the address to listen on. With an ifname spec: the first match (IPv4 first).
// Without: an interface other than lo and docker*, else loopback (logged at INFO). With
// `toward` valid and no spec, a loopback `toward` (a local rendezvous) selects loopback.
// `family` is "", "AF_INET" or "AF_INET6". Throws SystemError naming the interfaces it saw.
NetInterface chooseInterface(const std::vector<NetInterface>& candidates, const std::string& spec,
                             const std::string& family, const SocketAddress* toward);

// chooseInterface over listInterfaces() with LOOM_SOCKET_IFNAME and LOOM_SOCKET_FAMILY.
NetInterface chooseBootstrapInterface(const SocketAddress* toward);

}  // namespace loom
