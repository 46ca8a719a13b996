// Unit tests of the choice between CMA and the shared ring (src/core/pull_policy.h): the first
// calls of a group alternate, then the faster way wins and the other is retried on calls 16,
// 48 and every kExploreEvery-th; a change of the machine's state flips the choice; one slow
// call does not; small calls and groups of other sizes or collectives are counted apart; a bad
// LOOM_SHM_CMA_MODE fails communicator init naming the variable.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "loom/loom.h"
#include "src/core/pull_policy.h"
#include "tests/test_util.h"

namespace loom {
namespace {

constexpr size_t kMin = 16384;

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

// The ways of calls [0, n) of a group where pull is faster from the start.
std::string ways(PullPolicy& p, int n, uint64_t ringNs, uint64_t pullNs) {
  std::string s;
  for (int i = 0; i < n; ++i) {
    const PullPolicy::Ticket t = p.decide(CollKind::kAllGather, 65536);
    EXPECT_EQ(t.call, static_cast<uint32_t>(i));
    s += t.pull ? 'p' : 'r';
    p.record(t, t.pull ? pullNs : ringNs);
  }
  return s;
}

TEST(PullPolicy, WarmupAlternatesThenTheFasterWayWinsAndTheOtherIsRetried) {
  PullPolicy p(PullPolicy::Mode::kAuto, kMin);
  const std::string s = ways(p, 300, 9000, 5000);
  EXPECT_EQ(s.substr(0, 5), "rprpr");
  for (int i = 5; i < 300; ++i) {
    const bool explore = i == 16 || i == 48 || i == 128 || i == 256;
    EXPECT_EQ(s[i], explore ? 'r' : 'p') << "call " << i;
  }
  PullPolicy q(PullPolicy::Mode::kAuto, kMin);
  const std::string t = ways(q, 50, 5000, 9000);
  EXPECT_EQ(t, "rprpr" + std::string(11, 'r') + "p" + std::string(31, 'r') + "p" + "r");
}

TEST(PullPolicy, AChangeOfStateFlipsTheChoiceAndOneSlowCallDoesNot) {
  PullPolicy p(PullPolicy::Mode::kAuto, kMin);
  EXPECT_EQ(run(p, 100, 5000, 9000), 4);  // calls 1, 3 warming up, 16 and 48 looking again
  // One descheduled ring call (100x) counts for at most 4x the mean: still the ring.
  PullPolicy::Ticket t = p.decide(CollKind::kAllGather, 65536);
  ASSERT_FALSE(t.pull);
  p.record(t, 500000);
  EXPECT_EQ(run(p, 5, 5000, 9000), 0);
  // The ring gets 4x slower for good (the slow state): within a few calls its mean passes the
  // pull's, and from then on the group pulls, but for call 128.
  EXPECT_GE(run(p, 5, 20000, 9000), 3);
  EXPECT_EQ(run(p, 100, 20000, 9000), 99);
}

TEST(PullPolicy, GroupsAreCountedApart) {
  PullPolicy p(PullPolicy::Mode::kAuto, kMin);
  run(p, 100, 9000, 5000);  // pull wins for AllGather 64 KiB
  // Another size class, another collective: they warm up on their own; the ring wins there.
  for (auto [kind, bytes] : {std::pair{CollKind::kAllGather, size_t{1} << 20},
                             std::pair{CollKind::kBroadcast, size_t{65536}}}) {
    EXPECT_FALSE(p.decide(kind, bytes).pull) << collName(kind) << " " << bytes;
    EXPECT_EQ(run(p, 99, 5000, 9000, kind, bytes), 4) << collName(kind) << " " << bytes;
  }
  EXPECT_EQ(run(p, 20, 9000, 5000), 20);  // calls 100-119 of AllGather 64 KiB
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
