// Failures during init with ranks as threads: ranks that never arrive, loomCommAbort from a
// second thread while init waits, aborting or destroying a non-blocking init.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "tests/test_util.h"

namespace loom::test {
namespace {

loomConfig_t withTimeout(int ms, int blocking = 1) {
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  config.timeoutMs = ms;
  config.blocking = blocking;
  return config;
}

TEST(Fault, MissingRanksTimeOutAndAreNamed) {
  loomUniqueId id = makeId();
  // A job of 5 where ranks 2 and 4 never come.
  std::vector<int> present{0, 1, 3};
  std::vector<loomResult_t> results(present.size());
  std::vector<std::string> messages(present.size());
  std::vector<loomComm_t> comms(present.size(), reinterpret_cast<loomComm_t>(1));
  runThreads(static_cast<int>(present.size()), [&](int i) {
    loomConfig_t config = withTimeout(1000);
    results[i] = loomCommInitRankConfig(&comms[i], 5, id, present[i], &config);
    messages[i] = loomGetLastError(nullptr);
  });
  for (size_t i = 0; i < present.size(); ++i) {
    EXPECT_EQ(results[i], loomTimeout) << messages[i];
    EXPECT_NE(messages[i].find("missing rank(s) 2, 4"), std::string::npos) << messages[i];
    EXPECT_EQ(comms[i], nullptr) << "a failed blocking init must set *comm to NULL";
  }
}

TEST(Fault, NonBlockingInitReportsTimeoutThroughAsyncError) {
  loomUniqueId id = makeId();
  loomComm_t comm = nullptr;
  loomConfig_t config = withTimeout(500, 0);
  ASSERT_EQ(loomCommInitRankConfig(&comm, 2, id, 0, &config), loomInProgress);
  loomResult_t state = loomInProgress;
  for (int i = 0; i < 1000 && state == loomInProgress; ++i) {
    ASSERT_LOOM_OK(loomCommGetAsyncError(comm, &state));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(state, loomTimeout);
  EXPECT_NE(std::string(loomGetLastError(comm)).find("missing rank(s) 1"), std::string::npos)
      << loomGetLastError(comm);
  // A failed communicator refuses work with a clear message, and can still be destroyed.
  loomComm_t child = nullptr;
  EXPECT_EQ(loomCommSplit(comm, 0, 0, &child, nullptr), loomInvalidUsage);
  EXPECT_EQ(loomCommDestroy(comm), loomSuccess);
}

TEST(Fault, AbortFromAnotherThreadUnblocksBlockingInit) {
  loomUniqueId id = makeId();
  loomComm_t comm = nullptr;  // written by init before it blocks
  std::atomic<bool> returned{false};
  loomResult_t result = loomSuccess;
  std::string message;
  std::thread initThread([&] {
    loomConfig_t config = withTimeout(60000);  // rank 1 never comes; only abort ends this
    result = loomCommInitRankConfig(&comm, 2, id, 0, &config);
    message = loomGetLastError(nullptr);
    returned = true;
  });
  loomComm_t handle = nullptr;
  for (int i = 0; i < 1000 && handle == nullptr; ++i) {
    handle = __atomic_load_n(&comm, __ATOMIC_ACQUIRE);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_NE(handle, nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(returned.load()) << "init should still be waiting for rank 1";
  EXPECT_EQ(loomCommAbort(handle), loomSuccess) << loomGetLastError(nullptr);
  initThread.join();
  EXPECT_EQ(result, loomInvalidUsage);
  EXPECT_NE(message.find("aborted"), std::string::npos) << message;
  // The handle is gone: using it again is reported, not a crash.
  int count = 0;
  EXPECT_EQ(loomCommCount(handle, &count), loomInvalidArgument);
}

TEST(Fault, AbortNonBlockingInit) {
  loomUniqueId id = makeId();
  loomComm_t comm = nullptr;
  loomConfig_t config = withTimeout(60000, 0);
  ASSERT_EQ(loomCommInitRankConfig(&comm, 3, id, 1, &config), loomInProgress);
  loomResult_t state = loomSuccess;
  ASSERT_LOOM_OK(loomCommGetAsyncError(comm, &state));
  EXPECT_EQ(state, loomInProgress);
  EXPECT_EQ(loomCommAbort(comm), loomSuccess);
  EXPECT_EQ(loomCommGetAsyncError(comm, &state), loomInvalidArgument);
}

TEST(Fault, DestroyNonBlockingInitInProgress) {
  loomUniqueId id = makeId();
  loomComm_t comm = nullptr;
  loomConfig_t config = withTimeout(60000, 0);
  ASSERT_EQ(loomCommInitRankConfig(&comm, 2, id, 0, &config), loomInProgress);
  EXPECT_EQ(loomCommDestroy(comm), loomSuccess);
  EXPECT_EQ(loomCommDestroy(comm), loomInvalidArgument);
}

TEST(Fault, AbortReadyCommunicatorThenPeersFailCleanly) {
  // Rank 0 aborts a ready communicator; rank 1's finalize (a barrier) then fails with an error
  // naming the peer instead of hanging.
  loomUniqueId id = makeId();
  std::vector<loomComm_t> comms = initThreads(2, id);
  ASSERT_LOOM_OK(loomCommAbort(comms[0]));
  loomResult_t r = loomCommFinalize(comms[1]);
  EXPECT_EQ(r, loomRemoteError) << loomGetLastError(comms[1]);
  EXPECT_NE(std::string(loomGetLastError(comms[1])).find("rank 0"), std::string::npos)
      << loomGetLastError(comms[1]);
  EXPECT_EQ(loomCommDestroy(comms[1]), loomSuccess);
}

TEST(Fault, RootGoneBeforeInit) {
  // An id whose root is no longer there (made up: a port nobody listens on): init fails by its
  // deadline with a message pointing at the root, instead of hanging.
  ScopedEnv commId("LOOM_COMM_ID", "127.0.0.1:" + std::to_string(freePort()));
  loomUniqueId id;
  ASSERT_LOOM_OK(loomGetUniqueId(&id));
  loomComm_t comm = nullptr;
  loomConfig_t config = withTimeout(500);
  loomResult_t r = loomCommInitRankConfig(&comm, 2, id, 1, &config);  // rank 1: no root here
  EXPECT_TRUE(r == loomRemoteError || r == loomTimeout) << loomGetErrorString(r);
  EXPECT_NE(std::string(loomGetLastError(nullptr)).find("rendezvous root"), std::string::npos)
      << loomGetLastError(nullptr);
}

}  // namespace
}  // namespace loom::test
