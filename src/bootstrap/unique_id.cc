#include "src/bootstrap/unique_id.h"

#include <arpa/inet.h>

#include <cerrno>
#include <cstring>

#include "src/base/error.h"

namespace loom {
namespace {

constexpr uint32_t kIdMagic = 0x4c4d4944;  // "LMID"
constexpr uint16_t kIdVersion = 1;
constexpr uint16_t kFlagRootAtRank0 = 1;

// Layout: magic(4) version(2) flags(2) family(2) port(2) scope(4) addr(16) secret(16) zero...
struct Writer {
  uint8_t* p;
  void bytes(const void* d, size_t n) {
    std::memcpy(p, d, n);
    p += n;
  }
  void u16(uint16_t v) {
    v = htons(v);
    bytes(&v, 2);
  }
  void u32(uint32_t v) {
    v = htonl(v);
    bytes(&v, 4);
  }
};
struct Reader {
  const uint8_t* p;
  void bytes(void* d, size_t n) {
    std::memcpy(d, p, n);
    p += n;
  }
  uint16_t u16() {
    uint16_t v;
    bytes(&v, 2);
    return ntohs(v);
  }
  uint32_t u32() {
    uint32_t v;
    bytes(&v, 4);
    return ntohl(v);
  }
};

}  // namespace

loomUniqueId packUniqueId(const UniqueIdContents& c) {
  loomUniqueId id;
  std::memset(&id, 0, sizeof(id));
  Writer w{reinterpret_cast<uint8_t*>(id.internal)};
  w.u32(kIdMagic);
  w.u16(kIdVersion);
  w.u16(c.rootAtRank0 ? kFlagRootAtRank0 : 0);
  w.u16(static_cast<uint16_t>(c.root.family()));
  w.u16(static_cast<uint16_t>(c.root.port()));
  uint8_t addr[16] = {0};
  uint32_t scope = 0;
  if (c.root.family() == AF_INET) {
    std::memcpy(addr, &reinterpret_cast<const sockaddr_in*>(&c.root.storage)->sin_addr, 4);
  } else if (c.root.family() == AF_INET6) {
    auto* a6 = reinterpret_cast<const sockaddr_in6*>(&c.root.storage);
    std::memcpy(addr, &a6->sin6_addr, 16);
    scope = a6->sin6_scope_id;
  }
  w.u32(scope);
  w.bytes(addr, 16);
  w.bytes(c.secret.data(), c.secret.size());
  return id;
}

UniqueIdContents unpackUniqueId(const loomUniqueId& id) {
  Reader r{reinterpret_cast<const uint8_t*>(id.internal)};
  uint32_t magic = r.u32();
  uint16_t version = r.u16();
  LOOM_ENFORCE(magic == kIdMagic, InvalidArgument,
               "the unique id is not a loom id (bad magic); pass the bytes loomGetUniqueId() "
               "wrote, unchanged, to every rank");
  LOOM_ENFORCE(version == kIdVersion, InvalidArgument, "the unique id has version ", version,
               " but this loom reads version ", kIdVersion,
               "; every rank must run the same loom version");
  UniqueIdContents c;
  uint16_t flags = r.u16();
  LOOM_ENFORCE((flags & ~kFlagRootAtRank0) == 0, InvalidArgument,
               "the unique id has unknown flags ", flags, "; was it corrupted?");
  c.rootAtRank0 = (flags & kFlagRootAtRank0) != 0;
  uint16_t family = r.u16();
  uint16_t port = r.u16();
  uint32_t scope = r.u32();
  uint8_t addr[16];
  r.bytes(addr, 16);
  r.bytes(c.secret.data(), c.secret.size());
  if (family == AF_INET) {
    auto* a4 = reinterpret_cast<sockaddr_in*>(&c.root.storage);
    a4->sin_family = AF_INET;
    std::memcpy(&a4->sin_addr, addr, 4);
    c.root.length = sizeof(sockaddr_in);
  } else if (family == AF_INET6) {
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&c.root.storage);
    a6->sin6_family = AF_INET6;
    std::memcpy(&a6->sin6_addr, addr, 16);
    a6->sin6_scope_id = scope;
    c.root.length = sizeof(sockaddr_in6);
  } else {
    throw InvalidArgument(
        strCat("the unique id holds an unknown address family ", family, "; was it corrupted?"));
  }
  LOOM_ENFORCE(port != 0, InvalidArgument, "the unique id holds port 0; was it corrupted?");
  c.root.setPort(port);
  return c;
}

}  // namespace loom
