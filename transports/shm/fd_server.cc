// The SCM_RIGHTS way (fd_passing.h): FdOffer, the per-process fd server that hands offered fds
// out, and its client, fetchOfferedFd.
//
// The protocol, on a fresh AF_UNIX stream connection to the server's abstract name:
//   client -> server  8 bytes: the offer's request word
//   server -> client  4 bytes: 0 and the fd (SCM_RIGHTS), or ENOENT and no fd
// then the server closes the connection. An offer is served once: the request word of a taken
// or withdrawn offer gets ENOENT.
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "src/base/deadline.h"
#include "src/base/env.h"
#include "src/base/error.h"
#include "src/base/logging.h"
#include "transports/shm/fd_passing.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

namespace loom::transport::shm {
namespace {

constexpr int32_t kServed = 0;
// A client has this long to send its request: a stranger that connects and says nothing must
// not hold a slot of the server for long.
constexpr auto kClientPatience = std::chrono::seconds(5);
constexpr size_t kMaxClients = 256;

uint64_t randomWord() {
  uint64_t w = 0;
  if (getrandom(&w, sizeof(w), 0) != static_cast<ssize_t>(sizeof(w)))
    throwSystemError("getrandom for an fd offer", errno);
  return w;
}

// Every server's name: "loom-fd-<pid>-<random>".
std::string serverPrefix(long pid) { return strCat("loom-fd-", pid, "-"); }

sockaddr_un abstractAddress(const char* name, socklen_t* len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const size_t n = strnlen(name, sizeof(a.sun_path) - 1);
  std::memcpy(a.sun_path + 1, name, n);  // sun_path[0] stays 0: the abstract namespace
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  return a;
}

// Whether the other end of `sock` runs as our user.
bool sameUser(int sock) {
  ucred c{};
  socklen_t n = sizeof(c);
  return getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &c, &n) == 0 && c.uid == geteuid();
}

// The server of one process. A forked child gets a copy of its parent's, which it never
// touches (its mutex may have been held at the fork): the child's first offer makes its own.
struct Server {
  pid_t pid = 0;
  int listener = -1;
  std::string name;  // without the leading NUL
  std::mutex mutex;
  std::map<uint64_t, int> offers;  // request word -> the offered fd (the offer's owner's)
};

std::atomic<Server*> current{nullptr};
std::mutex startMutex;

struct Client {
  int fd;
  std::chrono::steady_clock::time_point since;
  uint8_t request[8];
  size_t got;
};

// Answers `c`'s complete request and hands the fd out, once. The send happens under the lock,
// so an owner that withdraws the offer (and then closes the fd) waits until it is done.
void answer(Server& s, const Client& c) {
  uint64_t request;
  std::memcpy(&request, c.request, sizeof(request));
  std::lock_guard<std::mutex> lock(s.mutex);
  int fd = -1;
  if (auto it = s.offers.find(request); it != s.offers.end()) {
    fd = it->second;
    s.offers.erase(it);
  }
  int32_t status = fd >= 0 ? kServed : ENOENT;
  iovec iov{&status, sizeof(status)};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(cm), &fd, sizeof(int));
  }
  // A fresh connection's buffer takes 4 bytes at once; a client that is gone simply misses it.
  (void)sendmsg(c.fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
}

[[noreturn]] void serve(Server* s) {
  std::vector<Client> clients;
  std::vector<pollfd> fds;
  for (;;) {
    fds.assign(1, pollfd{s->listener, POLLIN, 0});
    for (const Client& c : clients) fds.push_back(pollfd{c.fd, POLLIN, 0});
    if (poll(fds.data(), fds.size(), clients.empty() ? -1 : 1000) < 0) {
      if (errno != EINTR) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    const auto now = std::chrono::steady_clock::now();
    std::vector<Client> kept;
    for (size_t i = 0; i < clients.size(); ++i) {
      Client c = clients[i];
      bool done = now - c.since > kClientPatience;
      if (!done && fds[i + 1].revents != 0) {
        const ssize_t n = read(c.fd, c.request + c.got, sizeof(c.request) - c.got);
        if (n > 0) c.got += static_cast<size_t>(n);
        done = n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR);
        if (c.got == sizeof(c.request)) {
          answer(*s, c);
          done = true;
        }
      }
      if (done)
        close(c.fd);
      else
        kept.push_back(c);
    }
    clients.swap(kept);
    if (fds[0].revents == 0) continue;
    for (;;) {
      const int fd = accept4(s->listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) break;
      if (!sameUser(fd) || clients.size() >= kMaxClients) {
        close(fd);
        continue;
      }
      clients.push_back(Client{fd, now, {}, 0});
    }
  }
}

