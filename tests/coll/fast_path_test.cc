// The executor's fast path for one small call (src/exec/cpu/exchange_now.h: an exchange
// AllReduce, and AllGather, ReduceScatter, Broadcast and Reduce up to kFastMaxBytes), the
// planner's tasks cached per shape: calls outside a group take it once connected, what it sends
// is what the planned tasks send (a peer that groups two calls takes the planned path for both,
// and all must agree bit for bit), and a peer that never calls ends in a timeout that names
// it, not a hang.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "src/exec/cpu/exchange_now.h"
#include "tests/coll/coll_harness.h"
#include "tests/test_util.h"

namespace loom::colltest {
namespace {

using loom::testing::exchangeNowCallsOnThisThread;

// x[r][i] = r + 1 + i % 3: sums, maxima and averages are exact in float and int32 (the
// average of n ranks is (n + 1) / 2 + i % 3, a multiple of 0.5; int32 averages use even sums
// only, see expected()).
template <typename T>
T input(int r, size_t i) {
  return static_cast<T>(r + 1 + static_cast<int>(i % 3));
}

template <typename T>
T expected(loomRedOp_t op, int n, size_t i) {
  const double base = static_cast<double>(i % 3);
  if (op == loomSum) return static_cast<T>(n * (n + 1) / 2 + n * base);
  if (op == loomMax) return static_cast<T>(n + base);
  return static_cast<T>((n + 1) / 2.0 + base);  // loomAvg
}

template <typename T>
void checkMixedPaths(int nranks, loomDataType_t type, const char* proto) {
  test::ScopedEnv p("LOOM_PROTO", proto);
  CommSet comms(nranks);
  ASSERT_TRUE(comms.ok());
  std::vector<uint64_t> fastCalls(nranks, 0);
  for (size_t count : {size_t{1}, size_t{7}, size_t{1000}}) {
    for (loomRedOp_t op : {loomSum, loomMax, loomAvg}) {
      // int32 averages are exact only when n divides the sum: odd rank counts.
      if (type == loomInt32 && op == loomAvg && nranks % 2 == 0) continue;
      for (bool inPlace : {false, true}) {
        std::vector<std::vector<T>> in(nranks, std::vector<T>(count)),
            out(nranks, std::vector<T>(count, T(-7))), second(nranks, std::vector<T>(3));
        test::runThreads(nranks, [&](int r) {
          for (size_t i = 0; i < count; ++i) in[r][i] = input<T>(r, i);
          for (size_t i = 0; i < 3; ++i) second[r][i] = input<T>(r, i);
          T* dst = inPlace ? in[r].data() : out[r].data();
          const uint64_t before = exchangeNowCallsOnThisThread();
          // Rank 0 groups the call with a second one (planned tasks), the others make the two
          // calls one by one (the fast path).
          if (r == 0) ASSERT_LOOM_OK(loomGroupStart());
          ASSERT_LOOM_OK(loomAllReduce(in[r].data(), dst, count, type, op, comms[r], nullptr));
          ASSERT_LOOM_OK(loomAllReduce(second[r].data(), second[r].data(), 3, type, loomSum,
                                       comms[r], nullptr));
          if (r == 0) ASSERT_LOOM_OK(loomGroupEnd());
          fastCalls[r] += exchangeNowCallsOnThisThread() - before;
        });
        for (int r = 0; r < nranks; ++r) {
          const std::vector<T>& got = inPlace ? in[r] : out[r];
          for (size_t i = 0; i < count; ++i)
            ASSERT_EQ(got[i], expected<T>(op, nranks, i))
                << proto << " " << nranks << " ranks count " << count << " op " << op
                << (inPlace ? " in place" : "") << " rank " << r << " element " << i;
          for (size_t i = 0; i < 3; ++i)
            ASSERT_EQ(second[r][i], expected<T>(loomSum, nranks, i)) << "rank " << r;
        }
      }
    }
  }
  EXPECT_EQ(fastCalls[0], 0u) << "a group of two calls must take the planned path";
  for (int r = 1; r < nranks; ++r)
    EXPECT_GT(fastCalls[r], 0u) << "rank " << r << " never took the fast path";
}

TEST(ExchangeFastPath, AgreesWithThePlannedTasksOnTheWire) {
  for (int nranks : {2, 3, 5}) {
    for (const char* proto : {"ll", "simple"}) {
      checkMixedPaths<float>(nranks, loomFloat32, proto);
      checkMixedPaths<int32_t>(nranks, loomInt32, proto);
    }
  }
}

// Each communicator keeps the fast path's plan for the last shape of call (exchange_now.h):
// changing any one of count, datatype or op must make a new plan, and going back must not
// reuse a stale one. Every call's data differs, so a stale plan shows as a wrong value or a
// signature mismatch.
// One call of each other collective the fast path takes (AllGather, ReduceScatter, Broadcast
// and Reduce up to kFastMaxBytes), every result checked, out of place and in place; rank 0
// groups its calls with a small AllReduce (the planned tasks) while the others call one by
// one, so the two paths must agree on the wire.
void checkOtherCollectives(int n, const char* proto) {
  test::ScopedEnv p("LOOM_PROTO", proto);
  CommSet comms(n);
  ASSERT_TRUE(comms.ok());
  const int root = n - 1;
  std::vector<uint64_t> fastCalls(n, 0);
  for (CollKind kind :
       {CollKind::kAllGather, CollKind::kReduceScatter, CollKind::kBroadcast, CollKind::kReduce}) {
    for (size_t count : {size_t{1}, size_t{7}, size_t{1000}}) {
      for (bool inPlace : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << collName(kind) << " " << proto << " " << n << " ranks count " << count
                     << (inPlace ? " in place" : ""));
        const size_t whole = count * static_cast<size_t>(n);
        // AllGather's output and ReduceScatter's input hold a block per rank.
        std::vector<std::vector<float>> in(n, std::vector<float>(whole)),
            out(n, std::vector<float>(whole, -7.0f)), extra(n, std::vector<float>(3));
        test::runThreads(n, [&](int r) {
          float* send = in[r].data();
          float* recv = out[r].data();
          if (inPlace && kind == CollKind::kAllGather) {
            send = recv + r * count;
          } else if (inPlace && kind == CollKind::kReduceScatter) {
            recv = send + r * count;
          } else if (inPlace) {
            recv = send;
          }
          uint64_t before = exchangeNowCallsOnThisThread();
          // The first round connects and plans, every rank calling one by one (a group that
          // sets up connections waits for every peer to reach the same calls); in the second
          // rank 0 groups its two calls.
          for (int call = 0; call < 2; ++call) {
            for (size_t i = 0; i < whole; ++i) in[r][i] = input<float>(r, i);
            if (kind == CollKind::kAllGather)
              std::copy_n(in[r].begin(), count, out[r].begin() + static_cast<long>(r * count));
            if (call == 1) before = exchangeNowCallsOnThisThread();
            const bool grouped = r == 0 && call == 1;
            if (grouped) ASSERT_LOOM_OK(loomGroupStart());
            switch (kind) {
              case CollKind::kAllGather:
                ASSERT_LOOM_OK(loomAllGather(send, recv, count, loomFloat32, comms[r], nullptr));
                break;
              case CollKind::kReduceScatter:
                ASSERT_LOOM_OK(
                    loomReduceScatter(send, recv, count, loomFloat32, loomSum, comms[r], nullptr));
                break;
              case CollKind::kBroadcast:
                ASSERT_LOOM_OK(
                    loomBroadcast(send, recv, count, loomFloat32, root, comms[r], nullptr));
                break;
              default:
                ASSERT_LOOM_OK(
                    loomReduce(send, recv, count, loomFloat32, loomSum, root, comms[r], nullptr));
            }
            for (size_t i = 0; i < 3; ++i) extra[r][i] = input<float>(r, i);
            ASSERT_LOOM_OK(loomAllReduce(extra[r].data(), extra[r].data(), 3, loomFloat32, loomSum,
                                         comms[r], nullptr));
            if (grouped) ASSERT_LOOM_OK(loomGroupEnd());
          }
          fastCalls[r] += exchangeNowCallsOnThisThread() - before;
        });
        for (int r = 0; r < n; ++r) {
          for (size_t i = 0; i < 3; ++i)
            ASSERT_EQ(extra[r][i], expected<float>(loomSum, n, i)) << "rank " << r;
          const float* got = inPlace && kind != CollKind::kAllGather ? in[r].data() : out[r].data();
          if (kind == CollKind::kAllGather) {
            for (size_t i = 0; i < whole; ++i)
              ASSERT_EQ(got[i], input<float>(static_cast<int>(i / count), i % count))
                  << "rank " << r << " element " << i;
          } else if (kind == CollKind::kReduceScatter) {
            const size_t at = inPlace ? r * count : 0;
            for (size_t i = 0; i < count; ++i)
              ASSERT_EQ(got[at + i], expected<float>(loomSum, n, r * count + i))
                  << "rank " << r << " element " << i;
          } else if (kind == CollKind::kBroadcast) {
            for (size_t i = 0; i < count; ++i)
              ASSERT_EQ(got[i], input<float>(root, i)) << "rank " << r << " element " << i;
          } else if (r == root) {
            for (size_t i = 0; i < count; ++i)
              ASSERT_EQ(got[i], expected<float>(loomSum, n, i)) << "element " << i;
          }
        }
      }
    }
  }
  EXPECT_EQ(fastCalls[0], 0u) << "grouped calls must take the planned path";
  for (int r = 1; r < n; ++r)
    EXPECT_EQ(fastCalls[r], 4u * 3 * 2 * 2) << "rank " << r << ": every second round";
}

TEST(ExchangeFastPath, OtherCollectivesAgreeWithThePlannedTasks) {
  for (int nranks : {2, 3}) {
    for (const char* proto : {"ll", "simple"}) checkOtherCollectives(nranks, proto);
  }
}

// Above kFastMaxBytes (the larger buffer) a call takes the general path.
TEST(ExchangeFastPath, LargeCallsTakeThePlannedPath) {
  constexpr int kRanks = 2;
  constexpr size_t kCount = kFastMaxBytes / sizeof(float) / kRanks + 16;  // output > the bound
  CommSet comms(kRanks);
  ASSERT_TRUE(comms.ok());
  std::vector<uint64_t> fastCalls(kRanks, 0);
  std::vector<std::vector<float>> in(kRanks, std::vector<float>(kCount)),
      out(kRanks, std::vector<float>(kCount * kRanks));
  test::runThreads(kRanks, [&](int r) {
    for (size_t i = 0; i < kCount; ++i) in[r][i] = input<float>(r, i);
    const uint64_t before = exchangeNowCallsOnThisThread();
    for (int call = 0; call < 3; ++call)
      ASSERT_LOOM_OK(
          loomAllGather(in[r].data(), out[r].data(), kCount, loomFloat32, comms[r], nullptr));
    fastCalls[r] = exchangeNowCallsOnThisThread() - before;
  });
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(fastCalls[r], 0u) << "rank " << r;
    EXPECT_EQ(out[r][kCount + 5], input<float>(1, 5));
  }
}

