// Host streams and events: many operations queued on one stream run in order and all complete;
// an event recorded after operation k completes no earlier than k; stream and event queries
// report loomInProgress or loomSuccess and eventually loomSuccess.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>

#include "src/exec/host_stream.h"
#include "tests/coll/coll_harness.h"

namespace loom::colltest {
namespace {

using Clock = std::chrono::steady_clock;

// Operation k of a long queue: the collective, type and op change from one to the next, and
// each has its own buffers.
Case queued(int k, int nranks) {
  static const Kind kinds[] = {Kind::kAllReduce,     Kind::kAllGather, Kind::kBroadcast,
                               Kind::kReduceScatter, Kind::kReduce,    Kind::kAlltoAll};
  static const Op ops[] = {Op::kSum, Op::kMax, Op::kAvg, Op::kPreMulDev, Op::kMin, Op::kProd};
  Case c;
  c.kind = kinds[k % 6];
  c.type = allTypes()[k % allTypes().size()];
  c.op = ops[(k / 6) % 6];
  c.count = 1 + (k * 37) % 211;
  c.root = k % nranks;
  c.salt = 7000 + k;
  return placed(c, k % 5);
}

// ops[k][r]: rank r's side of operation k, set up (PreMulSum ops made) on comms.
using Queue = std::vector<std::vector<std::unique_ptr<RankData>>>;

Queue makeQueue(CommSet& comms, int count) {
  Queue q(count);
  for (int k = 0; k < count; ++k) {
    for (int r = 0; r < comms.size(); ++r) {
      q[k].push_back(std::make_unique<RankData>(queued(k, comms.size()), comms.size(), r));
      EXPECT_EQ(q[k][r]->setup(comms[r]), loomSuccess) << loomGetLastError(comms[r]);
    }
  }
  return q;
}

void enqueue(CommSet& comms, const Queue& q, int k) {
  for (int r = 0; r < comms.size(); ++r)
    EXPECT_EQ(q[k][r]->issue(comms[r], comms.stream(r)), loomSuccess)
        << "op " << k << " rank " << r << ": " << loomGetLastError(comms[r]);
}

void verifyAndTeardown(CommSet& comms, Queue& q) {
  for (auto& op : q) {
    for (int r = 0; r < comms.size(); ++r) {
      EXPECT_EQ(op[r]->verify(), "");
      EXPECT_EQ(op[r]->teardown(comms[r]), loomSuccess);
    }
  }
}

TEST(HostStream, HundredOperationsFromOneThread) {
  CommSet comms(3);
  ASSERT_TRUE(comms.ok());
  Queue q = makeQueue(comms, 100);
  for (int k = 0; k < 100; ++k) enqueue(comms, q, k);
  for (int r = 0; r < 3; ++r) ASSERT_LOOM_OK(loomStreamSynchronize(comms.stream(r)));
  EXPECT_EQ(loomStreamQuery(comms.stream(0)), loomSuccess);
  verifyAndTeardown(comms, q);
}

TEST(HostStream, HundredOperationsThreadPerRank) {
  CommSet comms(4);
  ASSERT_TRUE(comms.ok());
  for (int r = 0; r < 4; ++r) comms.stream(r);  // created here, used by rank r's thread
  Queue q = makeQueue(comms, 100);
  test::runThreads(4, [&](int r) {
    for (int k = 0; k < 100; ++k)
      EXPECT_EQ(q[k][r]->issue(comms[r], comms.stream(r)), loomSuccess) << "op " << k;
    EXPECT_EQ(loomStreamSynchronize(comms.stream(r)), loomSuccess);
  });
  verifyAndTeardown(comms, q);
}

TEST(HostEvent, RecordedAfterOpKCompletesOpK) {
  CommSet comms(3);
  ASSERT_TRUE(comms.ok());
  const int kOps = 60, kMark = 25;
  Queue q = makeQueue(comms, kOps);
  std::vector<loomEvent_t> events(3, nullptr);
  for (auto& e : events) ASSERT_LOOM_OK(loomEventCreate(&e));
  EXPECT_EQ(loomEventQuery(events[0]), loomSuccess) << "an event never recorded is complete";
  for (int k = 0; k < kOps; ++k) {
    enqueue(comms, q, k);
    if (k == kMark)
      for (int r = 0; r < 3; ++r) ASSERT_LOOM_OK(loomEventRecord(events[r], comms.stream(r)));
  }
  for (int r = 0; r < 3; ++r) {
    ASSERT_LOOM_OK(loomEventSynchronize(events[r]));
    EXPECT_EQ(loomEventQuery(events[r]), loomSuccess);
    // Operations up to the mark are complete on this rank; later ones may still run.
    for (int k = 0; k <= kMark; ++k) EXPECT_EQ(q[k][r]->verify(), "") << "op " << k;
  }
  for (int r = 0; r < 3; ++r) ASSERT_LOOM_OK(loomStreamSynchronize(comms.stream(r)));
  verifyAndTeardown(comms, q);
  for (auto e : events) EXPECT_EQ(loomEventDestroy(e), loomSuccess);
}

TEST(HostEvent, ReRecordingMovesTheMark) {
  CommSet comms(2);
  ASSERT_TRUE(comms.ok());
  Queue q = makeQueue(comms, 30);
  std::vector<loomEvent_t> events(2, nullptr);
  for (auto& e : events) ASSERT_LOOM_OK(loomEventCreate(&e));
  for (int k = 0; k < 30; ++k) {
    enqueue(comms, q, k);
    if (k == 5 || k == 20)
      for (int r = 0; r < 2; ++r) ASSERT_LOOM_OK(loomEventRecord(events[r], comms.stream(r)));
  }
  for (int r = 0; r < 2; ++r) {
    ASSERT_LOOM_OK(loomEventSynchronize(events[r]));
    EXPECT_EQ(q[20][r]->verify(), "") << "rank " << r;
  }
  for (int r = 0; r < 2; ++r) ASSERT_LOOM_OK(loomStreamSynchronize(comms.stream(r)));
  verifyAndTeardown(comms, q);
  for (auto e : events) EXPECT_EQ(loomEventDestroy(e), loomSuccess);
}

// Threads that wait for a stream run the items the worker has not started (host_stream.h):
// with one thread enqueueing and two others waiting all the time, every item still runs once,
// in order, and never beside another.
TEST(HostStream, WaitersRunItemsInOrderOneAtATime) {
  CommSet comms(2);
  ASSERT_TRUE(comms.ok());
  std::shared_ptr<HostStream> s = findStream(comms.stream(0));
  constexpr int kItems = 3000;
  std::vector<int> ran;  // written only by the item running now
  ran.reserve(kItems);
  std::atomic<bool> inside{false}, overlapped{false}, producing{true};
  std::atomic<int> onWaiters{0};
  const std::thread::id worker = [&] {
    std::thread::id id;
    const uint64_t p = s->enqueue([&] { id = std::this_thread::get_id(); });
    while (s->query(p) == loomInProgress) std::this_thread::yield();
    return id;
  }();
  std::thread producer([&] {
    for (int k = 0; k < kItems; ++k) {
      s->enqueue([&, k] {
        if (inside.exchange(true)) overlapped = true;
        ran.push_back(k);
        if (std::this_thread::get_id() != worker) ++onWaiters;
        inside = false;
      });
      if (k % 100 == 0) std::this_thread::yield();
    }
    producing = false;
  });
  std::vector<std::thread> waiters;
  for (int w = 0; w < 2; ++w) {
    waiters.emplace_back([&] {
      while (producing) EXPECT_EQ(s->wait(s->enqueued()), loomSuccess);
    });
  }
  producer.join();
  for (auto& t : waiters) t.join();
  ASSERT_EQ(s->wait(s->enqueued()), loomSuccess);
  EXPECT_FALSE(overlapped);
  ASSERT_EQ(ran.size(), static_cast<size_t>(kItems));
  for (int k = 0; k < kItems; ++k) ASSERT_EQ(ran[k], k);
  std::printf("items run by waiting threads: %d of %d\n", onWaiters.load(), kItems);
}

// Queries while work runs say loomInProgress or loomSuccess, and reach loomSuccess.
TEST(HostStream, QueryUntilDone) {
  CommSet comms(2);
  ASSERT_TRUE(comms.ok());
  std::vector<std::unique_ptr<RankData>> ops;
  for (int k = 0; k < 10; ++k) {
    Case c;
    c.type = loomFloat32;
    c.count = 200003;
    c.salt = 7500 + k;
    for (int r = 0; r < 2; ++r) {
      ops.push_back(std::make_unique<RankData>(c, 2, r));
      ASSERT_LOOM_OK(ops.back()->setup(comms[r]));
      ASSERT_LOOM_OK(ops.back()->issue(comms[r], comms.stream(r)));
    }
  }
  loomEvent_t event = nullptr;
  ASSERT_LOOM_OK(loomEventCreate(&event));
  ASSERT_LOOM_OK(loomEventRecord(event, comms.stream(1)));
  auto deadline = Clock::now() + std::chrono::seconds(60);
  bool streamDone = false, eventDone = false;
  while (!(streamDone && eventDone) && Clock::now() < deadline) {
    loomResult_t s = loomStreamQuery(comms.stream(0)), e = loomEventQuery(event);
    ASSERT_TRUE(s == loomSuccess || s == loomInProgress) << s << ": " << loomGetLastError(nullptr);
    ASSERT_TRUE(e == loomSuccess || e == loomInProgress) << e << ": " << loomGetLastError(nullptr);
    streamDone = s == loomSuccess;
    eventDone = e == loomSuccess;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(streamDone && eventDone) << "stream or event still in progress after 60 s";
  ASSERT_LOOM_OK(loomStreamSynchronize(comms.stream(1)));
  for (auto& op : ops) EXPECT_EQ(op->verify(), "");
  EXPECT_EQ(loomEventDestroy(event), loomSuccess);
}

}  // namespace
}  // namespace loom::colltest
