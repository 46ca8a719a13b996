// Reads NCCL's topology XML (NCCL_TOPO_FILE, NCCL_TOPO_DUMP_FILE; what cloud images ship) into
// loom's NodeTopology, the same objects hwloc discovery gives.
//
// The format, as NCCL writes and reads it (src/graph/xml.cc, topo.cc):
//   <system version="1">
//     <cpu numaid="0" affinity="00000000,00ffffff" arch= vendor= familyid= modelid=>
//       <pci busid="ffff:ff:01.0" class="0x060400" link_speed="16 GT/s" link_width="16">
//         <pci busid="0003:00:00.0" class="0x030200" ...>          a GPU (class 0x03....)
//           <gpu dev="0" sm="80" rank="0" gdr="1">
//             <nvlink target="0000:c7:00.0" count="2" tclass="0x068000"/>
//           </gpu>
//         </pci>
//         <pci busid="0103:00:00.0" class="0x020700" ...>          a NIC (class 0x02....)
//           <nic><net name="mlx5_0" dev="0" speed="200000" port="1" gdr="1"/></nic>
//         </pci>
//       </pci>
//       <nic><net .../></nic>                                     a NIC with no PCI address
//     </cpu>
//   </system>
// Each <cpu> is one NUMA node (numaid) with its CPUs as a Linux cpumask (32-bit hex words,
// most significant first). A <pci> with children is a bridge or switch; devices below one
// bridge share it. <gpu> and <nic> may be absent (the Azure files give only the PCI tree; NCCL
// fills them in from the running machine): a PCI function of class 0x03 is then still a GPU,
// and of class 0x02 a NIC named by its bus id. <nvlink> counts links to a GPU (tclass 0x03..),
// to NVSwitches (0x068000) or to the CPU (0x068001); its bandwidth is count x the per-link
// rate of the GPU's generation (nvlinkLinkGBps). <net speed> is in Mbit/s.
// Elements loom does not use (c2c, pcilink, gin ...) are skipped; missing required attributes
// and values that do not parse are errors naming the file and line.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>

#include "src/base/error.h"
#include "src/topo/discovery.h"
#include "src/topo/path_class.h"
#include "src/topo/xml_tree.h"

namespace loom::topo {
namespace {

constexpr uint16_t kVendorNvidia = 0x10de;

struct PendingLink {
  int gpu;  // index into the unsorted GPU list
  const XmlElement* element;
};

class NcclReader {
 public:
  explicit NcclReader(const std::string& file) : file_(file) {}

  NodeTopology read(const XmlElement& root) {
    if (root.name != "system")
      fail(root, strCat("the root element is <", root.name, ">, not NCCL's <system>"));
    if (const std::string* version = root.attr("version")) integer(root, "version", *version);
    node_.source = file_;
    node_.format = "nccl";
    for (const auto& child : root.children)
      if (child->name == "cpu") readCpu(*child);
    if (node_.packages.empty())
      fail(root, "<system> holds no <cpu>; NCCL files have one per NUMA node");
    finishGpus();
    std::stable_sort(node_.nics.begin(), node_.nics.end(),
                     [](const Nic& a, const Nic& b) { return a.where.busId < b.where.busId; });
    return std::move(node_);
  }

 private:
  [[noreturn]] void fail(const XmlElement& e, const std::string& what) const {
    throw InvalidArgument(strCat("topology file '", file_, "' line ", e.line, ": ", what));
  }

  const std::string& required(const XmlElement& e, const char* key) const {
    const std::string* v = e.attr(key);
    if (v == nullptr) fail(e, strCat("<", e.name, "> has no '", key, "' attribute"));
    return *v;
  }

  long integer(const XmlElement& e, const char* key, const std::string& text, int base = 10) const {
    char* end = nullptr;
    long v = std::strtol(text.c_str(), &end, base);
    if (text.empty() || *end != '\0')
      fail(e, strCat("<", e.name, " ", key, "=\"", text, "\">: not a number"));
    return v;
  }

  // "0x030200" -> 0x0302 (base class and subclass; the programming interface is dropped).
  uint16_t pciClassOf(const XmlElement& e) const {
    const std::string* text = e.attr("class");
    if (text == nullptr) return 0;
    long v = integer(e, "class", *text, 16);
    return static_cast<uint16_t>(text->size() > 6 ? v >> 8 : v);
  }