TEST(ExchangeFastPath, PlanFollowsEveryChangeOfShape) {
  struct Shape {
    size_t count;
    loomDataType_t type;
    loomRedOp_t op;
  };
  const std::vector<Shape> shapes = {{4, loomFloat32, loomSum}, {4, loomFloat32, loomMax},
                                     {4, loomInt32, loomSum},   {5, loomFloat32, loomSum},
                                     {4, loomFloat32, loomSum}, {1, loomInt32, loomMax},
                                     {4, loomInt32, loomSum},   {4, loomFloat32, loomSum}};
  constexpr int kRanks = 2;
  CommSet comms(kRanks);
  ASSERT_TRUE(comms.ok());
  std::vector<uint64_t> fastCalls(kRanks, 0);
  test::runThreads(kRanks, [&](int r) {
    std::vector<float> f(8), fout(8);
    std::vector<int32_t> i(8), iout(8);
    ASSERT_LOOM_OK(loomAllReduce(f.data(), fout.data(), 4, loomFloat32, loomSum, comms[r],
                                 nullptr));  // connects
    const uint64_t before = exchangeNowCallsOnThisThread();
    for (size_t call = 0; call < shapes.size(); ++call) {
      const Shape& s = shapes[call];
      SCOPED_TRACE(::testing::Message() << "call " << call);
      // Rank r, element e of call c holds (r + 1) * (c + 1) + e: sum and max are exact.
      auto value = [&](int rank, size_t e) {
        return (rank + 1) * static_cast<int>(call + 1) + static_cast<int>(e);
      };
      auto want = [&](size_t e) {
        return s.op == loomSum ? value(0, e) + value(1, e) : value(1, e);
      };
      for (size_t e = 0; e < s.count; ++e) {
        f[e] = static_cast<float>(value(r, e));
        i[e] = value(r, e);
      }
      const bool isFloat = s.type == loomFloat32;
      ASSERT_LOOM_OK(loomAllReduce(isFloat ? static_cast<void*>(f.data()) : i.data(),
                                   isFloat ? static_cast<void*>(fout.data()) : iout.data(), s.count,
                                   s.type, s.op, comms[r], nullptr));
      for (size_t e = 0; e < s.count; ++e) {
        if (isFloat)
          ASSERT_EQ(fout[e], static_cast<float>(want(e))) << "call " << call << " rank " << r;
        else
          ASSERT_EQ(iout[e], want(e)) << "call " << call << " rank " << r;
      }
    }
    fastCalls[r] = exchangeNowCallsOnThisThread() - before;
  });
  for (int r = 0; r < kRanks; ++r)
    EXPECT_EQ(fastCalls[r], shapes.size()) << "rank " << r << ": every call takes the fast path";
}

