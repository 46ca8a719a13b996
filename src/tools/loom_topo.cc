// loom-topo: what loom sees of a node: CPU sockets, NUMA nodes, GPUs and NICs with their local
// CPUs, the path class between every pair (like `nvidia-smi topo -m`), the GPU-NIC pairing
// loom uses, and the summary the tuner reads. This machine by default, or a topology file (hwloc
// or NCCL XML).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "src/base/error.h"
#include "src/topo/discovery.h"
#include "src/topo/path_class.h"
#include "src/topo/ring_search.h"
#include "src/topo/system.h"
#include "src/tune/decision_table.h"
#include "src/tune/gpu_model.h"
#include "src/tune/node_model.h"

namespace {

using loom::strCat;
using namespace loom::topo;

struct Options {
  std::string xml;  // empty: this machine
  bool help = false;
  bool tune = false;
  std::vector<int> nodes{1, 2, 8, 64, 1024};
  int cpuRanks = 2;
  int ranksPerGpu = 1;
};

std::vector<int> parseNodeList(const char* text) {
  std::vector<int> nodes;
  std::string item;
  for (const char* p = text;; ++p) {
    if (*p == ',' || *p == '\0') {
      char* end = nullptr;
      const long n = std::strtol(item.c_str(), &end, 10);
      LOOM_ENFORCE(!item.empty() && *end == '\0' && n >= 1 && n <= 1000000, InvalidArgument,
                   "--nodes wants a comma list of node counts from 1, e.g. 2,8,1024; got '", text,
                   "'");
      nodes.push_back(static_cast<int>(n));
      item.clear();
      if (*p == '\0') break;
    } else {
      item += *p;
    }
  }
  return nodes;
}

// One row per option; add options here (the parser and --help both read this table).
struct OptionSpec {
  const char* name;
  const char* argument;  // nullptr for a flag
  const char* help;
  std::function<void(Options&, const char*)> apply;
};

const std::vector<OptionSpec>& optionTable() {
  static const std::vector<OptionSpec> table = {
      {"--xml", "FILE",
       "read a topology file instead of this machine: hwloc XML (lstopo --of xml) or NCCL's "
       "topology XML (NCCL_TOPO_FILE, NCCL_TOPO_DUMP_FILE), told apart by the root element",
       [](Options& o, const char* v) { o.xml = v; }},
      {"--tune", nullptr,
       "print the tuner's AllReduce decisions (size -> algorithm, protocol, channels, predicted "
       "time and busbw) for clusters of this node",
       [](Options& o, const char*) { o.tune = true; }},
      {"--nodes", "LIST", "node counts for --tune (default 1,2,8,64,1024)",
       [](Options& o, const char* v) { o.nodes = parseNodeList(v); }},
      {"--cpu-ranks", "N", "ranks per node for --tune on a node without GPUs (default 2)",
       [](Options& o, const char* v) {
         o.cpuRanks = std::atoi(v);
         LOOM_ENFORCE(o.cpuRanks >= 1, InvalidArgument, "--cpu-ranks wants a number from 1");
       }},
      {"--ranks-per-gpu", "N", "ranks sharing each GPU, for the ring and --tune (default 1)",
       [](Options& o, const char* v) {
         o.ranksPerGpu = std::atoi(v);
         LOOM_ENFORCE(o.ranksPerGpu >= 1 && o.ranksPerGpu <= 64, InvalidArgument,
                      "--ranks-per-gpu wants a number from 1 to 64");
       }},
      {"--help", nullptr, "print this help", [](Options& o, const char*) { o.help = true; }},
  };
  return table;
}

void printUsage(FILE* out) {
  std::fprintf(out, "usage: loom-topo [options]\n");
  for (const OptionSpec& o : optionTable())
    std::fprintf(out, "  %-18s %s\n",
                 strCat(o.name, o.argument ? " " : "", o.argument ? o.argument : "").c_str(),
                 o.help);
}

Options parseArgs(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const OptionSpec* spec = nullptr;
    for (const OptionSpec& o : optionTable())
      if (std::strcmp(argv[i], o.name) == 0) spec = &o;
    LOOM_ENFORCE(spec != nullptr, InvalidArgument, "unknown option '", argv[i], "'; see --help");
    const char* value = nullptr;
    if (spec->argument) {
      LOOM_ENFORCE(i + 1 < argc, InvalidArgument, spec->name, " needs ", spec->argument);
      value = argv[++i];
    }
    spec->apply(options, value);
  }
  return options;
}

std::string numaName(const NodeTopology& node, int numa) {
  return numa >= 0 ? std::to_string(node.numaNodes[numa].osIndex) : "?";
}

