// A POSIX shared-memory segment (shm_open + mmap), owned RAII-style.
//
// The creator picks a random, unguessable name (O_EXCL, mode 0600, so no other user can open
// it and nobody can make us open theirs), reserves its memory with posix_fallocate so a
// /dev/shm that is too small fails here with a clear message instead of a SIGBUS on first
// touch, maps it and faults every page in once. The creator unlinks the name as soon as the
// peer has mapped it (or in its destructor): from then on the memory lives only as long as
// the mappings, and a crash leaves nothing behind in /dev/shm.
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

 private:
  void release() noexcept;
  void* data_ = nullptr;
  size_t size_ = 0;
  std::string name_;
  bool linked_ = false;  // our name is still in /dev/shm and ours to remove
};

namespace testing {
// Fault injection: when non-zero, create() asks posix_fallocate for this many bytes instead
// of the segment's size (a size larger than /dev/shm makes it fail with ENOSPC at once).
// Process-wide, like the core's test hooks; 0 restores normal behaviour.
void setFallocateBytesOverride(uint64_t bytes);
}  // namespace testing

}  // namespace loom::transport::shm
