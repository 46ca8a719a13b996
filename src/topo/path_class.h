// Path classes: how two devices of a node, or two ranks of a job, are connected, from best to
// worst, each with a nominal bandwidth and latency for the tuner's cost model.
//
// Nominal numbers (GB/s, us) and where they come from. They are starting points for the cost
// model, to be replaced by calibration from measured runs; what matters most is their order.
//   same process   20  0.2  one core's memcpy within one address space (no process crossing);
//                           latency of a flag handoff between two cores
//   NVLink         *   0.6  bandwidth from hwloc's NVLinkBandwidth matrix for the pair; 20 GB/s
//                           per link when a class is forced without a matrix (NCCL topo.h
//                           SM70-SM90_NVLINK_BW 20-20.6); latency: NCCL tuning.cc NVLink base
//   PCIe switch    12  1.0  NCCL PCI_BW (Gen3 x16 effective), or the slower of the two devices'
//                           PCIe links as hwloc reports them; latency: NCCL PCI base latency
//   host bridge    12  1.5  as a switch, plus the root complex hop (NCCL PHB)
//   same NUMA      10  0.5  shared memory between processes on one NUMA node (memcpy through
//                           L3/DRAM; loom's shm transport measures about this on current Xeons)
//   same socket     8  0.7  across sub-NUMA clusters of one package (SNC), an on-die mesh hop
//   cross-socket    6  1.2  NCCL QPI_BW 6 (UPI/xGMI effective for PCIe peer traffic)
//   network        12  5.0  NCCL NET_BW 12 (100 Gb/s) and NCCL's network base latency; for a
//                           pair of ranks, the slower NIC's PCIe link if hwloc knows it, and
//                           1.25 GB/s (10 GbE) when neither side has an RDMA NIC
#pragma once

#include <string>
#include <vector>

#include "src/topo/node_topology.h"

namespace loom::topo {

// Best to worst; comparisons (<) mean "closer".
enum class PathClass : uint8_t {
  kSameProcess = 0,
  kNvlink,
  kPcieSwitch,
  kHostBridge,
  kSameNuma,
  kSameSocket,
  kCrossSocket,
  kNetwork,
};
constexpr int kPathClassCount = 8;

const char* pathClassName(PathClass c);   // "PCIe switch"
const char* pathClassLabel(PathClass c);  // short, for matrices: "PIX"
// Throws InvalidArgument for an unknown name (accepts the label or the name).
PathClass parsePathClass(const std::string& text);

struct Link {
  PathClass cls = PathClass::kNetwork;
  double bandwidthGBps = 0;
  double latencyUs = 0;
};

// The nominal link of a class (the table above); NVLink gets the per-link default.
Link nominalLink(PathClass c);

// What a device's position means for paths: a GPU, a NIC or a CPU package of one node.
struct Endpoint {
  enum Kind { kGpu, kNic, kCpu } kind;
  int index;  // into gpus, nics or packages
};
std::string endpointName(const NodeTopology& node, Endpoint e);  // "GPU0", "mlx5_0", "CPU1"

// The path between two endpoints of one node (equal endpoints: same process).
Link devicePath(const NodeTopology& node, Endpoint a, Endpoint b);

// GPU -> NIC the GPU should use (index into nics; -1 when the node has no NIC). RDMA NICs are
// preferred over plain netdevs; each GPU takes its closest NIC (same PCIe switch first), and
// among equally close NICs the one fewest GPUs use yet, so GPUs spread over NICs.
std::vector<int> pairGpusWithNics(const NodeTopology& node);

// What the tuner needs to know about one node.
struct NodeLinkSummary {
  int gpus = 0;
  PathClass gpuClass = PathClass::kSameProcess;  // of the slowest GPU pair
  double gpuBandwidthGBps = 0;                   // slowest GPU pair; 0 with < 2 GPUs
  double gpuLatencyUs = 0;
  int nics = 0;                 // RDMA NICs if any, else plain ones
  double nicBandwidthGBps = 0;  // per NIC (the slowest)
  int cores = 0;
  int numaNodes = 0;
  int packages = 0;
};
NodeLinkSummary summarizeNode(const NodeTopology& node);

// The bandwidth a NIC offers the network: its PCIe link when known, else NCCL's NET_BW for
// RDMA NICs and 10 GbE for plain ones.
double nicBandwidthGBps(const Nic& nic);

}  // namespace loom::topo
