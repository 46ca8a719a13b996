// Helpers of the transport tests, shared by the GoogleTest binary and the rank process
// (transport_rank_main.cc), so they report problems as strings rather than test failures.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "src/comm/comm.h"
#include "transports/registry.h"

namespace loom::transport::test {

// Bytes of step `step` from `sender` on `channel`: 0, 1, a whole slot, a slot less one, small
// odd sizes and pseudo-random ones, all derived from the arguments so the receiver knows them.
size_t stepBytes(size_t slotBytes, int sender, int channel, uint64_t step);
// Fills `bytes` of the pattern of (sender, channel, step); checkStep returns "" when `data`
// holds exactly that pattern, else where the first wrong byte is.
void fillStep(void* data, size_t bytes, int sender, int channel, uint64_t step);
std::string checkStep(const void* data, size_t bytes, int sender, int channel, uint64_t step);

// The tag that travels with step `step` of (sender, channel): exchange checks it arrives.
uint32_t stepTag(int sender, int channel, uint64_t step);

// The requests of a ring: on `channels` channels from `firstChannel` on, send to rank+1 and
// receive from rank-1, all with `protocol`.
std::vector<ConnectionRequest> ringRequests(const Comm& comm, int channels,
                                            Protocol protocol = Protocol::kSimple,
                                            int firstChannel = 0);

// Streams `steps` steps over every connection of `conns` (made from `requests`) and checks
// every byte and tag received, driving progress() on all of them. First it posts kSlots steps on
// each send connection and checks that a further tryAcquire fails (the sender never has more than
// kSlots in flight), then meets the other ranks at a bootstrap barrier so no receiver has
// released anything yet. Returns "" on success, else what went wrong; transport errors throw.
// Gives up after `limit`.
std::string exchange(Comm& comm, const std::vector<ConnectionRequest>& requests, Connections& conns,
                     uint64_t steps, std::chrono::seconds limit = std::chrono::seconds(60));

// Names in /dev/shm of the form "loom-<pid>-*", the name a POSIX segment of process `pid`
// would have. loom makes none (rings are memfds: transports/shm/shm_segment.h); the tests check
// that it stays so, whatever happens to the process.
std::vector<std::string> devShmNamesOf(long pid);

// How many fds of process `pid` are shm rings (memfds named "loom-ring"), from /proc/PID/fd.
int ringMemfdsOf(long pid);

}  // namespace loom::transport::test
