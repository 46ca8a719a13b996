#include "src/tune/gpu_model.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "src/topo/ring_search.h"

namespace loom::tune {
namespace {

using topo::PathClass;

// The table in gpu_model.h.
struct GpuHop {
  double channelGBs;
  double llUs;
  double simpleUs;
};
constexpr GpuHop kSameGpu{25.0, 0.4, 2.0};
constexpr GpuHop kNvlinkHop{20.0, 0.6, 3.4};
constexpr GpuHop kPcieHop{12.0, 1.0, 5.7};
constexpr GpuHop kNetworkHop{12.0, 4.0, 8.0};
constexpr int kMaxChannels = 16;    // LOOM_NCHANNELS' range
constexpr double kNoNicGBs = 1.25;  // 10 GbE, as topo's plain-Ethernet figure

const GpuHop& hopOf(PathClass cls) {
  switch (cls) {
    case PathClass::kSameProcess:
    case PathClass::kSameGpu:
      return kSameGpu;
    case PathClass::kNvlink:
      return kNvlinkHop;
    case PathClass::kNetwork:
      return kNetworkHop;
    default:
      return kPcieHop;
  }
}

LinkParams params(const GpuHop& hop, double linkGBs, double totalGBs) {
  const double channel = std::min(hop.channelGBs, linkGBs);
  return LinkParams{ProtoCost{hop.simpleUs, channel}, ProtoCost{hop.llUs, channel / 2}, totalGBs,
                    0.5};
}

}  // namespace

LinkParams gpuLinkParams(const topo::Link& link, int flows) {
  return params(hopOf(link.cls), link.bandwidthGBps, link.bandwidthGBps * std::max(1, flows));
}

int channelsToFill(const topo::Link& link) {
  const double per = std::min(hopOf(link.cls).channelGBs, link.bandwidthGBps);
  if (per <= 0) return 1;
  return std::clamp(static_cast<int>(std::ceil(link.bandwidthGBps / per - 1e-9)), 1, kMaxChannels);
}

ClusterModel gpuModel(const topo::System& system, const std::vector<int>& order) {
  ClusterModel m;
  std::vector<int> perNode(system.nodes().size(), 0);
  std::map<std::pair<int, int>, int> perGpu;  // (node, gpu) -> ranks
  for (int r = 0; r < system.nranks(); ++r) {
    ++perNode[system.nodeOf(r)];
    ++perGpu[{system.nodeOf(r), system.rank(r).gpu}];
  }
  m.nodes = static_cast<int>(perNode.size());
  m.ranksPerNode = perNode.empty() ? 1 : *std::max_element(perNode.begin(), perNode.end());
  for (int n : perNode) m.uniform = m.uniform && n == m.ranksPerNode;
  int sharing = 1;
  for (const auto& [key, ranks] : perGpu) sharing = std::max(sharing, ranks);

  // Inside: every rank's flow crosses one ring hop at once; the slowest bounds the ring. Ranks
  // of one GPU also share its memory: each gets 1/sharing of a same-GPU copy's rate.
  topo::Link hop = topo::slowestIntraNodeHop(system, order);
  if (m.ranksPerNode < 2) hop = topo::nominalLink(PathClass::kSameGpu);
  double perFlow = hop.bandwidthGBps;
  if (sharing > 1)
    perFlow = std::min(perFlow, topo::nominalLink(PathClass::kSameGpu).bandwidthGBps / sharing);
  m.intra = params(hopOf(hop.cls), hop.bandwidthGBps, perFlow * m.ranksPerNode);
  int channels = channelsToFill(hop);

  // Between nodes: the NICs that node 0's ranks leave by (nodes are alike in a model).
  double netGBs = 0;
  std::set<int> nics;
  for (int r = 0; r < system.nranks(); ++r) {
    const topo::RankPlace& p = system.rank(r);
    if (p.node != 0 || p.nic < 0 || !nics.insert(p.nic).second) continue;
    netGBs += topo::nicBandwidthGBps(system.nodes()[0].nics[p.nic]);
  }
  if (netGBs <= 0) netGBs = kNoNicGBs;
  m.inter = params(kNetworkHop, netGBs, netGBs);
  if (m.nodes > 1) channels = std::max(channels, channelsToFill({PathClass::kNetwork, netGBs, 0}));
  m.channelsMin = 1;
  m.channelsMax = channels;
  // Launch and per-channel costs of a kernel-driven call (as the nominal GPU server's).
  const ClusterModel server = gpuServerModel(1);
  m.opOverheadUs = server.opOverheadUs;
  m.channelOverheadUs = server.channelOverheadUs;
  return m;
}

bool useGpuLinksInside(ClusterModel& m, const topo::System& system, const std::vector<int>& order) {
  if (system.nranks() == 0 || static_cast<int>(order.size()) != system.nranks()) return false;
  for (int r = 0; r < system.nranks(); ++r)
    if (system.rank(r).gpu < 0) return false;
  const ClusterModel gpu = gpuModel(system, order);
  m.intra = gpu.intra;
  m.opOverheadUs = gpu.opOverheadUs;
  m.channelOverheadUs = gpu.channelOverheadUs;
  return true;
}

ClusterModel modelForGpuNode(const topo::NodeTopology& node, int nodes, int ranksPerGpu) {
  // Two nodes show everything the model needs (the links inside one, the NICs between them);
  // the System of a thousand would hold millions of rank pairs.
  const int built = std::min(nodes, 2);
  std::vector<topo::RankDescription> ranks;
  int pid = 1;
  for (int n = 0; n < built; ++n) {
    for (size_t g = 0; g < node.gpus.size(); ++g) {
      for (int k = 0; k < std::max(1, ranksPerGpu); ++k) {
        topo::RankDescription d;
        d.hostHash = static_cast<uint64_t>(n + 1);
        d.pid = pid++;
        d.device = node.gpus[g].cudaIndex;
        d.gpu = static_cast<int32_t>(g);
        d.numa = node.gpus[g].where.numa;
        d.node = node;
        ranks.push_back(std::move(d));
      }
    }
  }
  topo::System system(ranks);
  ClusterModel m = gpuModel(system, topo::searchRing(system));
  m.nodes = nodes;
  return m;
}

}  // namespace loom::tune
