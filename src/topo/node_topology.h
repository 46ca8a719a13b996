// What one node (host) looks like to loom: CPU packages, NUMA nodes, NVIDIA GPUs and NICs with
// the PCI paths that connect them, and the NVLink bandwidth between GPUs. A plain struct, so
// that it can be built from hwloc (discovery.h) or by hand in tests, and serialized to bytes
// that ranks exchange over the bootstrap at init.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace loom::topo {

// Where a device sits: the PCI chain from its host bridge down to it, and its locality.
struct DeviceLocation {
  std::string busId;  // "0000:4e:00.0"
  // Ancestors from the top: the host bridge ("hostbridge 0000:[4b-4e]") then each PCI bridge
  // ("0000:4a:00.0") down to the device's parent. Two devices meet where these chains part.
  std::vector<std::string> pciChain;
  int numa = -1;           // index into NodeTopology::numaNodes, -1 when unknown
  int package = -1;        // index into NodeTopology::packages, -1 when unknown
  std::string cpuset;      // the CPUs close to the device, as a list ("0-27,112-139")
  double pciLinkGBps = 0;  // PCIe link bandwidth as hwloc reports it; 0 when unknown
  uint16_t vendorId = 0;
  uint16_t deviceId = 0;
  uint16_t pciClass = 0;  // 0x0302 3D controller, 0x0207 InfiniBand, 0x0200 Ethernet ...
};

struct Gpu {
  DeviceLocation where;
  std::string cudaName;  // "cuda0" when hwloc saw the CUDA device, else empty
  std::string nvmlName;  // "nvml0" (a GPU or, in older files, a COPROC OS device)
  // The CUDA ordinal this GPU answers to: from cudaName, else nvmlName, else its place in
  // PCI order among the node's GPUs.
  int cudaIndex = -1;
  double cpuNvlinkGBps = 0;  // NVLink to its CPU package (IBM POWER), 0 when none
  int sm = 0;                // compute capability x 10 (80 for A100) when the source says, else 0
  int nvlinks = 0;  // NVLink links of this GPU (to GPUs, NVSwitches, its CPU) when the source
                    // counts them (NCCL XML); 0 when unknown or none (hwloc gives bandwidths)
};

enum class NicKind : uint8_t {
  kInfiniBand = 0,  // PCI class 0x0207 with an OpenFabrics device
  kRoce = 1,        // RDMA on an Ethernet-class device (RoCE, iWARP, AWS EFA)
  kEthernet = 2,    // a netdev without RDMA
};
const char* nicKindName(NicKind kind);

struct Nic {
  DeviceLocation where;
  std::string name;    // the OpenFabrics device ("mlx5_0", "rdmap197s0"), else the netdev
  std::string netdev;  // "ib0", "eth0"; empty when hwloc saw none
  NicKind kind = NicKind::kEthernet;
  double speedGBps = 0;  // the port's line rate when the source says (NCCL XML), else 0
  bool rdma() const { return kind != NicKind::kEthernet; }
};

struct NumaNode {
  int osIndex = 0;
  int package = -1;  // index into NodeTopology::packages
  std::string cpuset;
  uint64_t memoryBytes = 0;
};

struct Package {
  int osIndex = 0;
  std::string cpuset;
  int cores = 0;
};

struct NodeTopology {
  std::string hostName;  // from hwloc's HostName, for messages
  std::string source;    // "this machine" or the XML file it came from
  std::string format;    // "hwloc" or "nccl": the kind of file (or discovery) it came from
  int cores = 0;
  int pus = 0;
  std::vector<Package> packages;
  std::vector<NumaNode> numaNodes;
  std::vector<Gpu> gpus;  // NVIDIA GPUs in hwloc (PCI) order
  std::vector<Nic> nics;
  // gpus.size()^2 bandwidths in GB/s (hwloc's "NVLinkBandwidth", MB/s / 1000), 0 where two
  // GPUs have no NVLink; through NVSwitches when hasNvSwitch. Empty without a matrix.
  std::vector<double> nvlinkGBps;
  bool hasNvSwitch = false;

  double nvlink(int a, int b) const {
    return nvlinkGBps.empty() ? 0.0 : nvlinkGBps[static_cast<size_t>(a) * gpus.size() + b];
  }
  // The GPU that CUDA ordinal `device` names here, or -1.
  int gpuForCudaDevice(int device) const;
  // The same as seen by a process with this CUDA_VISIBLE_DEVICES. When hwloc named the GPUs
  // cudaN it did so in the discovering process, visible devices applied; otherwise (nvml names
  // or PCI order) a list of integers maps the ordinal to a physical GPU. UUID or MIG lists
  // cannot be resolved from hwloc and fall back to the ordinal.
  int gpuForCudaDevice(int device, const std::string& cudaVisibleDevices) const;
  // The NUMA node (index) holding CPU `cpu` (an OS index), or -1.
  int numaOfCpu(int cpu) const;
};

// Bytes that round-trip through deserialize on any rank of the same loom build.
std::vector<uint8_t> serialize(const NodeTopology& node);
// Throws InvalidArgument when the bytes are truncated or not a serialized NodeTopology.
NodeTopology deserialize(const uint8_t* data, size_t size);

}  // namespace loom::topo
