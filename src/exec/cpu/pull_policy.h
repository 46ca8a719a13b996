// Whether a call's steps between processes of one host may be pulled by the receiver with
// CMA (transports/shm/direct_read.h: process_vm_readv from the sender's buffer, one kernel
// copy) or go through the shared ring (two copies: into a slot, out of it). Decided per call
// by measuring both ways, per collective and size (LOOM_SHM_CMA_MODE=auto, the default).
//
// Why measured and not a size rule. Which way is faster depends on how the two cores reach
// each other's caches at the moment, not only on the size. The ring's receiver reads lines
// the sender has just written, still dirty in the sender's cache; CMA reads the sender's
// input, which is clean, but pays a system call and pins every page. Where a dirty line
// crosses between the cores cheaply (two cores of one L3) the ring wins; where it costs several
// times more (two sockets, or a VM whose host moves its vCPUs apart) CMA wins, and one machine
// can switch between the two states within minutes (host_limits' cache-line round trip shows
// which one it is in). So no fixed threshold is right in both; docs/performance.md ("Where the
// time goes") has the figures.
//
// How. Calls are grouped by collective (or Send/Recv group) and size (powers of two of the
// bytes per rank). A group's first calls try each way in turn (warmupCalls()); after that it
// takes the way whose recent calls were faster (the other way must be faster by kSwitchMargin
// to take over from the chosen one) and now and then (exploresOn) tries the other way again,
// so that a change of state is noticed within a few hundred calls. A way's time is that of its
// latest run of calls only (record()): a burst of the other way is compared with what the
// chosen way takes now, not with the mean of every call it ever made, early cold ones included. A
// group counts only its own calls, so every rank that makes the same calls explores on the same
// ones (both ends of a connection then change way together and the times compare like with like).
// The choice only changes how bytes move, never which bytes arrive: a call is correct either way.
//
// One group, call by call (the PullPolicy.* unit tests check this schedule):
//   - calls 0 .. ringColdCalls() - 1 go through the ring and are not counted (until every slot
//     of the ring has been written once: at most kSlots calls, at least call 0);
//   - the next kCountedRingWarmup calls go through the ring and are counted;
//   - the next kPullWarmup calls pull;
//   - from then on each call takes the faster way, except bursts of kBurst calls of the other
//     way from call kFirstBurst and from every kExploreEvery-th call;
//   - the first call after a change of way is not counted.
//
// Not thread-safe: used under the communicator's execution mutex (executor.cc).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "src/plan/coll.h"

namespace loom {

class PullPolicy {
 public:
  // kCopies: a fixed rule for more ranks than CPUs (fromEnv), where timing cannot choose.
  enum class Mode : uint8_t { kNever, kAuto, kAlways, kCopies };
  // LOOM_SHM_CMA_MODE (auto, always) and LOOM_SHM_CMA_THRESHOLD (0: never). Throws
  // InvalidArgument naming the variable for any other value. `slotBytes` is the
  // communicator's ring slot size (PlannerState::slotBytes). With more ranks on the host than
  // CPUs (`oversubscribed`), auto is a fixed rule (kCopies), since measuring cannot tell the
  // two ways apart there: a call's time is mostly the scheduler's.
  //   - Reductions never pull: a pulled step keeps the sender's call open until the receiver
  //     has been scheduled and read it, where the ring lets the sender leave the data in a
  //     slot and go on (4 processes on 2 CPUs, AllReduce: 0.75-0.85x pulled).
  //   - Broadcast and AllGather pull from kCopiesPullMinBytes a rank: a rank that forwards
  //     what it received posts its output by address instead of copying it into the next
  //     slot, which saves a copy of the whole call per rank on CPUs that all ranks share
  //     (4 processes on 2 CPUs, 4 interleaved runs, 256 KiB-16 MiB: Broadcast 1.2-2x,
  //     AllGather 1.1-1.3x; at 64 and 128 KiB they lost, 0.6-0.8x).
  // Where every link is a network link (`networkOnly`) nothing can be pulled, and measuring
  // two ways that move bytes alike would only time noise: never.
  static PullPolicy fromEnv(bool oversubscribed, bool networkOnly, size_t slotBytes);