  std::string busIdOf(const XmlElement& e, const std::string& text) const {
    std::string id = text;
    for (char& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    // dddd:bb:dd.f, as NCCL writes it (an 8-digit domain is allowed too)
    size_t colon = id.find(':');
    bool ok = colon != std::string::npos && colon >= 4 && id.size() == colon + 8 &&
              id[colon + 3] == ':' && id[colon + 6] == '.';
    for (size_t i = 0; ok && i < id.size(); ++i)
      ok = (i == colon || i == colon + 3 || i == colon + 6) ||
           std::isxdigit(static_cast<unsigned char>(id[i]));
    if (!ok) fail(e, strCat("'", text, "' is not a PCI bus id like 0000:07:00.0"));
    return id;
  }

  // "16 GT/s", "16.0 GT/s PCIe", "32.0 GT/s PCIe" with a lane count -> GB/s (0 when unknown).
  double linkGBps(const XmlElement& e) const {
    const std::string* speed = e.attr("link_speed");
    const std::string* width = e.attr("link_width");
    if (speed == nullptr || width == nullptr) return 0;
    double gts = std::strtod(speed->c_str(), nullptr);
    long lanes = std::strtol(width->c_str(), nullptr, 10);
    return pcieLinkGBps(gts, static_cast<int>(lanes));
  }

  // A Linux cpumask ("00000000,00ffffff") as a CPU list ("0-23"); counts the CPUs.
  std::string cpusetFromMask(const XmlElement& e, const std::string& mask, int* count) const {
    std::vector<uint32_t> words;  // least significant first
    size_t end = mask.size();
    for (;;) {
      size_t comma = mask.rfind(',', end == 0 ? 0 : end - 1);
      size_t start = comma == std::string::npos || comma >= end ? 0 : comma + 1;
      std::string word = mask.substr(start, end - start);
      if (word.size() > 2 && word[0] == '0' && (word[1] == 'x' || word[1] == 'X')) word.erase(0, 2);
      if (word.empty() || word.size() > 8 ||
          word.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
        fail(e, strCat("affinity '", mask, "' is not a cpumask like 00000000,00ffffff"));
      words.push_back(static_cast<uint32_t>(std::strtoul(word.c_str(), nullptr, 16)));
      if (start == 0) break;
      end = start - 1;
    }
    std::string list;
    *count = 0;
    int runStart = -1;
    int bits = static_cast<int>(words.size() * 32);
    for (int cpu = 0; cpu <= bits; ++cpu) {
      bool set = cpu < bits && (words[cpu / 32] >> (cpu % 32) & 1u);
      if (set) ++*count;
      if (set && runStart < 0) runStart = cpu;
      if (!set && runStart >= 0) {
        list += strCat(list.empty() ? "" : ",", runStart);
        if (cpu - 1 > runStart) list += strCat("-", cpu - 1);
        runStart = -1;
      }
    }
    return list;
  }

  void readCpu(const XmlElement& cpu) {
    int numaId = static_cast<int>(integer(cpu, "numaid", required(cpu, "numaid")));
    for (const NumaNode& n : node_.numaNodes)
      if (n.osIndex == numaId) fail(cpu, strCat("a second <cpu numaid=\"", numaId, "\">"));
    int cpus = 0;
    std::string cpuset;
    if (const std::string* mask = cpu.attr("affinity")) cpuset = cpusetFromMask(cpu, *mask, &cpus);
    // The format knows NUMA nodes, not sockets: each <cpu> stands for one package with one
    // NUMA node, as NCCL's own model does (CPU to CPU is its SYS path). Cores are not told
    // apart from hardware threads.
    int index = static_cast<int>(node_.packages.size());
    node_.packages.push_back(Package{numaId, cpuset, cpus});
    node_.numaNodes.push_back(NumaNode{numaId, index, cpuset, 0});
    node_.cores += cpus;
    node_.pus += cpus;
    DeviceLocation here;
    here.numa = here.package = index;
    here.cpuset = cpuset;
    here.pciChain = {strCat("cpu numaid=", numaId)};
    for (const auto& child : cpu.children) {
      if (child->name == "pci") readPci(*child, here);
      if (child->name == "nic") readNic(*child, nullptr, here);
    }
  }

  static const XmlElement* childNamed(const XmlElement& e, const char* name) {
    for (const auto& c : e.children)
      if (c->name == name) return c.get();
    return nullptr;
  }

  void readPci(const XmlElement& pci, const DeviceLocation& parent) {
    std::string busId = busIdOf(pci, required(pci, "busid"));
    uint16_t cls = pciClassOf(pci);
    DeviceLocation where = parent;
    where.busId = busId;
    where.pciClass = cls;
    where.pciLinkGBps = linkGBps(pci);
    if (const std::string* v = pci.attr("vendor"))
      where.vendorId = static_cast<uint16_t>(integer(pci, "vendor", *v, 16));
    if (const std::string* d = pci.attr("device"))
      where.deviceId = static_cast<uint16_t>(integer(pci, "device", *d, 16));
    const XmlElement* gpu = childNamed(pci, "gpu");
    const XmlElement* nic = childNamed(pci, "nic");
    bool nvidiaOrUnknown = where.vendorId == 0 || where.vendorId == kVendorNvidia;
    if (gpu != nullptr || ((cls >> 8) == 0x03 && nvidiaOrUnknown && pci.children.empty())) {
      if (where.vendorId == 0) where.vendorId = kVendorNvidia;  // NCCL lists NVIDIA GPUs only
      readGpu(gpu, where);
    } else if (cls == 0x0680) {
      node_.hasNvSwitch = true;
    } else if (nic != nullptr || ((cls >> 8) == 0x02 && pci.children.empty())) {
      if (nic != nullptr) {
        for (const auto& child : pci.children)
          if (child->name == "nic") readNic(*child, &pci, where);
      } else {
        Nic bare;  // a NIC known by its PCI function only (the Azure files)
        bare.where = where;
        bare.name = busId;
        bare.kind = cls == 0x0207 ? NicKind::kInfiniBand : NicKind::kEthernet;
        node_.nics.push_back(std::move(bare));
      }
    } else {
      // A bridge or switch: the devices below it meet here.
      DeviceLocation below = parent;
      below.pciChain.push_back(busId);
      for (const auto& child : pci.children)
        if (child->name == "pci") readPci(*child, below);
    }
  }

  void readGpu(const XmlElement* gpu, const DeviceLocation& where) {
    Gpu g;
    g.where = where;
    if (gpu != nullptr) {
      if (const std::string* dev = gpu->attr("dev")) g.cudaIndex = integer(*gpu, "dev", *dev);
      if (const std::string* sm = gpu->attr("sm")) g.sm = integer(*gpu, "sm", *sm);
      for (const auto& link : gpu->children)
        if (link->name == "nvlink")
          links_.push_back(PendingLink{static_cast<int>(node_.gpus.size()), link.get()});
    }
    node_.gpus.push_back(std::move(g));
  }

  // Every <net> of a <nic> is a port loom can use; `pci` is the PCI function they sit on.
  void readNic(const XmlElement& nic, const XmlElement* pci, const DeviceLocation& where) {
    uint16_t cls = where.pciClass;
    for (const auto& net : nic.children) {
      if (net->name != "net") continue;
      Nic n;
      n.where = where;
      n.name = required(*net, "name");
      if (const std::string* speed = net->attr("speed")) {
        long mbps = integer(*net, "speed", *speed);
        n.speedGBps = mbps > 0 ? mbps / 8000.0 : 0;  // NCCL writes -1 when the port does not say
      }
      // The format has no field for the link layer: the PCI class tells InfiniBand; an
      // Ethernet-class device with a verbs name (mlx5_*, rdmap*, efa*, bnxt_re*, irdma*)
      // does RDMA over Ethernet.
      bool verbsName = false;
      for (const char* prefix : {"mlx", "rdma", "efa", "bnxt_re", "irdma"})
        verbsName = verbsName || n.name.rfind(prefix, 0) == 0;
      n.kind = cls == 0x0207 ? NicKind::kInfiniBand
               : verbsName   ? NicKind::kRoce
                             : NicKind::kEthernet;
      if (pci == nullptr) n.where.busId = "";  // a NIC NCCL placed on the CPU (no PCI address)
      node_.nics.push_back(std::move(n));
    }
  }

  // PCI order for GPUs (as hwloc discovery), CUDA ordinals, then the NVLink matrix.
  void finishGpus() {
    std::vector<size_t> order(node_.gpus.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return node_.gpus[a].where.busId < node_.gpus[b].where.busId;
    });
    std::vector<int> sortedIndex(order.size());
    std::vector<Gpu> sorted;
    for (size_t i = 0; i < order.size(); ++i) {
      sortedIndex[order[i]] = static_cast<int>(i);
      sorted.push_back(std::move(node_.gpus[order[i]]));
    }
    node_.gpus = std::move(sorted);
    std::map<std::string, int> byBusId;
    for (size_t i = 0; i < node_.gpus.size(); ++i) {
      if (!byBusId.emplace(node_.gpus[i].where.busId, static_cast<int>(i)).second)
        throw InvalidArgument(strCat("topology file '", file_, "': GPU ", node_.gpus[i].where.busId,
                                     " appears twice"));
    }
    bool anyDev = false;
    for (const Gpu& g : node_.gpus) anyDev = anyDev || g.cudaIndex >= 0;
    for (size_t i = 0; i < node_.gpus.size() && !anyDev; ++i)
      node_.gpus[i].cudaIndex = static_cast<int>(i);
    if (links_.empty()) return;

    size_t n = node_.gpus.size();
    node_.nvlinkGBps.assign(n * n, 0.0);
    std::vector<double> toSwitch(n, 0.0);
    for (const PendingLink& p : links_) {
      const XmlElement& e = *p.element;
      int g = sortedIndex[p.gpu];
      Gpu& gpu = node_.gpus[g];
      long count = integer(e, "count", required(e, "count"));
      if (count <= 0) fail(e, strCat("<nvlink count=\"", count, "\">: a link count is at least 1"));
      if (gpu.sm <= 0)
        fail(e, "<nvlink> on a <gpu> without 'sm': the GPU generation sets its rate");
      double gbps = static_cast<double>(count) * nvlinkLinkGBps(gpu.sm);
      long tclass = integer(e, "tclass", required(e, "tclass"), 16);
      gpu.nvlinks += static_cast<int>(count);
      if (tclass == 0x068000) {
        toSwitch[g] += gbps;
        node_.hasNvSwitch = true;
      } else if (tclass == 0x068001) {
        gpu.cpuNvlinkGBps += gbps;  // the GPU's own CPU (IBM POWER, Grace)
      } else if ((tclass >> 16) == 0x03) {
        std::string peer = busIdOf(e, required(e, "target"));
        auto it = byBusId.find(peer);
        if (it == byBusId.end())
          fail(e, strCat("<nvlink target=\"", peer, "\"> is not a GPU of this file"));
        if (it->second == g) fail(e, "an <nvlink> from a GPU to itself");
        node_.nvlinkGBps[g * n + it->second] += gbps;
      } else {
        fail(e, strCat("<nvlink tclass=\"", required(e, "tclass"),
                       "\">: not a GPU (0x03....), NVSwitch (0x068000) or CPU (0x068001)"));
      }
    }
    // A link listed by one side only still joins both.
    for (size_t a = 0; a < n; ++a)
      for (size_t b = a + 1; b < n; ++b)
        node_.nvlinkGBps[a * n + b] = node_.nvlinkGBps[b * n + a] =
            std::max(node_.nvlinkGBps[a * n + b], node_.nvlinkGBps[b * n + a]);
    // Through the switches a pair gets the slower GPU's share.
    for (size_t a = 0; a < n; ++a)
      for (size_t b = 0; b < n; ++b)
        if (a != b && toSwitch[a] > 0 && toSwitch[b] > 0)
          node_.nvlinkGBps[a * n + b] += std::min(toSwitch[a], toSwitch[b]);
  }

  std::string file_;
  NodeTopology node_;
  std::vector<PendingLink> links_;
};

}  // namespace

NodeTopology describeNcclXml(const XmlElement& root, const std::string& source) {
  return NcclReader(source).read(root);
}

}  // namespace loom::topo
