#include "src/net/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "src/base/error.h"

namespace loom {

// ---- SocketAddress ------------------------------------------------------------------------

int SocketAddress::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  if (family() == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  return 0;
}

void SocketAddress::setPort(int port) {
  if (family() == AF_INET)
    reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(static_cast<uint16_t>(port));
  if (family() == AF_INET6)
    reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(static_cast<uint16_t>(port));
}

bool SocketAddress::isLoopback() const {
  if (family() == AF_INET) {
    uint32_t a = ntohl(reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr.s_addr);
    return (a >> 24) == 127;
  }
  if (family() == AF_INET6) {
    const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(&a);
  }
  return false;
}

std::string SocketAddress::toString() const {
  char host[NI_MAXHOST] = {0};
  if (!valid() || getnameinfo(sa(), length, host, sizeof(host), nullptr, 0, NI_NUMERICHOST) != 0)
    return "<invalid address>";
  if (family() == AF_INET6) return strCat("[", host, "]:", port());
  return strCat(host, ":", port());
}

SocketAddress SocketAddress::parse(const std::string& text, int familyHint) {
  std::string host, port;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    LOOM_ENFORCE(close != std::string::npos && close + 1 < text.size() && text[close + 1] == ':',
                 InvalidArgument, "address '", text, "' should look like [v6addr]:port");
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    LOOM_ENFORCE(colon != std::string::npos && colon > 0, InvalidArgument, "address '", text,
                 "' should look like host:port, [v6addr]:port or name:port");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    LOOM_ENFORCE(host.find(':') == std::string::npos, InvalidArgument, "address '", text,
                 "': put IPv6 addresses in brackets, as [", host, "]:port");
  }
  char* end = nullptr;
  long portNumber = std::strtol(port.c_str(), &end, 10);
  LOOM_ENFORCE(!port.empty() && *end == '\0' && portNumber >= 0 && portNumber <= 65535,
               InvalidArgument, "address '", text, "': port '", port, "' is not 0-65535");

  addrinfo hints{};
  hints.ai_family = familyHint;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &result);
  LOOM_ENFORCE(rc == 0 && result != nullptr, InvalidArgument, "cannot resolve '", host,
               "' in address '", text, "': ", gai_strerror(rc));
  // Prefer IPv4 when no family was asked for: it is what most clusters route.
  const addrinfo* chosen = result;
  for (const addrinfo* ai = result; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_family == AF_INET) {
      chosen = ai;
      break;
    }
  }
  SocketAddress out;
  std::memcpy(&out.storage, chosen->ai_addr, chosen->ai_addrlen);
  out.length = chosen->ai_addrlen;
  freeaddrinfo(result);
  return out;
}

// ---- Socket -------------------------------------------------------------------------------

namespace {

int newSocket(int family) {
  int fd = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) throwSystemError("socket()", errno);
  return fd;
}

void setNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// Waits until fd is ready for `events`; returns false when the deadline passed first.
bool waitReady(int fd, short events, Deadline deadline, AbortFlag abort, const char* what) {
  for (;;) {
    throwIfAborted(abort, what);
    if (deadline.expired()) return false;
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, deadline.pollMs(kAbortPollMs));
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) throwSystemError(strCat(what, ": poll()"), errno);
  }
}

}  // namespace

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.fd_;
    peer_ = std::move(other.peer_);
    other.fd_ = -1;
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Socket Socket::listen(const SocketAddress& address, int backlog) {
  Socket s(newSocket(address.family()));
  int one = 1;
  setsockopt(s.fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(s.fd_, address.sa(), address.length) != 0)
    throwSystemError(strCat("bind to ", address.toString(),
                            " (is the port in use, or the address not on this host?)"),
                     errno);
  if (::listen(s.fd_, backlog) != 0) throwSystemError("listen()", errno);
  s.peer_ = "listener";
  return s;
}

Socket Socket::connect(const SocketAddress& address, Deadline deadline, AbortFlag abort,
                       bool retryRefused) {
  int delayMs = 1;
  for (;;) {
    throwIfAborted(abort, "connect");
    Socket s(newSocket(address.family()));
    s.peer_ = address.toString();
    int rc = ::connect(s.fd_, address.sa(), address.length);
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      if (!waitReady(s.fd_, POLLOUT, deadline, abort, "connect")) {
        throw TimeoutError(strCat("connecting to ", address.toString(), " timed out"));
      }
      socklen_t len = sizeof(err);
      getsockopt(s.fd_, SOL_SOCKET, SO_ERROR, &err, &len);
    }
    if (err == 0) {
      setNoDelay(s.fd_);
      return s;
    }
    // Refused or reset: the listener may not be up yet; retry with backoff until the deadline.
    bool transient = err == ECONNREFUSED || err == ECONNRESET || err == ETIMEDOUT || err == EAGAIN;
    if (!transient || (!retryRefused && err != EAGAIN))
      throwSystemError(strCat("connect to ", address.toString()), err);
    if (deadline.expired())
      throwSystemError(
          strCat("connect to ", address.toString(), " kept failing until the deadline"), err);
    std::this_thread::sleep_for(std::chrono::milliseconds(deadline.pollMs(delayMs)));
    delayMs = delayMs < 100 ? delayMs * 2 : 100;
  }
}

Socket Socket::tryAccept() {
  int fd = ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED)
      return Socket();
    throwSystemError("accept()", errno);
  }
  setNoDelay(fd);
  Socket s(fd);
  s.peer_ = s.remoteAddress().toString();
  return s;
}

