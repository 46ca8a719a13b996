// NCCL's topology XML: the Azure NDv2/NDv4/NDv5 files and NCCL-dump-style variants (see
// fixtures/README.md) load into the same NodeTopology objects as hwloc discovery, with the
// GPU, NIC and NVLink counts read from the files by hand.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "src/base/error.h"
#include "src/topo/discovery.h"
#include "src/topo/path_class.h"
#include "src/topo/xml_tree.h"

namespace loom::topo {
namespace {

std::string fixturePath(const std::string& name) {
  return std::string(LOOM_TOPO_FIXTURES) + "/" + name;
}
NodeTopology load(const std::string& name) { return loadXmlFile(fixturePath(name))->node(); }

std::vector<std::string> gpuBusIds(const NodeTopology& node) {
  std::vector<std::string> ids;
  for (const Gpu& g : node.gpus) ids.push_back(g.where.busId);
  return ids;
}

std::vector<std::string> pairedNicBusIds(const NodeTopology& node) {
  std::vector<std::string> ids;
  for (int nic : pairGpusWithNics(node)) ids.push_back(nic >= 0 ? node.nics[nic].where.busId : "-");
  return ids;
}

PathClass gpuPair(const NodeTopology& node, int a, int b) {
  return devicePath(node, {Endpoint::kGpu, a}, {Endpoint::kGpu, b}).cls;
}

int totalNvlinks(const NodeTopology& node) {
  int links = 0;
  for (const Gpu& g : node.gpus) links += g.nvlinks;
  return links;
}

TEST(NcclXml, AzureNdv2PublishedFile) {
  NodeTopology node = load("azure-ndv2-topo.xml");
  EXPECT_EQ(node.format, "nccl");
  ASSERT_EQ(node.numaNodes.size(), 2u);
  EXPECT_EQ(node.numaNodes[0].cpuset, "0-19");
  EXPECT_EQ(node.numaNodes[1].cpuset, "20-39");
  EXPECT_EQ(node.pus, 40);
  ASSERT_EQ(node.gpus.size(), 8u);
  EXPECT_EQ(gpuBusIds(node), (std::vector<std::string>{
                                 "0001:00:00.0", "0002:00:00.0", "0003:00:00.0", "0004:00:00.0",
                                 "0005:00:00.0", "0006:00:00.0", "0007:00:00.0", "0008:00:00.0"}));
  for (int g = 0; g < 8; ++g) {
    EXPECT_EQ(node.gpus[g].cudaIndex, g);  // no <gpu dev>: PCI order
    EXPECT_EQ(node.gpus[g].where.numa, g / 4);
    EXPECT_NEAR(node.gpus[g].where.pciLinkGBps, 31.5, 0.01);  // 16 GT/s x 16
  }
  EXPECT_EQ(totalNvlinks(node), 0);  // the published file carries the PCI tree only
  EXPECT_TRUE(node.nvlinkGBps.empty());
  ASSERT_EQ(node.nics.size(), 1u);
  EXPECT_EQ(node.nics[0].name, "0101:00:00.0");  // no <net>: named by its PCI function
  EXPECT_EQ(node.nics[0].kind, NicKind::kInfiniBand);
  // Devices hang straight off their CPU: host bridge inside a NUMA node, SYS across.
  EXPECT_EQ(gpuPair(node, 0, 3), PathClass::kHostBridge);
  EXPECT_EQ(gpuPair(node, 3, 4), PathClass::kCrossSocket);
  EXPECT_EQ(pairedNicBusIds(node), std::vector<std::string>(8, "0101:00:00.0"));
}

TEST(NcclXml, AzureNdv4PublishedFileGpusShareSwitchesWithNics) {
  NodeTopology node = load("azure-ndv4-topo.xml");
  ASSERT_EQ(node.numaNodes.size(), 4u);
  EXPECT_EQ(node.pus, 96);
  ASSERT_EQ(node.gpus.size(), 8u);
  EXPECT_EQ(gpuBusIds(node), (std::vector<std::string>{
                                 "0001:00:00.0", "0002:00:00.0", "0003:00:00.0", "0004:00:00.0",
                                 "000b:00:00.0", "000c:00:00.0", "000d:00:00.0", "000e:00:00.0"}));
  EXPECT_EQ(node.numaNodes[node.gpus[0].where.numa].osIndex, 1);
  EXPECT_EQ(node.numaNodes[node.gpus[2].where.numa].osIndex, 0);
  EXPECT_EQ(node.numaNodes[node.gpus[4].where.numa].osIndex, 3);
  EXPECT_EQ(node.numaNodes[node.gpus[6].where.numa].osIndex, 2);
  EXPECT_EQ(node.gpus[0].where.pciChain,
            (std::vector<std::string>{"cpu numaid=1", "ffff:ff:02.0"}));
  EXPECT_EQ(totalNvlinks(node), 0);
  ASSERT_EQ(node.nics.size(), 8u);
  for (const Nic& nic : node.nics) EXPECT_EQ(nic.kind, NicKind::kInfiniBand) << nic.name;
  // Two GPUs and two NICs per virtual switch: each GPU takes a NIC of its switch, one each.
  EXPECT_EQ(gpuPair(node, 0, 1), PathClass::kPcieSwitch);
  EXPECT_EQ(gpuPair(node, 1, 2), PathClass::kCrossSocket);
  EXPECT_EQ(
      pairedNicBusIds(node),
      (std::vector<std::string>{"0101:00:00.0", "0102:00:00.0", "0103:00:00.0", "0104:00:00.0",
                                "0105:00:00.0", "0106:00:00.0", "0107:00:00.0", "0108:00:00.0"}));
  EXPECT_EQ(summarizeNode(node).nics, 8);
}

TEST(NcclXml, AzureNdv5PublishedFileOneNicPerGpuSwitch) {
  NodeTopology node = load("azure-ndv5-topo.xml");
  ASSERT_EQ(node.numaNodes.size(), 2u);
  EXPECT_EQ(node.numaNodes[0].cpuset, "48-95");
  EXPECT_EQ(node.numaNodes[1].cpuset, "0-47");
  ASSERT_EQ(node.gpus.size(), 8u);
  ASSERT_EQ(node.nics.size(), 8u);
  EXPECT_NEAR(node.gpus[0].where.pciLinkGBps, 63.0, 0.02);  // "32.0 GT/s PCIe" x 16
  EXPECT_EQ(gpuPair(node, 0, 1), PathClass::kHostBridge);   // two switches of one CPU
  EXPECT_EQ(gpuPair(node, 3, 4), PathClass::kCrossSocket);
  // 0008:00:00.0 (GPU3) sits with 0104:00:00.0 under ffff:ff:04.0.
  EXPECT_EQ(node.gpus[3].where.busId, "0008:00:00.0");
  std::vector<std::string> paired = pairedNicBusIds(node);
  EXPECT_EQ(paired[3], "0104:00:00.0");
  EXPECT_EQ(paired[4], "0105:00:00.0");
  for (size_t g = 0; g < paired.size(); ++g) {
    int nic = pairGpusWithNics(node)[g];
    EXPECT_EQ(devicePath(node, {Endpoint::kGpu, static_cast<int>(g)}, {Endpoint::kNic, nic}).cls,
              PathClass::kPcieSwitch);
  }
  EXPECT_NEAR(nicBandwidthGBps(node.nics[0]), 63.0, 0.02);  // no port speed: its PCIe link
}

TEST(NcclXml, Ndv4DumpHasTwelveNvlinksPerA100ThroughNvswitch) {
  NodeTopology node = load("azure-ndv4-nccl-dump.xml");
  ASSERT_EQ(node.gpus.size(), 8u);
  EXPECT_TRUE(node.hasNvSwitch);
  EXPECT_EQ(totalNvlinks(node), 96);
  for (int g = 0; g < 8; ++g) {
    EXPECT_EQ(node.gpus[g].nvlinks, 12);
    EXPECT_EQ(node.gpus[g].sm, 80);
    EXPECT_EQ(node.gpus[g].cudaIndex, g);  // <gpu dev>
  }
  ASSERT_EQ(node.nvlinkGBps.size(), 64u);
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b) EXPECT_DOUBLE_EQ(node.nvlink(a, b), a == b ? 0.0 : 300.0);
  ASSERT_EQ(node.nics.size(), 8u);
  for (size_t n = 0; n < 8; ++n) {
    EXPECT_EQ(node.nics[n].name, "mlx5_ib" + std::to_string(n));
    EXPECT_EQ(node.nics[n].kind, NicKind::kInfiniBand);
    EXPECT_DOUBLE_EQ(node.nics[n].speedGBps, 25.0);  // HDR, 200000 Mbit/s
    EXPECT_DOUBLE_EQ(nicBandwidthGBps(node.nics[n]), 25.0);
  }
  Link link = devicePath(node, {Endpoint::kGpu, 0}, {Endpoint::kGpu, 7});
  EXPECT_EQ(link.cls, PathClass::kNvlink);
  EXPECT_DOUBLE_EQ(link.bandwidthGBps, 300.0);
  NodeLinkSummary s = summarizeNode(node);
  EXPECT_EQ(s.gpuClass, PathClass::kNvlink);
  EXPECT_DOUBLE_EQ(s.gpuBandwidthGBps, 300.0);
  EXPECT_EQ(s.nics, 8);
  EXPECT_DOUBLE_EQ(s.nicBandwidthGBps, 25.0);
  // The GPU's nearest NIC is the one of its switch; the first of the two.
  EXPECT_EQ(node.nics[pairGpusWithNics(node)[2]].name, "mlx5_ib2");
}

TEST(NcclXml, Ndv2DumpHasTheV100HybridCubeMesh) {
  NodeTopology node = load("azure-ndv2-nccl-dump.xml");
  ASSERT_EQ(node.gpus.size(), 8u);
  EXPECT_FALSE(node.hasNvSwitch);
  EXPECT_EQ(totalNvlinks(node), 48);  // 6 per V100
  // Links per pair (DGX-1V): doubled links carry 50 GB/s, single ones 25.
  const int mesh[8][8] = {{0, 1, 1, 2, 2, 0, 0, 0}, {1, 0, 2, 1, 0, 2, 0, 0},
                          {1, 2, 0, 2, 0, 0, 1, 0}, {2, 1, 2, 0, 0, 0, 0, 1},
                          {2, 0, 0, 0, 0, 1, 1, 2}, {0, 2, 0, 0, 1, 0, 2, 1},
                          {0, 0, 1, 0, 1, 2, 0, 2}, {0, 0, 0, 1, 2, 1, 2, 0}};
  for (int a = 0; a < 8; ++a) {
    EXPECT_EQ(node.gpus[a].nvlinks, 6);
    for (int b = 0; b < 8; ++b) {
      EXPECT_DOUBLE_EQ(node.nvlink(a, b), 25.0 * mesh[a][b]) << a << "-" << b;
      if (a == b) continue;
      PathClass expected = mesh[a][b]         ? PathClass::kNvlink
                           : (a / 4 == b / 4) ? PathClass::kHostBridge
                                              : PathClass::kCrossSocket;
      EXPECT_EQ(gpuPair(node, a, b), expected) << a << "-" << b;
    }
  }
  ASSERT_EQ(node.nics.size(), 1u);
  EXPECT_EQ(node.nics[0].name, "mlx5_0");
  EXPECT_DOUBLE_EQ(node.nics[0].speedGBps, 12.5);  // EDR, 100000 Mbit/s
}

TEST(NcclXml, SerializesAndExportsLikeHwlocTopologies) {
  auto loaded = loadXmlFile(fixturePath("azure-ndv4-nccl-dump.xml"));
  std::vector<uint8_t> bytes = serialize(loaded->node());
  NodeTopology copy = deserialize(bytes.data(), bytes.size());
  EXPECT_EQ(copy.format, "nccl");
  EXPECT_EQ(copy.gpus[5].nvlinks, 12);
  EXPECT_EQ(copy.gpus[5].sm, 80);
  EXPECT_DOUBLE_EQ(copy.nics[3].speedGBps, 25.0);
  // The export is the file's own text, which loads back to the same node.
  auto again = loadXmlText(loaded->exportXml(), "export");
  EXPECT_EQ(again->node().gpus.size(), 8u);
  EXPECT_DOUBLE_EQ(again->node().nvlink(1, 6), 300.0);
}

TEST(NcclXml, MinimalFilesAndNicsWithoutPciAddress) {
  // A declaration, comments, single quotes and a NIC NCCL placed on the CPU.
  auto loaded = loadXmlText(
      "<?xml version='1.0'?>\n<!-- a comment -->\n<system version='2'>\n"
      "  <cpu numaid='0' affinity='f'>\n"
      "    <nic><net name='eth0' dev='0' speed='10000'/></nic>\n"
      "    <pci busid='0000:3B:00.0' class='0x030200'><gpu dev='0' sm='90' rank='0' "
      "gdr='0'/></pci>\n"
      "    <c2c count='1' bw='1'/>\n"
      "  </cpu>\n</system>\n",
      "minimal");
  const NodeTopology& node = loaded->node();
  EXPECT_EQ(node.numaNodes[0].cpuset, "0-3");
  ASSERT_EQ(node.gpus.size(), 1u);
  EXPECT_EQ(node.gpus[0].where.busId, "0000:3b:00.0");  // bus ids in lower case
  EXPECT_EQ(node.gpus[0].sm, 90);
  ASSERT_EQ(node.nics.size(), 1u);
  EXPECT_EQ(node.nics[0].name, "eth0");
  EXPECT_EQ(node.nics[0].kind, NicKind::kEthernet);
  EXPECT_DOUBLE_EQ(nicBandwidthGBps(node.nics[0]), 1.25);
}

TEST(XmlTree, ElementsAttributesEntitiesAndLines) {
  auto root = parseXml(
      "\xEF\xBB\xBF<?xml version=\"1.0\"?>\n<a x=\"1 &amp; 2\" y='&lt;&#65;&#x42;&gt;'>\n"
      "  <!-- c - d -->\n  <b/>\n  <c z = \"&quot;&apos;\"></c >\n</a>\n<!-- after -->\n",
      "t.xml");
  EXPECT_EQ(root->name, "a");
  EXPECT_EQ(root->line, 2);
  ASSERT_NE(root->attr("x"), nullptr);
  EXPECT_EQ(*root->attr("x"), "1 & 2");
  EXPECT_EQ(*root->attr("y"), "<AB>");
  EXPECT_EQ(root->attr("w"), nullptr);
  ASSERT_EQ(root->children.size(), 2u);
  EXPECT_EQ(root->children[0]->name, "b");
  EXPECT_EQ(root->children[0]->line, 4);
  EXPECT_EQ(*root->children[1]->attr("z"), "\"'");
}

TEST(XmlTree, StrictAboutWhatTheFormatsDoNotUse) {
  auto error = [](const std::string& text) {
    try {
      parseXml(text, "t.xml");
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error("<a x=\"1\" x=\"2\"/>"),
            "topology file 't.xml' line 1: attribute 'x' appears twice in <a>");
  EXPECT_EQ(error("<a>\n<![CDATA[x]]></a>"),
            "topology file 't.xml' line 2: CDATA is not supported in this format");
  EXPECT_EQ(error("<a x=\"&nbsp;\"/>"), "topology file 't.xml' line 1: unknown entity &nbsp;");
  EXPECT_EQ(error("<a x=1/>"), "topology file 't.xml' line 1: expected a quoted attribute value");
  EXPECT_EQ(error("<a><!-- x -- y --></a>"), "topology file 't.xml' line 1: '--' inside a comment");
  EXPECT_EQ(error("\n\n"),
            "topology file 't.xml' line 3: no root element (the file holds no XML "
            "element)");
  EXPECT_EQ(error("<a/>\ntext"), "topology file 't.xml' line 2: text after the root element");
  std::string deep;
  for (int i = 0; i < 100; ++i) deep += "<a>";
  EXPECT_EQ(error(deep), "topology file 't.xml' line 1: elements nest deeper than 64");
}

TEST(XmlTree, RootNameTellsTheFormats) {
  EXPECT_EQ(xmlRootName("<?xml version=\"1.0\"?>\n<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n"
                        "<topology version=\"2.0\">"),
            "topology");
  EXPECT_EQ(xmlRootName("<!-- p4d <system> -->\n<system version=\"1\">"), "system");
  EXPECT_EQ(xmlRootName("no markup"), "");
}

}  // namespace
}  // namespace loom::topo
