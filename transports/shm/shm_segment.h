// The shared memory of one shm connection: a memfd both sides map, owned RAII-style.
//
// No name. The creator (the connection's receiver) makes a sealed memfd (src/mem/memfd.h),
// reserves its memory with fallocate so that a lack of memory fails here with a clear message
// instead of a SIGBUS on first touch, maps it and faults every page in once. Its peer gets the
// fd itself (fd_passing.h): the fd number as it is between threads of one process, with
// pidfd_getfd where ptrace rules allow it, else by SCM_RIGHTS from the creator's fd server. The
// memory lives only as long as some process holds the fd or a mapping, so a process killed at
// any instant leaves nothing behind, and /dev/shm (and its size) plays no part.
//
// The right file. The creator writes a random check word just past the mapped bytes; the
// importer maps nothing until it finds there the word the connection blob announced (which
// travelled over the authenticated bootstrap), so no stranger can hand it another file.
//
// Whether the peer is still there. Each side holds an open-file-description lock
// (F_OFD_SETLK) on one byte of the file: byte 0 the creator's, byte 1 the importer's. The
// kernel drops such a lock when the last descriptor of that open file description closes, so
// also when the process dies however it dies (SIGKILL, OOM killer), and a peer's lock is
// visible through F_OFD_GETLK without any permission over its process (no pid, no ptrace; pid
// namespaces do not matter). An fd passed between processes shares its open file description
// with the owner's, and locks of one description never conflict with each other, so the
// importer first reopens the file as a description of its own (/proc/self/fd/N). Each side
// tells the other whether it holds its lock (blob and acknowledgement); a side looks at the
// peer's lock only when both do. A rank killed in the middle of a call over shared memory is
// otherwise only noticed by the timeout: its peers poll a ring nobody will write.
#pragma once

#include <cstddef>
#include <cstdint>

#include "transports/shm/direct_read.h"
#include "transports/shm/fd_passing.h"

namespace loom::transport::shm {

// What the creator tells its peer so it can import the segment (plain bytes: it travels in
// the connection blob).
struct SegmentHandle {
  ProcessIdentity owner = {};  // the creating process
  int32_t fd = -1;             // the memfd's number there
  uint8_t ownerMarked = 0;     // the creator holds its lock byte
  uint64_t bytes = 0;          // the mapped size
  FdTicket ticket;             // the creator's offer of the fd; its check word is in the file
};

class ShmSegment {
 public:
  ShmSegment() = default;
  // Creates and maps a new segment of `bytes`, zero-filled and faulted in, and offers its fd
  // to one peer. Throws SystemError (saying what memory ran out and the remedies).
  static ShmSegment create(size_t bytes);
  // Imports and maps the segment that rank `peer` created and described in `handle`, checking
  // it is that segment of `bytes`. Throws SystemError when the fd cannot be had, RemoteError
  // when what came is not the segment announced.
  static ShmSegment attach(const SegmentHandle& handle, size_t bytes, int peer);
  ~ShmSegment();
  ShmSegment(ShmSegment&& other) noexcept;
  ShmSegment& operator=(ShmSegment&& other) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  // The creator's description of the segment, for the connection blob.
  const SegmentHandle& handle() const { return handle_; }
  // The creator, once its peer acknowledged: withdraws the fd's offer and records whether the
  // peer holds its lock byte (its acknowledgement says).
  void peerAttached(bool peerMarked);
  // Whether this side holds its lock byte (the importer tells its peer in the acknowledgement).
  bool marked() const { return marked_; }
  void* data() const { return data_; }
  size_t size() const { return size_; }
  // False once the other side's process no longer holds the segment (it exited, crashed or
  // destroyed the connection). A system call: for long waits, not for every poll. True while
  // either side has no lock byte (then nothing is detected).
  bool peerHoldsIt() const;

 private:
  void release() noexcept;
  void holdMark();  // takes this side's lock
  void* data_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;              // kept open: it holds our mark
  bool creator_ = false;     // our mark is byte 0 (creator) or 1 (importer)
  bool marked_ = false;      // our mark is held
  bool peerMarked_ = false;  // the peer's is (as it told us)
  SegmentHandle handle_;     // the creator's
  FdOffer offer_;            // the creator's, until the peer attached
};

// Throws RemoteError naming `peer` when it no longer holds `segment` (the connections'
// checkPeer()).
void checkPeerHolds(const ShmSegment& segment, int peer);

namespace testing {
// Fault injection: when non-zero, create() fails to reserve its memory with this errno
// (ENOMEM: as when the host or the memory cgroup is full), without asking the kernel.
// Process-wide, like the core's test hooks; 0 restores normal behaviour.
void setReserveError(int err);
}  // namespace testing

}  // namespace loom::transport::shm
