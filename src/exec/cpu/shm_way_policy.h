// How a call's steps between processes of one host move their bytes, chosen per call by
// measuring every way, per collective and size (LOOM_SHM_CMA_MODE=auto, the default). Four ways:
//   - the shared ring: the sender copies a step into a slot, the receiver reads it out;
//   - the ring with streamed stores: the same, but the sender writes the slot with
//     non-temporal stores, which put the lines in memory rather than in the sender's cache;
//   - CMA: the receiver pulls the sender's buffer with process_vm_readv
//     (transports/shm/direct_read.h), one kernel copy;
//   - the walked ring: the ring, its copies and reductions through slots walking 8 pages at
//     once (src/kernels/cross_core_copy.h), where every rank has a CPU of its own.
//
// Why measured and not a rule. Which way is faster depends on how the two cores reach each
// other's caches at the moment, not only on the size. The ring's receiver reads lines the sender
// has just written, still dirty in the sender's cache, and the sender writes lines the receiver
// read last, which must first be taken back from its core. Where a line crosses between the
// cores cheaply (two cores of one L3) the ring wins. Where it costs several times more (two
// sockets, two core complexes of one AMD EPYC, a VM whose host moves its vCPUs apart), streamed
// stores skip both hand-overs of each line: the receiver reads from memory, which its
// prefetchers stream. CMA reads the sender's input, which is clean, but pays a system call and
// pins every page. One machine can switch between states within minutes (host_limits'
// cache-line round trip shows which one it is in), and the same state ranks the ways differently
// on different CPUs (docs/performance.md, "Where the time goes", has the figures). The walk
// is one: between the two vCPUs of an Intel Xeon VM it gained up to 1.25x, between those of
// an AMD EPYC VM it loses 1.2-1.7x (5x in the exchange of 64 KiB) in either state.
//
// How. Calls are grouped by collective (or Send/Recv group) and size (powers of two of the
// bytes per rank). A group's first calls try each way in turn (warmupCalls()); after that it
// takes the way whose recent calls were fastest (another way must be faster by kSwitchMargin
// to take over from the chosen one) and now and then (exploring()) tries each other way again,
// so that a change of state is noticed within a few hundred calls. A way's time is that of its
// latest run of calls only (record()): a burst of another way is compared with what the
// chosen way takes now, not with the mean of every call it ever made, early cold ones included. A
// group counts only its own calls, so every rank that makes the same calls explores on the same
// ones (both ends of a connection then change way together and the times compare like with like).
// The choice only changes how bytes move, never which bytes arrive: a call is correct either way.
//
// One group, call by call (the ShmWayPolicy.* unit tests check this schedule), with the ways
// in the order ring, streamed ring, pull, walked ring (those the communicator has; ways()):
//   - calls 0 .. ringColdCalls() - 1 go through the ring and are not counted (until every slot
//     of the ring has been written once: at most kSlots calls, at least call 0);
//   - the next kCountedRingWarmup calls go through the ring and are counted;
//   - then kWayWarmup calls of each other way, in order;
//   - from then on each call takes the fastest way, except bursts of kBurst calls of each
//     other way in order, from call kFirstBurst and from every kExploreEvery-th call;
//   - the first call after a change of way is not counted.
//
// Not thread-safe: used under the communicator's execution mutex (executor.cc).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "src/plan/coll.h"

namespace loom {

enum class ShmWay : uint8_t { kRing, kStreamedRing, kPull, kWalkedRing };

class ShmWayPolicy {
 public:
  // kCopies: a fixed rule for more ranks than CPUs (fromEnv), where timing cannot choose.
  enum class Mode : uint8_t { kNever, kAuto, kAlways, kCopies };
  static constexpr int kWays = 4;
  // LOOM_SHM_CMA_MODE (auto, always), LOOM_SHM_CMA_THRESHOLD (0: never pull) and
  // LOOM_SHM_STREAM_SLOTS (auto: a way to measure; 1: every ring step streams, 0: none does)
  // and LOOM_SHM_PAGE_WALK (auto: a way to measure; 1: every way walks; 0: none does).
  // Throws InvalidArgument naming the variable for any other value. `slotBytes` is the
  // communicator's ring slot size (PlannerState::slotBytes). With more ranks on the host than
  // CPUs (`oversubscribed`), auto is a fixed rule (kCopies), since measuring cannot tell the
  // ways apart there: a call's time is mostly the scheduler's; nothing streams unless forced.
  //   - Reductions never pull: a pulled step keeps the sender's call open until the receiver
  //     has been scheduled and read it, where the ring lets the sender leave the data in a
  //     slot and go on (4 processes on 2 CPUs, AllReduce: 0.75-0.85x pulled).
  //   - Broadcast and AllGather pull from kCopiesPullMinBytes a rank: a rank that forwards
  //     what it received posts its output by address instead of copying it into the next
  //     slot, which saves a copy of the whole call per rank on CPUs that all ranks share
  //     (4 processes on 2 CPUs, 4 interleaved runs, 256 KiB-16 MiB: Broadcast 1.2-2x,
  //     AllGather 1.1-1.3x; at 64 and 128 KiB they lost, 0.6-0.8x).
  // Where every link is a network link (`networkOnly`) there is no shared memory, and measuring
  // ways that move bytes alike would only time noise: never.
  static ShmWayPolicy fromEnv(bool oversubscribed, bool networkOnly, size_t slotBytes);