SocketAddress Socket::localAddress() const {
  SocketAddress a;
  a.length = sizeof(a.storage);
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&a.storage), &a.length) != 0) a.length = 0;
  return a;
}

SocketAddress Socket::remoteAddress() const {
  SocketAddress a;
  a.length = sizeof(a.storage);
  if (getpeername(fd_, reinterpret_cast<sockaddr*>(&a.storage), &a.length) != 0) a.length = 0;
  return a;
}

bool Socket::peerClosed() const {
  if (fd_ < 0) return true;
  char byte;
  ssize_t n = ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && (errno == ECONNRESET || errno == EPIPE));
}

bool Socket::peerReset() const {
  char byte;
  ssize_t n = ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == ECONNRESET || errno == EPIPE);
}

long Socket::recvSome(void* data, size_t size) {
  if (size == 0) return 0;
  const iovec piece{data, size};
  return recvSomeV(&piece, 1);
}

long Socket::recvSomeV(const struct iovec* pieces, int count) {
  msghdr message{};
  message.msg_iov = const_cast<iovec*>(pieces);
  message.msg_iovlen = static_cast<size_t>(count);
  for (;;) {
    ssize_t n = ::recvmsg(fd_, &message, 0);
    if (n > 0) return n;
    if (n == 0) return -1;  // the peer closed (callers ask for at least one byte)
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    if (errno == ECONNRESET || errno == EPIPE) return -1;
    throwSystemError(strCat("receive from ", peer_), errno);
  }
}

size_t Socket::sendSome(const void* data, size_t size) {
  for (;;) {
    ssize_t n = ::send(fd_, data, size, MSG_NOSIGNAL);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    if (errno == ECONNRESET || errno == EPIPE)
      throw RemoteError(strCat(peer_, " closed the connection (did it exit or crash?)"));
    throwSystemError(strCat("send to ", peer_), errno);
  }
}

size_t Socket::sendSomeV(const struct iovec* pieces, int count) {
  msghdr message{};
  message.msg_iov = const_cast<iovec*>(pieces);
  message.msg_iovlen = static_cast<size_t>(count);
  for (;;) {
    ssize_t n = ::sendmsg(fd_, &message, MSG_NOSIGNAL);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    if (errno == ECONNRESET || errno == EPIPE)
      throw RemoteError(strCat(peer_, " closed the connection (did it exit or crash?)"));
    throwSystemError(strCat("send to ", peer_), errno);
  }
}

void Socket::sendAll(const void* data, size_t size, Deadline deadline, AbortFlag abort) {
  Socket none;
  sendRecvAll(*this, data, size, none, nullptr, 0, deadline, abort);
}

void Socket::recvAll(void* data, size_t size, Deadline deadline, AbortFlag abort) {
  Socket none;
  sendRecvAll(none, nullptr, 0, *this, data, size, deadline, abort);
}

void sendRecvAll(Socket& out, const void* sendBuf, size_t sendSize, Socket& in, void* recvBuf,
                 size_t recvSize, Deadline deadline, AbortFlag abort) {
  const char* sendPtr = static_cast<const char*>(sendBuf);
  char* recvPtr = static_cast<char*>(recvBuf);
  size_t sent = 0, received = 0;
  bool watchOut = true;
  while (sent < sendSize || received < recvSize) {
    if (sent < sendSize) sent += out.sendSome(sendPtr + sent, sendSize - sent);
    if (received < recvSize) {
      long n = in.recvSome(recvPtr + received, recvSize - received);
      if (n < 0)
        throw RemoteError(strCat(in.peerName(), " closed the connection after ", received, " of ",
                                 recvSize, " bytes (did it exit or crash?)"));
      received += static_cast<size_t>(n);
    }
    if (sent == sendSize && received == recvSize) break;
    throwIfAborted(abort, "a socket transfer");
    if (deadline.expired())
      throw TimeoutError(
          strCat("timed out ", received < recvSize ? "receiving from " : "sending to ",
                 received < recvSize ? in.peerName() : out.peerName(), " (", received, "/",
                 recvSize, " bytes received, ", sent, "/", sendSize, " sent)"));
    // Also watch `out` for a reset. In a ring nothing arrives on it, and a peer that died
    // without reading what we sent resets the connection; waiting on `in` alone would then
    // hang until the deadline, because `in` waits on the same dead peer further round the
    // ring. An orderly close (FIN) is no error: a neighbour that has everything it needs
    // may finish and close before we do.
    pollfd fds[3];
    nfds_t count = 0;
    if (sent < sendSize) fds[count++] = {out.fd(), POLLOUT, 0};
    if (received < recvSize) fds[count++] = {in.fd(), POLLIN, 0};
    const bool watching = watchOut && out.valid() && out.fd() != in.fd();
    if (watching) fds[count++] = {out.fd(), POLLIN, 0};
    int rc = ::poll(fds, count, deadline.pollMs(kAbortPollMs));
    if (rc < 0 && errno != EINTR) throwSystemError("poll()", errno);
    if (rc > 0 && watching && fds[count - 1].revents != 0) {
      if (out.peerReset())
        throw RemoteError(strCat(out.peerName(), " reset the connection (did it exit or crash?)"));
      watchOut = false;  // closed in order, or data we do not expect: stop watching
    }
  }
}

}  // namespace loom
