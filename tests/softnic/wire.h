// TEST DOUBLE: the soft NIC's wire, one TCP connection per requesting QP.
//
// A requester QP connects to the NIC named by its destination GID and sends a Hello naming the
// destination QP and itself. Then, per work request, strictly one at a time (stop-and-wait keeps
// RC ordering trivially true): a Request, `length` payload bytes for SEND and WRITE, and the
// responder answers with a Response, followed by `length` bytes for an acknowledged READ.
// Fields are in host byte order: both ends are this soft NIC on one architecture. imm is carried
// as the caller gave it (network order, as in ibv_send_wr).
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace softnic::wire {

constexpr uint32_t kHelloMagic = 0x31484e53;  // "SNH1"

struct Hello {
  uint32_t magic;
  uint32_t dstQpn;
  uint32_t srcQpn;
  uint32_t pad;
};

enum Op : uint8_t { kSend = 1, kWrite = 2, kRead = 3 };

struct Request {
  uint8_t op;
  uint8_t hasImm;
  uint8_t solicited;
  uint8_t pad;
  uint32_t psn;  // 24 bits, as on the IB wire
  uint32_t imm;
  uint32_t length;
  uint64_t remoteAddr;
  uint32_t rkey;
  uint32_t pad2;
};

// kDrop is what a real responder does silently (wrong state, wrong PSN, unknown QP); the
// requester treats it exactly like a transport timeout.
enum Status : uint8_t {
  kAck = 1,
  kRnrNak,
  kRemoteAccess,
  kRemoteInvalid,
  kRemoteOp,
  kDrop,
};

struct Response {
  uint8_t status;
  uint8_t rnrTimer;  // the responder's min_rnr_timer, with kRnrNak
  uint16_t pad;
  uint32_t psn;
  uint32_t length;
  uint32_t pad2;
};

bool carriesPayload(const Request& r);
bool readFull(int fd, void* buf, size_t len);
bool writeFull(int fd, const void* buf, size_t len);
bool readv(int fd, std::vector<iovec> iov);
bool writev(int fd, std::vector<iovec> iov);
bool drain(int fd, size_t len);
// Connects to ipv4:port (network-order address), waiting at most timeoutMs; -1 on failure.
int connectTo(uint32_t ipv4, uint16_t port, int timeoutMs);
// Waits for fd to become readable; false on timeout.
bool waitReadable(int fd, int timeoutMs);

}  // namespace softnic::wire
