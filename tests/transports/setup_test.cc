// Transport selection, connectAll's checks and error forwarding, and the out-of-memory error of
// a shared ring. The shared ring itself (memfd, fd passing, lock bytes): shm_segment_test.cc.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "src/base/error.h"
#include "src/comm/comm.h"
#include "tests/test_util.h"
#include "tests/transports/transport_test_util.h"
#include "transports/registry.h"
#include "transports/shm/shm_segment.h"
#include "transports/tags.h"

namespace loom::transport::test {
namespace {

using loom::test::ScopedEnv;
// EXPECT_PRED2 prints both strings when the check fails.
bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

RankInfo rankOn(int rank, uint64_t host) {
  RankInfo info;
  info.rank = rank;
  info.hostHash = host;
  return info;
}

// The pair as the communicator describes it: one host is shared memory's path class here.
PeerPair pairOf(const RankInfo& a, const RankInfo& b) {
  return PeerPair{
      a, b, a.hostHash == b.hostHash ? topo::PathClass::kSameNuma : topo::PathClass::kNetwork};
}

std::string selectionError(const RankInfo& a, const RankInfo& b) {
  try {
    selectTransport(pairOf(a, b));
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(TransportSelection, PrefersShmOnOneHostAndSocketBetweenHosts) {
  ScopedEnv transport("LOOM_TRANSPORT", "");
  ScopedEnv shmDisable("LOOM_SHM_DISABLE", "0");
  EXPECT_STREQ(selectTransport(pairOf(rankOn(0, 7), rankOn(1, 7))).name(), "shm");
  EXPECT_STREQ(selectTransport(pairOf(rankOn(0, 7), rankOn(1, 8))).name(), "socket");
}

TEST(TransportSelection, ShmDisableFallsBackToSocket) {
  ScopedEnv transport("LOOM_TRANSPORT", "");
  ScopedEnv shmDisable("LOOM_SHM_DISABLE", "1");
  EXPECT_STREQ(selectTransport(pairOf(rankOn(0, 7), rankOn(1, 7))).name(), "socket");
}

TEST(TransportSelection, ForcedTransportWins) {
  ScopedEnv shmDisable("LOOM_SHM_DISABLE", "0");
  {
    ScopedEnv transport("LOOM_TRANSPORT", "socket");
    EXPECT_STREQ(selectTransport(pairOf(rankOn(0, 7), rankOn(1, 7))).name(), "socket");
  }
  ScopedEnv transport("LOOM_TRANSPORT", "shm");
  EXPECT_STREQ(selectTransport(pairOf(rankOn(0, 7), rankOn(1, 7))).name(), "shm");
}

TEST(TransportSelection, ForcedShmBetweenHostsSaysWhy) {
  ScopedEnv transport("LOOM_TRANSPORT", "shm");
  ScopedEnv shmDisable("LOOM_SHM_DISABLE", "0");
  std::string error = selectionError(rankOn(0, 7), rankOn(3, 8));
  EXPECT_PRED2(contains, error, "LOOM_TRANSPORT=shm cannot connect rank 0 and rank 3");
  EXPECT_PRED2(contains, error, "different hosts");
  EXPECT_PRED2(contains, error, "socket");  // the remedy
}

TEST(TransportSelection, ForcedShmWithShmDisabledIsRefused) {
  ScopedEnv transport("LOOM_TRANSPORT", "shm");
  ScopedEnv shmDisable("LOOM_SHM_DISABLE", "1");
  EXPECT_PRED2(contains, selectionError(rankOn(0, 7), rankOn(1, 7)), "LOOM_SHM_DISABLE=1");
}

TEST(TransportSelection, UnknownTransportNamesTheChoices) {
  ScopedEnv transport("LOOM_TRANSPORT", "carrier-pigeon");
  std::string error = selectionError(rankOn(0, 7), rankOn(1, 7));
  EXPECT_PRED2(contains, error, "LOOM_TRANSPORT=carrier-pigeon is not a transport");
  EXPECT_PRED2(contains, error, LOOM_HAVE_IBVERBS ? "shm, ib, socket" : "shm, socket");
}

// ---- connectAll on two ranks as threads -----------------------------------------------------

class TwoRanks : public ::testing::Test {
 protected:
  void SetUp() override { comms_ = loom::test::initThreads(2, loom::test::makeId()); }
  void TearDown() override { loom::test::finalizeAndDestroy(comms_); }
  Comm& comm(int r) { return *static_cast<Comm*>(comms_[r]); }

  // Rank 0 sends to rank 1 on channel 0; returns each rank's error ("" if none).
  std::vector<std::string> connectOneWay() {
    std::vector<std::string> errors(2);
    loom::test::runThreads(2, [&](int r) {
      try {
        Connections c = connectAll(comm(r), {{1 - r, 0, r == 0}}, 5);
      } catch (const Error& e) {
        errors[r] = e.what();
      }
    });
    return errors;
  }

  ScopedEnv timeout_{"LOOM_TIMEOUT", "60"};
  std::vector<loomComm_t> comms_;
};

TEST_F(TwoRanks, BadRequestsAreInvalidArguments) {
  auto expectInvalid = [&](std::vector<ConnectionRequest> requests, uint32_t batch,
                           const char* what) {
    try {
      connectAll(comm(0), requests, batch);
      ADD_FAILURE() << "no error for " << what;
    } catch (const InvalidArgument& e) {
      EXPECT_PRED2(contains, e.what(), what);
    }
  };
  expectInvalid({{0, 0, true}}, 1, "another rank");
  expectInvalid({{2, 0, true}}, 1, "another rank");
  expectInvalid({{1, 0, true}, {1, 0, true}}, 1, "duplicate");
  expectInvalid({{1, kMaxChannels, true}}, 1, "channel");
  expectInvalid({{1, 0, true}}, kMaxBatchTag + 1, "batch tag");
}

// The receiver fails in phase 1 (here: no memory for the ring); it tells the sender, which fails
// at once with the receiver's reason instead of waiting for its deadline.
TEST_F(TwoRanks, ShmOutOfMemoryIsReportedOnBothSides) {
  ScopedEnv transport("LOOM_TRANSPORT", "shm");
  shm::testing::setReserveError(ENOMEM);
  std::vector<std::string> errors = connectOneWay();
  shm::testing::setReserveError(0);
  for (const std::string& error : errors) {
    EXPECT_PRED2(contains, error, "cannot reserve");
    EXPECT_PRED2(contains, error, "memory cgroup");
    EXPECT_PRED2(contains, error, "LOOM_BUFFSIZE");
    EXPECT_PRED2(contains, error, "LOOM_SHM_DISABLE=1");
  }
  EXPECT_PRED2(contains, errors[0], "rank 1 failed to set up its side of rank 0 -> rank 1");
  EXPECT_EQ(ringMemfdsOf(getpid()), 0);
}

TEST_F(TwoRanks, BadSocketSettingsAreInvalidArguments) {
  ScopedEnv transport("LOOM_TRANSPORT", "socket");
  {
    ScopedEnv streams("LOOM_SOCKET_NSTREAMS", "0");
    std::vector<std::string> errors = connectOneWay();
    EXPECT_PRED2(contains, errors[1], "LOOM_SOCKET_NSTREAMS=0 is out of range");
    EXPECT_PRED2(contains, errors[0], "LOOM_SOCKET_NSTREAMS=0 is out of range");
  }
  ScopedEnv buffsize("LOOM_BUFFSIZE", "-1");
  EXPECT_PRED2(contains, connectOneWay()[1], "LOOM_BUFFSIZE=-1 is out of range");
}

// Batches one after the other: a rank that is a batch ahead never takes the other's messages
// (each batch has its own tags), and both batches carry data.
TEST_F(TwoRanks, ConsecutiveBatchesDoNotMix) {
  ScopedEnv transport("LOOM_TRANSPORT", "socket");
  ScopedEnv buffsize("LOOM_BUFFSIZE", "65536");
  std::vector<std::string> errors(2);
  loom::test::runThreads(2, [&](int r) {
    try {
      std::vector<ConnectionRequest> requests = ringRequests(comm(r), 1);
      Connections a = connectAll(comm(r), requests, 8);
      Connections b = connectAll(comm(r), requests, 9);
      errors[r] = exchange(comm(r), requests, a, 50) + exchange(comm(r), requests, b, 50);
    } catch (const Error& e) {
      errors[r] = e.what();
    }
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

// socket: a peer that goes away (here it destroys its connections) makes progress() throw a
// RemoteError naming it, on the receiving and on the sending side, instead of hanging.
TEST_F(TwoRanks, SocketPeerGoneIsRemoteError) {
  ScopedEnv transport("LOOM_TRANSPORT", "socket");
  ScopedEnv buffsize("LOOM_BUFFSIZE", "65536");
  std::atomic<bool> gone{false};
  std::vector<std::string> errors(2);
  std::string recvError, sendError;
  loom::test::runThreads(2, [&](int r) {
    try {
      Connections c = connectAll(comm(r), ringRequests(comm(r), 1), 2);
      if (r == 1) {
        c = Connections{};
        gone = true;
        return;
      }
      while (!gone) std::this_thread::yield();
      auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (recvError.empty() && std::chrono::steady_clock::now() < end) {
        try {
          c.recvs[0]->progress();
        } catch (const RemoteError& e) {
          recvError = e.what();
        }
      }
      while (sendError.empty() && std::chrono::steady_clock::now() < end) {
        try {
          if (c.sends[0]->tryAcquire() != nullptr) c.sends[0]->post(c.sends[0]->slotBytes());
          c.sends[0]->progress();
        } catch (const RemoteError& e) {
          sendError = e.what();
        }
      }
    } catch (const Error& e) {
      errors[r] = e.what();
    }
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_PRED2(contains, recvError, "rank 1 closed the connection");
  EXPECT_PRED2(contains, sendError, "rank 1");
}

// shm: the ring cannot see a dead peer (shm_transport.h), but what a sender posted before it
// went away stays readable: the receiver's mapping keeps the memory.
TEST_F(TwoRanks, ShmDataOutlivesTheSender) {
  ScopedEnv transport("LOOM_TRANSPORT", "shm");
  ScopedEnv buffsize("LOOM_BUFFSIZE", "65536");
  std::vector<Connections> conns(2);
  loom::test::runThreads(2, [&](int r) {
    conns[r] = connectAll(comm(r), {{1 - r, 0, r == 0}}, 4);
  });
  ASSERT_EQ(conns[0].sends.size(), 1u);
  ASSERT_EQ(conns[1].recvs.size(), 1u);
  SendConnection& send = *conns[0].sends[0];
  for (int step = 0; step < kSlots; ++step) {
    void* slot = send.tryAcquire();
    ASSERT_NE(slot, nullptr);
    size_t n = stepBytes(send.slotBytes(), 0, 0, step);
    fillStep(slot, n, 0, 0, step);
    send.post(n);
  }
  conns[0] = Connections{};
  RecvConnection& recv = *conns[1].recvs[0];
  for (int step = 0; step < kSlots; ++step) {
    size_t bytes = 0;
    const void* data = recv.tryReceive(&bytes);
    ASSERT_NE(data, nullptr);
    ASSERT_EQ(bytes, stepBytes(recv.slotBytes(), 0, 0, step));
    EXPECT_EQ(checkStep(data, bytes, 0, 0, step), "");
    recv.release();
  }
  size_t bytes = 0;
  EXPECT_EQ(recv.tryReceive(&bytes), nullptr);
}

}  // namespace
}  // namespace loom::transport::test
