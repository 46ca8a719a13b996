#include "src/comm/ring_setup.h"

#include <string>

#include "algorithms/ring.h"
#include "algorithms/ring_order.h"
#include "src/base/error.h"
#include "src/base/logging.h"

namespace loom {

std::vector<int> nodesOf(const std::vector<RankInfo>& infos) {
  std::vector<uint64_t> hosts;
  for (const RankInfo& info : infos) hosts.push_back(info.hostHash);
  return algo::nodeIndices(hosts);
}

int buildRing(const std::vector<RankInfo>& infos, int rank, std::vector<int>& order) {
  const std::vector<int> nodeOf = nodesOf(infos);
  order = algo::topoRingOrder(nodeOf);
  LOOM_ENFORCE(algo::isRingOrder(order.data(), static_cast<int>(order.size())), InternalError,
               "the topology ring is not a permutation of the ranks");
  std::string text;
  for (int r : order) text += " " + std::to_string(r);
  LOOM_INFO(kLogGraph, "ring 0:", text, " (", algo::nodeCount(nodeOf), " node(s), ",
            algo::ringCrossings(order, nodeOf), " crossing(s); every channel)");
  return algo::ringPosition(order.data(), static_cast<int>(order.size()), rank);
}

}  // namespace loom
