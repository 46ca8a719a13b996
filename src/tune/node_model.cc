#include "src/tune/node_model.h"

#include <algorithm>

namespace loom::tune {
namespace {

// One channel of a GPU collective (a pair of SMs) moves at most ~20 GB/s over NVLink and
// ~12 GB/s through a NIC (NCCL's figures); LL moves half the payload per byte on the wire.
constexpr double kGpuChannelGBs = 20.0;
constexpr double kNicChannelGBs = 12.0;
constexpr double kTenGbE = 1.25;

double networkGBs(const topo::NodeLinkSummary& node) {
  return node.nics > 0 ? node.nics * node.nicBandwidthGBps : kTenGbE;
}

}  // namespace

ClusterModel modelForNode(const topo::NodeLinkSummary& node, int nodes, int cpuRanksPerNode) {
  if (node.gpus == 0) return defaultModel(nodes, std::max(1, cpuRanksPerNode), networkGBs(node), 1);
  ClusterModel m = gpuServerModel(nodes);
  m.ranksPerNode = node.gpus;
  if (node.gpus > 1) {
    const double pair = node.gpuBandwidthGBps;
    const double latency = std::max(node.gpuLatencyUs, 0.5);
    m.intra = LinkParams{ProtoCost{latency, std::min(kGpuChannelGBs, pair)},
                         ProtoCost{latency / 3, std::min(kGpuChannelGBs, pair) / 2},
                         node.gpus * pair, 0.5};
  }
  const double net = networkGBs(node);
  const double perChannel = std::min(kNicChannelGBs, net);
  m.inter = LinkParams{ProtoCost{m.inter.simple.latencyUs, perChannel},
                       ProtoCost{m.inter.ll.latencyUs, perChannel / 2}, net};
  return m;
}

}  // namespace loom::tune
