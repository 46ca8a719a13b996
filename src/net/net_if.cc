#include "src/net/net_if.h"

#include <ifaddrs.h>
#include <net/if.h>

#include <cstring>

#include "src/base/env.h"
#include "src/base/error.h"
#include "src/base/logging.h"

namespace loom {

std::vector<NetInterface> listInterfaces() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) throwSystemError("getifaddrs()", errno);
  std::vector<NetInterface> out;
  for (ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || !(ifa->ifa_flags & IFF_UP)) continue;
    int family = ifa->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    NetInterface itf;
    itf.name = ifa->ifa_name;
    itf.address.length = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    std::memcpy(&itf.address.storage, ifa->ifa_addr, itf.address.length);
    if (family == AF_INET6) {
      auto* a6 = reinterpret_cast<sockaddr_in6*>(&itf.address.storage);
      // Link-local addresses need a scope id on every connect; they are never the best choice.
      if (IN6_IS_ADDR_LINKLOCAL(&a6->sin6_addr)) continue;
    }
    out.push_back(itf);
  }
  freeifaddrs(list);
  return out;
}

InterfaceFilter::InterfaceFilter(const std::string& spec) {
  std::string s = spec;
  if (!s.empty() && s[0] == '^') {
    exclude_ = true;
    s = s.substr(1);
  }
  if (!s.empty() && s[0] == '=') {
    exact_ = true;
    s = s.substr(1);
  }
  items_ = splitList(s, ',');
}

bool InterfaceFilter::matches(const std::string& name) const {
  if (items_.empty()) return true;
  bool hit = false;
  for (const std::string& item : items_) {
    if (exact_ ? name == item : name.compare(0, item.size(), item) == 0) hit = true;
  }
  return exclude_ ? !hit : hit;
}

namespace {

bool isDefaultExcluded(const NetInterface& itf) {
  return itf.address.isLoopback() || itf.name == "lo" || itf.name.rfind("docker", 0) == 0;
}

std::string describe(const std::vector<NetInterface>& candidates) {
  std::string out;
  for (const NetInterface& c : candidates) {
    if (!out.empty()) out += ", ";
    out +=
        strCat(c.name, " (", c.address.toString().substr(0, c.address.toString().rfind(':')), ")");
  }
  return out.empty() ? "none" : out;
}

}  // namespace

NetInterface chooseInterface(const std::vector<NetInterface>& candidates, const std::string& spec,
                             const std::string& family, const SocketAddress* toward) {
  int wantFamily = AF_UNSPEC;
  if (family == "AF_INET")
    wantFamily = AF_INET;
  else if (family == "AF_INET6")
    wantFamily = AF_INET6;
  else
    LOOM_ENFORCE(family.empty(), InvalidArgument, "LOOM_SOCKET_FAMILY='", family,
                 "' must be AF_INET or AF_INET6");

  // IPv4 before IPv6 within each pass, preserving the system's interface order otherwise.
  auto pick = [&](auto&& accept) -> const NetInterface* {
    for (int fam : {AF_INET, AF_INET6}) {
      if (wantFamily != AF_UNSPEC && fam != wantFamily) continue;
      for (const NetInterface& c : candidates) {
        if (c.address.family() == fam && accept(c)) return &c;
      }
    }
    return nullptr;
  };

  if (!spec.empty()) {
    InterfaceFilter filter(spec);
    if (const NetInterface* c = pick([&](const NetInterface& i) { return filter.matches(i.name); }))
      return *c;
    throw SystemError(strCat("no network interface matches LOOM_SOCKET_IFNAME='", spec,
                             "'; interfaces here: ", describe(candidates)));
  }
  if (toward != nullptr && toward->valid() && toward->isLoopback()) {
    if (const NetInterface* c = pick([](const NetInterface& i) { return i.address.isLoopback(); }))
      return *c;
  }
  if (const NetInterface* c = pick([](const NetInterface& i) { return !isDefaultExcluded(i); }))
    return *c;
  if (const NetInterface* c = pick([](const NetInterface& i) { return i.address.isLoopback(); })) {
    LOOM_INFO(kLogNet, "no interface other than loopback found; using ", c->name,
              ": ranks on other hosts cannot reach this one");
    return *c;
  }
  throw SystemError(
      strCat("no usable network interface (up, with an IP address); interfaces "
             "here: ",
             describe(candidates), ". Set LOOM_SOCKET_IFNAME."));
}

NetInterface chooseBootstrapInterface(const SocketAddress* toward) {
  return chooseInterface(listInterfaces(), envString(EnvVar::LOOM_SOCKET_IFNAME),
                         envString(EnvVar::LOOM_SOCKET_FAMILY), toward);
}

}  // namespace loom
