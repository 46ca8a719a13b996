// Hang reports: a rank that stops calling collectives is named, with what it did last, in
// every other rank's timeout message (ranks as threads; the control channel asks every rank,
// idle or not). And the report's wording from a progress table (no network).
#include "src/comm/hang_report.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/test_util.h"

namespace loom::test {
namespace {

RankProgress progress(const char* kind, uint64_t issued, uint64_t completed, uint64_t count) {
  RankProgress p;
  std::strncpy(p.kind, kind, sizeof(p.kind) - 1);
  p.issued = issued;
  p.completed = completed;
  p.count = count;
  p.datatype = loomFloat32;
  p.root = 0;
  p.msSinceCompleted = 5000;
  p.answered = true;
  return p;
}

TEST(HangReport, NamesTheRankThatHasNotCalled) {
  std::vector<RankProgress> table(4, progress("AllReduce", 21, 20, 675920));
  table[3] = progress("AllGather", 20, 20, 100);
  const std::string report = formatHangReport(1, table);
  EXPECT_EQ(report,
            "AllReduce #21 (count 675920, float32): ranks 0-2 are waiting; rank 3 has not called "
            "it. Its last call was AllGather #20 (count 100, float32), completed 5.0 s ago.");
}

TEST(HangReport, MismatchedAndSilentRanks) {
  std::vector<RankProgress> table(5, progress("AllReduce", 7, 6, 16));
  table[2] = progress("Broadcast", 7, 6, 16);
  table[4].answered = false;
  const std::string report = formatHangReport(0, table);
  EXPECT_TRUE(contains(report, "ranks 0-1, 3 are waiting")) << report;
  EXPECT_TRUE(contains(report, "rank 2 called Broadcast #7 (count 16, float32, root 0) instead"))
      << report;
  EXPECT_TRUE(contains(report, "rank 4 did not answer")) << report;
}

TEST(HangReport, NothingInFlightNothingToSay) {
  std::vector<RankProgress> table(2, progress("AllReduce", 3, 3, 1));
  EXPECT_EQ(formatHangReport(0, table), "");
}

TEST(HangReport, ProgressEntryRoundTrip) {
  RankProgress p = progress("ReduceScatter", 1ull << 40, 7, 123456789012ull);
  p.root = -1;
  p.msSinceIssued = 42;
  uint8_t wire[kProgressEntryBytes];
  encodeProgress(p, wire);
  RankProgress q = decodeProgress(wire);
  EXPECT_EQ(q.issued, p.issued);
  EXPECT_EQ(q.completed, p.completed);
  EXPECT_EQ(q.count, p.count);
  EXPECT_EQ(q.datatype, p.datatype);
  EXPECT_EQ(q.root, -1);
  EXPECT_EQ(q.msSinceIssued, 42u);
  EXPECT_EQ(q.msSinceCompleted, 5000u);
  EXPECT_TRUE(q.answered);
  EXPECT_STREQ(q.kind, "ReduceScatter");
}

TEST(HangReport, RankRanges) {
  EXPECT_EQ(describeRanks({3}), "rank 3");
  EXPECT_EQ(describeRanks({0, 1, 2}), "ranks 0-2");
  EXPECT_EQ(describeRanks({0, 2, 5, 6, 7}), "ranks 0, 2, 5-7");
}

TEST(HangReport, IdleRankIsNamedInEveryTimeout) {
  constexpr int kRanks = 4, kIdle = 2;
  ScopedEnv timeout("LOOM_TIMEOUT", "2");
  loomUniqueId id = makeId();
  std::vector<loomComm_t> comms = initThreads(kRanks, id);
  std::vector<loomResult_t> results(kRanks, loomSuccess);
  std::vector<std::string> messages(kRanks);
  runThreads(kRanks, [&](int rank) {
    std::vector<float> data(1000, 1.0f);
    for (int i = 0; i < 3; ++i)
      ASSERT_EQ(loomAllReduce(data.data(), data.data(), data.size(), loomFloat32, loomSum,
                              comms[rank], nullptr),
                loomSuccess)
          << loomGetLastError(comms[rank]);
    if (rank == kIdle) {
      // Stays out of loom (its control thread still answers) until the others timed out.
      std::this_thread::sleep_for(std::chrono::seconds(6));
      return;
    }
    results[rank] = loomAllGather(data.data(), data.data(), 250, loomFloat32, comms[rank], nullptr);
    messages[rank] = loomGetLastError(comms[rank]);
  });
  for (int r = 0; r < kRanks; ++r) {
    if (r == kIdle) continue;
    EXPECT_EQ(results[r], loomTimeout) << messages[r];
    EXPECT_TRUE(contains(messages[r], "AllGather #4 (count 250, float32)")) << messages[r];
    EXPECT_TRUE(contains(messages[r], "ranks 0-1, 3 are waiting")) << messages[r];
    EXPECT_TRUE(contains(messages[r], "rank 2 has not called it. Its last call was AllReduce #3"))
        << messages[r];
  }
  for (loomComm_t c : comms) EXPECT_EQ(loomCommDestroy(c), loomSuccess);
}

// Rank 3 gives up first (a shorter timeout) while setting up the AllGather's connections, after
// finishing its side of the one rank 0 receives on. That side must stay: had it gone with rank
// 3's failed setup, rank 0 would read it as rank 3's death. Every waiting rank times out on its
// own instead, naming the rank that did not call.
TEST(HangReport, ARankThatTimedOutInSetupDoesNotLookDead) {
  constexpr int kRanks = 4, kIdle = 2, kFirst = 3;
  loomUniqueId id = makeId();
  std::vector<loomComm_t> comms(kRanks, nullptr);
  runThreads(kRanks, [&](int rank) {
    loomConfig_t config = LOOM_CONFIG_INITIALIZER;
    config.timeoutMs = rank == kFirst ? 1000 : 3000;
    ASSERT_EQ(loomCommInitRankConfig(&comms[rank], kRanks, id, rank, &config), loomSuccess);
  });
  std::vector<loomResult_t> results(kRanks, loomSuccess);
  std::vector<std::string> messages(kRanks);
  runThreads(kRanks, [&](int rank) {
    std::vector<float> data(1000, 1.0f);
    ASSERT_EQ(loomAllReduce(data.data(), data.data(), data.size(), loomFloat32, loomSum,
                            comms[rank], nullptr),
              loomSuccess)
        << loomGetLastError(comms[rank]);
    if (rank == kIdle) {
      std::this_thread::sleep_for(std::chrono::seconds(5));
      return;
    }
    results[rank] = loomAllGather(data.data(), data.data(), 250, loomFloat32, comms[rank], nullptr);
    messages[rank] = loomGetLastError(comms[rank]);
  });
  for (int r = 0; r < kRanks; ++r) {
    if (r == kIdle) continue;
    EXPECT_EQ(results[r], loomTimeout) << "rank " << r << ": " << messages[r];
    EXPECT_TRUE(contains(messages[r], "rank 2")) << "rank " << r << ": " << messages[r];
    EXPECT_FALSE(contains(messages[r], "gone")) << "rank " << r << ": " << messages[r];
  }
  for (loomComm_t c : comms) EXPECT_EQ(loomCommDestroy(c), loomSuccess);
}

TEST(HangReport, ConnectionSetupWaitNamesTheCallAndThePeer) {
  // The end-of-epoch hang: rank 1 has run out of batches and enters a barrier (a one-byte
  // AllReduce, whose protocol needs connections no earlier call set up) while rank 0 is still
  // in a gradient AllReduce. Rank 1 waits for rank 0's half of that setup, which never comes:
  // its timeout names its own call and rank 0, not a bootstrap tag.
  constexpr int kRanks = 2;
  ScopedEnv timeout("LOOM_TIMEOUT", "2");
  loomUniqueId id = makeId();
  std::vector<loomComm_t> comms = initThreads(kRanks, id);
  std::vector<loomResult_t> results(kRanks, loomSuccess);
  std::vector<std::string> messages(kRanks);
  runThreads(kRanks, [&](int rank) {
    std::vector<float> data(1000, 1.0f);
    for (int i = 0; i < 2; ++i)
      ASSERT_EQ(loomAllReduce(data.data(), data.data(), data.size(), loomFloat32, loomSum,
                              comms[rank], nullptr),
                loomSuccess)
          << loomGetLastError(comms[rank]);
    uint8_t flag = 1;
    results[rank] = rank == 0
                        ? loomAllReduce(data.data(), data.data(), data.size(), loomFloat32, loomSum,
                                        comms[rank], nullptr)
                        : loomAllReduce(&flag, &flag, 1, loomUint8, loomSum, comms[rank], nullptr);
    messages[rank] = loomGetLastError(comms[rank]);
  });
  EXPECT_EQ(results[1], loomTimeout) << messages[1];
  EXPECT_TRUE(contains(messages[1],
                       "rank 0's part of a connection setup for this rank's "
                       "AllReduce #3 (count 1, uint8)"))
      << messages[1];
  EXPECT_FALSE(contains(messages[1], "tag ")) << messages[1];
  EXPECT_NE(results[0], loomSuccess);
  EXPECT_TRUE(contains(messages[0], "rank 1")) << messages[0];
  for (loomComm_t c : comms) loomCommAbort(c);
}

TEST(HangReport, IdleRankIsNamedWhenTheCallIsInAGroup) {
  // The waiting ranks' call is a group on one communicator: loomGroupEnd reports the timeout
  // on that communicator, with who has not arrived.
  constexpr int kRanks = 3, kIdle = 1;
  ScopedEnv timeout("LOOM_TIMEOUT", "2");
  loomUniqueId id = makeId();
  std::vector<loomComm_t> comms = initThreads(kRanks, id);
  std::vector<loomResult_t> results(kRanks, loomSuccess);
  std::vector<std::string> messages(kRanks);
  runThreads(kRanks, [&](int rank) {
    std::vector<float> data(600, 1.0f);
    ASSERT_EQ(loomAllReduce(data.data(), data.data(), data.size(), loomFloat32, loomSum,
                            comms[rank], nullptr),
              loomSuccess)
        << loomGetLastError(comms[rank]);
    if (rank == kIdle) {
      std::this_thread::sleep_for(std::chrono::seconds(6));
      return;
    }
    ASSERT_EQ(loomGroupStart(), loomSuccess);
    ASSERT_EQ(loomBroadcast(data.data(), data.data(), 300, loomFloat32, 0, comms[rank], nullptr),
              loomSuccess);
    results[rank] = loomGroupEnd();
    messages[rank] = loomGetLastError(comms[rank]);
  });
  for (int r = 0; r < kRanks; ++r) {
    if (r == kIdle) continue;
    EXPECT_EQ(results[r], loomTimeout) << messages[r];
    EXPECT_TRUE(
        contains(messages[r], "Broadcast #2 (count 300, float32, root 0): ranks 0, 2 are waiting"))
        << messages[r];
    EXPECT_TRUE(contains(messages[r], "rank 1 has not called it. Its last call was AllReduce #1"))
        << messages[r];
  }
  for (loomComm_t c : comms) EXPECT_EQ(loomCommDestroy(c), loomSuccess);
}

TEST(HangReport, StuckCallIsReportedWhileItWaits) {
  // LOOM_WARN_STUCK_S=1: the report is logged once while the call goes on waiting (the timeout
  // comes later, when the idle rank finally calls).
  constexpr int kRanks = 3, kIdle = 0;
  ScopedEnv timeout("LOOM_TIMEOUT", "30");
  ScopedEnv stuck("LOOM_WARN_STUCK_S", "1");
  loomUniqueId id = makeId();
  std::vector<loomComm_t> comms = initThreads(kRanks, id);
  std::vector<loomResult_t> results(kRanks, loomInternalError);
  testing::internal::CaptureStderr();
  runThreads(kRanks, [&](int rank) {
    std::vector<float> data(64, 1.0f);
    if (rank == kIdle) std::this_thread::sleep_for(std::chrono::seconds(4));
    results[rank] = loomAllReduce(data.data(), data.data(), data.size(), loomFloat32, loomSum,
                                  comms[rank], nullptr);
  });
  const std::string log = testing::internal::GetCapturedStderr();
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(results[r], loomSuccess) << loomGetLastError(comms[r]);
  EXPECT_TRUE(contains(log, "LOOM_WARN_STUCK_S")) << log;
  EXPECT_TRUE(contains(log,
                       "AllReduce #1 (count 64, float32): ranks 1-2 are waiting; rank 0 has "
                       "not called it. It has made no call on this communicator yet."))
      << log;
  finalizeAndDestroy(comms);
}

}  // namespace
}  // namespace loom::test
