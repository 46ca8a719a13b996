// Path classes between the devices of one node, GPU-NIC pairing and the node summary.
#include "src/topo/path_class.h"

#include <algorithm>
#include <limits>

#include "src/base/error.h"

namespace loom::topo {
namespace {

struct ClassSpec {
  const char* name;
  const char* label;
  double bandwidthGBps;
  double latencyUs;
};

// Indexed by PathClass; the numbers are documented in path_class.h.
constexpr ClassSpec kClasses[kPathClassCount] = {
    {"same process", "PROC", 20.0, 0.2}, {"same GPU", "GPU", 1000.0, 0.4},
    {"NVLink", "NVL", 20.0, 0.6},        {"PCIe switch", "PIX", 12.0, 1.0},
    {"host bridge", "PHB", 12.0, 1.5},   {"same NUMA", "NUMA", 10.0, 0.5},
    {"same socket", "SOCK", 8.0, 0.7},   {"cross-socket", "SYS", 6.0, 1.2},
    {"network", "NET", 12.0, 5.0},
};

constexpr double kPlainEthernetGBps = 1.25;  // 10 GbE

const DeviceLocation* locationOf(const NodeTopology& node, Endpoint e) {
  if (e.kind == Endpoint::kGpu) return &node.gpus.at(e.index).where;
  if (e.kind == Endpoint::kNic) return &node.nics.at(e.index).where;
  return nullptr;
}

// Two PCI devices: where their bridge chains part.
PathClass pciClass(const DeviceLocation& a, const DeviceLocation& b) {
  size_t common = 0;
  while (common < a.pciChain.size() && common < b.pciChain.size() &&
         a.pciChain[common] == b.pciChain[common])
    ++common;
  if (common >= 2) return PathClass::kPcieSwitch;  // a bridge below the host bridge
  if (common == 1) return PathClass::kHostBridge;
  if (a.numa >= 0 && a.numa == b.numa) return PathClass::kSameNuma;
  if (a.package >= 0 && a.package == b.package) return PathClass::kSameSocket;
  return PathClass::kCrossSocket;
}

double pcieBandwidth(const DeviceLocation& a, const DeviceLocation& b, double nominal) {
  if (a.pciLinkGBps > 0 && b.pciLinkGBps > 0) return std::min(a.pciLinkGBps, b.pciLinkGBps);
  return nominal;
}

}  // namespace

const char* pathClassName(PathClass c) { return kClasses[static_cast<int>(c)].name; }
const char* pathClassLabel(PathClass c) { return kClasses[static_cast<int>(c)].label; }

PathClass parsePathClass(const std::string& text) {
  for (int i = 0; i < kPathClassCount; ++i)
    if (text == kClasses[i].name || text == kClasses[i].label) return static_cast<PathClass>(i);
  throw InvalidArgument(strCat("unknown path class '", text,
                               "'; use one of PROC, GPU, NVL, PIX, PHB, NUMA, SOCK, SYS, NET"));
}

Link nominalLink(PathClass c) {
  const ClassSpec& spec = kClasses[static_cast<int>(c)];
  return Link{c, spec.bandwidthGBps, spec.latencyUs};
}

std::string endpointName(const NodeTopology& node, Endpoint e) {
  switch (e.kind) {
    case Endpoint::kGpu:
      return strCat("GPU", e.index);
    case Endpoint::kNic:
      return node.nics.at(e.index).name;
    case Endpoint::kCpu:
      return strCat("CPU", e.index);
  }
  return "?";
}

Link devicePath(const NodeTopology& node, Endpoint a, Endpoint b) {
  if (a.kind == b.kind && a.index == b.index) return nominalLink(PathClass::kSameProcess);
  if (a.kind == Endpoint::kGpu && b.kind == Endpoint::kGpu) {
    double nvlink = node.nvlink(a.index, b.index);
    if (nvlink > 0)
      return Link{PathClass::kNvlink, nvlink, nominalLink(PathClass::kNvlink).latencyUs};
  }
  if (a.kind == Endpoint::kCpu || b.kind == Endpoint::kCpu) {
    if (a.kind == Endpoint::kCpu && b.kind == Endpoint::kCpu)
      return nominalLink(PathClass::kCrossSocket);  // two different packages
    Endpoint cpu = a.kind == Endpoint::kCpu ? a : b;
    Endpoint dev = a.kind == Endpoint::kCpu ? b : a;
    if (dev.kind == Endpoint::kGpu && node.gpus.at(dev.index).cpuNvlinkGBps > 0 &&
        node.gpus[dev.index].where.package == cpu.index)
      return Link{PathClass::kNvlink, node.gpus[dev.index].cpuNvlinkGBps,
                  nominalLink(PathClass::kNvlink).latencyUs};
    // A device hangs off one of its package's host bridges.
    const DeviceLocation* where = locationOf(node, dev);
    return nominalLink(where->package == cpu.index ? PathClass::kHostBridge
                                                   : PathClass::kCrossSocket);
  }
  const DeviceLocation& da = *locationOf(node, a);
  const DeviceLocation& db = *locationOf(node, b);
  PathClass cls = pciClass(da, db);
  Link link = nominalLink(cls);
  if (cls == PathClass::kPcieSwitch || cls == PathClass::kHostBridge)
    link.bandwidthGBps = pcieBandwidth(da, db, link.bandwidthGBps);
  return link;
}

double nicBandwidthGBps(const Nic& nic) {
  if (nic.speedGBps > 0)
    return nic.where.pciLinkGBps > 0 ? std::min(nic.speedGBps, nic.where.pciLinkGBps)
                                     : nic.speedGBps;
  if (!nic.rdma())
    return nic.where.pciLinkGBps > 0 ? std::min(nic.where.pciLinkGBps, kPlainEthernetGBps)
                                     : kPlainEthernetGBps;
  return nic.where.pciLinkGBps > 0 ? nic.where.pciLinkGBps
                                   : nominalLink(PathClass::kNetwork).bandwidthGBps;
}

double nvlinkLinkGBps(int sm) {
  if (sm >= 100) return 50.0;
  if (sm == 86) return 14.0625;
  if (sm >= 70) return 25.0;
  return 20.0;
}

double pcieLinkGBps(double gtPerSecond, int lanes) {
  if (gtPerSecond <= 0 || lanes <= 0) return 0;
  double coding = gtPerSecond < 8.0 ? 8.0 / 10.0 : 128.0 / 130.0;
  return gtPerSecond * coding * lanes / 8.0;
}

std::vector<int> pairGpusWithNics(const NodeTopology& node) {
  bool anyRdma =
      std::any_of(node.nics.begin(), node.nics.end(), [](const Nic& n) { return n.rdma(); });
  std::vector<int> candidates;
  for (size_t i = 0; i < node.nics.size(); ++i)
    if (node.nics[i].rdma() || !anyRdma) candidates.push_back(static_cast<int>(i));
  std::vector<int> pairing(node.gpus.size(), -1);
  std::vector<int> users(node.nics.size(), 0);
  for (size_t g = 0; g < node.gpus.size(); ++g) {
    int best = -1;
    for (int n : candidates) {
      if (best < 0) {
        best = n;
        continue;
      }
      Endpoint gpu{Endpoint::kGpu, static_cast<int>(g)};
      PathClass cn = devicePath(node, gpu, {Endpoint::kNic, n}).cls;
      PathClass cb = devicePath(node, gpu, {Endpoint::kNic, best}).cls;
      if (cn < cb || (cn == cb && users[n] < users[best])) best = n;
    }
    pairing[g] = best;
    if (best >= 0) ++users[best];
  }
  return pairing;
}

NodeLinkSummary summarizeNode(const NodeTopology& node) {
  NodeLinkSummary s;
  s.gpus = static_cast<int>(node.gpus.size());
  s.cores = node.cores;
  s.numaNodes = static_cast<int>(node.numaNodes.size());
  s.packages = static_cast<int>(node.packages.size());
  double slowest = std::numeric_limits<double>::infinity();
  for (int a = 0; a < s.gpus; ++a) {
    for (int b = a + 1; b < s.gpus; ++b) {
      Link link = devicePath(node, {Endpoint::kGpu, a}, {Endpoint::kGpu, b});
      if (link.bandwidthGBps < slowest ||
          (link.bandwidthGBps == slowest && link.latencyUs > s.gpuLatencyUs)) {
        slowest = link.bandwidthGBps;
        s.gpuClass = link.cls;
        s.gpuBandwidthGBps = link.bandwidthGBps;
        s.gpuLatencyUs = link.latencyUs;
      }
    }
  }
  bool anyRdma =
      std::any_of(node.nics.begin(), node.nics.end(), [](const Nic& n) { return n.rdma(); });
  double nicSlowest = std::numeric_limits<double>::infinity();
  for (const Nic& nic : node.nics) {
    if (anyRdma && !nic.rdma()) continue;
    ++s.nics;
    nicSlowest = std::min(nicSlowest, nicBandwidthGBps(nic));
  }
  s.nicBandwidthGBps = s.nics > 0 ? nicSlowest : 0;
  return s;
}

}  // namespace loom::topo
