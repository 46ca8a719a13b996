// Serialization of NodeTopology: a magic word and version, then every field in declaration
// order, little-endian as the machine writes it (ranks of one job run the same build on the
// same architecture; the version check at init already insists on the same loom).
#include "src/topo/node_topology.h"

#include <hwloc.h>

#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "src/base/error.h"

namespace loom::topo {
namespace {

constexpr uint32_t kMagic = 0x6c6f7470;  // "lotp"
constexpr uint32_t kVersion = 2;

class Writer {
 public:
  template <typename T>
  void pod(T value) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const uint8_t*>(&value);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
  }
  void str(const std::string& s) {
    pod<uint32_t>(static_cast<uint32_t>(s.size()));
    bytes_.insert(bytes_.end(), s.begin(), s.end());
  }
  std::vector<uint8_t> take() { return std::move(bytes_); }

 private:
  std::vector<uint8_t> bytes_;
};

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  template <typename T>
  T pod() {
    need(sizeof(T));
    T value;
    std::memcpy(&value, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }
  std::string str() {
    uint32_t n = pod<uint32_t>();
    need(n);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }
  // A count of elements that follow; bounded by the bytes left so garbage cannot allocate.
  size_t count() {
    uint32_t n = pod<uint32_t>();
    LOOM_ENFORCE(n <= size_ - pos_, InvalidArgument, "serialized topology: count ", n,
                 " exceeds the ", size_ - pos_, " bytes left");
    return n;
  }
  bool done() const { return pos_ == size_; }

 private:
  void need(size_t n) {
    LOOM_ENFORCE(n <= size_ - pos_, InvalidArgument, "serialized topology is truncated at byte ",
                 pos_, " of ", size_);
  }
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

void writeLocation(Writer& w, const DeviceLocation& d) {
  w.str(d.busId);
  w.pod<uint32_t>(static_cast<uint32_t>(d.pciChain.size()));
  for (const std::string& s : d.pciChain) w.str(s);
  w.pod<int32_t>(d.numa);
  w.pod<int32_t>(d.package);
  w.str(d.cpuset);
  w.pod<double>(d.pciLinkGBps);
  w.pod<uint16_t>(d.vendorId);
  w.pod<uint16_t>(d.deviceId);
  w.pod<uint16_t>(d.pciClass);
}

DeviceLocation readLocation(Reader& r) {
  DeviceLocation d;
  d.busId = r.str();
  d.pciChain.resize(r.count());
  for (std::string& s : d.pciChain) s = r.str();
  d.numa = r.pod<int32_t>();
  d.package = r.pod<int32_t>();
  d.cpuset = r.str();
  d.pciLinkGBps = r.pod<double>();
  d.vendorId = r.pod<uint16_t>();
  d.deviceId = r.pod<uint16_t>();
  d.pciClass = r.pod<uint16_t>();
  return d;
}

}  // namespace

const char* nicKindName(NicKind kind) {
  switch (kind) {
    case NicKind::kInfiniBand:
      return "InfiniBand";
    case NicKind::kRoce:
      return "RoCE";
    case NicKind::kEthernet:
      return "Ethernet";
  }
  return "?";
}

int NodeTopology::gpuForCudaDevice(int device) const {
  for (size_t i = 0; i < gpus.size(); ++i)
    if (gpus[i].cudaIndex == device) return static_cast<int>(i);
  return -1;
}

int NodeTopology::gpuForCudaDevice(int device, const std::string& cudaVisibleDevices) const {
  if (device < 0) return -1;
  bool hwlocSawCuda = false;
  for (const Gpu& gpu : gpus) hwlocSawCuda = hwlocSawCuda || !gpu.cudaName.empty();
  if (hwlocSawCuda || cudaVisibleDevices.empty()) return gpuForCudaDevice(device);
  std::vector<int> physical;
  size_t at = 0;
  while (at <= cudaVisibleDevices.size()) {
    size_t comma = cudaVisibleDevices.find(',', at);
    std::string item =
        cudaVisibleDevices.substr(at, comma == std::string::npos ? comma : comma - at);
    if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos)
      return gpuForCudaDevice(device);  // a UUID or MIG name: not resolvable here
    physical.push_back(std::atoi(item.c_str()));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  if (device >= static_cast<int>(physical.size())) return -1;
  return gpuForCudaDevice(physical[device]);
}

int NodeTopology::numaOfCpu(int cpu) const {
  if (cpu < 0) return -1;
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  int found = -1;
  for (size_t i = 0; i < numaNodes.size() && found < 0; ++i) {
    if (hwloc_bitmap_list_sscanf(set, numaNodes[i].cpuset.c_str()) == 0 &&
        hwloc_bitmap_isset(set, static_cast<unsigned>(cpu)))
      found = static_cast<int>(i);
  }
  hwloc_bitmap_free(set);
  return found;
}

std::vector<uint8_t> serialize(const NodeTopology& node) {
  Writer w;
  w.pod(kMagic);
  w.pod(kVersion);
  w.str(node.hostName);
  w.str(node.source);
  w.str(node.format);
  w.pod<int32_t>(node.cores);
  w.pod<int32_t>(node.pus);
  w.pod<uint32_t>(static_cast<uint32_t>(node.packages.size()));
  for (const Package& p : node.packages) {
    w.pod<int32_t>(p.osIndex);
    w.str(p.cpuset);
    w.pod<int32_t>(p.cores);
  }
  w.pod<uint32_t>(static_cast<uint32_t>(node.numaNodes.size()));
  for (const NumaNode& n : node.numaNodes) {
    w.pod<int32_t>(n.osIndex);
    w.pod<int32_t>(n.package);
    w.str(n.cpuset);
    w.pod<uint64_t>(n.memoryBytes);
  }
  w.pod<uint32_t>(static_cast<uint32_t>(node.gpus.size()));
  for (const Gpu& g : node.gpus) {
    writeLocation(w, g.where);
    w.str(g.cudaName);
    w.str(g.nvmlName);
    w.pod<int32_t>(g.cudaIndex);
    w.pod<double>(g.cpuNvlinkGBps);
    w.pod<int32_t>(g.sm);
    w.pod<int32_t>(g.nvlinks);
  }
  w.pod<uint32_t>(static_cast<uint32_t>(node.nics.size()));
  for (const Nic& n : node.nics) {
    writeLocation(w, n.where);
    w.str(n.name);
    w.str(n.netdev);
    w.pod<uint8_t>(static_cast<uint8_t>(n.kind));
    w.pod<double>(n.speedGBps);
  }
  w.pod<uint32_t>(static_cast<uint32_t>(node.nvlinkGBps.size()));
  for (double bw : node.nvlinkGBps) w.pod<double>(bw);
  w.pod<uint8_t>(node.hasNvSwitch ? 1 : 0);
  return w.take();
}

NodeTopology deserialize(const uint8_t* data, size_t size) {
  Reader r(data, size);
  uint32_t magic = r.pod<uint32_t>();
  LOOM_ENFORCE(magic == kMagic, InvalidArgument,
               "bytes are not a serialized loom node topology (bad magic)");
  uint32_t version = r.pod<uint32_t>();
  LOOM_ENFORCE_EQ(version, kVersion, InvalidArgument,
                  "serialized node topology of another format version; every rank must run the "
                  "same loom build");
  NodeTopology node;
  node.hostName = r.str();
  node.source = r.str();
  node.format = r.str();
  node.cores = r.pod<int32_t>();
  node.pus = r.pod<int32_t>();
  node.packages.resize(r.count());
  for (Package& p : node.packages) {
    p.osIndex = r.pod<int32_t>();
    p.cpuset = r.str();
    p.cores = r.pod<int32_t>();
  }
  node.numaNodes.resize(r.count());
  for (NumaNode& n : node.numaNodes) {
    n.osIndex = r.pod<int32_t>();
    n.package = r.pod<int32_t>();
    n.cpuset = r.str();
    n.memoryBytes = r.pod<uint64_t>();
  }
  node.gpus.resize(r.count());
  for (Gpu& g : node.gpus) {
    g.where = readLocation(r);
    g.cudaName = r.str();
    g.nvmlName = r.str();
    g.cudaIndex = r.pod<int32_t>();
    g.cpuNvlinkGBps = r.pod<double>();
    g.sm = r.pod<int32_t>();
    g.nvlinks = r.pod<int32_t>();
  }
  node.nics.resize(r.count());
  for (Nic& n : node.nics) {
    n.where = readLocation(r);
    n.name = r.str();
    n.netdev = r.str();
    uint8_t kind = r.pod<uint8_t>();
    LOOM_ENFORCE(kind <= 2, InvalidArgument, "serialized topology: bad NIC kind ", int(kind));
    n.kind = static_cast<NicKind>(kind);
    n.speedGBps = r.pod<double>();
  }
  node.nvlinkGBps.resize(r.count());
  for (double& bw : node.nvlinkGBps) bw = r.pod<double>();
  LOOM_ENFORCE(
      node.nvlinkGBps.empty() || node.nvlinkGBps.size() == node.gpus.size() * node.gpus.size(),
      InvalidArgument, "serialized topology: NVLink matrix of ", node.nvlinkGBps.size(),
      " entries for ", node.gpus.size(), " GPUs");
  node.hasNvSwitch = r.pod<uint8_t>() != 0;
  LOOM_ENFORCE(r.done(), InvalidArgument, "serialized topology has trailing bytes");
  return node;
}

}  // namespace loom::topo