  // A group first goes through the ring, then takes each other way for kWayWarmup calls; from
  // then on it takes the fastest. The ring's first ringColdCalls() calls are not counted: each
  // of them writes slots no call of that size has written yet, and those run cold (several
  // times slower than warm ones, though without page faults: slots are touched at setup).
  // Counting them would make the warm-up pick another way, and later ring bursts would still
  // hit unwritten slots, so the group would keep the other way for hundreds of calls.
  // A call that moves a whole ring's bytes (LOOM_BUFFSIZE) per rank writes every slot in its
  // first call, so its group counts from call 1 (call 0 may set up connections) as before.
  // The other ways are tried again in bursts of kBurst calls each from call kFirstBurst (a
  // first impression from two calls each can be wrong) and then every kExploreEvery-th. One
  // early round of bursts, once every way runs warm, not two: a size's calls get faster either
  // way over its first ~30 calls, so an earlier burst would time a way while it still warms
  // and need a second one to confirm, and every burst costs kBurst calls of a slower way. The
  // first call after a change of way is not counted either: a lone call of another way runs
  // cold, well above what that way takes once it runs steadily.
  static constexpr size_t kCopiesPullMinBytes = size_t{256} << 10;
  // Calls of fewer bytes per rank are not measured: their steps are too short for the way
  // to matter against the call's fixed costs (and LL carries the smallest).
  static constexpr size_t kMeasuredMinBytes = 16384;
  // How much faster another way must be to take over from the chosen one (record()). Two
  // processes, AllReduce 1 MiB, the ways 10-25% apart: with no margin, bursts on quiet moments
  // flipped the choice to the slower way several times in 300 calls.
  static constexpr double kSwitchMargin = 0.15;
  static constexpr uint32_t kCountedRingWarmup = 2;
  static constexpr uint32_t kWayWarmup = 3;
  static constexpr uint32_t kBurst = 3;
  static constexpr uint32_t kFirstBurst = 32;
  static constexpr uint32_t kExploreEvery = 256;
  // Whether call `call` of a group explores, with `others` ways besides the chosen one: -1
  // if not, else which of the others (0: the first in way order).
  static constexpr int exploring(uint32_t call, int others) {
    const uint32_t span = kBurst * static_cast<uint32_t>(others);
    if (call >= kFirstBurst && call < kFirstBurst + span)
      return static_cast<int>((call - kFirstBurst) / kBurst);
    if (call >= kExploreEvery && call % kExploreEvery < span)
      return static_cast<int>(call % kExploreEvery / kBurst);
    return -1;
  }
  // Ring calls of a group of `bytesPerRank` that are not counted: enough to write every slot
  // of the ring once (one slot per call at most: kSlots), at least call 0.
  uint32_t ringColdCalls(size_t bytesPerRank) const;
  // Calls before the group first takes the fastest way: the ring, then each other way.
  uint32_t warmupCalls(size_t bytesPerRank) const;
  // The ways a group of `bytesPerRank` tries (bit w: ShmWay w); only the ring where nothing is
  // measured.
  uint32_t ways(size_t bytesPerRank) const;