// "hostbridge 0000:[4b-4e] > 0000:4a:00.0 > 0000:4c:01.0": the bridges above a device.
void printPciChain(const DeviceLocation& where) {
  std::string chain;
  for (const std::string& hop : where.pciChain) chain += (chain.empty() ? "" : " > ") + hop;
  std::printf("        via %s\n", chain.empty() ? "(no bridge)" : chain.c_str());
}

void printDevices(const NodeTopology& node) {
  std::printf("CPU sockets:\n");
  for (size_t p = 0; p < node.packages.size(); ++p) {
    std::string numas;
    for (const NumaNode& n : node.numaNodes)
      if (n.package == static_cast<int>(p)) numas += strCat(numas.empty() ? "" : ",", n.osIndex);
    std::printf("  CPU%zu  %d cores  cpus %s  NUMA %s\n", p, node.packages[p].cores,
                node.packages[p].cpuset.c_str(), numas.c_str());
  }
  std::printf("NUMA nodes:\n");
  for (const NumaNode& n : node.numaNodes)
    std::printf("  NUMA %d  socket CPU%d  cpus %s  %.0f GiB\n", n.osIndex, n.package,
                n.cpuset.c_str(), static_cast<double>(n.memoryBytes) / (1ull << 30));
  std::printf("GPUs:\n");
  if (node.gpus.empty()) std::printf("  none\n");
  for (size_t g = 0; g < node.gpus.size(); ++g) {
    const Gpu& gpu = node.gpus[g];
    std::string names = gpu.cudaName + (gpu.nvmlName.empty() ? "" : " " + gpu.nvmlName);
    std::printf("  GPU%zu  %s  [%04x:%04x]  cuda %d  %s  NUMA %s  cpus %s  PCIe %.1f GB/s", g,
                gpu.where.busId.c_str(), gpu.where.vendorId, gpu.where.deviceId, gpu.cudaIndex,
                names.empty() ? "-" : names.c_str(), numaName(node, gpu.where.numa).c_str(),
                gpu.where.cpuset.c_str(), gpu.where.pciLinkGBps);
    if (gpu.sm > 0) std::printf("  sm %d", gpu.sm);
    if (gpu.nvlinks > 0) std::printf("  %d NVLinks", gpu.nvlinks);
    std::printf("\n");
    printPciChain(gpu.where);
  }
  std::printf("NICs:\n");
  if (node.nics.empty()) std::printf("  none\n");
  for (const Nic& nic : node.nics) {
    std::printf("  %-10s %s  [%04x:%04x]  %-10s netdev %s  NUMA %s  cpus %s  PCIe %.1f GB/s",
                nic.name.c_str(), nic.where.busId.c_str(), nic.where.vendorId, nic.where.deviceId,
                nicKindName(nic.kind), nic.netdev.empty() ? "-" : nic.netdev.c_str(),
                numaName(node, nic.where.numa).c_str(), nic.where.cpuset.c_str(),
                nic.where.pciLinkGBps);
    if (nic.speedGBps > 0) std::printf("  port %.1f GB/s", nic.speedGBps);
    std::printf("\n");
    printPciChain(nic.where);
  }
}

std::string cellLabel(const Link& link) {
  if (link.cls == PathClass::kSameProcess) return "X";
  if (link.cls == PathClass::kNvlink)
    return strCat("NV", static_cast<int>(link.bandwidthGBps + 0.5));
  return pathClassLabel(link.cls);
}

void printMatrix(const NodeTopology& node) {
  std::vector<Endpoint> ends;
  for (size_t g = 0; g < node.gpus.size(); ++g)
    ends.push_back({Endpoint::kGpu, static_cast<int>(g)});
  for (size_t n = 0; n < node.nics.size(); ++n)
    ends.push_back({Endpoint::kNic, static_cast<int>(n)});
  for (size_t p = 0; p < node.packages.size(); ++p)
    ends.push_back({Endpoint::kCpu, static_cast<int>(p)});
  std::vector<std::string> names;
  std::vector<std::vector<std::string>> cells(ends.size());
  for (size_t a = 0; a < ends.size(); ++a) {
    names.push_back(endpointName(node, ends[a]));
    for (size_t b = 0; b < ends.size(); ++b)
      cells[a].push_back(cellLabel(devicePath(node, ends[a], ends[b])));
  }
  std::printf("\nPath classes:\n%s", formatMatrix(names, cells).c_str());
  std::printf("\nLegend:\n  X      self\n");
  std::printf("  NV#    NVLink, # = GB/s between the pair (%s%s)\n",
              node.format == "nccl" ? "NVLink links x per-link rate" : "hwloc NVLinkBandwidth",
              node.hasNvSwitch ? ", through NVSwitch" : "");
  for (int c = static_cast<int>(PathClass::kPcieSwitch); c < kPathClassCount; ++c) {
    Link l = nominalLink(static_cast<PathClass>(c));
    std::printf("  %-6s %-13s nominal %5.1f GB/s, %.1f us\n", pathClassLabel(l.cls),
                pathClassName(l.cls), l.bandwidthGBps, l.latencyUs);
  }
  std::printf("  (PIX/PHB between two devices use the slower PCIe link when hwloc reports it)\n");
}

