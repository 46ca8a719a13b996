// TEST DOUBLE: socket helpers and the listener of the soft NIC's TCP wire (format in wire.h).
#include "wire.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "qp.h"
#include "softnic.h"

namespace softnic::wire {

bool carriesPayload(const Request& r) { return r.op == kSend || r.op == kWrite; }

bool readFull(int fd, void* buf, size_t len) {
  auto* p = static_cast<char*>(buf);
  while (len > 0) {
    ssize_t n = ::recv(fd, p, len, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= size_t(n);
  }
  return true;
}

bool writeFull(int fd, const void* buf, size_t len) {
  iovec one{const_cast<void*>(buf), len};
  return writev(fd, {one});
}

namespace {

// Runs readv/writev until every byte of iov moved, advancing past partial transfers.
template <class Io>
bool moveAll(std::vector<iovec> iov, Io io) {
  size_t first = 0;
  while (first < iov.size()) {
    if (iov[first].iov_len == 0) {
      ++first;
      continue;
    }
    int count = int(std::min<size_t>(iov.size() - first, 64));
    ssize_t n = io(&iov[first], count);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    size_t left = size_t(n);
    while (left > 0) {
      size_t take = std::min(left, iov[first].iov_len);
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + take;
      iov[first].iov_len -= take;
      left -= take;
      if (iov[first].iov_len == 0) ++first;
    }
  }
  return true;
}

}  // namespace

bool readv(int fd, std::vector<iovec> iov) {
  return moveAll(std::move(iov), [fd](iovec* v, int n) { return ::readv(fd, v, n); });
}

bool writev(int fd, std::vector<iovec> iov) {
  return moveAll(std::move(iov), [fd](iovec* v, int n) {
    msghdr msg{};
    msg.msg_iov = v;
    msg.msg_iovlen = size_t(n);
    return ::sendmsg(fd, &msg, MSG_NOSIGNAL);
  });
}

bool drain(int fd, size_t len) {
  char buf[65536];
  while (len > 0) {
    size_t take = std::min(len, sizeof(buf));
    if (!readFull(fd, buf, take)) return false;
    len -= take;
  }
  return true;
}

bool waitReadable(int fd, int timeoutMs) {
  pollfd p{fd, POLLIN, 0};
  for (;;) {
    int r = poll(&p, 1, timeoutMs);
    if (r < 0 && errno == EINTR) continue;
    return r > 0;
  }
}

int connectTo(uint32_t ipv4, uint16_t port, int timeoutMs) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = ipv4;
  int r = connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
  if (r != 0 && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    int err = 0;
    socklen_t len = sizeof(err);
    if (poll(&p, 1, timeoutMs) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 &&
        err == 0)
      r = 0;
  }
  if (r != 0) {
    close(fd);
    return -1;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

}  // namespace softnic::wire

namespace softnic {
namespace {

// Serves one requester: resolves each request against the destination QP, in arrival order.
void serveConnection(Device* dev, int fd) {
  wire::Hello hello{};
  if (wire::readFull(fd, &hello, sizeof(hello)) && hello.magic == wire::kHelloMagic) {
    wire::Request req{};
    while (wire::readFull(fd, &req, sizeof(req))) {
      std::shared_ptr<Qp> qp = dev->findQp(hello.dstQpn);
      bool keep = qp != nullptr ? qp->respond(hello.srcQpn, req, fd) : respondDrop(req, fd);
      if (!keep) break;
    }
  }
  close(fd);
}

void acceptLoop(Device* dev, int listenFd) {
  for (;;) {
    int fd = accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE) continue;
      return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::thread(serveConnection, dev, fd).detach();
  }
}

}  // namespace

bool respondDrop(const wire::Request& req, int fd) {
  if (wire::carriesPayload(req) && !wire::drain(fd, req.length)) return false;
  wire::Response resp{};
  resp.status = wire::kDrop;
  resp.psn = req.psn;
  return wire::writeFull(fd, &resp, sizeof(resp));
}

bool startListener(Device* dev) {
  std::lock_guard<std::mutex> lock(dev->mu);
  if (dev->listening) return true;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = dev->ipv4;
  socklen_t len = sizeof(sa);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || listen(fd, 512) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    int saved = errno;
    close(fd);
    errno = saved;
    return false;
  }
  dev->tcpPort = ntohs(sa.sin_port);
  dev->listening = true;
  // The listener lives as long as the process, like the NIC it stands for.
  std::thread(acceptLoop, dev, fd).detach();
  return true;
}

}  // namespace softnic
