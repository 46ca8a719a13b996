// Handing a file descriptor to another process of this host: how a peer gets the memfd of a
// ring (shm_segment.h) or of a loomMemAlloc region (registered_read.h). Memory is shared by
// its fd, never by a name, so nothing can be left behind when a process dies (src/mem/memfd.h).
//
// Two ways between processes (threads of one process simply use the fd number as it is):
//   - pidfd. The importer opens a pidfd for the owner's pid and proves through it that the pid
//     names the owner: it takes the owner's identity memfd with pidfd_getfd and reads the
//     owner's random token from it (pid namespaces reuse numbers). From then on the pidfd pins
//     that process, and any of its fds can be taken by number (Linux >= 5.6). This needs the
//     same permission as ptrace: same user, and Yama's ptrace_scope 0 (scope 1, Ubuntu's
//     default, allows it only from an ancestor). PeerProcess is this; registered regions and
//     rings share it.
//   - SCM_RIGHTS, where ptrace is not allowed. The owner offers the fd (FdOffer) to its fd
//     server: a thread of the owner's process that listens on an abstract AF_UNIX socket with
//     a random name and hands an offered fd, once, to the client that names its ticket. A thread,
//     because the owner itself is busy: during connection setup it waits in the bootstrap
//     for its peers (transports/registry.cc), and cannot answer a request then. Only rings
//     take this way; a region's fd is wanted at any moment of a call, so a receiver that may
//     not take them copies registered steps through the ring instead.
//
// Who may. The ticket (the server's name and two random 64-bit words) travels in a connection
// blob over the authenticated bootstrap, so only the intended peer knows it. A stranger cannot
// fetch an offered fd: it does not know the request word. Nor can it slip in an fd of its own,
// even by binding the server's name after the owner died: the importer checks the fd it got
// against the check word, which the owner wrote into the file and the server never sends. Both
// ends also check that the other end runs as the same user (SO_PEERCRED).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "transports/shm/direct_read.h"

namespace loom::transport::shm {

// A one-page memfd holding `token`, for peers' pidfd_getfd probe; -1 where memfd fails.
int createIdentityFd(uint64_t token);

// A peer process whose fds this process may take with pidfd_getfd.
class PeerProcess {
 public:
  // The process `owner` (its identity from connection setup), shared by every user in this
  // process; nullptr when this process may not take its fds, with the reason in *why (asked of
  // the kernel once per process: a refusal is remembered).
  static std::shared_ptr<PeerProcess> open(const ProcessIdentity& owner, std::string* why);
  ~PeerProcess();
  PeerProcess(const PeerProcess&) = delete;
  PeerProcess& operator=(const PeerProcess&) = delete;

  // A new close-on-exec fd for the owner's fd `number` (the same open file), or -1 with errno.
  int takeFd(int32_t number) const;
  const ProcessIdentity& owner() const { return owner_; }

 private:
  PeerProcess(int pidfd, const ProcessIdentity& owner) : pidfd_(pidfd), owner_(owner) {}
  int pidfd_;
  ProcessIdentity owner_;
};

// What a peer needs to fetch an offered fd from its owner's server (plain bytes: it travels in
// a connection blob).
struct FdTicket {
  char server[40] = {};  // the server's abstract socket name, without the leading NUL
  uint64_t request = 0;  // the client sends it: which fd, and proof it may have it
  uint64_t check = 0;    // the owner wrote it where the fd's file shows it (shm_segment.h)
};

// An fd offered to one taker until it is taken or the offer is withdrawn (the destructor).
// The first offer of a process starts its fd server; after a fork, the child's first offer
// starts the child's own.
class FdOffer {
 public:
  FdOffer() = default;
  // Offers `fd`, which must stay open until the offer is withdrawn (the server sends it under
  // the same lock that withdraw() takes). Throws SystemError when the server cannot start.
  static FdOffer make(int fd);
  ~FdOffer() { withdraw(); }
  FdOffer(FdOffer&& other) noexcept;
  FdOffer& operator=(FdOffer&& other) noexcept;
  FdOffer(const FdOffer&) = delete;
  FdOffer& operator=(const FdOffer&) = delete;

  const FdTicket& ticket() const { return ticket_; }
  // Idempotent; a taken offer is gone already.
  void withdraw() noexcept;

 private:
  FdTicket ticket_;
  bool live_ = false;
};

// Fetches the fd that `ticket` names from the server of process `owner` (its pid lets the wait
// end at once when that process dies). Returns the fd, or -1 with the reason in *why.
int fetchOfferedFd(const FdTicket& ticket, int32_t ownerPid, std::string* why);

namespace testing {
// Fault injection: when set, PeerProcess::open refuses every process (as ptrace rules may),
// so rings come by SCM_RIGHTS. Process-wide, like the core's test hooks.
void refusePidfd(bool refuse);
}  // namespace testing

}  // namespace loom::transport::shm
