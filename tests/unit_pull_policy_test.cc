// Unit tests of the choice between CMA and the shared ring (src/core/pull_policy.h): the first
// calls of a group alternate, then the faster way wins and the other is retried every
// kExploreEvery-th call; a change of the machine's state flips the choice; one slow call does
// not; small calls and groups of other sizes or collectives are counted apart; a bad
// LOOM_SHM_CMA_MODE fails communicator init naming the variable.
#include <gtest/gtest.h>

#include <string>

#include "loom/loom.h"
#include "src/core/pull_policy.h"
#include "tests/test_util.h"

namespace loom {
namespace {

constexpr size_t kMin = 16384;
constexpr uint32_t kWarmup = 2 * (PullPolicy::kWarmupCalls + 1);

// Runs `calls` calls of one group, each taking ringNs or pullNs; returns how many pulled.
int run(PullPolicy& p, int calls, uint64_t ringNs, uint64_t pullNs,
        CollKind kind = CollKind::kAllGather, size_t bytes = 65536) {
  int pulled = 0;
  for (int i = 0; i < calls; ++i) {
    const PullPolicy::Ticket t = p.decide(kind, bytes);
    pulled += t.pull;
    p.record(t, t.pull ? pullNs : ringNs);
  }
  return pulled;
}

TEST(PullPolicy, WarmupAlternatesThenTheFasterWayWins) {
  PullPolicy p(PullPolicy::Mode::kAuto, kMin);
  for (uint32_t i = 0; i < kWarmup; ++i) {
    const PullPolicy::Ticket t = p.decide(CollKind::kAllGather, 65536);
    EXPECT_EQ(t.pull, i % 2 == 1) << "call " << i;
    EXPECT_GE(t.group, 0);
    p.record(t, t.pull ? 5000 : 9000);
  }
  // The rest of the first kExploreEvery calls pull; call kExploreEvery tries the ring.
  const int rest = static_cast<int>(PullPolicy::kExploreEvery - kWarmup);
  EXPECT_EQ(run(p, rest, 9000, 5000), rest);
  const PullPolicy::Ticket explore = p.decide(CollKind::kAllGather, 65536);
  EXPECT_FALSE(explore.pull);
  p.record(explore, 9000);
  EXPECT_EQ(run(p, 10, 9000, 5000), 10);
}

TEST(PullPolicy, AChangeOfStateFlipsTheChoiceAndOneSlowCallDoesNot) {
  PullPolicy p(PullPolicy::Mode::kAuto, kMin);
  const int period = static_cast<int>(PullPolicy::kExploreEvery);
  run(p, period, 5000, 9000);                // ring faster: pulls only while warming up
  EXPECT_EQ(run(p, period, 5000, 9000), 1);  // and once per period, to look again
  EXPECT_EQ(run(p, 1, 5000, 9000), 1);       // (that call)
  // One descheduled ring call (100x) counts for at most 4x the mean: still the ring.
  PullPolicy::Ticket t = p.decide(CollKind::kAllGather, 65536);
  ASSERT_FALSE(t.pull);
  p.record(t, 500000);
  EXPECT_FALSE(p.decide(CollKind::kAllGather, 65536).pull);
  // The ring gets 4x slower for good (the slow state): the mean passes the pull's.
  run(p, 5, 20000, 9000);
  EXPECT_EQ(run(p, period, 20000, 9000), period - 1);
}

TEST(PullPolicy, GroupsAreCountedApart) {
  PullPolicy p(PullPolicy::Mode::kAuto, kMin);
  const int period = static_cast<int>(PullPolicy::kExploreEvery);
  run(p, period, 9000, 5000, CollKind::kAllGather, 65536);  // pull wins for AllGather 64 KiB
  // Another size class, another collective: warm up on their own, and the ring wins there.
  for (auto [kind, bytes] : {std::pair{CollKind::kAllGather, size_t{1} << 20},
                             std::pair{CollKind::kBroadcast, size_t{65536}}}) {
    EXPECT_FALSE(p.decide(kind, bytes).pull) << collName(kind) << " " << bytes;
    run(p, period, 5000, 9000, kind, bytes);
    EXPECT_EQ(run(p, period, 5000, 9000, kind, bytes), 1);
  }
  EXPECT_EQ(run(p, period, 9000, 5000), period - 1);
  // Sizes in one power of two share a group: 65536 and 131071 bytes.
  EXPECT_EQ(p.decide(CollKind::kAllGather, 131071).group,
            p.decide(CollKind::kAllGather, 65536).group);
}

TEST(PullPolicy, SmallCallsAndFixedModesAreNotMeasured) {
  PullPolicy p(PullPolicy::Mode::kAuto, kMin);
  const PullPolicy::Ticket small = p.decide(CollKind::kAllReduce, kMin - 1);
  EXPECT_FALSE(small.pull);
  EXPECT_LT(small.group, 0);
  PullPolicy always(PullPolicy::Mode::kAlways, kMin);
  EXPECT_TRUE(always.pullsAlways());
  const PullPolicy::Ticket a = always.decide(CollKind::kAllReduce, 1 << 20);
  EXPECT_TRUE(a.pull);
  EXPECT_LT(a.group, 0);
  PullPolicy never(PullPolicy::Mode::kNever, 0);
  EXPECT_FALSE(never.decide(CollKind::kAllReduce, 1 << 20).pull);
}

TEST(PullPolicyErrors, UnknownModeFailsInit) {
  test::ScopedEnv env("LOOM_SHM_CMA_MODE", "sometimes");
  loomComm_t comms[2] = {};
  int devices[2] = {LOOM_DEVICE_CPU, LOOM_DEVICE_CPU};
  EXPECT_EQ(loomCommInitAll(comms, 2, devices), loomInvalidArgument);
  EXPECT_NE(std::string(loomGetLastError(nullptr)).find("LOOM_SHM_CMA_MODE"), std::string::npos)
      << loomGetLastError(nullptr);
}

}  // namespace
}  // namespace loom
