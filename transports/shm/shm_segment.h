// A POSIX shared-memory segment (shm_open + mmap), owned RAII-style.
//
// The creator picks a random, unguessable name (O_EXCL, mode 0600, so no other user can open
// it and nobody can make us open theirs), reserves its memory with posix_fallocate so a
// /dev/shm that is too small fails here with a clear message instead of a SIGBUS on first
// touch, maps it and faults every page in once. The creator unlinks the name as soon as the
// peer has mapped it (or in its destructor): from then on the memory lives only as long as
// the mappings, and a crash leaves nothing behind in /dev/shm.
//
// Whether the peer is still there. Each side keeps its descriptor open and holds an
// open-file-description lock (F_OFD_SETLK) on one byte of the file: byte 0 the creator's,
// byte 1 the attacher's. The kernel drops such a lock when the process's last descriptor of
// it closes, so also when the process dies however it dies (SIGKILL, OOM killer), and a
// peer's lock is visible through F_OFD_GETLK without any permission over its process (no pid,
// no ptrace; pid namespaces do not matter). A rank killed in the middle of a call over shared
// memory is otherwise only noticed by the timeout: its peers poll a ring nobody will write.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace loom::transport::shm {

// Every segment's name is "/loom-<creator pid>-<16 random hex digits>"; tests find leaks of
// one process by this prefix (as a file under /dev/shm: "loom-<pid>-").
std::string segmentNamePrefix(long pid);

class ShmSegment {
 public:
  ShmSegment() = default;
  // Creates and maps a new segment of `bytes`, zero-filled and faulted in. Throws SystemError
  // (naming /dev/shm and the remedy when it is too small).
  static ShmSegment create(size_t bytes);
  // Maps the segment `name` that another process or thread created, checking it holds at
  // least `bytes`. Throws SystemError.
  static ShmSegment attach(const std::string& name, size_t bytes);
  ~ShmSegment();
  ShmSegment(ShmSegment&& other) noexcept;
  ShmSegment& operator=(ShmSegment&& other) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  // Removes the name from /dev/shm (the mapping stays valid). Idempotent; a name that is gone
  // already (the peer unlinked it) is fine.
  void unlink();
  void* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }
  // False once the other side's process no longer holds the segment (it exited, crashed or
  // destroyed the connection). A system call: for long waits, not for every poll. True where
  // the locks are not available (then nothing is detected, as before).
  bool peerHoldsIt() const;

 private:
  void release() noexcept;
  void holdMark();  // takes this side's lock
  void* data_ = nullptr;
  size_t size_ = 0;
  std::string name_;
  int fd_ = -1;           // kept open: it holds our mark
  bool creator_ = false;  // our mark is byte 0 (creator) or 1 (attacher)
  bool marked_ = false;   // our mark is held (else the peer's is not looked at either)
  bool linked_ = false;   // our name is still in /dev/shm and ours to remove
};

// Throws RemoteError naming `peer` when it no longer holds `segment` (the connections'
// checkPeer()).
void checkPeerHolds(const ShmSegment& segment, int peer);

namespace testing {
// Fault injection: when non-zero, create() asks posix_fallocate for this many bytes instead
// of the segment's size (a size larger than /dev/shm makes it fail with ENOSPC at once).
// Process-wide, like the core's test hooks; 0 restores normal behaviour.
void setFallocateBytesOverride(uint64_t bytes);
}  // namespace testing

}  // namespace loom::transport::shm
