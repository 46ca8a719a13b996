// Recursive doubling (algorithms/doubling.h): pairs are symmetric, every rank's input is folded
// in exactly once, and every rank ends with the same fold in the same order, for 1 to 33 ranks.
#include "algorithms/doubling.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace loom::algo::test {
namespace {

TEST(Doubling, PlaceAndPartners) {
  EXPECT_EQ(doublingPlace(1, 0).rounds, 0);
  EXPECT_EQ(doublingPlace(8, 5).rounds, 3);
  EXPECT_EQ(doublingPlace(8, 5).extraPeer, -1);
  const DoublingPlace extra = doublingPlace(7, 6), host = doublingPlace(7, 2);
  EXPECT_TRUE(extra.extra);
  EXPECT_EQ(extra.extraPeer, 2);
  EXPECT_FALSE(host.extra);
  EXPECT_EQ(host.extraPeer, 6);
  EXPECT_EQ(doublingPlace(7, 3).extraPeer, -1);  // 4..6 are the extras of 0..2
  for (int n = 1; n <= 33; ++n) {
    const DoublingPlace d = doublingPlace(n, 0);
    EXPECT_TRUE(d.pow2 <= n && 2 * d.pow2 > n && (1 << d.rounds) == d.pow2) << n;
    for (int r = 0; r < d.pow2; ++r)
      for (int k = 0; k < d.rounds; ++k) {
        const int p = doublingPartner(r, k);
        EXPECT_TRUE(p >= 0 && p < d.pow2 && p != r && doublingPartner(p, k) == r) << n;
      }
  }
}

// Runs the schedule on expressions: a fold of a and b is "(a,b)", lower rank's first.
TEST(Doubling, EveryRankGetsTheSameFoldOfEveryInputOnce) {
  for (int n = 1; n <= 33; ++n) {
    std::vector<std::string> v(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) v[r] = std::to_string(r);
    const DoublingPlace d0 = doublingPlace(n, 0);
    for (int r = d0.pow2; r < n; ++r) {
      const DoublingPlace d = doublingPlace(n, r);
      ASSERT_TRUE(d.extra);
      ASSERT_EQ(doublingPlace(n, d.extraPeer).extraPeer, r);
      v[d.extraPeer] = "(" + v[d.extraPeer] + "," + v[r] + ")";
    }
    for (int k = 0; k < d0.rounds; ++k) {
      std::vector<std::string> next = v;
      for (int r = 0; r < d0.pow2; ++r) {
        const int p = doublingPartner(r, k);
        const int lo = r < p ? r : p, hi = r < p ? p : r;
        next[r] = "(" + v[lo] + "," + v[hi] + ")";
      }
      v = next;
    }
    for (int r = d0.pow2; r < n; ++r) v[r] = v[doublingPlace(n, r).extraPeer];
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(v[r], v[0]) << "n=" << n << " rank " << r;
      for (int i = 0; i < n; ++i) {
        const std::string id = std::to_string(i);
        int found = 0;
        for (size_t at = 0; (at = v[r].find(id, at)) != std::string::npos; at += id.size()) {
          const bool left = at == 0 || v[r][at - 1] == '(' || v[r][at - 1] == ',';
          const size_t end = at + id.size();
          const bool right = end == v[r].size() || v[r][end] == ')' || v[r][end] == ',';
          found += left && right;
        }
        EXPECT_EQ(found, 1) << "n=" << n << " input " << i << " in " << v[r];
      }
    }
  }
}

}  // namespace
}  // namespace loom::algo::test
