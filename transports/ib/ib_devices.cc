#include "transports/ib/ib_devices.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "src/base/env.h"
#include "src/base/error.h"
#include "src/base/logging.h"
#include "transports/ib/ib_hca_filter.h"
#include "transports/ib/ib_verbs.h"

namespace loom::transport::ib {
namespace {

bool isZero(const ibv_gid& gid) {
  for (uint8_t b : gid.raw)
    if (b != 0) return false;
  return true;
}
bool isIpv4Mapped(const ibv_gid& gid) {
  for (int i = 0; i < 10; ++i)
    if (gid.raw[i] != 0) return false;
  return gid.raw[10] == 0xff && gid.raw[11] == 0xff;
}
bool isLinkLocal(const ibv_gid& gid) { return gid.raw[0] == 0xfe && (gid.raw[1] & 0xc0) == 0x80; }

std::string readSysfs(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.pop_back();
  return line;
}

const char* stateName(ibv_port_state state) {
  switch (state) {
    case IBV_PORT_DOWN:
      return "down";
    case IBV_PORT_INIT:
      return "init";
    case IBV_PORT_ARMED:
      return "armed";
    case IBV_PORT_ACTIVE:
      return "active";
    default:
      return "not active";
  }
}

// The GID table of a RoCE port: the device's entries, typed from sysfs where it has them.
std::vector<GidEntry> readGidTable(const Verbs& v, const IbDevice& dev, int port, int length) {
  std::vector<GidEntry> table;
  const std::string types =
      strCat("/sys/class/infiniband/", dev.name, "/ports/", port, "/gid_attrs/types/");
  for (int i = 0; i < length && i < 256; ++i) {
    GidEntry e;
    e.index = i;
    if (v.queryGid(dev.context, static_cast<uint8_t>(port), i, &e.gid) != 0) continue;
    e.type = readSysfs(types + std::to_string(i));
    table.push_back(e);
  }
  return table;
}

}  // namespace

int chooseGidIndex(const std::vector<GidEntry>& table) {
  auto first = [&](auto&& pred) {
    for (const GidEntry& e : table)
      if (!isZero(e.gid) && pred(e)) return e.index;
    return -1;
  };
  auto v2 = [](const GidEntry& e) { return e.type == "RoCE v2"; };
  for (int found : {first([&](const GidEntry& e) { return v2(e) && isIpv4Mapped(e.gid); }),
                    first([&](const GidEntry& e) { return v2(e) && !isLinkLocal(e.gid); }),
                    first(v2), first([](const GidEntry& e) { return e.type.empty(); })})
    if (found >= 0) return found;
  return -1;
}

std::string IbPort::describe() const {
  return infiniband ? strCat(deviceName, ":", port, " (InfiniBand, LID ", lid, ")")
                    : strCat(deviceName, ":", port, " (RoCE, GID index ", gidIndex, ")");
}

const IbDevices& IbDevices::instance() {
  // Never destroyed: its protection domains and contexts serve connections until the process
  // ends, and static destruction order would put their teardown after the last user's.
  static const IbDevices* const devices = new IbDevices;
  return *devices;
}

IbDevices::IbDevices() {
  try {
    discover();
  } catch (const Error& e) {
    ports_.clear();
    reason_ = e.what();
  }
  if (usable()) {
    std::string names;
    for (const IbPort& p : ports_) names += strCat(names.empty() ? "" : ", ", p.describe());
    LOOM_INFO(kLogNet, "ib: usable RDMA ports: ", names);
  } else {
    LOOM_INFO(kLogNet, "ib: transport unavailable: ", reason_);
  }
}

void IbDevices::discover() {
  if (envInt(EnvVar::LOOM_IB_DISABLE) != 0) {
    reason_ = "LOOM_IB_DISABLE=1 forbids it";
    return;
  }
  const HcaFilter filter(envString(EnvVar::LOOM_IB_HCA));
  const Verbs& v = verbs();
  if (!v.usable()) {
    reason_ = v.error;
    return;
  }
  int count = 0;
  errno = 0;
  ibv_device** list = v.getDeviceList(&count);
  if (list == nullptr) {
    const int err = errno;
    reason_ = err == ENOSYS
                  ? strCat(v.source, " finds no RDMA support in this kernel (", std::strerror(err),
                           "): no InfiniBand/RoCE driver is loaded")
                  : strCat(v.source, " cannot list RDMA devices (", std::strerror(err), ")");
    return;
  }
  std::string seen;  // every port looked at, for the reason when none is usable
  for (int d = 0; d < count; ++d) {
    IbDevice dev;
    dev.name = v.getDeviceName(list[d]);
    dev.context = v.openDevice(list[d]);
    if (dev.context == nullptr) {
      seen += strCat(seen.empty() ? "" : ", ", dev.name, " (cannot be opened)");
      continue;
    }
    if (v.queryDevice(dev.context, &dev.attr) != 0 ||
        (dev.pd = v.allocPd(dev.context)) == nullptr) {
      seen += strCat(seen.empty() ? "" : ", ", dev.name, " (cannot be queried)");
      v.closeDevice(dev.context);
      continue;
    }
    const int index = static_cast<int>(devices_.size());
    for (int port = 1; port <= dev.attr.phys_port_cnt; ++port) {
      ibv_port_attr attr{};
      if (v.queryPort(dev.context, static_cast<uint8_t>(port), &attr) != 0) continue;
      if (attr.state != IBV_PORT_ACTIVE) {
        seen +=
            strCat(seen.empty() ? "" : ", ", dev.name, ":", port, " (", stateName(attr.state), ")");
        continue;
      }
      if (!filter.accepts(dev.name, port)) {
        seen += strCat(seen.empty() ? "" : ", ", dev.name, ":", port, " (not in LOOM_IB_HCA)");
        continue;
      }
      IbPort p;
      p.device = index;
      p.deviceName = dev.name;
      p.port = port;
      p.infiniband = attr.link_layer != IBV_LINK_LAYER_ETHERNET;
      p.lid = attr.lid;
      p.mtu = attr.active_mtu;
      if (envIsSet(EnvVar::LOOM_IB_GID_INDEX)) {
        p.gidIndex = static_cast<int>(envInt(EnvVar::LOOM_IB_GID_INDEX));
      } else if (!p.infiniband) {
        p.gidIndex = chooseGidIndex(readGidTable(v, dev, port, attr.gid_tbl_len));
        if (p.gidIndex < 0) {
          seen += strCat(seen.empty() ? "" : ", ", dev.name, ":", port, " (RoCE without a GID)");
          continue;
        }
      }
      if (v.queryGid(dev.context, static_cast<uint8_t>(port), p.gidIndex, &p.gid) != 0) {
        seen += strCat(seen.empty() ? "" : ", ", dev.name, ":", port, " (no GID at index ",
                       p.gidIndex, ")");
        continue;
      }
      ports_.push_back(p);
    }
    devices_.push_back(dev);
  }
  v.freeDeviceList(list);
  if (ports_.empty()) {
    reason_ = count == 0 ? strCat(v.source, " finds no RDMA device")
                         : strCat("no usable RDMA port: ", seen.empty() ? "none found" : seen);
  }
}

int choosePort(const std::vector<IbPort>& ports, const std::string& nic, int localIndex) {
  if (ports.empty()) return -1;
  for (size_t i = 0; i < ports.size(); ++i)
    if (!nic.empty() && ports[i].deviceName == nic) return static_cast<int>(i);
  const int n = static_cast<int>(ports.size());
  return ((localIndex % n) + n) % n;
}

}  // namespace loom::transport::ib