// This process's server, started on first use.
Server& server() {
  Server* s = current.load(std::memory_order_acquire);
  const pid_t pid = getpid();
  if (s != nullptr && s->pid == pid) return *s;
  std::lock_guard<std::mutex> lock(startMutex);
  s = current.load(std::memory_order_relaxed);
  if (s != nullptr && s->pid == pid) return *s;
  // A forked child's copy of the listener would keep our parent's name bound after it dies.
  if (s != nullptr && s->listener >= 0) {
    close(s->listener);
    s->listener = -1;  // our copy of the parent's server: never closed twice
  }
  auto fresh = std::make_unique<Server>();
  fresh->pid = pid;
  fresh->name = strCat(serverPrefix(pid), randomWord());
  fresh->listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fresh->listener < 0) throwSystemError("socket(AF_UNIX) for the shm fd server", errno);
  socklen_t len = 0;
  const sockaddr_un address = abstractAddress(fresh->name.c_str(), &len);
  if (bind(fresh->listener, reinterpret_cast<const sockaddr*>(&address), len) != 0 ||
      listen(fresh->listener, SOMAXCONN) != 0) {
    const int err = errno;
    close(fresh->listener);
    throwSystemError(strCat("binding the shm fd server to abstract socket @", fresh->name), err);
  }
  try {
    std::thread(serve, fresh.get()).detach();
  } catch (const std::system_error& e) {
    close(fresh->listener);
    throw SystemError(strCat("starting the shm fd server's thread: ", e.what()));
  }
  // Never destroyed from here on: the thread serves until the process ends.
  Server* started = fresh.release();
  LOOM_INFO(kLogShm, "fd server listens on abstract socket @", started->name);
  current.store(started, std::memory_order_release);
  return *started;
}

// Waits until `sock` is readable, or the owner (its pidfd, -1: unknown) exits, or `deadline`.
// Returns "" when readable, else why not.
std::string waitReadable(int sock, int pidfd, const Deadline& deadline) {
  for (;;) {
    pollfd fds[2] = {{sock, POLLIN, 0}, {pidfd, POLLIN, 0}};
    const int n = poll(fds, pidfd >= 0 ? 2 : 1, deadline.pollMs(1000));
    if (n < 0 && errno != EINTR) return strCat("poll: ", std::strerror(errno));
    if (n > 0 && fds[0].revents != 0) return "";
    if (n > 0 && fds[1].revents != 0) return "the process exited";
    if (deadline.expired()) return "no answer within LOOM_TIMEOUT";
  }
}

}  // namespace

FdOffer FdOffer::make(int fd) {
  Server& s = server();
  FdOffer offer;
  std::snprintf(offer.ticket_.server, sizeof(offer.ticket_.server), "%s", s.name.c_str());
  offer.ticket_.check = randomWord();
  std::lock_guard<std::mutex> lock(s.mutex);
  do {
    offer.ticket_.request = randomWord();
  } while (offer.ticket_.request == 0 || s.offers.count(offer.ticket_.request) != 0);
  s.offers[offer.ticket_.request] = fd;
  offer.live_ = true;
  return offer;
}

void FdOffer::withdraw() noexcept {
  if (!live_) return;
  live_ = false;
  Server* s = current.load(std::memory_order_acquire);
  if (s == nullptr || s->pid != getpid()) return;  // an offer of the parent, seen in a child
  std::lock_guard<std::mutex> lock(s->mutex);
  s->offers.erase(ticket_.request);  // nothing if taken already
}

