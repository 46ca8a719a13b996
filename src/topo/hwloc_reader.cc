// Reads loom's NodeTopology out of an hwloc topology: packages, NUMA nodes, NVIDIA GPUs and
// NICs with their PCI chains, and the NVLink bandwidth matrix.
#include <hwloc.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "src/topo/discovery.h"

namespace loom::topo {
namespace {

constexpr uint16_t kVendorNvidia = 0x10de;

std::string cpusetList(hwloc_const_bitmap_t set) {
  if (set == nullptr) return "";
  char* text = nullptr;
  hwloc_bitmap_list_asprintf(&text, set);
  std::string list = text ? text : "";
  std::free(text);
  return list;
}

std::string busIdOf(const hwloc_obj_t pci) {
  const auto& a = pci->attr->pcidev;
  char text[32];
  std::snprintf(text, sizeof text, "%04x:%02x:%02x.%01x", a.domain, a.bus, a.dev, a.func);
  return text;
}

bool isNvidiaGpu(hwloc_obj_t pci) {
  const auto& a = pci->attr->pcidev;
  return a.vendor_id == kVendorNvidia && (a.class_id == 0x0302 || a.class_id == 0x0300);
}

bool isNvSwitch(hwloc_obj_t pci) {
  const auto& a = pci->attr->pcidev;
  return a.vendor_id == kVendorNvidia && a.class_id == 0x0680;
}

// The number at the end of an OS device name ("cuda3" -> 3), or -1.
int trailingNumber(const std::string& name) {
  size_t i = name.size();
  while (i > 0 && std::isdigit(static_cast<unsigned char>(name[i - 1]))) --i;
  return i == name.size() ? -1 : std::atoi(name.c_str() + i);
}

int packageIndexOf(hwloc_obj_t obj) {
  for (; obj != nullptr; obj = obj->parent)
    if (obj->type == HWLOC_OBJ_PACKAGE) return static_cast<int>(obj->logical_index);
  return -1;
}

// Fills the PCI chain and locality by walking ->parent ourselves (hwloc 2.9's common-ancestor
// helper crashes on I/O objects).
DeviceLocation locate(const NodeTopology& node, hwloc_obj_t pci) {
  DeviceLocation where;
  where.busId = busIdOf(pci);
  where.vendorId = pci->attr->pcidev.vendor_id;
  where.deviceId = pci->attr->pcidev.device_id;
  where.pciClass = pci->attr->pcidev.class_id;
  where.pciLinkGBps = pci->attr->pcidev.linkspeed;
  hwloc_obj_t up = pci->parent;
  for (; up != nullptr && up->type == HWLOC_OBJ_BRIDGE; up = up->parent) {
    const auto& b = up->attr->bridge;
    if (b.upstream_type == HWLOC_OBJ_BRIDGE_HOST) {
      char text[64];
      std::snprintf(text, sizeof text, "hostbridge %04x:[%02x-%02x]", b.downstream.pci.domain,
                    b.downstream.pci.secondary_bus, b.downstream.pci.subordinate_bus);
      where.pciChain.insert(where.pciChain.begin(), text);
    } else {
      where.pciChain.insert(where.pciChain.begin(), busIdOf(up));
    }
  }
  while (up != nullptr && hwloc_obj_type_is_io(up->type)) up = up->parent;  // PCI under PCI
  if (up == nullptr) return where;
  where.cpuset = cpusetList(up->cpuset);
  for (size_t i = 0; i < node.numaNodes.size(); ++i) {
    if (up->nodeset && hwloc_bitmap_isset(up->nodeset, node.numaNodes[i].osIndex)) {
      where.numa = static_cast<int>(i);
      break;
    }
  }
  where.package = packageIndexOf(up);
  if (where.package < 0 && where.numa >= 0) where.package = node.numaNodes[where.numa].package;
  return where;
}

Gpu readGpu(const NodeTopology& node, hwloc_obj_t pci) {
  Gpu gpu;
  gpu.where = locate(node, pci);
  for (hwloc_obj_t os = pci->io_first_child; os != nullptr; os = os->next_sibling) {
    if (os->type != HWLOC_OBJ_OS_DEVICE || os->name == nullptr) continue;
    std::string name = os->name;
    if (name.rfind("cuda", 0) == 0) gpu.cudaName = name;
    if (name.rfind("nvml", 0) == 0) gpu.nvmlName = name;
  }
  gpu.cudaIndex =
      gpu.cudaName.empty() ? trailingNumber(gpu.nvmlName) : trailingNumber(gpu.cudaName);
  return gpu;
}

// A network-class PCI device as a NIC; the name stays empty when hwloc saw no OS device on it
// (unconfigured, so loom cannot use it).
Nic readNic(const NodeTopology& node, hwloc_obj_t pci) {
  Nic nic;
  bool openFabrics = false;
  for (hwloc_obj_t os = pci->io_first_child; os != nullptr; os = os->next_sibling) {
    if (os->type != HWLOC_OBJ_OS_DEVICE || os->name == nullptr) continue;
    if (os->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS) {
      openFabrics = true;
      nic.name = os->name;
    } else if (os->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK && nic.netdev.empty()) {
      nic.netdev = os->name;
    }
  }
  if (nic.name.empty()) nic.name = nic.netdev;
  if (nic.name.empty()) return nic;
  nic.where = locate(node, pci);
  // IB and RoCE look alike to hwloc (both OpenFabrics); the PCI class tells them apart.
  if (openFabrics)
    nic.kind = pci->attr->pcidev.class_id == 0x0207 ? NicKind::kInfiniBand : NicKind::kRoce;
  else
    nic.kind = NicKind::kEthernet;
  return nic;
}

// The GPU (or, with `package`, the CPU package) an object of the NVLink matrix stands for.
void matrixObject(hwloc_obj_t obj, const std::vector<hwloc_obj_t>& gpuPci, int* gpu, int* package) {
  *gpu = -1;
  *package = -1;
  if (obj->type == HWLOC_OBJ_PACKAGE) {
    *package = static_cast<int>(obj->logical_index);
    return;
  }
  hwloc_obj_t pci = obj;
  while (pci != nullptr && pci->type == HWLOC_OBJ_OS_DEVICE) pci = pci->parent;
  for (size_t i = 0; i < gpuPci.size(); ++i)
    if (gpuPci[i] == pci) *gpu = static_cast<int>(i);
}

void readNvlink(hwloc_topology_t topology, const std::vector<hwloc_obj_t>& gpuPci,
                NodeTopology& node) {
  unsigned count = 1;
  hwloc_distances_s* distances = nullptr;
  if (hwloc_distances_get_by_name(topology, "NVLinkBandwidth", &count, &distances, 0) != 0 ||
      count == 0)
    return;
  // Through NVSwitches GPUs have no direct entries; the closure fills them in. Without a
  // switch it would zero the direct links (POWER8), so only then.
  bool switched = false;
  for (unsigned i = 0; i < distances->nbobjs; ++i) {
    hwloc_obj_t obj = distances->objs[i];
    if (obj->type == HWLOC_OBJ_PCI_DEVICE && isNvSwitch(obj)) switched = true;
  }
  if (switched)
    hwloc_distances_transform(topology, distances, HWLOC_DISTANCES_TRANSFORM_TRANSITIVE_CLOSURE,
                              nullptr, 0);
  size_t n = node.gpus.size();
  node.nvlinkGBps.assign(n * n, 0.0);
  node.hasNvSwitch = switched;
  unsigned objs = distances->nbobjs;
  for (unsigned i = 0; i < objs; ++i) {
    int gi, pi;
    matrixObject(distances->objs[i], gpuPci, &gi, &pi);
    if (gi < 0) continue;
    for (unsigned j = 0; j < objs; ++j) {
      if (i == j) continue;
      int gj, pj;
      matrixObject(distances->objs[j], gpuPci, &gj, &pj);
      double gbps = static_cast<double>(distances->values[i * objs + j]) / 1000.0;  // MB/s
      if (gj >= 0 && gj != gi) node.nvlinkGBps[gi * n + gj] = gbps;
      if (pj >= 0 && pj == node.gpus[gi].where.package) node.gpus[gi].cpuNvlinkGBps = gbps;
    }
  }
  hwloc_distances_release(topology, distances);
}

}  // namespace

NodeTopology describe(hwloc_topology_t topology, const std::string& source) {
  NodeTopology node;
  node.source = source;
  node.format = "hwloc";
  const char* host = hwloc_obj_get_info_by_name(hwloc_get_root_obj(topology), "HostName");
  node.hostName = host ? host : "";
  node.cores = hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_CORE);
  node.pus = hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_PU);
  for (hwloc_obj_t p = nullptr; (p = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_PACKAGE, p));) {
    node.packages.push_back(
        Package{static_cast<int>(p->os_index), cpusetList(p->cpuset),
                hwloc_get_nbobjs_inside_cpuset_by_type(topology, p->cpuset, HWLOC_OBJ_CORE)});
  }
  if (node.packages.empty()) {  // some virtual machines report none: one package for all
    hwloc_obj_t root = hwloc_get_root_obj(topology);
    node.packages.push_back(Package{0, cpusetList(root->cpuset), node.cores});
  }
  for (hwloc_obj_t n = nullptr;
       (n = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_NUMANODE, n));) {
    int package = packageIndexOf(n);
    if (package < 0) package = 0;
    node.numaNodes.push_back(NumaNode{static_cast<int>(n->os_index), package, cpusetList(n->cpuset),
                                      n->attr->numanode.local_memory});
  }
  std::vector<hwloc_obj_t> gpuPci;
  for (hwloc_obj_t pci = nullptr; (pci = hwloc_get_next_pcidev(topology, pci));) {
    if (isNvidiaGpu(pci)) {
      node.gpus.push_back(readGpu(node, pci));
      gpuPci.push_back(pci);
    } else if (isNvSwitch(pci)) {
      node.hasNvSwitch = true;
    } else if ((pci->attr->pcidev.class_id >> 8) == 0x02) {
      Nic nic = readNic(node, pci);
      if (!nic.name.empty()) node.nics.push_back(std::move(nic));
    }
  }
  // PCI bus order: CUDA's order with CUDA_DEVICE_ORDER=PCI_BUS_ID, and stable across files
  // (hwloc lists devices in the order of their host bridges' discovery).
  std::vector<size_t> order(node.gpus.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return node.gpus[a].where.busId < node.gpus[b].where.busId;
  });
  std::vector<Gpu> sortedGpus;
  std::vector<hwloc_obj_t> sortedPci;
  for (size_t i : order) {
    sortedGpus.push_back(std::move(node.gpus[i]));
    sortedPci.push_back(gpuPci[i]);
  }
  node.gpus = std::move(sortedGpus);
  gpuPci = std::move(sortedPci);
  std::stable_sort(node.nics.begin(), node.nics.end(),
                   [](const Nic& a, const Nic& b) { return a.where.busId < b.where.busId; });
  // Without any cudaN/nvmlN names (hwloc built without those plugins) GPUs take their place
  // in PCI order, which is CUDA's with CUDA_DEVICE_ORDER=PCI_BUS_ID. Where some GPUs are named,
  // an unnamed one was not visible to CUDA and keeps -1.
  bool anyNamed = false;
  for (const Gpu& gpu : node.gpus) anyNamed = anyNamed || gpu.cudaIndex >= 0;
  for (size_t i = 0; i < node.gpus.size() && !anyNamed; ++i)
    node.gpus[i].cudaIndex = static_cast<int>(i);
  readNvlink(topology, gpuPci, node);
  return node;
}

}  // namespace loom::topo
