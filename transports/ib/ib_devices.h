// RDMA devices and ports: which ones this process may use, and why none when there are none.
//
// Discovery runs once per process (the devices are a property of the machine, and every
// communicator shares one opened context and protection domain per device, as NCCL does). It
// keeps the active ports that LOOM_IB_HCA accepts; LOOM_IB_DISABLE=1 skips it altogether. When
// nothing is usable, reason() says why in one sentence - the library is missing, the kernel
// has no RDMA support (ENOSYS), there is no device, or no port is active - and the ib
// transport's canConnect is false with that reason.
//
// Addresses. An InfiniBand port is reached by its LID. A RoCE port (Ethernet link layer) is
// reached by a GID: LOOM_IB_GID_INDEX when set, else the entry chooseGidIndex picks from the
// port's table (RoCE v2 with an IPv4-mapped address first, as routable RoCE needs).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>
#include <vector>

namespace loom::transport::ib {

// One entry of a port's GID table as sysfs and the device describe it.
struct GidEntry {
  int index = 0;
  std::string type;  // sysfs gid_attrs/types: "RoCE v2", "IB/RoCE v1"; empty when unknown
  ibv_gid gid{};
};

// The GID index a RoCE port uses: the first RoCE v2 entry with an IPv4-mapped address, else the
// first RoCE v2 entry that is not link-local, else the first RoCE v2 entry, else (types
// unknown) the first non-zero entry; -1 when the table has none.
int chooseGidIndex(const std::vector<GidEntry>& table);

struct IbDevice {
  std::string name;  // "mlx5_0"
  ibv_context* context = nullptr;
  ibv_pd* pd = nullptr;
  ibv_device_attr attr{};
};

struct IbPort {
  int device = 0;  // index into IbDevices::devices()
  std::string deviceName;
  int port = 1;
  bool infiniband = true;  // link layer; false: Ethernet (RoCE)
  uint16_t lid = 0;
  int gidIndex = 0;
  ibv_gid gid{};
  ibv_mtu mtu = IBV_MTU_1024;    // the port's active MTU
  std::string describe() const;  // "mlx5_0:1 (InfiniBand, LID 5)"
};

class IbDevices {
 public:
  // The process's devices, discovered on first use.
  static const IbDevices& instance();
  bool usable() const { return !ports_.empty(); }
  // Why no port is usable ("" when one is).
  const std::string& reason() const { return reason_; }
  const std::vector<IbPort>& ports() const { return ports_; }
  const std::vector<IbDevice>& devices() const { return devices_; }

 private:
  IbDevices();
  void discover();
  std::vector<IbDevice> devices_;
  std::vector<IbPort> ports_;
  std::string reason_;
};

// The port a rank uses: the first port of `nic`, the hwloc NIC the topology gives the rank
// (paired with its GPU, else nearest its NUMA node: Peers::localNic); when it is empty or has no
// usable port, ports[localIndex % ports.size()], spreading ranks over ports. -1 without ports.
int choosePort(const std::vector<IbPort>& ports, const std::string& nic, int localIndex);

}  // namespace loom::transport::ib