  // A group first goes through the ring, then pulls for kPullWarmup calls; from then on it
  // takes the faster way. The ring's first ringColdCalls() calls are not counted: each of them
  // writes slots no call of that size has written yet, and those run cold (several times
  // slower than warm ones, though without page faults: slots are touched at setup). Counting
  // them would make the warm-up pick CMA, and later ring bursts would still hit unwritten
  // slots, so the group would keep CMA for hundreds of calls.
  // A call that moves a whole ring's bytes (LOOM_BUFFSIZE) per rank writes every slot in its
  // first call, so its group counts from call 1 (call 0 may set up connections) as before.
  // The other way is tried again in a burst of kBurst calls from call kFirstBurst (a first
  // impression from two calls each can be wrong) and then every kExploreEvery-th. One early
  // burst, once both ways run warm, not two: a size's calls get faster either way over its
  // first ~30 calls, so an earlier burst would time the other way while it still warms and need
  // a second one to confirm, and every burst costs kBurst calls of the slower way. The first
  // call after a change of way is not counted either: a lone call of the other way runs cold,
  // well above what that way takes once it runs steadily.
  static constexpr size_t kCopiesPullMinBytes = size_t{256} << 10;
  // How much faster the other way must be to take over from the chosen one (record()). Two
  // processes, AllReduce 1 MiB, the ways 10-25% apart: with no margin, bursts on quiet moments
  // flipped the choice to the slower way several times in 300 calls.
  static constexpr double kSwitchMargin = 0.15;
  static constexpr uint32_t kCountedRingWarmup = 2;
  static constexpr uint32_t kPullWarmup = 3;
  static constexpr uint32_t kBurst = 3;
  static constexpr uint32_t kFirstBurst = 32;
  static constexpr uint32_t kExploreEvery = 256;
  static constexpr bool exploresOn(uint32_t call) {
    return (call >= kFirstBurst && call < kFirstBurst + kBurst) ||
           (call >= kExploreEvery && call % kExploreEvery < kBurst);
  }
  // Ring calls of a group of `bytesPerRank` that are not counted: enough to write every slot
  // of the ring once (one slot per call at most: kSlots), at least call 0.
  uint32_t ringColdCalls(size_t bytesPerRank) const;
  // Calls before the group first takes the faster way: ring, then pull.
  uint32_t warmupCalls(size_t bytesPerRank) const {
    return ringColdCalls(bytesPerRank) + kCountedRingWarmup + kPullWarmup;
  }

  // Steps smaller than `minStepBytes` are never pulled (LOOM_SHM_CMA_THRESHOLD): calls that
  // small are not measured either, so they pay nothing for the policy. `ringBytes` is the data
  // of one connection's shared ring (kSlots slots of LOOM_BUFFSIZE / kSlots).
  PullPolicy(Mode mode, size_t minStepBytes, size_t ringBytes)
      : mode_(mode), minStepBytes_(minStepBytes), ringBytes_(ringBytes) {}

  // What a call decided and must report back with its time.
  struct Ticket {
    bool pull = false;
    int group = -1;       // -1: nothing to record (not in auto mode)
    uint32_t call = 0;    // the how-manieth of its group
    bool counts = false;  // whether record() takes its time (see ringColdCalls)
  };
  Ticket decide(CollKind kind, size_t bytesPerRank) {
    return decideIn(static_cast<int>(kind), bytesPerRank);
  }
  // Sends and receives issued together in one group on one communicator (a sendrecv, a
  // batch of isend/irecv) are one call of their own class, by the largest op's bytes: they
  // run as one, so only their time together can be measured, and a Send alone times other
  // calls than a Send beside a Recv.
  Ticket decideP2pGroup(size_t largestOpBytes) { return decideIn(kP2pGroup, largestOpBytes); }
  bool pullsAlways() const { return mode_ == Mode::kAlways; }
  void record(const Ticket& t, uint64_t nanoseconds);

 private:
  struct Group {
    uint32_t calls = 0;  // decided so far
    // Per way (0 ring, 1 pull): counted calls of its current run (calls in a row of that way;
    // a change of way starts a new one), the run's first time, and the way's time per call.
    // The time is the latest run's: from the run's second counted call on it replaces what an
    // earlier run left, as the mean of the run's calls (weighted 1/16 to the newest after 16:
    // single calls of some microseconds vary by more than the two ways differ). Why a run and
    // not all calls: the other way is tried 2 counted calls at a time, so a mean over all of
    // them would keep its first, cold calls for thousands of calls: a size's first ~20 calls
    // take two to five times as long as later ones either way, more than the ways differ.
    std::array<uint32_t, 2> runSamples{};
    std::array<double, 2> runFirstNs{};
    std::array<double, 2> meanNs{};  // 0: no run of the way has counted 2 calls yet
    int8_t preferred = -1;           // the faster way as last logged (-1: not yet)
    int8_t lastWay = -1;             // the way of the group's previous call
    uint8_t ringCold = 1;            // ringColdCalls() of the group's first call
    uint16_t flips = 0;
  };
  Ticket decideIn(int kind, size_t bytesPerRank);

  static constexpr int kSizeClasses = 48;
  static constexpr int kP2pGroup = static_cast<int>(CollKind::kRecv) + 1;  // after every CollKind
  static constexpr int kKinds = kP2pGroup + 1;

  Mode mode_;
  size_t minStepBytes_;
  size_t ringBytes_;
  std::array<Group, kKinds * kSizeClasses> groups_{};
};

}  // namespace loom
