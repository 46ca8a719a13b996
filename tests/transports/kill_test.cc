// Ranks SIGKILLed at random instants of init and connection setup over shared memory: every
// survivor fails with an error instead of hanging, and no process, the dead one included,
// leaves a name in /dev/shm (rings are memfds: transports/shm/shm_segment.h).
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "loom/loom.h"
#include "src/base/strings.h"
#include "tests/test_util.h"
#include "tests/transports/transport_test_util.h"

namespace loom::transport::test {
namespace {

using loom::test::RankProcess;

constexpr int kTrials = 10;  // per job size: 30 in all
constexpr int kMaxDelayMs = 50;
// LOOM_TIMEOUT of the ranks: a survivor that waits on a rank killed before it ever reached
// the rendezvous learns of it only then. The wait for each survivor allows far more.
constexpr int kRankTimeoutS = 5;
constexpr int kWaitMs = 60000;

class KilledDuringSetup : public ::testing::TestWithParam<int> {};

TEST_P(KilledDuringSetup, SurvivorsFailAndNoNameIsLeft) {
  const int n = GetParam();
  std::mt19937 random(20261204u + static_cast<unsigned>(n));  // fixed: a failure replays
  for (int trial = 0; trial < kTrials; ++trial) {
    const int victim = static_cast<int>(random() % n);
    const int delayMs = static_cast<int>(random() % (kMaxDelayMs + 1));
    // Even trials kill in init, odd ones in connection setup (the first calls set it up). In
    // every other pair of trials the importers may not use pidfd_getfd, so rings come by
    // SCM_RIGHTS.
    const char* anchor = trial % 2 == 0 ? "starting" : "initialized";
    const bool scm = trial / 2 % 2 == 1;
    SCOPED_TRACE(strCat("trial ", trial, ": ", n, " ranks, rank ", victim, " killed ", delayMs,
                        " ms after it printed \"", anchor, "\"",
                        scm ? ", rings by SCM_RIGHTS" : ""));
    std::vector<std::string> env{"LOOM_TRANSPORT=shm", "LOOM_BUFFSIZE=65536",
                                 strCat("LOOM_TIMEOUT=", kRankTimeoutS)};
    if (scm) env.push_back("TRANSPORT_TEST_REFUSE_PIDFD=1");
    const std::string id = loom::test::idToHex(loom::test::makeId());
    std::vector<RankProcess> procs;
    for (int r = 0; r < n; ++r)
      procs.push_back(loom::test::spawnRank(
          {"allreduce-twice", std::to_string(n), std::to_string(r), id}, env));
    std::string victimOut;
    ASSERT_TRUE(loom::test::waitForLine(procs[victim], anchor, kWaitMs, &victimOut)) << victimOut;
    std::this_thread::sleep_for(std::chrono::milliseconds(delayMs));
    ASSERT_EQ(kill(procs[victim].pid, SIGKILL), 0);
    // It cannot have finished: it sleeps 150 ms between its two rounds of calls.
    EXPECT_EQ(loom::test::waitRank(procs[victim], kWaitMs), std::optional<int>(128 + SIGKILL));
    for (int r = 0; r < n; ++r) {
      if (r == victim) continue;
      std::string out;
      const std::optional<int> code = loom::test::waitRank(procs[r], kWaitMs, &out);
      ASSERT_TRUE(code.has_value()) << "rank " << r << " hung: " << out;
      // "fail <code> ...", exit 10 + a loomResult_t: an error, not a crash and not success.
      EXPECT_GT(*code, 10) << "rank " << r << ": " << out;
      EXPECT_LT(*code, 10 + loomNumResults) << "rank " << r << ": " << out;
      EXPECT_NE(out.find("fail "), std::string::npos) << "rank " << r << ": " << out;
    }
    for (int r = 0; r < n; ++r)
      EXPECT_EQ(devShmNamesOf(procs[r].pid), std::vector<std::string>{}) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, KilledDuringSetup, ::testing::Values(2, 3, 4),
                         [](const auto& info) { return strCat("n", info.param); });

}  // namespace
}  // namespace loom::transport::test