// The plan carries the call's signature: after a matched call, ranks that disagree on the
// datatype or the op of the next one (same count, same bytes) must both be told, not get a
// silently wrong sum from a signature left over from the plan of the call before.
TEST(ExchangeFastPath, DisagreementAfterAMatchedCallIsCaught) {
  struct Case {
    loomDataType_t type1;
    loomRedOp_t op1;
  };
  for (const Case& c : {Case{loomInt32, loomSum}, Case{loomFloat32, loomMax}}) {
    std::vector<loomComm_t> comms(2, nullptr);
    ASSERT_LOOM_OK(loomCommInitAll(comms.data(), 2, nullptr));
    std::vector<loomResult_t> second(2, loomSuccess);
    test::runThreads(2, [&](int r) {
      float in[4] = {1, 2, 3, 4}, out[4] = {};
      for (int call = 0; call < 2; ++call)
        ASSERT_LOOM_OK(loomAllReduce(in, out, 4, loomFloat32, loomSum, comms[r], nullptr));
      const uint64_t before = exchangeNowCallsOnThisThread();
      second[r] = r == 0 ? loomAllReduce(in, out, 4, loomFloat32, loomSum, comms[r], nullptr)
                         : loomAllReduce(in, out, 4, c.type1, c.op1, comms[r], nullptr);
      EXPECT_EQ(exchangeNowCallsOnThisThread(), before + 1);
    });
    for (int r = 0; r < 2; ++r)
      EXPECT_EQ(second[r], loomRemoteError)
          << "rank " << r << " with datatype " << c.type1 << " op " << c.op1 << ": "
          << loomGetLastError(comms[r]);
    for (loomComm_t comm : comms) EXPECT_EQ(loomCommAbort(comm), loomSuccess);
  }
}

