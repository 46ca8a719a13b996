// Every fixture of a real server (tests/topo/fixtures, see its README) loads with hwloc 2.9 and
// gives the GPUs, NICs, pairing and NVLink matrix read from the files by hand.
#include <gtest/gtest.h>

#include <string>

#include "src/base/error.h"
#include "src/topo/discovery.h"
#include "src/topo/path_class.h"

namespace loom::topo {
namespace {

NodeTopology load(const std::string& name) {
  return loadXmlFile(std::string(LOOM_TOPO_FIXTURES) + "/" + name)->node();
}

std::vector<std::string> busIds(const NodeTopology& node) {
  std::vector<std::string> ids;
  for (const Gpu& g : node.gpus) ids.push_back(g.where.busId);
  return ids;
}

std::vector<std::string> rdmaNicNames(const NodeTopology& node) {
  std::vector<std::string> names;
  for (const Nic& n : node.nics)
    if (n.rdma()) names.push_back(n.name);
  return names;
}

// The NIC name each GPU is paired with.
std::vector<std::string> pairedNics(const NodeTopology& node) {
  std::vector<std::string> names;
  for (int nic : pairGpusWithNics(node)) names.push_back(nic >= 0 ? node.nics[nic].name : "-");
  return names;
}

TEST(TopoFixture, DellXe8640FourH100FourMlx5NvlinkMatrix) {
  NodeTopology node = load("dell-xe8640-h100x4-mlx5x4-nvlink.ipa20.xml");
  EXPECT_EQ(node.packages.size(), 2u);
  EXPECT_EQ(node.numaNodes.size(), 8u);
  EXPECT_EQ(node.cores, 112);
  EXPECT_EQ(node.pus, 224);
  ASSERT_EQ(node.gpus.size(), 4u);
  EXPECT_EQ(busIds(node), (std::vector<std::string>{"0000:4e:00.0", "0000:5f:00.0", "0000:cb:00.0",
                                                    "0000:db:00.0"}));
  for (int g = 0; g < 4; ++g) {
    EXPECT_EQ(node.gpus[g].where.deviceId, 0x2330);  // H100 SXM5
    EXPECT_EQ(node.gpus[g].cudaIndex, g);
    EXPECT_EQ(node.gpus[g].cudaName, "cuda" + std::to_string(g));
    EXPECT_EQ(node.gpus[g].nvmlName, "nvml" + std::to_string(g));
  }
  // hwloc's CUDA plugin numbered these in the discovering process: visible devices applied.
  EXPECT_EQ(node.gpuForCudaDevice(1, "3,1"), 1);
  // NUMA (OS index) of each GPU: SNC4, one GPU per sub-NUMA cluster with a switch.
  EXPECT_EQ(node.numaNodes[node.gpus[0].where.numa].osIndex, 3);
  EXPECT_EQ(node.numaNodes[node.gpus[1].where.numa].osIndex, 1);
  EXPECT_EQ(node.numaNodes[node.gpus[2].where.numa].osIndex, 7);
  EXPECT_EQ(node.numaNodes[node.gpus[3].where.numa].osIndex, 5);
  EXPECT_EQ(node.gpus[0].where.cpuset, "42-55,154-167");

  EXPECT_EQ(rdmaNicNames(node), (std::vector<std::string>{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"}));
  EXPECT_EQ(node.nics.size(), 6u);  // + two Broadcom 1 GbE netdevs
  for (const Nic& nic : node.nics) {
    if (nic.rdma()) {
      EXPECT_EQ(nic.kind, NicKind::kInfiniBand) << nic.name;
    }
    if (nic.name == "mlx5_0") {
      EXPECT_EQ(nic.netdev, "hsi0");
      EXPECT_EQ(nic.where.busId, "0000:4d:00.0");
    }
  }
  // Each GPU with a NIC under its PCIe switch gets that NIC; cb:00.0 has none and takes the
  // closest, mlx5_3, on its socket.
  EXPECT_EQ(pairedNics(node), (std::vector<std::string>{"mlx5_0", "mlx5_2", "mlx5_3", "mlx5_3"}));
  auto gpuNic = [&](int g, const char* name) {
    for (size_t n = 0; n < node.nics.size(); ++n)
      if (node.nics[n].name == name)
        return devicePath(node, {Endpoint::kGpu, g}, {Endpoint::kNic, static_cast<int>(n)}).cls;
    ADD_FAILURE() << "no NIC " << name;
    return PathClass::kNetwork;
  };
  EXPECT_EQ(gpuNic(0, "mlx5_0"), PathClass::kPcieSwitch);
  EXPECT_EQ(gpuNic(1, "mlx5_2"), PathClass::kPcieSwitch);
  EXPECT_EQ(gpuNic(3, "mlx5_3"), PathClass::kPcieSwitch);
  EXPECT_EQ(gpuNic(2, "mlx5_3"), PathClass::kSameSocket);
  EXPECT_EQ(gpuNic(0, "mlx5_3"), PathClass::kCrossSocket);
  EXPECT_EQ(gpuNic(1, "mlx5_0"), PathClass::kSameSocket);

  // NVLinkBandwidth: 150000 MB/s between every pair (6 NVLink4 links of 25 GB/s each).
  EXPECT_FALSE(node.hasNvSwitch);
  ASSERT_EQ(node.nvlinkGBps.size(), 16u);
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b) EXPECT_DOUBLE_EQ(node.nvlink(a, b), a == b ? 0.0 : 150.0);
  Link link = devicePath(node, {Endpoint::kGpu, 0}, {Endpoint::kGpu, 3});
  EXPECT_EQ(link.cls, PathClass::kNvlink);
  EXPECT_DOUBLE_EQ(link.bandwidthGBps, 150.0);

  NodeLinkSummary s = summarizeNode(node);
  EXPECT_EQ(s.gpus, 4);
  EXPECT_EQ(s.gpuClass, PathClass::kNvlink);
  EXPECT_DOUBLE_EQ(s.gpuBandwidthGBps, 150.0);
  EXPECT_EQ(s.nics, 4);
  EXPECT_NEAR(s.nicBandwidthGBps, 31.5, 0.1);  // the ConnectX-6 ports' PCIe Gen4 x16 links
  EXPECT_EQ(s.cores, 112);
  EXPECT_EQ(s.numaNodes, 8);
  EXPECT_EQ(s.packages, 2);
}

TEST(TopoFixture, Dgx2hSixteenV100StoredAsCoprocThroughNvswitch) {
  NodeTopology node = load("nvidia-dgx2h-v100x16-nvswitch.hwloc-v2.14.xml");
  ASSERT_EQ(node.gpus.size(), 16u);
  for (int g = 0; g < 16; ++g) {
    EXPECT_EQ(node.gpus[g].where.deviceId, 0x1db8);  // V100 SXM3 32GB
    EXPECT_EQ(node.gpus[g].cudaName, "");            // COPROC "nvmlN" only
    EXPECT_EQ(node.gpus[g].nvmlName, "nvml" + std::to_string(g));
    EXPECT_EQ(node.gpus[g].cudaIndex, g);
  }
  EXPECT_EQ(node.gpus[0].where.busId, "0000:34:00.0");
  EXPECT_EQ(node.gpus[15].where.busId, "0000:e7:00.0");
  EXPECT_TRUE(node.nics.empty());
  EXPECT_TRUE(node.hasNvSwitch);
  // No cudaN names: CUDA_VISIBLE_DEVICES (integers) maps ordinals onto physical GPUs.
  EXPECT_EQ(node.gpuForCudaDevice(0, "3,1"), 3);
  EXPECT_EQ(node.gpuForCudaDevice(1, "3,1"), 1);
  EXPECT_EQ(node.gpuForCudaDevice(2, "3,1"), -1);
  EXPECT_EQ(node.gpuForCudaDevice(0, "GPU-8f2a"), 0);  // a UUID: the ordinal stands
  EXPECT_EQ(node.gpuForCudaDevice(5, ""), 5);
  // Through the NVSwitches every pair gets the GPU's 6 NVLink2 links (25 GB/s each).
  ASSERT_EQ(node.nvlinkGBps.size(), 256u);
  for (int a = 0; a < 16; ++a)
    for (int b = 0; b < 16; ++b) {
      if (a != b) {
        EXPECT_DOUBLE_EQ(node.nvlink(a, b), 150.0) << a << "-" << b;
      }
    }
  EXPECT_EQ(summarizeNode(node).gpuClass, PathClass::kNvlink);
  EXPECT_TRUE(pairedNics(node) == std::vector<std::string>(16, "-"));
}

TEST(TopoFixture, Power8NvlinkMatrixKeepsDirectLinks) {
  NodeTopology node = load("ibm-power8-p100x4-nvlink.hwloc-power8gpudistances.xml");
  ASSERT_EQ(node.gpus.size(), 4u);
  EXPECT_EQ(busIds(node), (std::vector<std::string>{"0002:01:00.0", "0003:01:00.0", "000a:01:00.0",
                                                    "000b:01:00.0"}));
  EXPECT_FALSE(node.hasNvSwitch);
  // GPU pairs 0-1 and 2-3 have 40 GB/s (2 NVLink1 links); the transitive closure would have
  // zeroed them.
  EXPECT_DOUBLE_EQ(node.nvlink(0, 1), 40.0);
  EXPECT_DOUBLE_EQ(node.nvlink(1, 0), 40.0);
  EXPECT_DOUBLE_EQ(node.nvlink(2, 3), 40.0);
  EXPECT_DOUBLE_EQ(node.nvlink(0, 2), 0.0);
  EXPECT_DOUBLE_EQ(node.nvlink(1, 3), 0.0);
  for (const Gpu& gpu : node.gpus) EXPECT_DOUBLE_EQ(gpu.cpuNvlinkGBps, 40.0);
  EXPECT_EQ(devicePath(node, {Endpoint::kGpu, 0}, {Endpoint::kGpu, 1}).cls, PathClass::kNvlink);
  EXPECT_EQ(devicePath(node, {Endpoint::kGpu, 0}, {Endpoint::kGpu, 2}).cls,
            PathClass::kCrossSocket);
  EXPECT_EQ(devicePath(node, {Endpoint::kGpu, 2}, {Endpoint::kCpu, 1}).cls, PathClass::kNvlink);
  NodeLinkSummary s = summarizeNode(node);
  EXPECT_EQ(s.gpuClass, PathClass::kCrossSocket);  // the slowest pair crosses sockets
  EXPECT_EQ(s.nics, 0);
}

TEST(TopoFixture, AwsG4dnEightT4AndAnEfaNic) {
  NodeTopology node = load("aws-g4dn-metal-t4x8-efa.xml");
  ASSERT_EQ(node.gpus.size(), 8u);
  for (const Gpu& gpu : node.gpus) EXPECT_EQ(gpu.where.deviceId, 0x1eb8);  // Tesla T4
  EXPECT_TRUE(node.nvlinkGBps.empty());
  ASSERT_EQ(rdmaNicNames(node), (std::vector<std::string>{"rdmap197s0"}));
  const Nic& efa = node.nics[0];
  EXPECT_EQ(efa.name, "rdmap197s0");
  EXPECT_EQ(efa.where.vendorId, 0x1d0f);  // Amazon
  EXPECT_EQ(efa.where.pciClass, 0x0200);  // Ethernet class: RDMA but not InfiniBand
  EXPECT_EQ(efa.kind, NicKind::kRoce);
  for (const Nic& nic : node.nics) EXPECT_EQ(nic.name.find("mlx5"), std::string::npos);
  EXPECT_TRUE(pairedNics(node) == std::vector<std::string>(8, "rdmap197s0"));
  // Two T4s behind one host bridge, different root ports.
  EXPECT_EQ(devicePath(node, {Endpoint::kGpu, 0}, {Endpoint::kGpu, 1}).cls, PathClass::kHostBridge);
  EXPECT_EQ(devicePath(node, {Endpoint::kGpu, 0}, {Endpoint::kGpu, 4}).cls,
            PathClass::kCrossSocket);
  EXPECT_EQ(summarizeNode(node).gpuClass, PathClass::kCrossSocket);
}

TEST(TopoFixture, IntelTwoP100PcieShareASwitchWithMlx5) {
  NodeTopology node = load("intel-p100pcie-x2-mlx5.cts1-pascal.xml");
  ASSERT_EQ(node.gpus.size(), 2u);
  EXPECT_TRUE(node.nvlinkGBps.empty());
  EXPECT_EQ(rdmaNicNames(node), (std::vector<std::string>{"mlx5_0"}));
  EXPECT_EQ(node.nics[0].kind, NicKind::kInfiniBand);
  EXPECT_EQ(pairedNics(node), (std::vector<std::string>{"mlx5_0", "mlx5_0"}));
  Link link = devicePath(node, {Endpoint::kGpu, 0}, {Endpoint::kGpu, 1});
  EXPECT_EQ(link.cls, PathClass::kPcieSwitch);
  EXPECT_NEAR(link.bandwidthGBps, 15.75, 0.01);  // Gen3 x16 as hwloc reports it
}

TEST(TopoFixture, XeonK40mSkipsTheAmdVgaAndFindsMlx5) {
  NodeTopology node = load("xeon-k40m-connectx4-small.hwloc-32em64t-2n8c2t-pci-wholeio.xml");
  // Three NVIDIA 3D controllers by PCI vendor/class; only 84:00.0 has a CUDA OS device. The
  // AMD Radeon (VGA class, vendor 0x1002) is no NVIDIA GPU.
  ASSERT_EQ(node.gpus.size(), 3u);
  int gpu = node.gpuForCudaDevice(0);
  ASSERT_GE(gpu, 0);
  EXPECT_EQ(node.gpus[gpu].where.busId, "0000:84:00.0");
  for (const Gpu& g : node.gpus) EXPECT_EQ(g.where.vendorId, 0x10de);
  ASSERT_EQ(rdmaNicNames(node), (std::vector<std::string>{"mlx5_0"}));
  EXPECT_EQ(node.nics[0].netdev, "ib0");
  EXPECT_EQ(node.nics[0].kind, NicKind::kInfiniBand);
  EXPECT_EQ(pairedNics(node)[gpu], "mlx5_0");
}

TEST(TopoFixture, DescriptionsSurviveSerialization) {
  for (const char* name : {"dell-xe8640-h100x4-mlx5x4-nvlink.ipa20.xml",
                           "ibm-power8-p100x4-nvlink.hwloc-power8gpudistances.xml"}) {
    NodeTopology node = load(name);
    std::vector<uint8_t> bytes = serialize(node);
    NodeTopology back = deserialize(bytes.data(), bytes.size());
    EXPECT_EQ(serialize(back), bytes) << name;
    EXPECT_EQ(back.gpus.size(), node.gpus.size());
    EXPECT_EQ(back.nics.size(), node.nics.size());
    EXPECT_EQ(back.nvlinkGBps, node.nvlinkGBps);
    EXPECT_EQ(pairGpusWithNics(back), pairGpusWithNics(node));
    // Truncations are refused, never read past the end.
    for (size_t cut : {size_t{0}, size_t{5}, bytes.size() / 2, bytes.size() - 1})
      EXPECT_THROW(deserialize(bytes.data(), cut), InvalidArgument) << cut;
  }
}

}  // namespace
}  // namespace loom::topo
