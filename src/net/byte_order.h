// Big-endian (network order) fields of loom's own wire formats: the Hello
// (src/net/auth_listener.h) and the control channel's frames (src/bootstrap/control_channel.h).
// Each put advances the write cursor, each get the read cursor; callers check sizes first.
#pragma once

#include <arpa/inet.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace loom::wire {

inline void put16(uint8_t*& p, uint16_t v) {
  v = htons(v);
  std::memcpy(p, &v, 2);
  p += 2;
}
inline void put32(uint8_t*& p, uint32_t v) {
  v = htonl(v);
  std::memcpy(p, &v, 4);
  p += 4;
}
inline void put64(uint8_t*& p, uint64_t v) {
  put32(p, static_cast<uint32_t>(v >> 32));
  put32(p, static_cast<uint32_t>(v));
}
inline void put32(std::vector<uint8_t>& out, uint32_t v) {
  uint8_t bytes[4];
  uint8_t* p = bytes;
  put32(p, v);
  out.insert(out.end(), bytes, bytes + 4);
}
inline uint16_t get16(const uint8_t*& p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  p += 2;
  return ntohs(v);
}
inline uint32_t get32(const uint8_t*& p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  p += 4;
  return ntohl(v);
}
inline uint64_t get64(const uint8_t*& p) {
  const uint64_t hi = get32(p);
  return hi << 32 | get32(p);
}

}  // namespace loom::wire