// The communicator lookup of a call is cached per thread (comm_registry.cc): a handle this
// thread used and then destroyed must still be refused, and a new communicator (which may
// get the same address) must work.
TEST(ExchangeFastPath, DestroyedCommunicatorIsRefusedAfterUse) {
  constexpr int kRanks = 2;
  const loomUniqueId first = test::makeId(), second = test::makeId();
  test::runThreads(kRanks, [&](int r) {
    float in[2] = {1.0f * (r + 1), 2.0f}, out[2] = {};
    loomComm_t comm = nullptr;
    ASSERT_LOOM_OK(loomCommInitRank(&comm, kRanks, first, r));
    for (int call = 0; call < 3; ++call)
      ASSERT_LOOM_OK(loomAllReduce(in, out, 2, loomFloat32, loomSum, comm, nullptr));
    ASSERT_EQ(out[0], 3.0f);
    // A live stream keeps the destroyed communicator's object alive: only the handle is gone.
    loomStream_t stream = nullptr;
    ASSERT_LOOM_OK(loomStreamCreate(comm, &stream));
    ASSERT_LOOM_OK(loomCommDestroy(comm));
    EXPECT_EQ(loomAllReduce(in, out, 2, loomFloat32, loomSum, comm, nullptr), loomInvalidArgument);
    EXPECT_NE(std::string(loomGetLastError(nullptr)).find("not live"), std::string::npos)
        << loomGetLastError(nullptr);
    ASSERT_LOOM_OK(loomStreamDestroy(stream));
    loomComm_t again = nullptr;
    ASSERT_LOOM_OK(loomCommInitRank(&again, kRanks, second, r));
    in[0] = 10.0f * (r + 1);
    ASSERT_LOOM_OK(loomAllReduce(in, out, 2, loomFloat32, loomSum, again, nullptr));
    EXPECT_EQ(out[0], 30.0f);
    EXPECT_EQ(out[1], 4.0f);
    ASSERT_LOOM_OK(loomCommDestroy(again));
  });
}

