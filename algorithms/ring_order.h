// Topology-aware ring order: which rank follows which on the ring, so the ring crosses slow
// links (between hosts, then between NUMA domains) as few times as possible.
//
// How it works: every rank knows every rank's host (and NUMA domain, when known) from the
// exchange at init, so every rank computes the same order from the same inputs, with no
// further communication. Hosts are numbered by their lowest rank (the first host is rank 0's);
// the ring visits the hosts in that order and, inside a host, its ranks sorted by (NUMA
// domain, rank). A ring over H hosts must leave each host at least once, so H crossings
// (none for one host) is the minimum, and this order reaches it whatever the numbering:
// ranks numbered interleaved across 2 hosts (0 2 4 | 1 3 5) give "0 2 4 1 3 5", 2 crossings,
// where rank order would cross 6 times.
//
// Pure and host-only (std::vector); the device code only ever sees the finished order.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace loom::algo {

// Node index of every rank: hosts numbered 0, 1, ... in order of their lowest rank.
inline std::vector<int> nodeIndices(const std::vector<std::uint64_t>& hostOf) {
  std::vector<std::uint64_t> seen;
  std::vector<int> nodeOf(hostOf.size());
  for (std::size_t r = 0; r < hostOf.size(); ++r) {
    auto it = std::find(seen.begin(), seen.end(), hostOf[r]);
    if (it == seen.end()) {
      seen.push_back(hostOf[r]);
      it = seen.end() - 1;
    }
    nodeOf[r] = static_cast<int>(it - seen.begin());
  }
  return nodeOf;
}

inline int nodeCount(const std::vector<int>& nodeOf) {
  int most = -1;
  for (int v : nodeOf) most = std::max(most, v);
  return most + 1;
}

// The ring: nodes in index order, each node's ranks by (numa, rank). `numaOf` may be empty
// (unknown: rank order inside the node) or hold -1 for unknown entries.
inline std::vector<int> topoRingOrder(const std::vector<int>& nodeOf,
                                      const std::vector<int>& numaOf = {}) {
  std::vector<int> order(nodeOf.size());
  for (std::size_t r = 0; r < order.size(); ++r) order[r] = static_cast<int>(r);
  auto numa = [&](int r) { return numaOf.empty() ? 0 : numaOf[static_cast<std::size_t>(r)]; };
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const int na = nodeOf[static_cast<std::size_t>(a)], nb = nodeOf[static_cast<std::size_t>(b)];
    if (na != nb) return na < nb;
    return numa(a) < numa(b);  // stable: rank order within a NUMA domain
  });
  return order;
}

// How many ring hops (order[i] -> order[i + 1], wrapping) join ranks of different groups
// (nodes, or NUMA domains).
inline int ringCrossings(const std::vector<int>& order, const std::vector<int>& groupOf) {
  const std::size_t n = order.size();
  int crossings = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (groupOf[static_cast<std::size_t>(order[i])] !=
        groupOf[static_cast<std::size_t>(order[(i + 1) % n])])
      ++crossings;
  }
  return crossings;
}

// Each node's ranks in ring order: nodes[k] lists node k's ranks as the ring visits them.
inline std::vector<std::vector<int>> ranksByNode(const std::vector<int>& order,
                                                 const std::vector<int>& nodeOf) {
  std::vector<std::vector<int>> nodes(static_cast<std::size_t>(nodeCount(nodeOf)));
  for (int r : order)
    nodes[static_cast<std::size_t>(nodeOf[static_cast<std::size_t>(r)])].push_back(r);
  return nodes;
}

}  // namespace loom::algo
