// Anonymous shared memory with a file descriptor (memfd), the one kind of memory that loom
// shares between processes of a host: loomMemAlloc's regions (region_registry.h) and the shm
// transport's rings (transports/shm/shm_segment.h) are both made and checked here.
//
// Why memfds. A memfd has no name anywhere: it lives as long as some process holds its fd or
// a mapping of it, so no crash, at whatever instant, can leave anything behind (a POSIX
// segment in /dev/shm outlives a process killed before it unlinked the name). Its pages come
// from the kernel's internal shmem mount, not from /dev/shm, so the size of /dev/shm (64 MB in
// a container started without --shm-size) does not limit it; they count against the memory
// cgroup of the process that first touches them, like any other shared memory. A peer process
// gets the fd itself (transports/shm/fd_passing.h), never a name.
//
// Why sealed. Each memfd is sealed at its size (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
// before anyone else can see it: a peer that maps it relies on every page staying there, since
// a file that shrank under a mapping would turn the next read into a SIGBUS. An importer
// checks the seals (sealedMemfd) before it maps anything it was handed.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>

namespace loom {

// Creates a memfd called `name` (shown in /proc/PID/fd; not a path) of exactly `bytes` > 0
// bytes, close-on-exec and sealed at its size, its pages not yet allocated. Returns the fd;
// throws SystemError naming `what` (what the memory is for) when the kernel refuses.
int createSealedMemfd(const char* name, size_t bytes, const char* what);

// Allocates every page of `fd`'s first `bytes` now (fallocate), so that a lack of memory
// shows here as an error instead of a SIGBUS when a page is first touched. Returns 0 or the
// errno (ENOMEM, ENOSPC: the host or the memory cgroup has no room).
int reserveMemfd(int fd, size_t bytes);

// What an importer learns of an fd it was handed.
struct MemfdInfo {
  size_t size = 0;
  dev_t device = 0;
  ino_t inode = 0;
};
// The fd's size and identity when it is a memfd whose size is sealed (createSealedMemfd made
// it), else nullopt: the only kind of fd a peer's word may make us map.
std::optional<MemfdInfo> sealedMemfd(int fd);

}  // namespace loom
