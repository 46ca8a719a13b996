// Path classes: how two devices of a node, or two ranks of a job, are connected, from best to
// worst, each with a nominal bandwidth and latency for the tuner's cost model.
//
// Nominal numbers (GB/s, us) and where they come from. They are starting points for the cost
// model, to be replaced by calibration from measured runs; what matters most is their order.
//   same process   20  0.2  one core's memcpy within one address space (no process crossing);
//                           latency of a flag handoff between two cores
//   same GPU     1000  0.4  two ranks on one GPU: a device-to-device copy reads and writes each
//                           byte in HBM, so about half the memory bandwidth (A100 80GB 2.0 TB/s,
//                           H100 SXM 3.35 TB/s, NVIDIA datasheets; V100 0.9 TB/s is below it);
//                           latency: a flag seen through L2, under NVLink's
//   NVLink         *   0.6  bandwidth from the pair's NVLink matrix (hwloc's NVLinkBandwidth, or
//                           NCCL XML link counts x nvlinkLinkGBps); 20 GB/s when a class is
//                           forced without a matrix (NCCL topo.h SM70-SM90_NVLINK_BW 20-20.6);
//                           latency: NCCL tuning.cc NVLink base
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
  kSameGpu,  // two ranks on one GPU (threads or processes)
  kNvlink,
  kPcieSwitch,
  kHostBridge,
  kSameNuma,
  kSameSocket,
  kCrossSocket,
  kNetwork,
};
constexpr int kPathClassCount = 9;

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

// The bandwidth a NIC offers the network: its port speed when known (NCCL XML), bounded by its
// PCIe link when known; else the PCIe link; else NCCL's NET_BW for RDMA NICs and 10 GbE for
// plain ones.
double nicBandwidthGBps(const Nic& nic);

// One NVLink link's bandwidth per direction, GB/s, by the GPU's compute capability x 10: the
// datasheets' total NVLink bandwidth (both directions) / links / 2. The same unit as hwloc's
// NVLinkBandwidth (which reads NVML), so both sources give one matrix.
//   sm 60 (P100)  20      160 GB/s over 4 NVLink1 links
//   sm 70 (V100)  25      300 GB/s over 6 NVLink2 links
//   sm 80 (A100)  25      600 GB/s over 12 NVLink3 links
//   sm 86 (A40, RTX A6000 bridge)  14.0625   112.5 GB/s over 4 links
//   sm 90 (H100)  25      900 GB/s over 18 NVLink4 links
//   sm 100+ (B200) 50     1.8 TB/s over 18 NVLink5 links
double nvlinkLinkGBps(int sm);

// A PCIe link's bandwidth, GB/s, from its transfer rate (GT/s per lane) and lanes, after line
// coding (8b/10b up to 5 GT/s, 128b/130b from 8 GT/s; PCIe 3.0-5.0 specifications), as hwloc
// computes its linkspeed: 16 GT/s x 16 gives 31.5. 0 when either is unknown (<= 0).
double pcieLinkGBps(double gtPerSecond, int lanes);

}  // namespace loom::topo
