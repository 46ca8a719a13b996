#include "src/tune/comm_topology.h"

#include <algorithm>
#include <string>

#include "algorithms/hierarchical.h"
#include "algorithms/ring.h"
#include "algorithms/ring_order.h"
#include "src/core/env.h"
#include "src/core/error.h"
#include "src/core/logging.h"

namespace loom::tune {
namespace {

std::vector<int> nodesOf(const std::vector<RankInfo>& infos) {
  std::vector<uint64_t> hosts;
  for (const RankInfo& info : infos) hosts.push_back(info.hostHash);
  return algo::nodeIndices(hosts);
}

}  // namespace

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

NodeLayout nodeLayout(const Comm& comm) {
  NodeLayout l;
  l.nodeOf = nodesOf(comm.rankInfos());
  l.ranks = algo::ranksByNode(comm.ringOrder(), l.nodeOf);
  l.ranksPerNode = 0;
  for (const auto& node : l.ranks) l.ranksPerNode = std::max<int>(l.ranksPerNode, node.size());
  for (const auto& node : l.ranks) l.uniform &= static_cast<int>(node.size()) == l.ranksPerNode;
  return l;
}

algo::TreeLinks treeLinks(const NodeLayout& layout, int tree, int rank) {
  return algo::nodeTreeLinks(layout.ranks, layout.nodeOf, tree, rank);
}

ClusterModel clusterModel(const Comm& comm, const NodeLayout& layout) {
  const int64_t mbps = envInt(EnvVar::LOOM_TUNE_NET_MBPS);
  LOOM_ENFORCE(mbps > 0, InvalidArgument, "LOOM_TUNE_NET_MBPS=", mbps,
               " must be positive: the network bandwidth per host in Mbit/s (10000 for 10GbE)");
  ClusterModel m =
      defaultModel(layout.nodes(), layout.ranksPerNode, mbps / 8000.0, comm.channels());
  m.uniform = layout.uniform;
  return m;
}

}  // namespace loom::tune
