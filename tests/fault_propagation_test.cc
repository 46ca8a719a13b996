// Fault propagation with ranks as processes (tests/fault_rank_main.cc): 4 ranks, one killed
// with SIGKILL (at init, mid-traffic, while the others wait on something that does not touch
// it) or aborting; every survivor's call must fail with loomRemoteError naming that rank. The
// timeout is large (60 s): a survivor that learned of the death only by its timeout would fail
// with loomTimeout, and the test with it. Over shared memory and over TCP (LOOM_TRANSPORT).
#include <gtest/gtest.h>
#include <signal.h>

#include <random>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace loom::test {
namespace {

constexpr int kRanks = 4;
constexpr int kWaitMs = 90000;

struct Outcome {
  int exitCode = -1;
  int failedRank = -2;
  std::string output;
};

// "fail <code> <rank> <message>" -> the rank.
int failedRankIn(const std::string& output) {
  size_t at = output.find("fail ");
  if (at == std::string::npos) return -2;
  int code = 0, rank = -2;
  if (std::sscanf(output.c_str() + at, "fail %d %d", &code, &rank) != 2) return -2;
  return rank;
}

// Runs the scenario with `victim`; kills it at its "stalled" line unless it aborts. With
// `relayPauseMs`, every rank pauses that long after each control frame it sends to several ranks.
std::vector<Outcome> runScenario(const std::string& scenario, int victim,
                                 const std::string& transport, int relayPauseMs = 0) {
  const std::string id = idToHex(makeId());
  std::vector<std::string> env{"LOOM_TIMEOUT=60", "LOOM_TRANSPORT=" + transport};
  std::vector<RankProcess> ranks;
  for (int r = 0; r < kRanks; ++r) {
    std::vector<std::string> args{scenario, std::to_string(kRanks), std::to_string(r), id,
                                  std::to_string(victim)};
    if (relayPauseMs > 0) args.push_back(std::to_string(relayPauseMs));
    ranks.push_back(spawnProcess(LOOM_FAULT_RANK_BINARY, args, env));
  }
  std::vector<Outcome> out(kRanks);
  if (scenario != "abort") {
    std::string victimOut;
    EXPECT_TRUE(waitForLine(ranks[victim], "stalled", kWaitMs, &victimOut)) << victimOut;
    kill(ranks[victim].pid, SIGKILL);
  }
  for (int r = 0; r < kRanks; ++r) {
    std::optional<int> code = waitRank(ranks[r], kWaitMs, &out[r].output);
    out[r].exitCode = code.value_or(-1);
    out[r].failedRank = failedRankIn(out[r].output);
  }
  return out;
}

void expectSurvivorsNameVictim(const std::vector<Outcome>& out, int victim, bool knowsRank) {
  for (int r = 0; r < kRanks; ++r) {
    if (r == victim) continue;
    EXPECT_EQ(out[r].exitCode, 10 + loomRemoteError) << "rank " << r << ": " << out[r].output;
    if (knowsRank) {
      EXPECT_EQ(out[r].failedRank, victim) << "rank " << r << ": " << out[r].output;
    }
    EXPECT_NE(out[r].output.find("rank " + std::to_string(victim)), std::string::npos)
        << "rank " << r << ": " << out[r].output;
  }
}

int randomVictim() {
  std::random_device device;
  return static_cast<int>(device() % kRanks);
}

class FaultPropagation : public ::testing::TestWithParam<std::string> {};

TEST_P(FaultPropagation, KilledAtInit) {
  const int victim = randomVictim();
  SCOPED_TRACE("victim rank " + std::to_string(victim));
  std::vector<Outcome> out = runScenario("init", victim, GetParam());
  EXPECT_EQ(out[victim].exitCode, 128 + SIGKILL);
  expectSurvivorsNameVictim(out, victim, /*knowsRank=*/false);  // init returns no handle
}

TEST_P(FaultPropagation, KilledMidTrafficWhileOthersWaitOrIdle) {
  for (int victim : {0, randomVictim()}) {
    SCOPED_TRACE("victim rank " + std::to_string(victim));
    std::vector<Outcome> out = runScenario("traffic", victim, GetParam());
    expectSurvivorsNameVictim(out, victim, true);
  }
}

TEST_P(FaultPropagation, ReceiverOfAnotherRankLearnsOfTheDeath) {
  // Victim 0: rank 3 waits on a receive from rank 2 (alive, idle), rank 1 idles.
  for (int victim : {0, randomVictim()}) {
    SCOPED_TRACE("victim rank " + std::to_string(victim));
    std::vector<Outcome> out = runScenario("recv", victim, GetParam());
    expectSurvivorsNameVictim(out, victim, true);
  }
}

TEST_P(FaultPropagation, SplitChildSeesItsParentsFailure) {
  const int victim = randomVictim();
  SCOPED_TRACE("victim rank " + std::to_string(victim));
  std::vector<Outcome> out = runScenario("split", victim, GetParam());
  expectSurvivorsNameVictim(out, victim, true);
}

// Rank 0 relays the death slowly, so a survivor that heard of it first fails and exits while
// the others have not heard yet: they must wait for the verdict, not blame that survivor.
TEST_P(FaultPropagation, SplitChildSeesItsParentsFailureWhenTheRelayIsSlow) {
  const int victim = 1 + randomVictim() % (kRanks - 1);  // not rank 0, which relays
  SCOPED_TRACE("victim rank " + std::to_string(victim));
  std::vector<Outcome> out = runScenario("split", victim, GetParam(), /*relayPauseMs=*/400);
  expectSurvivorsNameVictim(out, victim, true);
}

// Rank 0 says LEAVING slowly: the survivors that heard it exit, and rank 0, having left, must not
// name their exits to the ones that have not heard it yet.
TEST_P(FaultPropagation, AbortOfRankZeroIsSeenAsLeavingWhenItIsSaidSlowly) {
  std::vector<Outcome> out = runScenario("abort", 0, GetParam(), /*relayPauseMs=*/400);
  EXPECT_EQ(out[0].exitCode, 0) << out[0].output;
  expectSurvivorsNameVictim(out, 0, true);
}

TEST_P(FaultPropagation, AbortIsSeenAsLeaving) {
  const int victim = randomVictim();
  SCOPED_TRACE("aborting rank " + std::to_string(victim));
  std::vector<Outcome> out = runScenario("abort", victim, GetParam());
  EXPECT_EQ(out[victim].exitCode, 0) << out[victim].output;
  expectSurvivorsNameVictim(out, victim, true);
  for (int r = 0; r < kRanks; ++r) {
    if (r != victim) {
      EXPECT_NE(out[r].output.find("loomCommAbort"), std::string::npos) << out[r].output;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, FaultPropagation, ::testing::Values("shm", "socket"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace loom::test
