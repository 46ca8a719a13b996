// The executor's fast path for one small exchange AllReduce (src/core/exchange_now.h): calls
// outside a group take it once connected, what it sends is what the planned tasks send (a
// peer that groups two calls takes the planned path for both, and all must agree bit for
// bit), and a peer that never calls ends in a timeout that names it, not a hang.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "src/core/exchange_now.h"
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
