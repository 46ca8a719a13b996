#include "src/tune/node_model.h"

#include <algorithm>

#include "src/topo/path_class.h"
#include "src/tune/gpu_model.h"

namespace loom::tune {
namespace {

constexpr double kTenGbE = 1.25;

}  // namespace

ClusterModel modelForNode(const topo::NodeTopology& node, int nodes, int cpuRanksPerNode,
                          int ranksPerGpu) {
  if (!node.gpus.empty()) return modelForGpuNode(node, nodes, ranksPerGpu);
  const topo::NodeLinkSummary s = topo::summarizeNode(node);
  const double net = s.nics > 0 ? s.nics * s.nicBandwidthGBps : kTenGbE;
  return defaultModel(nodes, std::max(1, cpuRanksPerNode), net, 1);
}

}  // namespace loom::tune
