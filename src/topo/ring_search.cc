// Ring search over the system's links (the method is described in ring_search.h).
#include "src/topo/ring_search.h"

#include <algorithm>
#include <limits>

namespace loom::topo {
namespace {

constexpr size_t kExhaustiveGroups = 9;  // 8! orders of the other groups: ~40k, well under 1 ms

// How good a closed walk over the groups is; compared lexicographically.
struct Score {
  double slowest = std::numeric_limits<double>::infinity();
  int slowestHops = 0;
  double total = 0;

  bool betterThan(const Score& o) const {
    if (slowest != o.slowest) return slowest > o.slowest;
    if (slowestHops != o.slowestHops) return slowestHops < o.slowestHops;
    return total > o.total;
  }
};

class GroupRing {
 public:
  GroupRing(const System& system, std::vector<std::vector<int>> groups)
      : groups_(std::move(groups)) {
    size_t n = groups_.size();
    bw_.resize(n * n);
    for (size_t a = 0; a < n; ++a)
      for (size_t b = 0; b < n; ++b)
        bw_[a * n + b] = system.link(groups_[a].front(), groups_[b].front()).bandwidthGBps;
  }

  // The groups' ranks, concatenated in the best order found.
  std::vector<int> ranks() const {
    std::vector<size_t> order = groups_.size() <= kExhaustiveGroups ? exhaustive() : greedy();
    std::vector<int> out;
    for (size_t g : order) out.insert(out.end(), groups_[g].begin(), groups_[g].end());
    return out;
  }

 private:
  double bw(size_t a, size_t b) const { return bw_[a * groups_.size() + b]; }

  Score score(const std::vector<size_t>& order) const {
    Score s;
    if (order.size() < 2) return s;
    for (size_t i = 0; i < order.size(); ++i) {
      double b = bw(order[i], order[(i + 1) % order.size()]);
      s.total += b;
      if (b < s.slowest) {
        s.slowest = b;
        s.slowestHops = 1;
      } else if (b == s.slowest) {
        ++s.slowestHops;
      }
    }
    return s;
  }

  std::vector<size_t> exhaustive() const {
    std::vector<size_t> order(groups_.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::vector<size_t> best = order;
    Score bestScore = score(order);
    // The first group (the lowest rank's) stays first: rotations are the same ring.
    while (order.size() > 2 && std::next_permutation(order.begin() + 1, order.end())) {
      Score s = score(order);
      if (s.betterThan(bestScore)) {
        bestScore = s;
        best = order;
      }
    }
    return best;
  }

  // Large nodes (16 GPUs and more): from the first group, always on to the unvisited group of
  // the fastest link, the lowest index among equals.
  std::vector<size_t> greedy() const {
    std::vector<size_t> order{0};
    std::vector<bool> used(groups_.size(), false);
    used[0] = true;
    while (order.size() < groups_.size()) {
      size_t from = order.back(), next = groups_.size();
      for (size_t g = 0; g < groups_.size(); ++g)
        if (!used[g] && (next == groups_.size() || bw(from, g) > bw(from, next))) next = g;
      used[next] = true;
      order.push_back(next);
    }
    return order;
  }

  std::vector<std::vector<int>> groups_;
  std::vector<double> bw_;
};

}  // namespace

std::vector<int> searchNodeRing(const System& system, const std::vector<int>& ranks) {
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  // Groups by place, in order of their lowest rank.
  std::vector<std::vector<int>> groups;
  std::vector<std::pair<bool, int>> keys;  // (GPU rank, GPU or NUMA index)
  for (int r : sorted) {
    const RankPlace& p = system.rank(r);
    std::pair<bool, int> key{p.gpu >= 0, p.gpu >= 0 ? p.gpu : p.numa};
    auto it = std::find(keys.begin(), keys.end(), key);
    if (it == keys.end()) {
      keys.push_back(key);
      groups.push_back({r});
    } else {
      groups[static_cast<size_t>(it - keys.begin())].push_back(r);
    }
  }
  if (groups.size() <= 1) return sorted;
  return GroupRing(system, std::move(groups)).ranks();
}

std::vector<int> searchRing(const System& system) {
  std::vector<std::vector<int>> byNode(system.nodes().size());
  for (int r = 0; r < system.nranks(); ++r) byNode[system.nodeOf(r)].push_back(r);
  std::vector<int> order;
  for (const std::vector<int>& ranks : byNode) {  // nodes are numbered by their lowest rank
    std::vector<int> ring = searchNodeRing(system, ranks);
    order.insert(order.end(), ring.begin(), ring.end());
  }
  return order;
}

Link slowestIntraNodeHop(const System& system, const std::vector<int>& order) {
  Link slowest{PathClass::kSameProcess, 0, 0};
  bool any = false;
  std::vector<std::vector<int>> byNode(system.nodes().size());
  for (int r : order) byNode[system.nodeOf(r)].push_back(r);
  for (const std::vector<int>& ring : byNode) {
    if (ring.size() < 2) continue;
    for (size_t i = 0; i < ring.size(); ++i) {
      const Link& l = system.link(ring[i], ring[(i + 1) % ring.size()]);
      if (!any || l.bandwidthGBps < slowest.bandwidthGBps ||
          (l.bandwidthGBps == slowest.bandwidthGBps && l.latencyUs > slowest.latencyUs)) {
        slowest = l;
        any = true;
      }
    }
  }
  return slowest;
}

}  // namespace loom::topo
