// loomCommSplit: colors, key ordering, ties, LOOM_SPLIT_NOCOLOR, nested splits and children
// used at the same time as their parent.
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>

#include "tests/test_util.h"

namespace loom::test {
namespace {

struct SplitResult {
  loomComm_t comm = nullptr;
  int rank = -1;
  int count = -1;
};

// Every rank splits with its (color, key); returns each rank's child and its rank/count.
std::vector<SplitResult> splitAll(const std::vector<loomComm_t>& parents,
                                  const std::vector<int>& colors, const std::vector<int>& keys) {
  int n = static_cast<int>(parents.size());
  std::vector<SplitResult> out(n);
  runThreads(n, [&](int r) {
    loomResult_t rc = loomCommSplit(parents[r], colors[r], keys[r], &out[r].comm, nullptr);
    EXPECT_EQ(rc, loomSuccess) << "rank " << r << ": " << loomGetLastError(parents[r]);
    if (out[r].comm != nullptr) {
      EXPECT_EQ(loomCommUserRank(out[r].comm, &out[r].rank), loomSuccess);
      EXPECT_EQ(loomCommCount(out[r].comm, &out[r].count), loomSuccess);
    }
  });
  return out;
}

std::vector<loomComm_t> comms(const std::vector<SplitResult>& results) {
  std::vector<loomComm_t> out;
  for (const auto& s : results) out.push_back(s.comm);
  return out;
}

TEST(Split, ThreeColorsWithReversedKeys) {
  const int n = 8;
  auto parents = initThreads(n, makeId());
  std::vector<int> colors(n), keys(n);
  for (int r = 0; r < n; ++r) {
    colors[r] = r % 3;  // sizes 3, 3, 2
    keys[r] = 100 - r;  // reversed: the highest parent rank becomes rank 0
  }
  auto children = splitAll(parents, colors, keys);
  for (int r = 0; r < n; ++r) {
    int size = r % 3 == 2 ? 2 : 3;
    int position = r / 3;  // among ranks of this color, ascending parent rank
    EXPECT_EQ(children[r].count, size) << "rank " << r;
    EXPECT_EQ(children[r].rank, size - 1 - position) << "rank " << r;
  }
  finalizeAndDestroy(comms(children));
  finalizeAndDestroy(parents);
}

TEST(Split, EqualKeysKeepParentOrder) {
  const int n = 5;
  auto parents = initThreads(n, makeId());
  auto children = splitAll(parents, std::vector<int>(n, 4), std::vector<int>(n, 0));
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(children[r].count, n);
    EXPECT_EQ(children[r].rank, r);
  }
  finalizeAndDestroy(comms(children));
  finalizeAndDestroy(parents);
}

TEST(Split, NoColorRanksGetNull) {
  const int n = 7;
  auto parents = initThreads(n, makeId());
  std::vector<int> colors(n), keys(n, 0);
  for (int r = 0; r < n; ++r) colors[r] = (r % 3 == 0) ? LOOM_SPLIT_NOCOLOR : 1;
  auto children = splitAll(parents, colors, keys);
  int members = 0;
  for (int r = 0; r < n; ++r) {
    if (r % 3 == 0) {
      EXPECT_EQ(children[r].comm, nullptr) << "rank " << r;
    } else {
      ASSERT_NE(children[r].comm, nullptr) << "rank " << r;
      EXPECT_EQ(children[r].count, 4);  // ranks 1, 2, 4, 5
      EXPECT_EQ(children[r].rank, members++);
    }
  }
  std::vector<loomComm_t> live;
  for (auto& c : children)
    if (c.comm) live.push_back(c.comm);
  finalizeAndDestroy(live);
  finalizeAndDestroy(parents);
}

TEST(Split, AllNoColor) {
  auto parents = initThreads(3, makeId());
  auto children = splitAll(parents, std::vector<int>(3, LOOM_SPLIT_NOCOLOR), {0, 0, 0});
  for (auto& c : children) EXPECT_EQ(c.comm, nullptr);
  finalizeAndDestroy(parents);
}

TEST(Split, NestedSplitsDownToSingletons) {
  const int n = 8;
  auto level0 = initThreads(n, makeId());
  // 8 -> two of 4 (by parity) -> four of 2 -> eight of 1.
  auto level1 = splitAll(level0, {0, 1, 0, 1, 0, 1, 0, 1}, {0, 0, 0, 0, 0, 0, 0, 0});
  std::vector<int> colors(n), keys(n, 0);
  for (int r = 0; r < n; ++r) colors[r] = level1[r].rank / 2;
  auto level2 = splitAll(comms(level1), colors, keys);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(level2[r].count, 2);
    colors[r] = level2[r].rank;
    keys[r] = 0;
  }
  // Colors repeat across different level-2 communicators: each split is its own.
  auto level3 = splitAll(comms(level2), colors, keys);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(level3[r].count, 1);
    EXPECT_EQ(level3[r].rank, 0);
  }
  finalizeAndDestroy(comms(level3));
  finalizeAndDestroy(comms(level2));
  finalizeAndDestroy(comms(level1));
  finalizeAndDestroy(level0);
}

TEST(Split, ChildInheritsParentOptionsUnlessConfigured) {
  loomUniqueId id = makeId();
  std::vector<loomComm_t> parents(2, nullptr);
  runThreads(2, [&](int r) {
    loomConfig_t config = LOOM_CONFIG_INITIALIZER;
    config.name = "parent";
    EXPECT_EQ(loomCommInitRankConfig(&parents[r], 2, id, r, &config), loomSuccess);
  });
  std::vector<loomComm_t> children(2, nullptr);
  runThreads(2, [&](int r) {
    loomConfig_t config = LOOM_CONFIG_INITIALIZER;
    config.name = "child";
    EXPECT_EQ(loomCommSplit(parents[r], 0, r, &children[r], &config), loomSuccess)
        << loomGetLastError(parents[r]);
    int device = 99;
    EXPECT_EQ(loomCommDevice(children[r], &device), loomSuccess);
    EXPECT_EQ(device, LOOM_DEVICE_CPU);
  });
  finalizeAndDestroy(children);
  finalizeAndDestroy(parents);
}

TEST(Split, ParentAndChildrenUsedConcurrently) {
  const int n = 4;
  auto parents = initThreads(n, makeId());
  auto children = splitAll(parents, {0, 1, 0, 1}, {0, 0, 0, 0});
  // Finalize the two children (concurrently, from all ranks) while a second split of the
  // parent runs: communicators are independent.
  std::vector<loomComm_t> again(n, nullptr);
  runThreads(n, [&](int r) {
    EXPECT_EQ(loomCommFinalize(children[r].comm), loomSuccess);
    EXPECT_EQ(loomCommSplit(parents[r], 0, -r, &again[r], nullptr), loomSuccess);
    int rank = -1;
    EXPECT_EQ(loomCommUserRank(again[r], &rank), loomSuccess);
    EXPECT_EQ(rank, n - 1 - r);
    EXPECT_EQ(loomCommDestroy(children[r].comm), loomSuccess);
  });
  finalizeAndDestroy(again);
  finalizeAndDestroy(parents);
}

}  // namespace
}  // namespace loom::test
