// Unit tests of the choice between the shared ring, the ring with streamed stores and CMA
// (src/exec/cpu/shm_way_policy.h): a group's first calls try every way, then the fastest wins
// and the others are retried in bursts; the first call after a change of way is not counted,
// nor the ring's calls before every slot was written once; a way's time is that of its latest
// run of calls; a change of the machine's state flips the choice; one slow call does not; small
// calls and groups of other sizes or collectives are counted apart; the environment sets which
// ways there are; bad settings fail init (ForcedChoicesErrors in tests/coll/protocol_algo_test.cc).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>

#include "loom/loom.h"
#include "src/base/error.h"
#include "src/exec/cpu/shm_way_policy.h"
#include "src/kernels/cross_core_copy.h"
#include "tests/test_util.h"

namespace loom {
namespace {

constexpr size_t kMin = 16384;
// A ring of 64 KiB: the 64 KiB calls most tests make write all of it in one call, so their
// groups count from call 1 and warm up in 6 calls (ringColdCalls has its own test).
constexpr size_t kRing = 65536;
constexpr int kWarmup = 6;

// Runs `calls` calls of one group, each taking ringNs or pullNs; returns how many pulled.
int run(ShmWayPolicy& p, int calls, uint64_t ringNs, uint64_t pullNs,
        CollKind kind = CollKind::kAllGather, size_t bytes = 65536) {
  int pulled = 0;
  for (int i = 0; i < calls; ++i) {
    const ShmWayPolicy::Ticket t = p.decide(kind, bytes);
    pulled += t.pulls();
    p.record(t, t.pulls() ? pullNs : ringNs);
  }
  return pulled;
}

// The ways of calls [0, n) of a group ('r' ring, 'p' pull), call i taking ns(i, pull).
std::string ways(ShmWayPolicy& p, int n, const std::function<uint64_t(int, bool)>& ns) {
  std::string s;
  for (int i = 0; i < n; ++i) {
    const ShmWayPolicy::Ticket t = p.decide(CollKind::kAllGather, 65536);
    EXPECT_EQ(t.call, static_cast<uint32_t>(i));
    s += t.pulls() ? 'p' : 'r';
    p.record(t, ns(i, t.pulls()));
  }
  return s;
}
std::string ways(ShmWayPolicy& p, int n, uint64_t ringNs, uint64_t pullNs) {
  return ways(p, n, [=](int, bool pull) { return pull ? pullNs : ringNs; });
}

// The way call `i` of a group takes when pulling is (or is not) the faster from the start.
char expectedWay(int i, bool pullFaster) {
  if (i < kWarmup) return i >= kWarmup / 2 ? 'p' : 'r';
  const bool explore = ShmWayPolicy::exploring(static_cast<uint32_t>(i), 1) >= 0;
  return (pullFaster != explore) ? 'p' : 'r';
}

TEST(ShmWayPolicy, WarmupThenTheFasterWayWinsAndTheOtherIsRetriedInBursts) {
  for (bool pullFaster : {true, false}) {
    ShmWayPolicy p(ShmWayPolicy::Mode::kAuto, kMin, kRing);
    EXPECT_EQ(p.warmupCalls(65536), static_cast<uint32_t>(kWarmup));
    const std::string s = pullFaster ? ways(p, 600, 9000, 5000) : ways(p, 600, 5000, 9000);
    EXPECT_EQ(s.substr(0, 6), "rrrppp");
    for (int i = 0; i < 600; ++i) EXPECT_EQ(s[i], expectedWay(i, pullFaster)) << "call " << i;
  }
  // One burst at 32 (once both ways run warm), then every kExploreEvery-th call.
  constexpr uint32_t kEvery = ShmWayPolicy::kExploreEvery;
  auto explores = [](uint32_t call) { return ShmWayPolicy::exploring(call, 1) >= 0; };
  EXPECT_TRUE(explores(32) && explores(34));
  EXPECT_FALSE(explores(16) || explores(31) || explores(35) || explores(48) ||
               explores(kEvery - 1));
  EXPECT_TRUE(explores(kEvery) && explores(kEvery + 2));
  EXPECT_FALSE(explores(kEvery + 3));
  // With two other ways, a burst of each in way order.
  EXPECT_EQ(ShmWayPolicy::exploring(32, 2), 0);
  EXPECT_EQ(ShmWayPolicy::exploring(35, 2), 1);
  EXPECT_EQ(ShmWayPolicy::exploring(37, 2), 1);
  EXPECT_EQ(ShmWayPolicy::exploring(38, 2), -1);
  EXPECT_EQ(ShmWayPolicy::exploring(kEvery + 2, 2), 0);
  EXPECT_EQ(ShmWayPolicy::exploring(kEvery + 3, 2), 1);
  EXPECT_EQ(ShmWayPolicy::exploring(kEvery + 6, 2), -1);
}

// A lone call of the other way runs cold: the first call after a change of way is not counted.
TEST(ShmWayPolicy, TheFirstCallAfterAChangeOfWayIsNotCounted) {
  ShmWayPolicy p(ShmWayPolicy::Mode::kAuto, kMin, kRing);
  std::string counted;
  for (int i = 0; i < 40; ++i) {
    const ShmWayPolicy::Ticket t = p.decide(CollKind::kAllGather, 65536);
    counted += t.counts ? '1' : '0';
    p.record(t, t.pulls() ? 5000 : 9000);
  }
  // ring 0-2 (0: setup), pull 3-5, pull from 6, ring burst 32-34, pull again at 35.
  EXPECT_EQ(counted, "011011" + std::string(26, '1') + "0110" + "1111");
}

// With LOOM_BUFFSIZE's default ring (16 MiB), a 512 KiB call writes one slot: its group's first
// 8 ring calls write slots nothing of that size wrote before and do not count. Calls as big as
// the ring write every slot in their first call.
TEST(ShmWayPolicy, TheRingCountsOnlyOnceEverySlotWasWritten) {
  constexpr size_t kMiB = size_t{1} << 20;
  ShmWayPolicy p(ShmWayPolicy::Mode::kAuto, kMin, 16 * kMiB);
  EXPECT_EQ(p.ringColdCalls(64 << 10), 8u);
  EXPECT_EQ(p.ringColdCalls(4 * kMiB), 4u);
  EXPECT_EQ(p.ringColdCalls(5 * kMiB), 4u);
  EXPECT_EQ(p.ringColdCalls(16 * kMiB), 1u);
  EXPECT_EQ(p.ringColdCalls(size_t{1} << 30), 1u);
  std::string ways, counted;
  for (int i = 0; i < 20; ++i) {
    const ShmWayPolicy::Ticket t = p.decide(CollKind::kAllGather, kMiB / 2);
    ways += t.pulls() ? 'p' : 'r';
    counted += t.counts ? '1' : '0';
    // The cold ring calls are slow; counted, they would make the group pull.
    const uint64_t ringNs = i < 8 ? 200000 : 40000;
    p.record(t, t.pulls() ? 57000 : ringNs);
  }
  // ring 0-9 (8, 9 counted), pull 10-12 (11, 12 counted), then the ring (13 not counted).
  EXPECT_EQ(ways, "rrrrrrrrrrppprrrrrrr");
  EXPECT_EQ(counted, "00000000110110111111");
  EXPECT_EQ(p.warmupCalls(kMiB / 2), 13u);
}

TEST(ShmWayPolicy, AChangeOfStateFlipsTheChoiceAndOneSlowCallDoesNot) {
  ShmWayPolicy p(ShmWayPolicy::Mode::kAuto, kMin, kRing);
  EXPECT_EQ(run(p, 100, 5000, 9000), 6);  // 3 warming up, the burst at 32
  // One descheduled ring call (100x) counts for at most 4x the mean: still the ring.
  ShmWayPolicy::Ticket t = p.decide(CollKind::kAllGather, 65536);
  ASSERT_FALSE(t.pulls());
  p.record(t, 500000);
  EXPECT_EQ(run(p, 5, 5000, 9000), 0);
  // The ring gets 4x slower for good (the slow state): within some calls its mean passes the
  // pull's, and from then on the group pulls.
  EXPECT_GE(run(p, 12, 20000, 9000), 3);
  EXPECT_EQ(run(p, 100, 20000, 9000), 100);
}

// The other way takes over only when it is faster by more than kSwitchMargin (15%).
TEST(ShmWayPolicy, TheOtherWayTakesOverOnlyWhenClearlyFaster) {
  ShmWayPolicy p(ShmWayPolicy::Mode::kAuto, kMin, kRing);
  EXPECT_EQ(run(p, 100, 5000, 9000), 6);  // the ring is chosen
  // The ring slows to 10 us: pulling at 9 us is 10% faster, inside the margin, so only the
  // burst at call 256 pulls.
  EXPECT_EQ(run(p, 400, 10000, 9000), 3);
  // At 8 us pulling is 20% faster: it takes over at the burst at call 512 and keeps it.
  EXPECT_EQ(run(p, 12, 10000, 8000), 0);  // calls 500-511
  EXPECT_EQ(run(p, 100, 10000, 8000), 100);
}

// A way's time is its latest run's. The ring's two counted warm-up calls are slow (a size's
// first calls run cold either way), then it is the faster: its burst at 32 shows that, and the
// group takes the ring from call 35. A mean over all its calls would have kept it above the
// pull's until call 258.
TEST(ShmWayPolicy, AWaysTimeIsItsLatestRunsNotItsFirstCalls) {
  ShmWayPolicy p(ShmWayPolicy::Mode::kAuto, kMin, kRing);
  const std::string s = ways(p, 64, [](int i, bool pull) -> uint64_t {
    return pull ? 9000 : i < 3 ? 20000 : 5000;
  });
  EXPECT_EQ(s.substr(0, 35), "rrr" + std::string(29, 'p') + "rrr");
  EXPECT_EQ(s.substr(35), std::string(29, 'r'));
}

TEST(ShmWayPolicy, GroupsAreCountedApart) {
  ShmWayPolicy p(ShmWayPolicy::Mode::kAuto, kMin, kRing);
  run(p, 100, 9000, 5000);  // pull wins for AllGather 64 KiB
  // Another size class, another collective: they warm up on their own; the ring wins there.
  for (auto [kind, bytes] : {std::pair{CollKind::kAllGather, size_t{1} << 20},
                             std::pair{CollKind::kBroadcast, size_t{65536}}}) {
    EXPECT_FALSE(p.decide(kind, bytes).pulls()) << collName(kind) << " " << bytes;
    EXPECT_EQ(run(p, 99, 5000, 9000, kind, bytes), 6) << collName(kind) << " " << bytes;
  }
  EXPECT_EQ(run(p, 20, 9000, 5000), 20);  // calls 100-119 of AllGather 64 KiB
  // Sizes in one power of two share a group: 65536 and 131071 bytes.
  EXPECT_EQ(p.decide(CollKind::kAllGather, 131071).group,
            p.decide(CollKind::kAllGather, 65536).group);
}

TEST(ShmWayPolicy, SendRecvGroupsAreCountedApartFromLoneSends) {
  ShmWayPolicy p(ShmWayPolicy::Mode::kAuto, kMin, kRing);
  // A Send alone of 64 KiB learns that pulling wins...
  EXPECT_EQ(run(p, 100, 9000, 5000, CollKind::kSend, 65536), 100 - kWarmup / 2 - 3);
  // ...while a group of Sends and Recvs of the same size warms up on its own, finds the ring
  // faster and keeps it (bar its warm-up and bursts).
  int pulled = 0;
  for (int i = 0; i < 99; ++i) {
    const ShmWayPolicy::Ticket t = p.decideP2pGroup(65536);
    EXPECT_EQ(t.call, static_cast<uint32_t>(i));
    EXPECT_EQ(t.pulls(), expectedWay(i, false) == 'p') << "call " << i;
    pulled += t.pulls();
    p.record(t, t.pulls() ? 9000 : 5000);
  }
  EXPECT_EQ(pulled, 6);
  EXPECT_NE(p.decideP2pGroup(65536).group, p.decide(CollKind::kSend, 65536).group);
  EXPECT_NE(p.decideP2pGroup(65536).group, p.decide(CollKind::kRecv, 65536).group);
  // Its groups stay small and unmeasured below the threshold, like every call's.
  EXPECT_EQ(p.decideP2pGroup(kMin - 1).group, -1);
}

TEST(ShmWayPolicy, SmallCallsAndFixedModesAreNotMeasured) {
  ShmWayPolicy p(ShmWayPolicy::Mode::kAuto, kMin, kRing);
  const ShmWayPolicy::Ticket small = p.decide(CollKind::kAllReduce, kMin - 1);
  EXPECT_FALSE(small.pulls());
  EXPECT_LT(small.group, 0);
  ShmWayPolicy always(ShmWayPolicy::Mode::kAlways, kMin, kRing);
  EXPECT_TRUE(always.pullsAlways());
  const ShmWayPolicy::Ticket a = always.decide(CollKind::kAllReduce, 1 << 20);
  EXPECT_TRUE(a.pulls());
  EXPECT_LT(a.group, 0);
  ShmWayPolicy never(ShmWayPolicy::Mode::kNever, 0, 0);
  EXPECT_FALSE(never.decide(CollKind::kAllReduce, 1 << 20).pulls());
  // Only network links (LOOM_SHM_DISABLE=1, or a rank per host): nothing to pull, nothing timed.
  ShmWayPolicy shm = ShmWayPolicy::fromEnv(false, false, 2 << 20);
  EXPECT_GE(shm.decide(CollKind::kAllReduce, 1 << 20).group, 0);
  ShmWayPolicy net = ShmWayPolicy::fromEnv(false, true, 2 << 20);
  const ShmWayPolicy::Ticket n = net.decide(CollKind::kAllReduce, 1 << 20);
  EXPECT_FALSE(n.pulls());
  EXPECT_LT(n.group, 0);
}

TEST(ShmWayPolicy, MoreRanksThanCpusPullsLargeBroadcastAndAllGatherOnly) {
  ShmWayPolicy p = ShmWayPolicy::fromEnv(true, false, 2 << 20);
  for (CollKind copy : {CollKind::kBroadcast, CollKind::kAllGather}) {
    const ShmWayPolicy::Ticket t = p.decide(copy, 1 << 20);
    EXPECT_TRUE(t.pulls());
    EXPECT_LT(t.group, 0);  // a fixed rule: nothing timed
    EXPECT_TRUE(p.decide(copy, ShmWayPolicy::kCopiesPullMinBytes).pulls());
    EXPECT_FALSE(p.decide(copy, ShmWayPolicy::kCopiesPullMinBytes - 1).pulls());
  }
  for (CollKind reduction : {CollKind::kAllReduce, CollKind::kReduceScatter, CollKind::kReduce})
    EXPECT_FALSE(p.decide(reduction, 16 << 20).pulls());
  EXPECT_FALSE(p.pullsAlways());  // groups do not pull
  // Only network links: nothing to pull, whatever the CPUs.
  EXPECT_FALSE(
      ShmWayPolicy::fromEnv(true, true, 2 << 20).decide(CollKind::kBroadcast, 1 << 20).pulls());
  // LOOM_SHM_CMA_MODE=always still pulls everything.
  test::ScopedEnv always("LOOM_SHM_CMA_MODE", "always");
  EXPECT_TRUE(
      ShmWayPolicy::fromEnv(true, false, 2 << 20).decide(CollKind::kAllReduce, 1 << 20).pulls());
}

// The three ways, in the order ring (r), streamed ring (s), pull (p): the ring's warm-up, then
// each other way's, then the fastest, with a burst of each other way from call 32 and from
// every kExploreEvery-th call.
std::string threeWays(ShmWayPolicy& p, int n, uint64_t ringNs, uint64_t streamNs, uint64_t pullNs) {
  std::string s;
  for (int i = 0; i < n; ++i) {
    const ShmWayPolicy::Ticket t = p.decide(CollKind::kAllReduce, 65536);
    const char way = "rsp"[static_cast<int>(t.way)];
    s += way;
    p.record(t, way == 'r' ? ringNs : way == 's' ? streamNs : pullNs);
  }
  return s;
}

TEST(ShmWayPolicy, ThreeWaysWarmUpInOrderThenTheFastestWinsAndTheOthersAreRetried) {
  ShmWayPolicy p(ShmWayPolicy::Mode::kAuto, kMin, kRing, /*streamedRing=*/true);
  EXPECT_EQ(p.ways(65536), 7u);
  EXPECT_EQ(p.warmupCalls(65536), 9u);
  const std::string s = threeWays(p, 300, 9000, 4000, 6000);
  EXPECT_EQ(s.substr(0, 9), "rrrsssppp");
  EXPECT_EQ(s.substr(9, 23), std::string(23, 's'));
  EXPECT_EQ(s.substr(32, 6), "rrrppp");  // a burst of each other way, in way order
  EXPECT_EQ(s.substr(38, 218), std::string(218, 's'));
  EXPECT_EQ(s.substr(256, 6), "rrrppp");
  EXPECT_EQ(s.substr(262), std::string(38, 's'));
}

TEST(ShmWayPolicy, AStateChangeAmongThreeWaysMovesTheChoiceToTheNowFastest) {
  ShmWayPolicy p(ShmWayPolicy::Mode::kAuto, kMin, kRing, true);
  threeWays(p, 100, 5000, 8000, 9000);  // the ring wins
  // Lines start to cross slowly: the ring takes 20 us, streaming 8, pulling 9. Within some
  // calls the ring's time passes the streamed ring's (from its last burst) by the margin, and
  // from then on the group streams, bar a burst of the ring and one of the pull at call 256.
  const std::string s = threeWays(p, 300, 20000, 8000, 9000);
  const size_t first = s.find('s');
  EXPECT_GE(first, 3u);
  EXPECT_LE(first, 12u);
  EXPECT_EQ(s.substr(first, 156 - first), std::string(156 - first, 's'));
  EXPECT_EQ(s.substr(156, 6), "rrrppp");
  EXPECT_EQ(s.substr(162), std::string(138, 's'));
}

// The fourth way, the walked ring (w), warms up after the pull and wins where it is fastest;
// the plain ring is then explored like any other way.
TEST(ShmWayPolicy, TheWalkedRingIsTheFourthWay) {
  ShmWayPolicy p(ShmWayPolicy::Mode::kAuto, kMin, kRing, /*streamedRing=*/true,
                 /*streamsAlways=*/false, /*walkedRing=*/true);
  EXPECT_EQ(p.ways(65536), 15u);
  EXPECT_EQ(p.warmupCalls(65536), 12u);
  std::string s;
  for (int i = 0; i < 300; ++i) {
    const ShmWayPolicy::Ticket t = p.decide(CollKind::kAllReduce, 65536);
    const char way = "rspw"[static_cast<int>(t.way)];
    s += way;
    p.record(t, way == 'w' ? 3000 : way == 's' ? 6000 : 9000);
  }
  EXPECT_EQ(s.substr(0, 12),
            "rrrsssppp"
            "www");
  EXPECT_EQ(s.substr(12, 20), std::string(20, 'w'));
  EXPECT_EQ(s.substr(32, 9), "rrrsssppp");  // a burst of each other way, in way order
  EXPECT_EQ(s.substr(41, 215), std::string(215, 'w'));
  EXPECT_EQ(s.substr(256, 9), "rrrsssppp");
}

// LOOM_SHM_CMA_THRESHOLD=0 leaves the ring, the streamed ring and the walked ring; steps below
// the CMA threshold are never pulled, so their groups try the other three only;
// LOOM_SHM_STREAM_SLOTS=0 leaves the streamed ring out, LOOM_SHM_PAGE_WALK=0 the walked ring,
// and with none of the three nothing is timed; STREAM_SLOTS=1 streams the ring's steps of every
// call that does not pull, measured or not, and PAGE_WALK=1 walks every way.
TEST(ShmWayPolicy, TheEnvironmentSetsTheWays) {
  constexpr uint32_t kR = 1, kS = 2, kP = 4, kW = 8;  // bits of ShmWay
  {
    test::ScopedEnv off("LOOM_SHM_CMA_THRESHOLD", "0");
    ShmWayPolicy p = ShmWayPolicy::fromEnv(false, false, 2 << 20);
    EXPECT_EQ(p.ways(1 << 20), kR | kS | kW);
    const ShmWayPolicy::Ticket t = p.decide(CollKind::kAllReduce, 1 << 20);
    EXPECT_GE(t.group, 0);
    EXPECT_FALSE(t.pulls());
    test::ScopedEnv noStream("LOOM_SHM_STREAM_SLOTS", "0");
    EXPECT_EQ(ShmWayPolicy::fromEnv(false, false, 2 << 20).ways(1 << 20), kR | kW);
    test::ScopedEnv noWalk("LOOM_SHM_PAGE_WALK", "0");
    ShmWayPolicy none = ShmWayPolicy::fromEnv(false, false, 2 << 20);
    EXPECT_EQ(none.ways(1 << 20), kR);
    EXPECT_LT(none.decide(CollKind::kAllReduce, 1 << 20).group, 0);
    EXPECT_EQ(none.fixedWay(), ShmWay::kRing);
    EXPECT_FALSE(none.walks(ShmWay::kRing));
  }
  {
    test::ScopedEnv high("LOOM_SHM_CMA_THRESHOLD", "262144");
    ShmWayPolicy p = ShmWayPolicy::fromEnv(false, false, 2 << 20);
    EXPECT_EQ(p.ways(65536), kR | kS | kW);
    EXPECT_EQ(p.ways(262144), kR | kS | kP | kW);
    // Steps smaller than a walk's block never walk: nothing to measure.
    EXPECT_EQ(p.ways(kCrossCoreBlockBytes - 64), kR | kS);
    EXPECT_EQ(p.ways(ShmWayPolicy::kMeasuredMinBytes - 1), kR);
    // Only the walked ring walks.
    EXPECT_TRUE(p.walks(ShmWay::kWalkedRing));
    EXPECT_FALSE(p.walks(ShmWay::kRing) || p.walks(ShmWay::kStreamedRing) ||
                 p.walks(ShmWay::kPull));
  }
  {
    test::ScopedEnv noStream("LOOM_SHM_STREAM_SLOTS", "0");
    EXPECT_EQ(ShmWayPolicy::fromEnv(false, false, 2 << 20).ways(1 << 20), kR | kP | kW);
  }
  {
    // Every way walks; none is measured for it.
    test::ScopedEnv walk("LOOM_SHM_PAGE_WALK", "1");
    ShmWayPolicy p = ShmWayPolicy::fromEnv(false, false, 2 << 20);
    EXPECT_EQ(p.ways(1 << 20), kR | kS | kP);
    EXPECT_TRUE(p.walks(ShmWay::kRing) && p.walks(ShmWay::kStreamedRing) && p.walks(ShmWay::kPull));
  }
  EXPECT_THROW(
      {
        test::ScopedEnv bad("LOOM_SHM_PAGE_WALK", "sometimes");
        ShmWayPolicy::fromEnv(false, false, 2 << 20);
      },
      Error);
  {
    // Every ring step streams: the group measures that ring against the pull.
    test::ScopedEnv always("LOOM_SHM_STREAM_SLOTS", "1");
    ShmWayPolicy p = ShmWayPolicy::fromEnv(false, false, 2 << 20);
    EXPECT_EQ(p.ways(65536), 5u);
    EXPECT_EQ(p.fixedWay(), ShmWay::kStreamedRing);
    EXPECT_TRUE(p.decide(CollKind::kAllReduce, 1024).streamsSlots());  // too small to measure
    std::string s;
    for (int i = 0; i < 40; ++i) {
      const ShmWayPolicy::Ticket t = p.decide(CollKind::kAllGather, 65536);
      s += t.pulls() ? 'p' : t.streamsSlots() ? 's' : 'r';
      p.record(t, t.pulls() ? 9000 : 5000);
    }
    // A 16 MiB ring: 8 cold ring calls, 2 counted, 3 pulls, then the (streamed) ring.
    EXPECT_EQ(s, std::string(10, 's') + "ppp" + std::string(19, 's') + "ppp" + std::string(5, 's'));
    test::ScopedEnv over("LOOM_SHM_CMA_THRESHOLD", "0");
    EXPECT_TRUE(ShmWayPolicy::fromEnv(true, false, 2 << 20)
                    .decide(CollKind::kAllReduce, 1 << 20)
                    .streamsSlots());
  }
  // More ranks than CPUs: a fixed rule, nothing timed, nothing streamed or walked.
  ShmWayPolicy over = ShmWayPolicy::fromEnv(true, false, 2 << 20);
  EXPECT_EQ(over.ways(1 << 20), 1u);
  EXPECT_FALSE(over.decide(CollKind::kAllReduce, 1 << 20).streamsSlots());
  EXPECT_FALSE(over.walks(ShmWay::kRing) || over.walks(ShmWay::kPull));
}

}  // namespace
}  // namespace loom
