// GPU ranks on the fixtures of real servers (tests/topo/fixtures): the ring the topology
// search finds (topo/ring_search.h), the links it crosses, and the tuner's model and choices
// for them (tune/gpu_model.h). Pure: no network, no GPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "src/comm/ring_setup.h"
#include "src/topo/discovery.h"
#include "src/topo/ring_search.h"
#include "src/tune/cost_model.h"
#include "src/tune/gpu_model.h"
#include "src/tune/node_model.h"

namespace loom::tune {
namespace {

using topo::Link;
using topo::PathClass;

topo::NodeTopology fixture(const std::string& name) {
  return topo::loadXmlFile(std::string(LOOM_TOPO_FIXTURES) + "/" + name)->node();
}

// `gpus[r]` is rank r's GPU; every rank its own process; hosts of `perHost` ranks.
topo::System systemOn(const topo::NodeTopology& node, const std::vector<int>& gpus,
                      int perHost = 1 << 20) {
  std::vector<topo::RankDescription> ranks;
  for (size_t r = 0; r < gpus.size(); ++r) {
    topo::RankDescription d;
    d.hostHash = 1 + r / perHost;
    d.pid = static_cast<int>(100 + r);
    d.gpu = gpus[r];
    d.device = gpus[r];
    d.numa = gpus[r] >= 0 ? node.gpus[gpus[r]].where.numa : 0;
    d.node = node;
    ranks.push_back(d);
  }
  return topo::System(ranks);
}

std::vector<int> identity(int n) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

std::vector<PathClass> hopClasses(const topo::System& system, const std::vector<int>& order) {
  std::vector<PathClass> classes;
  for (size_t i = 0; i < order.size(); ++i)
    classes.push_back(system.pathClass(order[i], order[(i + 1) % order.size()]));
  return classes;
}

TEST(GpuRing, Ndv4EightA100ThroughNvswitchEveryHopIsNvlink) {
  topo::NodeTopology ndv4 = fixture("azure-ndv4-nccl-dump.xml");
  topo::System system = systemOn(ndv4, identity(8));
  std::vector<int> ring = topo::searchRing(system);
  EXPECT_EQ(ring, identity(8));  // every order is as good: rank order stays
  for (int r = 0; r < 8; ++r) {
    const Link& hop = system.link(ring[r], ring[(r + 1) % 8]);
    EXPECT_EQ(hop.cls, PathClass::kNvlink);
    EXPECT_DOUBLE_EQ(hop.bandwidthGBps, 300.0);  // 12 links x 25 GB/s through the switches
  }
  Link slowest = topo::slowestIntraNodeHop(system, ring);
  EXPECT_EQ(slowest.cls, PathClass::kNvlink);
  EXPECT_EQ(channelsToFill(slowest), 15);  // 300 GB/s at 20 GB/s a channel
}

// What a communicator's init does with the exchanged rank information and System
// (comm/ring_setup.h): GPU ranks take the searched ring, CPU ranks rank order within a host.
TEST(GpuRing, CommunicatorRingFollowsTheSearchForGpuRanksOnly) {
  topo::NodeTopology ndv2 = fixture("azure-ndv2-nccl-dump.xml");
  std::vector<RankInfo> infos(8);
  for (int r = 0; r < 8; ++r) {
    infos[r].hostHash = 1;
    infos[r].rank = r;
  }
  topo::System gpus = systemOn(ndv2, identity(8));
  EXPECT_EQ(ringOrderFor(infos, gpus), (std::vector<int>{0, 3, 2, 1, 5, 6, 7, 4}));
  std::vector<int> order;
  EXPECT_EQ(buildRing(infos, gpus, 4, order), 7);
  topo::System cpus = systemOn(ndv2, std::vector<int>(8, -1));
  EXPECT_EQ(ringOrderFor(infos, cpus), identity(8));
  // Two hosts of 4 GPU ranks: one crossing into each host, in order of their lowest rank.
  for (int r = 4; r < 8; ++r) infos[r].hostHash = 2;
  topo::System twoHosts = systemOn(ndv2, {0, 1, 2, 3, 0, 1, 2, 3}, 4);
  std::vector<int> ring = ringOrderFor(infos, twoHosts);
  ASSERT_EQ(ring.size(), 8u);
  for (int i = 0; i < 4; ++i) EXPECT_LT(ring[i], 4) << i;
}

TEST(GpuRing, TwoRanksPerGpuSitSideBySide) {
  topo::NodeTopology ndv4 = fixture("azure-ndv4-nccl-dump.xml");
  // Ranks numbered across GPUs (r on GPU r % 4): the ring puts each GPU's ranks together.
  topo::System system = systemOn(ndv4, {0, 1, 2, 3, 0, 1, 2, 3});
  std::vector<int> ring = topo::searchRing(system);
  EXPECT_EQ(ring, (std::vector<int>{0, 4, 1, 5, 2, 6, 3, 7}));
  std::vector<PathClass> hops = hopClasses(system, ring);
  for (size_t i = 0; i < hops.size(); ++i)
    EXPECT_EQ(hops[i], i % 2 == 0 ? PathClass::kSameGpu : PathClass::kNvlink) << i;
}

TEST(GpuRing, Ndv2CubeMeshRingUsesOnlyDoubleNvlinks) {
  topo::NodeTopology ndv2 = fixture("azure-ndv2-nccl-dump.xml");
  topo::System system = systemOn(ndv2, identity(8));
  // Rank order would go 3 -> 4 (no NVLink: across the sockets) and 7 -> 0.
  EXPECT_EQ(topo::slowestIntraNodeHop(system, identity(8)).cls, PathClass::kCrossSocket);
  std::vector<int> ring = topo::searchRing(system);
  EXPECT_EQ(ring, (std::vector<int>{0, 3, 2, 1, 5, 6, 7, 4}));
  for (int r = 0; r < 8; ++r) {
    const Link& hop = system.link(ring[r], ring[(r + 1) % 8]);
    EXPECT_EQ(hop.cls, PathClass::kNvlink) << r;
    EXPECT_DOUBLE_EQ(hop.bandwidthGBps, 50.0) << r;
  }
  EXPECT_EQ(channelsToFill(topo::slowestIntraNodeHop(system, ring)), 3);
}

TEST(GpuRing, PcieOnlyNodeCrossesTheSocketsTwice) {
  for (const char* file : {"azure-ndv2-topo.xml", "azure-ndv5-topo.xml"}) {
    topo::NodeTopology node = fixture(file);
    // Interleave the sockets in rank order: 4 crossings that way.
    topo::System system = systemOn(node, {0, 4, 1, 5, 2, 6, 3, 7});
    std::vector<int> ring = topo::searchRing(system);
    int crossings = 0;
    for (PathClass c : hopClasses(system, ring)) crossings += c == PathClass::kCrossSocket;
    EXPECT_EQ(crossings, 2) << file;
    Link slowest = topo::slowestIntraNodeHop(system, ring);
    EXPECT_EQ(slowest.cls, PathClass::kCrossSocket) << file;
    EXPECT_EQ(channelsToFill(slowest), 1) << file;
  }
}

TEST(GpuRing, CpuRanksGroupByNumaNode) {
  topo::NodeTopology xe = fixture("dell-xe8640-h100x4-mlx5x4-nvlink.ipa20.xml");
  // NUMA indexes 0, 1 on socket 0 and 4, 5 on socket 1, numbered alternately.
  std::vector<topo::RankDescription> ranks;
  for (int numa : {0, 4, 1, 5, 0, 4}) {
    topo::RankDescription d;
    d.hostHash = 9;
    d.pid = static_cast<int>(ranks.size() + 10);
    d.numa = numa;
    d.node = xe;
    ranks.push_back(d);
  }
  topo::System system(ranks);
  // Each NUMA node's ranks together, the sockets crossed twice (the minimum): NUMA 0, 4, 5, 1.
  std::vector<int> ring = topo::searchRing(system);
  EXPECT_EQ(ring, (std::vector<int>{0, 4, 1, 5, 3, 2}));
  int crossings = 0;
  for (PathClass c : hopClasses(system, ring)) crossings += c == PathClass::kCrossSocket;
  EXPECT_EQ(crossings, 2);
}

TEST(GpuModel, Ndv4ModelsNvlinkInsideAndHdrNicsBetweenNodes) {
  topo::NodeTopology ndv4 = fixture("azure-ndv4-nccl-dump.xml");
  ClusterModel one = modelForGpuNode(ndv4, 1, 1);
  EXPECT_EQ(one.nranks(), 8);
  EXPECT_DOUBLE_EQ(one.intra.totalGBs, 8 * 300.0);
  EXPECT_DOUBLE_EQ(one.intra.simple.channelGBs, 20.0);
  EXPECT_DOUBLE_EQ(one.intra.simple.latencyUs, 3.4);
  EXPECT_DOUBLE_EQ(one.intra.ll.latencyUs, 0.6);
  EXPECT_EQ(one.channelsMax, 15);
  ClusterModel many = modelForGpuNode(ndv4, 64, 1);
  EXPECT_EQ(many.nodes, 64);
  EXPECT_DOUBLE_EQ(many.inter.totalGBs, 8 * 25.0);  // 8 HDR ports
  EXPECT_EQ(many.channelsMax, 16);                  // 200 GB/s of NICs at 12 a channel, capped
  // Large calls fill the links with many channels; 8 bytes take one.
  const Choice large = best(one, 1 << 30);
  EXPECT_EQ(large.algo, Algo::kRing);
  EXPECT_EQ(large.proto, Proto::kSimple);
  EXPECT_EQ(large.channels, 15);
  EXPECT_EQ(best(one, 8).channels, 1);
  EXPECT_EQ(best(one, 8).proto, Proto::kLL);
}

TEST(GpuModel, PcieNodeUsesFewerChannelsThanNvlinkNode) {
  ClusterModel pcie = modelForGpuNode(fixture("azure-ndv2-topo.xml"), 1, 1);
  ClusterModel nvlink = modelForGpuNode(fixture("azure-ndv2-nccl-dump.xml"), 1, 1);
  EXPECT_DOUBLE_EQ(pcie.intra.simple.channelGBs, 6.0);  // the socket crossing bounds it
  EXPECT_DOUBLE_EQ(pcie.intra.simple.latencyUs, 5.7);
  EXPECT_EQ(pcie.channelsMax, 1);
  EXPECT_EQ(nvlink.channelsMax, 3);
  EXPECT_LT(best(pcie, 1 << 30).channels, best(nvlink, 1 << 30).channels);
  EXPECT_GT(best(pcie, 1 << 30).timeUs, best(nvlink, 1 << 30).timeUs);
}

TEST(GpuModel, RanksSharingOneGpuShareItsMemory) {
  topo::NodeTopology ndv4 = fixture("azure-ndv4-nccl-dump.xml");
  topo::System system = systemOn(ndv4, {0, 0, 0, 0});
  std::vector<int> ring = topo::searchRing(system);
  EXPECT_EQ(topo::slowestIntraNodeHop(system, ring).cls, PathClass::kSameGpu);
  ClusterModel m = gpuModel(system, ring);
  EXPECT_EQ(m.nranks(), 4);
  // Four flows share one GPU's copy rate (1000 GB/s nominal): 250 each, 1000 in all.
  EXPECT_DOUBLE_EQ(m.intra.totalGBs, 1000.0);
  EXPECT_DOUBLE_EQ(m.intra.simple.channelGBs, 25.0);
  EXPECT_EQ(m.channelsMax, 16);
  // Two ranks on each of two GPUs: the NVLink hop bounds the ring, each GPU's memory is shared.
  topo::System pairs = systemOn(ndv4, {0, 0, 1, 1});
  ClusterModel p = gpuModel(pairs, topo::searchRing(pairs));
  EXPECT_DOUBLE_EQ(p.intra.totalGBs, 4 * 300.0);
  EXPECT_DOUBLE_EQ(p.intra.simple.latencyUs, 3.4);
}

TEST(GpuModel, CommunicatorModelTakesGpuLinksOnlyWhenEveryRankHasAGpu) {
  topo::NodeTopology ndv4 = fixture("azure-ndv4-nccl-dump.xml");
  ClusterModel m = defaultModel(2, 4, 1.25, 2);
  const ClusterModel before = m;
  topo::System mixed = systemOn(ndv4, {0, 1, -1, 3, 4, 5, 6, 7}, 4);
  EXPECT_FALSE(useGpuLinksInside(m, mixed, identity(8)));
  EXPECT_DOUBLE_EQ(m.intra.totalGBs, before.intra.totalGBs);
  topo::System gpus = systemOn(ndv4, identity(8), 4);
  EXPECT_TRUE(useGpuLinksInside(m, gpus, topo::searchRing(gpus)));
  EXPECT_DOUBLE_EQ(m.intra.totalGBs, 4 * 300.0);
  EXPECT_DOUBLE_EQ(m.inter.totalGBs, before.inter.totalGBs);  // the network stays
  EXPECT_EQ(m.channelsMax, 2);                                // and the channel count
}

TEST(GpuModel, LoomTopoTuneUsesTheSearchedRing) {
  // modelForNode picks the GPU model for GPU nodes and the CPU one otherwise.
  topo::NodeTopology ndv2 = fixture("azure-ndv2-nccl-dump.xml");
  ClusterModel m = modelForNode(ndv2, 2, 4, 1);
  EXPECT_EQ(m.ranksPerNode, 8);
  EXPECT_DOUBLE_EQ(m.intra.totalGBs, 8 * 50.0);
  EXPECT_DOUBLE_EQ(m.inter.totalGBs, 12.5);  // one EDR port
  topo::NodeTopology cpu = ndv2;
  cpu.gpus.clear();
  cpu.nvlinkGBps.clear();
  EXPECT_EQ(modelForNode(cpu, 2, 4, 1).ranksPerNode, 4);
}

}  // namespace
}  // namespace loom::tune