void printPairing(const NodeTopology& node) {
  std::printf("\nGPU-NIC pairing:\n");
  std::vector<int> pairing = pairGpusWithNics(node);
  if (pairing.empty()) std::printf("  no GPUs\n");
  for (size_t g = 0; g < pairing.size(); ++g) {
    if (pairing[g] < 0) {
      std::printf("  GPU%zu -> none\n", g);
      continue;
    }
    Link link =
        devicePath(node, {Endpoint::kGpu, static_cast<int>(g)}, {Endpoint::kNic, pairing[g]});
    std::printf("  GPU%zu -> %s (%s)\n", g, node.nics[pairing[g]].name.c_str(),
                pathClassLabel(link.cls));
  }
}

// The ring the topology search finds for this node's GPUs (ranksPerGpu ranks on each), its
// slowest hop and the channels that fill it.
void printRing(const NodeTopology& node, int ranksPerGpu) {
  if (node.gpus.empty()) return;
  std::vector<RankDescription> ranks;
  for (size_t g = 0; g < node.gpus.size(); ++g) {
    for (int k = 0; k < ranksPerGpu; ++k) {
      RankDescription d;
      d.hostHash = 1;
      d.pid = static_cast<int32_t>(ranks.size() + 1);
      d.gpu = static_cast<int32_t>(g);
      d.numa = node.gpus[g].where.numa;
      d.node = node;
      ranks.push_back(std::move(d));
    }
  }
  System system(ranks);
  std::vector<int> order = searchRing(system);
  std::string ring;
  for (int r : order) ring += strCat(" GPU", system.rank(r).gpu);
  Link hop = slowestIntraNodeHop(system, order);
  std::printf("\nRing (%d rank(s) per GPU):%s\n  slowest hop %s %.1f GB/s; %d channel(s) fill it\n",
              ranksPerGpu, ring.c_str(), pathClassLabel(hop.cls), hop.bandwidthGBps,
              loom::tune::channelsToFill(hop));
}

void printSummary(const NodeTopology& node) {
  NodeLinkSummary s = summarizeNode(node);
  std::printf(
      "\nNode summary: %d GPU(s), slowest GPU pair %s %.1f GB/s %.1f us; %d NIC(s) at "
      "%.1f GB/s each; %d cores, %d NUMA node(s), %d socket(s)\n",
      s.gpus, s.gpus > 1 ? pathClassLabel(s.gpuClass) : "-", s.gpuBandwidthGBps, s.gpuLatencyUs,
      s.nics, s.nicBandwidthGBps, s.cores, s.numaNodes, s.packages);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Options options = parseArgs(argc, argv);
    if (options.help) {
      printUsage(stdout);
      return 0;
    }
    auto loaded = options.xml.empty() ? discoverThisMachine() : loadXmlFile(options.xml);
    const NodeTopology& node = loaded->node();
    std::printf(
        "loom-topo: %s (host '%s'): %zu socket(s), %zu NUMA node(s), %d cores, %d PUs, "
        "%zu GPU(s), %zu NIC(s)\n\n",
        node.source.c_str(), node.hostName.c_str(), node.packages.size(), node.numaNodes.size(),
        node.cores, node.pus, node.gpus.size(), node.nics.size());
    if (options.tune) {
      printSummary(node);
      for (int nodes : options.nodes) {
        std::printf("\n");
        std::fflush(stdout);
        loom::tune::printDecisionTable(
            loom::tune::modelForNode(node, nodes, options.cpuRanks, options.ranksPerGpu),
            std::cout);
        std::cout.flush();
      }
      return 0;
    }
    printDevices(node);
    printMatrix(node);
    printPairing(node);
    printRing(node, options.ranksPerGpu);
    printSummary(node);
    return 0;
  } catch (const loom::Error& e) {
    std::fprintf(stderr, "loom-topo: %s\n", e.what());
    return 2;
  }
}
