#include "src/comm/ring_setup.h"

#include <string>

#include "algorithms/ring.h"
#include "algorithms/ring_order.h"
#include "src/base/error.h"
#include "src/base/logging.h"
#include "src/base/strings.h"
#include "src/topo/ring_search.h"

namespace loom {

std::vector<int> nodesOf(const std::vector<RankInfo>& infos) {
  std::vector<uint64_t> hosts;
  for (const RankInfo& info : infos) hosts.push_back(info.hostHash);
  return algo::nodeIndices(hosts);
}

std::vector<int> ringOrderFor(const std::vector<RankInfo>& infos, const topo::System& system) {
  bool onGpus = false;
  if (system.nranks() == static_cast<int>(infos.size()))
    for (int r = 0; r < system.nranks(); ++r) onGpus = onGpus || system.rank(r).gpu >= 0;
  // searchRing visits hosts in order of their lowest rank, as topoRingOrder does: the two
  // differ only inside a host.
  return onGpus ? topo::searchRing(system) : algo::topoRingOrder(nodesOf(infos));
}

int buildRing(const std::vector<RankInfo>& infos, const topo::System& system, int rank,
              std::vector<int>& order) {
  const std::vector<int> nodeOf = nodesOf(infos);
  order = ringOrderFor(infos, system);
  LOOM_ENFORCE(algo::isRingOrder(order.data(), static_cast<int>(order.size())), InternalError,
               "the topology ring is not a permutation of the ranks");
  std::string text;
  for (int r : order) text += strCat(" ", r);
  LOOM_INFO(kLogGraph, "ring 0:", text, " (", algo::nodeCount(nodeOf), " node(s), ",
            algo::ringCrossings(order, nodeOf), " crossing(s); every channel)");
  return algo::ringPosition(order.data(), static_cast<int>(order.size()), rank);
}

}  // namespace loom