// The cached tasks reduce without reduceCopy's per-step checks (exchange_now.h); buffers that
// partly overlap, the one thing those checks catch that changes from call to call, must still be
// refused as the general path refuses them.
TEST(ExchangeFastPath, PartlyOverlappingBuffersAreRefused) {
  std::vector<loomComm_t> comms(2, nullptr);
  ASSERT_LOOM_OK(loomCommInitAll(comms.data(), 2, nullptr));
  std::vector<loomResult_t> overlapping(2, loomSuccess);
  test::runThreads(2, [&](int r) {
    float buf[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[4] = {};
    for (int call = 0; call < 2; ++call)  // connects, then plans the shape
      ASSERT_LOOM_OK(loomAllReduce(buf, out, 4, loomFloat32, loomSum, comms[r], nullptr));
    const uint64_t before = exchangeNowCallsOnThisThread();
    overlapping[r] = loomAllReduce(buf, buf + 1, 4, loomFloat32, loomSum, comms[r], nullptr);
    EXPECT_EQ(exchangeNowCallsOnThisThread(), before) << "rank " << r;
  });
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(overlapping[r], loomInvalidArgument)
        << "rank " << r << ": " << loomGetLastError(comms[r]);
  for (loomComm_t comm : comms) EXPECT_EQ(loomCommAbort(comm), loomSuccess);
}

TEST(ExchangeFastPath, PeerThatNeverCallsTimesOutNamingIt) {
  std::vector<loomComm_t> comms(2, nullptr);
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  config.timeoutMs = 500;
  loomUniqueId id;
  ASSERT_LOOM_OK(loomGetUniqueId(&id));
  test::runThreads(
      2, [&](int r) { ASSERT_LOOM_OK(loomCommInitRankConfig(&comms[r], 2, id, r, &config)); });
  float a[2] = {1, 2}, b[2][2] = {};
  test::runThreads(2, [&](int r) {  // connects: later calls may take the fast path
    ASSERT_LOOM_OK(loomAllReduce(a, b[r], 2, loomFloat32, loomSum, comms[r], nullptr));
  });
  const uint64_t before = exchangeNowCallsOnThisThread();
  EXPECT_EQ(loomAllReduce(a, b[0], 2, loomFloat32, loomSum, comms[0], nullptr), loomTimeout);
  EXPECT_EQ(exchangeNowCallsOnThisThread(), before + 1);
  const std::string message = loomGetLastError(comms[0]);
  EXPECT_NE(message.find("exchange"), std::string::npos) << message;
  EXPECT_NE(message.find("data from rank 1"), std::string::npos) << message;
  // The communicator is failed from now on, with a clear message.
  EXPECT_EQ(loomAllReduce(a, b[0], 2, loomFloat32, loomSum, comms[0], nullptr), loomInvalidUsage);
  for (loomComm_t c : comms) EXPECT_EQ(loomCommAbort(c), loomSuccess);
}

}  // namespace
}  // namespace loom::colltest
