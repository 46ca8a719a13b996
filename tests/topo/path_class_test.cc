// Path classes, the class table and the System built from rank descriptions (several nodes,
// GPU and CPU ranks), without a network.
#include <gtest/gtest.h>

#include "src/base/error.h"
#include "src/topo/discovery.h"
#include "src/topo/system.h"
#include "src/topo/system_exchange.h"

namespace loom::topo {
namespace {

NodeTopology fixture(const std::string& name) {
  return loadXmlFile(std::string(LOOM_TOPO_FIXTURES) + "/" + name)->node();
}

TEST(TopoPathClass, TableIsOrderedFromBestToWorst) {
  // Closer classes are never slower or farther in the nominal table (NVLink aside: its
  // bandwidth comes from the matrix).
  for (int c = static_cast<int>(PathClass::kPcieSwitch); c + 1 < kPathClassCount - 1; ++c) {
    Link a = nominalLink(static_cast<PathClass>(c));
    Link b = nominalLink(static_cast<PathClass>(c + 1));
    EXPECT_GE(a.bandwidthGBps, b.bandwidthGBps) << pathClassName(a.cls);
  }
  EXPECT_LT(nominalLink(PathClass::kSameNuma).latencyUs,
            nominalLink(PathClass::kCrossSocket).latencyUs);
  EXPECT_GT(nominalLink(PathClass::kNetwork).latencyUs,
            nominalLink(PathClass::kCrossSocket).latencyUs);
  for (int c = 0; c < kPathClassCount; ++c) {
    auto cls = static_cast<PathClass>(c);
    EXPECT_EQ(parsePathClass(pathClassLabel(cls)), cls);
    EXPECT_EQ(parsePathClass(pathClassName(cls)), cls);
  }
  EXPECT_THROW(parsePathClass("warp"), InvalidArgument);
}

RankDescription rankOn(const NodeTopology& node, uint64_t host, int pid, int device, int numa) {
  RankDescription d;
  d.hostHash = host;
  d.pid = pid;
  d.device = device;
  d.gpu = node.gpuForCudaDevice(device);
  d.numa = numa;
  d.node = node;
  return d;
}

TEST(TopoSystem, TwoXe8640NodesWithOneRankPerGpu) {
  NodeTopology xe = fixture("dell-xe8640-h100x4-mlx5x4-nvlink.ipa20.xml");
  std::vector<RankDescription> ranks;
  for (uint64_t host : {11u, 22u})
    for (int gpu = 0; gpu < 4; ++gpu) ranks.push_back(rankOn(xe, host, 100 + gpu, gpu, -1));
  System system(ranks);
  ASSERT_EQ(system.nodes().size(), 2u);
  ASSERT_EQ(system.nranks(), 8);
  for (int r = 0; r < 8; ++r) EXPECT_EQ(system.nodeOf(r), r / 4);
  // Rank 1 drives cuda1 = 5f:00.0, paired with mlx5_2 under its switch, on socket 0.
  const RankPlace& p = system.rank(1);
  EXPECT_EQ(p.gpu, 1);
  EXPECT_EQ(system.nodes()[0].nics[p.nic].name, "mlx5_2");
  EXPECT_EQ(p.package, 0);
  EXPECT_EQ(system.pathClass(0, 1), PathClass::kNvlink);
  EXPECT_DOUBLE_EQ(system.link(0, 3).bandwidthGBps, 150.0);
  EXPECT_EQ(system.pathClass(2, 2), PathClass::kSameProcess);
  EXPECT_EQ(system.pathClass(0, 4), PathClass::kNetwork);
  // Between nodes: the slower of the two ranks' NICs (mlx5_0: PCIe Gen4 x16, mlx5_2: Gen5).
  EXPECT_NEAR(system.link(0, 5).bandwidthGBps, 31.5, 0.1);
  EXPECT_NEAR(system.link(1, 5).bandwidthGBps, 63.0, 0.1);
  std::string text = system.describe();
  EXPECT_NE(text.find("2 node(s), 8 rank(s)"), std::string::npos) << text;
  EXPECT_NE(text.find("NIC mlx5_2"), std::string::npos) << text;
}

TEST(TopoSystem, RanksSharingAGpuAreSameGpuWhateverTheirProcess) {
  NodeTopology ndv4 = fixture("azure-ndv4-nccl-dump.xml");
  // Ranks 0 and 1 are threads of one process on cuda0, rank 2 another process on cuda0,
  // rank 3 on cuda1 in rank 0's process.
  System system({rankOn(ndv4, 5, 100, 0, -1), rankOn(ndv4, 5, 100, 0, -1),
                 rankOn(ndv4, 5, 101, 0, -1), rankOn(ndv4, 5, 100, 1, -1)});
  EXPECT_EQ(system.pathClass(0, 0), PathClass::kSameProcess);
  EXPECT_EQ(system.pathClass(0, 1), PathClass::kSameGpu);
  EXPECT_EQ(system.pathClass(0, 2), PathClass::kSameGpu);
  EXPECT_EQ(system.pathClass(2, 1), PathClass::kSameGpu);
  EXPECT_EQ(system.pathClass(0, 3), PathClass::kNvlink);
  EXPECT_DOUBLE_EQ(system.link(2, 3).bandwidthGBps, 300.0);
  // Same GPU is closer and faster than any NVLink of the matrix.
  EXPECT_LT(PathClass::kSameGpu, PathClass::kNvlink);
  EXPECT_GT(system.link(0, 1).bandwidthGBps, system.link(0, 3).bandwidthGBps);
  EXPECT_LT(system.link(0, 1).latencyUs, system.link(0, 3).latencyUs);
  EXPECT_EQ(parsePathClass("GPU"), PathClass::kSameGpu);
  EXPECT_EQ(parsePathClass("same GPU"), PathClass::kSameGpu);
  // Every rank of a GPU leaves the node by that GPU's NIC.
  EXPECT_EQ(system.rank(1).nic, system.rank(2).nic);
  EXPECT_EQ(system.nodes()[0].nics[system.rank(2).nic].name, "mlx5_ib0");
  EXPECT_NE(system.describe().find("GPU "), std::string::npos);
}

TEST(TopoSystem, CpuRanksByNumaAndProcess) {
  NodeTopology xe = fixture("dell-xe8640-h100x4-mlx5x4-nvlink.ipa20.xml");
  // NUMA indexes 0 and 1 are on socket 0, 4 on socket 1.
  System system({rankOn(xe, 7, 10, -1, 0), rankOn(xe, 7, 10, -1, 0), rankOn(xe, 7, 11, -1, 0),
                 rankOn(xe, 7, 12, -1, 1), rankOn(xe, 7, 13, -1, 4)});
  ASSERT_EQ(system.nodes().size(), 1u);
  EXPECT_EQ(system.pathClass(0, 1), PathClass::kSameProcess);
  EXPECT_EQ(system.pathClass(0, 2), PathClass::kSameNuma);
  EXPECT_EQ(system.pathClass(0, 3), PathClass::kSameSocket);
  EXPECT_EQ(system.pathClass(0, 4), PathClass::kCrossSocket);
  EXPECT_EQ(system.pathClass(4, 0), PathClass::kCrossSocket);
  // A CPU rank on NUMA 0 leaves by an RDMA NIC of its socket (none on NUMA 0 itself).
  const NodeTopology& node = system.nodes()[0];
  EXPECT_TRUE(node.nics[system.rank(0).nic].rdma());
  EXPECT_EQ(node.nics[system.rank(0).nic].where.package, 0);
}

TEST(TopoSystem, MixedNodesAndTheFallback) {
  NodeTopology g4 = fixture("aws-g4dn-metal-t4x8-efa.xml");
  NodeTopology plain = fallbackTopology("test");
  System system({rankOn(g4, 1, 5, 7, -1), rankOn(plain, 2, 6, -1, 0)});
  EXPECT_EQ(system.nodes().size(), 2u);
  EXPECT_EQ(system.nodes()[0].nics[system.rank(0).nic].name, "rdmap197s0");
  EXPECT_EQ(system.rank(1).nic, -1);
  EXPECT_EQ(system.pathClass(0, 1), PathClass::kNetwork);
  EXPECT_DOUBLE_EQ(system.link(0, 1).bandwidthGBps, 1.25);  // the fallback node has no NIC
}

}  // namespace
}  // namespace loom::topo
