// Single-copy transfers between ranks of one host: the receiver reads the bytes straight from
// the sender's buffer instead of the sender first copying them into the shared ring.
//
// Why. Through the ring every byte is copied twice (sender into a slot, receiver out of it).
// When the data already sits in a user buffer that stays put until the step is consumed (an
// input being sent, or an output just written and forwarded), the sender can post only its
// address and the receiver's fused reduceCopy reads it directly: one copy, and the sender's
// core is free. Ranks in one process (threads) simply read each other's memory. Ranks in
// different processes read each other's memory when it comes from loomMemAlloc (registered
// regions, src/mem/region_registry.h): the sender posts (region id, offset), the receiver maps the
// region once (registered_read.h) and reads in place, as threads do. Other memory of another
// process can be pulled with process_vm_readv (CMA): one kernel copy, saving the sender's
// copy, straight into the receiver's output when the step only moves data there
// (RecvConnection::offerDestination) and into its slot otherwise. Whether that beats the ring
// depends on the machine and its state (CMA pins every page as it goes; the ring's receiver reads
// lines still dirty in the sender's cache), so each call may or may not pull as measured per
// collective and size (src/exec/cpu/shm_way_policy.h), from LOOM_SHM_CMA_THRESHOLD bytes a step.
//
// Safety. A process is identified by a random 64-bit token, not by its pid (pid namespaces
// reuse numbers), and CMA is used on a connection only after the receiver read the sender's
// token through process_vm_readv at setup (RingControl::cmaVerdict): the receiver is the one
// that reads, and ptrace permission is not symmetric. The sender keeps a directly posted region
// unchanged until the receiver released that step (drained()); the executor waits for that before
// the call returns, so the user may reuse the buffer at once.
#pragma once

#include <cstddef>
#include <cstdint>

namespace loom::transport::shm {

// The single-copy steps a connection may carry: the sender chooses at setup and sends its
// choice to the receiver in the acknowledgement. Bits: between processes a step in a registered
// region goes by region, and any other step by CMA when that is on too.
enum class DirectMode : uint8_t {
  kNone = 0,         // always through the ring
  kSameProcess = 1,  // the receiver reads the sender's address
  kCma = 2,          // the receiver pulls with process_vm_readv (into its output or slot)
  kRegistered = 4,   // the receiver reads the sender's loomMemAlloc regions through its mapping
};
constexpr DirectMode operator|(DirectMode a, DirectMode b) {
  return static_cast<DirectMode>(static_cast<uint8_t>(a) | static_cast<uint8_t>(b));
}
constexpr bool hasMode(DirectMode set, DirectMode m) {
  return (static_cast<uint8_t>(set) & static_cast<uint8_t>(m)) != 0;
}
// Whether a byte from a peer names a combination the sender can choose.
constexpr bool validDirectMode(uint8_t m) { return m <= 2 || m == 4 || m == 6; }

// What a side tells its peer at setup so the pair can choose a DirectMode.
struct ProcessIdentity {
  uint64_t token;         // random per process
  uint64_t tokenAddress;  // where the token lives in that process, for the CMA probe
  int32_t pid;
  int32_t identityFd;  // a memfd holding the token, for the pidfd_getfd probe; -1: none
};

ProcessIdentity thisProcess();

// The sender's choice for a connection toward `receiver`: same process when the tokens
// match and LOOM_SHM_DIRECT allows it. Between processes: registered regions when
// LOOM_SHM_REGISTERED allows it (the receiver still has to prove it may take our fds, see
// registered_read.h), plus CMA when LOOM_SHM_CMA_THRESHOLD > 0 (the receiver still has to
// prove it may read our memory: mayPullFrom); otherwise none.
DirectMode chooseDirectMode(const ProcessIdentity& receiver);

// The receiver's probe at setup: whether process_vm_readv of `sender`'s token returns that
// token (the pid names the right process in our pid namespace and the kernel lets us read it).
bool mayPullFrom(const ProcessIdentity& sender);

// Steps of at least this many bytes go direct in CMA mode (LOOM_SHM_CMA_THRESHOLD; 0: never).
size_t cmaThreshold();

// Copies `bytes` from `remote` in process `pid` into `local` (process_vm_readv, retried for
// partial reads). Throws SystemError naming `peer` and the remedy.
void cmaRead(int32_t pid, const void* remote, void* local, size_t bytes, int peer);

namespace testing {
// cmaRead calls this process has made (tests prove that steps were pulled).
uint64_t cmaReadsInThisProcess();
}  // namespace testing

}  // namespace loom::transport::shm
