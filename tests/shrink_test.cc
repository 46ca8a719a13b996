// loomCommShrink: survivors make a communicator without the excluded ranks. On threads: a
// healthy communicator shrunk (ranks renumbered in order, exact collectives, a late survivor
// waited for, the parent still usable, and shrunk again with other ranks), bad lists and
// flags, and survivors that disagree on the list. In processes, over shared memory and TCP: a
// rank (0, 2 or 3) SIGKILLed mid-traffic, then the survivors shrink and run exact collectives.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "tests/test_util.h"

namespace loom::test {
namespace {

// AllReduce, AllGather and Broadcast of integers on `comm` (nranks, rank), checked exactly.
void expectCollectives(loomComm_t comm, int nranks, int rank) {
  const size_t elems = 4099;
  std::vector<int32_t> mine(elems), sum(elems);
  for (size_t i = 0; i < elems; ++i) mine[i] = (rank + 1) * static_cast<int32_t>(i + 1);
  ASSERT_LOOM_OK(loomAllReduce(mine.data(), sum.data(), elems, loomInt32, loomSum, comm, nullptr));
  const int32_t ranksSum = nranks * (nranks + 1) / 2;
  for (size_t i = 0; i < elems; ++i)
    ASSERT_EQ(sum[i], ranksSum * static_cast<int32_t>(i + 1)) << "element " << i;

  const size_t block = 5;
  std::vector<int32_t> part(block), all(block * static_cast<size_t>(nranks));
  for (size_t i = 0; i < block; ++i) part[i] = rank * 100 + static_cast<int32_t>(i);
  ASSERT_LOOM_OK(loomAllGather(part.data(), all.data(), block, loomInt32, comm, nullptr));
  for (int r = 0; r < nranks; ++r)
    for (size_t i = 0; i < block; ++i)
      ASSERT_EQ(all[r * block + i], r * 100 + static_cast<int32_t>(i));

  const int root = nranks - 1;
  std::vector<int32_t> b(block, rank == root ? 77 : -1);
  ASSERT_LOOM_OK(loomBroadcast(b.data(), b.data(), block, loomInt32, root, comm, nullptr));
  for (int32_t v : b) ASSERT_EQ(v, 77);
}

int newRankOf(int rank, const std::vector<int>& exclude) {
  int below = 0;
  for (int r : exclude) below += r < rank ? 1 : 0;
  return rank - below;
}

bool excluded(int rank, const std::vector<int>& exclude) {
  return std::find(exclude.begin(), exclude.end(), rank) != exclude.end();
}

// Shrinks comms[r] on every rank not in `exclude`; the excluded ones do nothing.
std::vector<loomComm_t> shrinkThreads(const std::vector<loomComm_t>& comms,
                                      const std::vector<int>& exclude, int lateRank = -1) {
  const int n = static_cast<int>(comms.size());
  std::vector<loomComm_t> shrunk(static_cast<size_t>(n), nullptr);
  runThreads(n, [&](int r) {
    if (excluded(r, exclude)) return;
    if (r == lateRank) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ASSERT_LOOM_OK(loomCommShrink(comms[r], exclude.data(), static_cast<int>(exclude.size()),
                                  &shrunk[r], nullptr, LOOM_SHRINK_DEFAULT));
  });
  return shrunk;
}

TEST(Shrink, HealthyCommunicatorRenumbersInOrder) {
  const int n = 5;
  std::vector<loomComm_t> comms = initThreads(n, makeId());
  const std::vector<int> exclude{3, 1};  // any order
  std::vector<loomComm_t> shrunk = shrinkThreads(comms, exclude, /*lateRank=*/4);
  runThreads(n, [&](int r) {
    if (excluded(r, exclude)) {
      EXPECT_EQ(shrunk[r], nullptr);
      return;
    }
    ASSERT_NE(shrunk[r], nullptr);
    int count = -1, rank = -1;
    ASSERT_LOOM_OK(loomCommCount(shrunk[r], &count));
    ASSERT_LOOM_OK(loomCommUserRank(shrunk[r], &rank));
    EXPECT_EQ(count, 3);
    EXPECT_EQ(rank, newRankOf(r, exclude));  // 0 -> 0, 2 -> 1, 4 -> 2
    expectCollectives(shrunk[r], 3, rank);
  });
  // The parent stays usable after a default shrink, and shrinks again with other ranks: the
  // notices that ranks 1 and 3 got from the first shrink do not mislead the second.
  runThreads(n, [&](int r) { expectCollectives(comms[r], n, r); });
  const std::vector<int> exclude2{0};
  std::vector<loomComm_t> shrunk2 = shrinkThreads(comms, exclude2);
  runThreads(n, [&](int r) {
    if (r == 0) return;
    int rank = -1;
    ASSERT_LOOM_OK(loomCommUserRank(shrunk2[r], &rank));
    EXPECT_EQ(rank, r - 1);
    expectCollectives(shrunk2[r], n - 1, rank);
  });
  std::vector<loomComm_t> live;
  for (loomComm_t c : shrunk)
    if (c != nullptr) live.push_back(c);
  finalizeAndDestroy(live);
  live.clear();
  for (loomComm_t c : shrunk2)
    if (c != nullptr) live.push_back(c);
  finalizeAndDestroy(live);
  finalizeAndDestroy(comms);
}

TEST(Shrink, BadListsAndFlagsAreInvalidArguments) {
  const int n = 3;
  std::vector<loomComm_t> comms = initThreads(n, makeId());
  runThreads(n, [&](int r) {
    loomComm_t out = reinterpret_cast<loomComm_t>(0x1);
    auto expectInvalid = [&](std::vector<int> list, int count, int flags, const char* part) {
      out = reinterpret_cast<loomComm_t>(0x1);
      EXPECT_EQ(loomCommShrink(comms[r], list.empty() ? nullptr : list.data(), count, &out, nullptr,
                               flags),
                loomInvalidArgument)
          << part;
      EXPECT_EQ(out, nullptr);
      EXPECT_TRUE(contains(loomGetLastError(nullptr), part)) << loomGetLastError(nullptr);
    };
    const int other = (r + 1) % n;
    expectInvalid({n}, 1, LOOM_SHRINK_DEFAULT, "out of range");
    expectInvalid({-1}, 1, LOOM_SHRINK_DEFAULT, "out of range");
    expectInvalid({other, other}, 2, LOOM_SHRINK_DEFAULT, "excluded twice");
    expectInvalid({r}, 1, LOOM_SHRINK_DEFAULT, "its own exclude list");
    expectInvalid({}, 0, LOOM_SHRINK_DEFAULT, "excludeRanksCount is 0");
    expectInvalid({}, 1, LOOM_SHRINK_DEFAULT, "excludeRanksList is NULL");
    expectInvalid({other}, 1, 0x4, "shrinkFlags");
    int list[] = {other};
    EXPECT_EQ(loomCommShrink(comms[r], list, 1, nullptr, nullptr, 0), loomInvalidArgument);
  });
  // Nothing was sent: the communicator is intact.
  runThreads(n, [&](int r) { expectCollectives(comms[r], n, r); });
  finalizeAndDestroy(comms);
}

TEST(Shrink, SurvivorsThatDisagreeFailInsteadOfHanging) {
  // Ranks 0 and 1 exclude {3}; rank 2 excludes {1, 3}. Rank 0 and rank 2 each see the other's
  // list; rank 1 gets rank 2's notice that it is excluded. All fail with loomInvalidUsage, long
  // before the timeout.
  ScopedEnv timeout("LOOM_TIMEOUT", "60");
  const int n = 4;
  std::vector<loomComm_t> comms = initThreads(n, makeId());
  const auto start = std::chrono::steady_clock::now();
  runThreads(n, [&](int r) {
    if (r == 3) return;
    std::vector<int> list = r == 2 ? std::vector<int>{1, 3} : std::vector<int>{3};
    loomComm_t out = nullptr;
    EXPECT_EQ(loomCommShrink(comms[r], list.data(), static_cast<int>(list.size()), &out, nullptr,
                             LOOM_SHRINK_DEFAULT),
              loomInvalidUsage)
        << "rank " << r << ": " << loomGetLastError(nullptr);
    EXPECT_EQ(out, nullptr);
    EXPECT_TRUE(contains(loomGetLastError(nullptr), "same exclude list"))
        << loomGetLastError(nullptr);
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(50));
  for (loomComm_t c : comms) EXPECT_EQ(loomCommAbort(c), loomSuccess);
}

TEST(Shrink, ExcludedRankThatCallsLearnsItIsExcluded) {
  // Ranks 0 and 1 exclude {2} (rank 1 late) and make a communicator. Rank 2 is alive and
  // excludes {0}; it waits for rank 1, gets its notice instead and fails with loomInvalidUsage
  // (at once while rank 1's shrink runs, else at the deadline) instead of a timeout.
  ScopedEnv timeout("LOOM_TIMEOUT", "10");
  const int n = 3;
  std::vector<loomComm_t> comms = initThreads(n, makeId());
  const auto start = std::chrono::steady_clock::now();
  std::vector<loomResult_t> results(n, loomSuccess);
  std::vector<std::string> messages(n);
  runThreads(n, [&](int r) {
    if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const int list = r == 2 ? 0 : 2;
    loomComm_t out = nullptr;
    results[r] = loomCommShrink(comms[r], &list, 1, &out, nullptr, LOOM_SHRINK_DEFAULT);
    messages[r] = loomGetLastError(nullptr);
    if (out != nullptr) {
      EXPECT_EQ(loomCommAbort(out), loomSuccess);
    }
  });
  EXPECT_EQ(results[2], loomInvalidUsage) << messages[2];
  EXPECT_TRUE(contains(messages[2], "same exclude list")) << messages[2];
  EXPECT_EQ(results[0], loomSuccess) << messages[0];
  EXPECT_EQ(results[1], loomSuccess) << messages[1];
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(50));
  for (loomComm_t c : comms) EXPECT_EQ(loomCommAbort(c), loomSuccess);
}

// ---- Processes: a rank killed mid-traffic ----

std::set<std::string> shmNames(const std::vector<RankProcess>& procs) {
  std::set<std::string> names;
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return names;
  while (dirent* e = readdir(dir)) {
    const std::string name = e->d_name;
    for (const RankProcess& p : procs)
      if (name.rfind("loom-" + std::to_string(p.pid) + "-", 0) == 0) names.insert(name);
  }
  closedir(dir);
  return names;
}

using KillParam = std::tuple<std::string, std::string, int>;  // transport, flags, victim
class ShrinkAfterKill : public ::testing::TestWithParam<KillParam> {};

TEST_P(ShrinkAfterKill, SurvivorsGoOnWithExactResults) {
  const auto& [transport, flags, victim] = GetParam();
  const int n = 4;
  loomUniqueId id = makeId();
  std::vector<std::string> env{"LOOM_SOCKET_IFNAME=lo", "LOOM_TIMEOUT=10"};
  if (transport == "socket") env.push_back("LOOM_TRANSPORT=socket");
  std::vector<RankProcess> procs;
  for (int r = 0; r < n; ++r)
    procs.push_back(spawnProcess(
        LOOM_SHRINK_RANK_BINARY,
        {std::to_string(n), std::to_string(r), idToHex(id), std::to_string(victim), flags}, env));
  std::string victimOut;
  ASSERT_TRUE(waitForLine(procs[victim], "running", 60000, &victimOut)) << victimOut;
  ASSERT_EQ(kill(procs[victim].pid, SIGKILL), 0);
  EXPECT_EQ(waitRank(procs[victim], 30000), std::optional<int>(128 + SIGKILL));
  for (int r = 0; r < n; ++r) {
    if (r == victim) continue;
    std::string out;
    const std::optional<int> code = waitRank(procs[r], 60000, &out);
    ASSERT_TRUE(code.has_value()) << "rank " << r << " hung: " << out;
    EXPECT_EQ(*code, 0) << "rank " << r << ": " << out;
    EXPECT_TRUE(contains(out, "failed ")) << "rank " << r << ": " << out;
    EXPECT_TRUE(contains(out, "ok")) << "rank " << r << ": " << out;
  }
  EXPECT_EQ(shmNames(procs), std::set<std::string>{});
}

std::string killName(const ::testing::TestParamInfo<KillParam>& info) {
  return std::get<0>(info.param) + "_" + std::get<1>(info.param) + "_kill" +
         std::to_string(std::get<2>(info.param));
}

INSTANTIATE_TEST_SUITE_P(
    Transports, ShrinkAfterKill,
    ::testing::Values(KillParam{"shm", "abort", 2}, KillParam{"socket", "abort", 2},
                      KillParam{"shm", "default", 2}, KillParam{"socket", "default", 2},
                      KillParam{"shm", "abort", 0}, KillParam{"socket", "abort", 3}),
    killName);

}  // namespace
}  // namespace loom::test
