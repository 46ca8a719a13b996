#include "src/tune/comm_topology.h"

#include <algorithm>
#include <string>

#include "algorithms/hierarchical.h"
#include "algorithms/ring.h"
#include "algorithms/ring_order.h"
#include "src/base/env.h"
#include "src/base/error.h"
#include "src/base/logging.h"
#include "src/comm/ring_setup.h"
#include "src/tune/gpu_model.h"

namespace loom::tune {
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
  // GPU ranks: NVLink, PCIe P2P or a shared GPU inside the node, as the topology says. Between
  // nodes data is staged through host memory and the socket transport, priced as above.
  useGpuLinksInside(m, comm.system(), comm.ringOrder());
  return m;
}

}  // namespace loom::tune
