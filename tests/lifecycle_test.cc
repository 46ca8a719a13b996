// Communicator lifecycle with ranks as threads of one process: init, queries, finalize and
// destroy for several job sizes; loomCommInitAll; non-blocking init; many jobs in a row and at
// once.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "tests/test_util.h"

namespace loom::test {
namespace {

class LifecycleTest : public ::testing::TestWithParam<int> {};

TEST_P(LifecycleTest, InitQueryFinalizeDestroy) {
  const int nranks = GetParam();
  loomUniqueId id = makeId();
  std::vector<loomComm_t> comms = initThreads(nranks, id);
  for (int r = 0; r < nranks; ++r) {
    int count = -1, rank = -1, device = 99;
    loomResult_t state = loomInternalError;
    ASSERT_LOOM_OK(loomCommCount(comms[r], &count));
    ASSERT_LOOM_OK(loomCommUserRank(comms[r], &rank));
    ASSERT_LOOM_OK(loomCommDevice(comms[r], &device));
    ASSERT_LOOM_OK(loomCommGetAsyncError(comms[r], &state));
    EXPECT_EQ(count, nranks);
    EXPECT_EQ(rank, r);
    EXPECT_EQ(device, LOOM_DEVICE_CPU);
    EXPECT_EQ(state, loomSuccess);
  }
  finalizeAndDestroy(comms);
}

TEST_P(LifecycleTest, InitAll) {
  const int nranks = GetParam();
  std::vector<loomComm_t> comms(nranks, nullptr);
  ASSERT_LOOM_OK(loomCommInitAll(comms.data(), nranks, nullptr));
  for (int r = 0; r < nranks; ++r) {
    int count = -1, rank = -1;
    ASSERT_LOOM_OK(loomCommCount(comms[r], &count));
    ASSERT_LOOM_OK(loomCommUserRank(comms[r], &rank));
    EXPECT_EQ(count, nranks);
    EXPECT_EQ(rank, r);
  }
  finalizeAndDestroy(comms);
}

TEST_P(LifecycleTest, NonBlockingInitCompletesThroughAsyncError) {
  const int nranks = GetParam();
  loomUniqueId id = makeId();
  std::vector<loomComm_t> comms(nranks, nullptr);
  for (int r = 0; r < nranks; ++r) {
    loomConfig_t config = LOOM_CONFIG_INITIALIZER;
    config.blocking = 0;
    // Returns at once, even though the other ranks have not called init yet.
    ASSERT_EQ(loomCommInitRankConfig(&comms[r], nranks, id, r, &config), loomInProgress);
    ASSERT_NE(comms[r], nullptr);
  }
  for (int r = 0; r < nranks; ++r) {
    loomResult_t state = loomInProgress;
    for (int i = 0; i < 3000 && state == loomInProgress; ++i) {
      ASSERT_LOOM_OK(loomCommGetAsyncError(comms[r], &state));
      if (state == loomInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_EQ(state, loomSuccess) << loomGetLastError(comms[r]);
    int rank = -1;
    ASSERT_LOOM_OK(loomCommUserRank(comms[r], &rank));
    EXPECT_EQ(rank, r);
  }
  finalizeAndDestroy(comms);
}

INSTANTIATE_TEST_SUITE_P(Ranks, LifecycleTest, ::testing::Values(1, 2, 3, 4, 7, 8),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

TEST(Lifecycle, VersionMatchesHeader) {
  int version = 0;
  ASSERT_LOOM_OK(loomGetVersion(&version));
  EXPECT_EQ(version, LOOM_VERSION_CODE);
}

TEST(Lifecycle, ConfigNameAndTimeoutAreAccepted) {
  loomUniqueId id = makeId();
  std::vector<loomComm_t> comms(2, nullptr);
  runThreads(2, [&](int r) {
    loomConfig_t config = LOOM_CONFIG_INITIALIZER;
    config.name = "trainer-dp";
    config.timeoutMs = 20000;
    config.device = LOOM_DEVICE_CPU;
    config.blocking = 1;
    EXPECT_EQ(loomCommInitRankConfig(&comms[r], 2, id, r, &config), loomSuccess)
        << loomGetLastError(nullptr);
  });
  finalizeAndDestroy(comms);
}

TEST(Lifecycle, ManyJobsInARow) {
  for (int i = 0; i < 25; ++i) {
    loomUniqueId id = makeId();
    finalizeAndDestroy(initThreads(3, id));
  }
}

TEST(Lifecycle, IndependentJobsAtOnce) {
  // Four jobs of three ranks each, all initialising concurrently in one process.
  std::vector<std::thread> jobs;
  for (int j = 0; j < 4; ++j) {
    jobs.emplace_back([] {
      loomUniqueId id = makeId();
      finalizeAndDestroy(initThreads(3, id));
    });
  }
  for (auto& t : jobs) t.join();
}

TEST(Lifecycle, DestroyWithoutFinalizeIsAllowed) {
  loomUniqueId id = makeId();
  std::vector<loomComm_t> comms = initThreads(3, id);
  for (loomComm_t c : comms) EXPECT_EQ(loomCommDestroy(c), loomSuccess);
}

TEST(Lifecycle, DefaultInterfaceChoiceWorks) {
  // No LOOM_SOCKET_IFNAME: loom picks an interface itself (a non-loopback one if this host has
  // one; its own address, so traffic stays on this machine).
  unsetenv("LOOM_SOCKET_IFNAME");
  loomUniqueId id = makeId();
  finalizeAndDestroy(initThreads(2, id));
}

}  // namespace
}  // namespace loom::test