FdOffer::FdOffer(FdOffer&& other) noexcept
    : ticket_(other.ticket_), live_(std::exchange(other.live_, false)) {}

FdOffer& FdOffer::operator=(FdOffer&& other) noexcept {
  if (this != &other) {
    withdraw();
    ticket_ = other.ticket_;
    live_ = std::exchange(other.live_, false);
  }
  return *this;
}

int fetchOfferedFd(const FdTicket& ticket, int32_t ownerPid, std::string* why) {
  struct Fd {
    int fd;
    ~Fd() {
      if (fd >= 0) close(fd);
    }
  };
  char name[sizeof(ticket.server) + 1] = {};
  std::memcpy(name, ticket.server, sizeof(ticket.server));
  // Only ever a loom fd server, and the owner's: a peer's blob must not make us talk to any
  // other socket of this user.
  if (std::strncmp(name, serverPrefix(ownerPid).c_str(), serverPrefix(ownerPid).size()) != 0) {
    *why = strCat("its blob names no fd server of process ", ownerPid);
    return -1;
  }
  const std::string where = strCat("its fd server @", name);
  Fd sock{socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  if (sock.fd < 0) {
    *why = strCat("socket(AF_UNIX): ", std::strerror(errno));
    return -1;
  }
  // pidfd_open needs no permission over the process: it only lets the wait end when it dies.
  Fd owner{static_cast<int>(syscall(SYS_pidfd_open, ownerPid, 0))};
  const int64_t timeoutS = envInt(EnvVar::LOOM_TIMEOUT);
  const Deadline deadline = Deadline::after(std::chrono::seconds(timeoutS > 0 ? timeoutS : 0));
  // A UNIX connect waits only while the listener's backlog is full: bounded the same way.
  const timeval patience{1, 0};
  setsockopt(sock.fd, SOL_SOCKET, SO_SNDTIMEO, &patience, sizeof(patience));
  socklen_t len = 0;
  const sockaddr_un address = abstractAddress(name, &len);
  int rc;
  while ((rc = connect(sock.fd, reinterpret_cast<const sockaddr*>(&address), len)) != 0 &&
         (errno == EINTR || errno == EAGAIN) && !deadline.expired()) {
  }
  if (rc != 0) {
    *why = strCat("connecting to ", where, ": ", std::strerror(errno),
                  " (is it in another network namespace?)");
    return -1;
  }
  if (!sameUser(sock.fd)) {
    *why = strCat(where, " runs as another user");
    return -1;
  }
  if (send(sock.fd, &ticket.request, sizeof(ticket.request), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(sizeof(ticket.request))) {
    *why = strCat("sending to ", where, ": ", std::strerror(errno));
    return -1;
  }
  if (std::string late = waitReadable(sock.fd, owner.fd, deadline); !late.empty()) {
    *why = strCat("waiting for ", where, ": ", late);
    return -1;
  }
  int32_t status = -1;
  iovec iov{&status, sizeof(status)};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = recvmsg(sock.fd, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  int fd = -1;
  for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm != nullptr; cm = CMSG_NXTHDR(&msg, cm)) {
    if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
        cm->cmsg_len == CMSG_LEN(sizeof(int)) && fd < 0)
      std::memcpy(&fd, CMSG_DATA(cm), sizeof(int));
  }
  if (n == static_cast<ssize_t>(sizeof(status)) && status == kServed && fd >= 0 &&
      (msg.msg_flags & MSG_CTRUNC) == 0)
    return fd;
  if (fd >= 0) close(fd);
  if (n < 0)
    *why = strCat("reading from ", where, ": ", std::strerror(errno));
  else if (n == 0)
    *why = strCat(where, " closed the connection (did the process exit?)");
  else
    *why = strCat(where, " has no such offer (taken or withdrawn already)");
  return -1;
}

}  // namespace loom::transport::shm
