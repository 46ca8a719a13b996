// The receiving side of registered single-copy steps: reading a peer process's loomMemAlloc
// regions (src/mem/region_registry.h) through mappings of our own.
//
// How it works. A registered step arrives as (region id, the region's fd number in the sender,
// offset). The first time a region is seen, the receiver takes the sender's fd with
// pidfd_getfd (PeerProcess, fd_passing.h: Linux >= 5.6, the same ptrace permission as CMA),
// checks it is a sealed memfd (src/mem/memfd.h), maps it read-only
// and keeps the mapping in a cache per sender process, shared by every connection from it.
// Steps then read straight from that mapping: one copy in all, done by the receiver's fused
// reduceCopy.
//
// Who may. At setup (phase 3) the receiver proves it can take the sender's fds (PeerProcess:
// a pidfd, proven by the sender's token, that pins that process). If the probe fails (a
// region's fd is wanted in the middle of a call, so the SCM_RIGHTS way of fd_passing.h, made
// for setup, is not used here) the receiver logs it once
// at INFO and tells the sender through the ring's control block; the pair then copies through
// the ring for good. Until the verdict is in, the sender copies through the ring as well.
//
// Freed regions. Ids are never reused, so a mapping found by id is always the right region.
// When the owner frees a region a peer still maps, the peer's mapping keeps the pages alive
// (only that memory, read-only) until it is evicted: the cache holds at most kMaxMappings
// regions per sender, and each time it maps a new one it drops those whose fd the sender no
// longer holds.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "transports/shm/direct_read.h"
#include "transports/shm/fd_passing.h"

namespace loom::transport::shm {

// Registered steps this process has received (released) so far, from any peer: lets tests and
// diagnostics see that the single-copy path was really taken.
uint64_t registeredStepsReceived();
void countRegisteredStep();

// A read-only mapping of one peer region; unmapped when the last holder drops it (the cache or
// a connection that is reading a step from it).
struct PeerMapping {
  uint64_t id = 0;
  int32_t fd = -1;  // the region's fd number in the sender
  dev_t device = 0;
  ino_t inode = 0;
  const uint8_t* data = nullptr;
  size_t size = 0;
  ~PeerMapping();
};

class PeerRegions {
 public:
  // The regions of process `sender`, shared by every connection from it; nullptr when this
  // process may not take its fds (logged once per sender at INFO). `peer` names it in logs.
  static std::shared_ptr<PeerRegions> open(const ProcessIdentity& sender, int peer);
  ~PeerRegions();
  PeerRegions(const PeerRegions&) = delete;
  PeerRegions& operator=(const PeerRegions&) = delete;

  // The mapping of the sender's region `id` (fd number `fd` there) holding `bytes` at
  // `offset`; maps it on first use. Throws RemoteError when the sender no longer has it (freed
  // while a collective used it) or the range lies outside it. Thread-safe.
  std::shared_ptr<const PeerMapping> map(uint64_t id, int32_t fd, uint64_t offset, size_t bytes);

  static constexpr size_t kMaxMappings = 64;

 private:
  PeerRegions(std::shared_ptr<PeerProcess> sender, int peer);
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace loom::transport::shm