  // `minPullBytes`: steps smaller than this are never pulled (LOOM_SHM_CMA_THRESHOLD; 0: none
  // is). `ringBytes` is the data of one connection's shared ring (kSlots slots of
  // LOOM_BUFFSIZE / kSlots). `streamedRing`: the streamed ring is a way to measure (kAuto);
  // `streamsAlways`: every call that does not pull streams its ring steps instead.
  // `walkedRing`: the walked ring is a way to measure (kAuto); `walksAlways`: every way walks.
  // Otherwise nothing walks: a streamed slot is read from memory, a pulled step from this
  // core's own slot, where the walk has no other core's lines to keep in flight.
  ShmWayPolicy(Mode mode, size_t minPullBytes, size_t ringBytes, bool streamedRing = false,
               bool streamsAlways = false, bool walkedRing = false, bool walksAlways = false)
      : mode_(mode),
        minPullBytes_(minPullBytes),
        ringBytes_(ringBytes),
        streamedRing_(streamedRing),
        streamsAlways_(streamsAlways),
        walkedRing_(walkedRing),
        walksAlways_(walksAlways) {}

  // What a call decided and must report back with its time.
  struct Ticket {
    ShmWay way = ShmWay::kRing;
    int group = -1;       // -1: nothing to record (nothing measured)
    uint32_t call = 0;    // the how-manieth of its group
    bool counts = false;  // whether record() takes its time (see ringColdCalls)
    bool pulls() const { return way == ShmWay::kPull; }
    bool streamsSlots() const { return way == ShmWay::kStreamedRing; }
  };
  // Whether a call of way `w` walks 8 pages at once through slots (CpuCallFlags::crossCoreCopies,
  // where every rank has a CPU of its own).
  bool walks(ShmWay w) const { return walksAlways_ || w == ShmWay::kWalkedRing; }
  Ticket decide(CollKind kind, size_t bytesPerRank) {
    return decideIn(static_cast<int>(kind), bytesPerRank);
  }
  // Sends and receives issued together in one group on one communicator (a sendrecv, a
  // batch of isend/irecv) are one call of their own class, by the largest op's bytes: they
  // run as one, so only their time together can be measured, and a Send alone times other
  // calls than a Send beside a Recv.
  Ticket decideP2pGroup(size_t largestOpBytes) { return decideIn(kP2pGroup, largestOpBytes); }
  bool pullsAlways() const { return mode_ == Mode::kAlways; }
  // The way of a call that is not measured (a small one, one beside others, a fixed mode).
  ShmWay fixedWay() const {
    return pullsAlways() ? ShmWay::kPull : streamsAlways_ ? ShmWay::kStreamedRing : ShmWay::kRing;
  }
  void record(const Ticket& t, uint64_t nanoseconds);

 private:
  struct Group {
    uint32_t calls = 0;  // decided so far
    // Per way: counted calls of its current run (calls in a row of that way; a change of way
    // starts a new one), the run's first time, and the way's time per call. The time is the
    // latest run's: from the run's second counted call on it replaces what an earlier run
    // left, as the mean of the run's calls (weighted 1/16 to the newest after 16: single calls
    // of some microseconds vary by more than the ways differ). Why a run and not all calls:
    // another way is tried 2 counted calls at a time, so a mean over all of them would keep its
    // first, cold calls for thousands of calls: a size's first ~20 calls take two to five times
    // as long as later ones either way, more than the ways differ.
    std::array<uint32_t, kWays> runSamples{};
    std::array<double, kWays> runFirstNs{};
    std::array<double, kWays> meanNs{};  // 0: no run of the way has counted 2 calls yet
    int8_t preferred = -1;               // the fastest way as last logged (-1: not yet)
    int8_t lastWay = -1;                 // the way of the group's previous call
    uint8_t ringCold = 1;                // ringColdCalls() of the group's first call
    uint8_t ways = 1;                    // ways() of the group's first call
    uint16_t flips = 0;
  };
  Ticket decideIn(int kind, size_t bytesPerRank);
  // The way call `call` of a group takes.
  ShmWay wayOf(const Group& g, uint32_t call) const;

  static constexpr int kSizeClasses = 48;
  static constexpr int kP2pGroup = static_cast<int>(CollKind::kRecv) + 1;  // after every CollKind
  static constexpr int kKinds = kP2pGroup + 1;

  Mode mode_;
  size_t minPullBytes_;
  size_t ringBytes_;
  bool streamedRing_;
  bool streamsAlways_;
  bool walkedRing_;
  bool walksAlways_;
  std::array<Group, kKinds * kSizeClasses> groups_{};
};

}  // namespace loom
