// TCP sockets for the bootstrap (and later the socket transport): addresses, an RAII socket,
// and whole-buffer send/receive that honour a deadline and an abort flag. All fds are
// non-blocking and close-on-exec; waits are poll() in short slices.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <string>

#include "src/base/deadline.h"

namespace loom {

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;

  int family() const { return storage.ss_family; }
  int port() const;
  void setPort(int port);
  bool isLoopback() const;
  bool valid() const { return length > 0; }
  // "10.0.0.1:5000" or "[fe80::1%eth0]:5000".
  std::string toString() const;
  const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&storage); }

  // Parses "host:port", "[v6]:port", "name:port" (resolved with getaddrinfo); with
  // `familyHint` (AF_INET, AF_INET6 or AF_UNSPEC) choosing among a name's addresses.
  // Throws InvalidArgument with the text when it cannot be parsed or resolved.
  static SocketAddress parse(const std::string& text, int familyHint = AF_UNSPEC);
};

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { close(); }
  Socket(Socket&& other) noexcept : fd_(other.fd_), peer_(std::move(other.peer_)) {
    other.fd_ = -1;
  }
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  // Binds and listens; port 0 picks a free one. SO_REUSEADDR so a fixed LOOM_COMM_ID port can
  // be reused right after a job ends.
  static Socket listen(const SocketAddress& address, int backlog = 1024);
  // Connects. With `retryRefused`, a refused attempt is retried until `deadline` (for a peer
  // that may not listen yet, like a LOOM_COMM_ID root); without, it fails at once (the peer's
  // listener existed, so a refusal means the peer is gone).
  static Socket connect(const SocketAddress& address, Deadline deadline, AbortFlag abort,
                        bool retryRefused);
  // Accepts one pending connection, or returns an invalid Socket when none is pending.
  Socket tryAccept();

  bool valid() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  void close();
  SocketAddress localAddress() const;
  SocketAddress remoteAddress() const;

  // Who is at the other end, for error messages ("rank 3", "the rendezvous root").
  void setPeerName(std::string name) { peer_ = std::move(name); }
  const std::string& peerName() const { return peer_; }

  // Sends/receives exactly `size` bytes or throws: TimeoutError at the deadline, RemoteError
  // when the peer closes or resets the connection, InvalidUsage when aborted.
  void sendAll(const void* data, size_t size, Deadline deadline, AbortFlag abort);
  void recvAll(void* data, size_t size, Deadline deadline, AbortFlag abort);
  // Non-blocking: bytes read into data (0 if none ready); -1 when the peer closed the connection.
  long recvSome(void* data, size_t size);
  // As recvSome, scattering into `count` pieces with one recvmsg.
  long recvSomeV(const struct iovec* pieces, int count);
  // Non-blocking: true when the peer has closed or reset the connection (unread data aside).
  bool peerClosed() const;
  // Non-blocking: true only when the peer reset the connection (it died with unread data).
  bool peerReset() const;
  // Non-blocking: bytes sent (0 if the send buffer is full).
  size_t sendSome(const void* data, size_t size);
  // As sendSome, gathering `count` pieces into one sendmsg (a header and data elsewhere).
  size_t sendSomeV(const struct iovec* pieces, int count);

 private:
  int fd_ = -1;
  std::string peer_ = "peer";
};

// Sends `sendBuf` on `out` while receiving `recvBuf` from `in`, progressing both at once so two
// neighbours in a ring never deadlock on full socket buffers. `out` and `in` may be one socket.
void sendRecvAll(Socket& out, const void* sendBuf, size_t sendSize, Socket& in, void* recvBuf,
                 size_t recvSize, Deadline deadline, AbortFlag abort);

}  // namespace loom
