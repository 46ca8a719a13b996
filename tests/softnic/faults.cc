// TEST DOUBLE: fault injection for the soft NIC.
//
// A spec is a comma-separated list of kind[@N]:
//   retry_exceeded@N  the send WR after N more send WRs (0: the next) completes with
//                     IBV_WC_RETRY_EXC_ERR, as if the peer had gone silent; fires once
//   qp_fatal@N        likewise, but the QP raises IBV_EVENT_QP_FATAL and the WR completes with
//                     IBV_WC_FATAL_ERR; fires once
//   reg_fail@N        every memory registration after N more successful ones fails (ENOMEM)
//   no_dmabuf         ibv_reg_dmabuf_mr fails with EOPNOTSUPP
//   port_down         every port goes down (IBV_EVENT_PORT_ERR to open contexts)
//   clear             forgets the faults above and brings every port back up
// The counts are per process and across all the process's soft NICs. SOFTNIC_FAULT holds a spec
// applied at start-up; loom_softnic_inject() applies one at run time.
#include <cerrno>
#include <cstdlib>
#include <sstream>

#include "softnic.h"
#include "softnic_api.h"

namespace softnic {

Faults& faults() {
  static Faults* f = new Faults();  // lives for the process: threads refer to it
  return *f;
}

bool injectFaults(const std::string& spec, std::vector<Device*>& list) {
  std::stringstream items(spec);
  std::string item;
  while (std::getline(items, item, ',')) {
    if (item.empty()) continue;
    std::string kind = item.substr(0, item.find('@'));
    long n = 0;
    if (kind.size() < item.size()) {
      char* end = nullptr;
      n = std::strtol(item.c_str() + kind.size() + 1, &end, 10);
      if (*end != '\0' || n < 0) return false;
    }
    Faults& f = faults();
    bool portsUp = false, portsDown = false;
    {
      std::lock_guard<std::mutex> lock(f.mu);
      if (kind == "retry_exceeded") {
        f.retryExceededAfter = f.sendsSeen + n;
      } else if (kind == "qp_fatal") {
        f.qpFatalAfter = f.sendsSeen + n;
      } else if (kind == "reg_fail") {
        f.regFailAfter = f.regsSeen + n;
      } else if (kind == "no_dmabuf") {
        f.noDmabuf = true;
      } else if (kind == "port_down") {
        portsDown = true;
      } else if (kind == "clear") {
        f.retryExceededAfter = f.qpFatalAfter = f.regFailAfter = -1;
        f.noDmabuf = false;
        portsUp = true;
      } else {
        return false;
      }
    }
    if (portsUp || portsDown)
      for (Device* dev : list)
        for (int p = 1; p <= dev->numPorts; ++p) setPortState(dev, p, portsUp);
  }
  return true;
}

}  // namespace softnic

extern "C" int loom_softnic_inject(const char* spec) {
  return softnic::injectFaults(spec != nullptr ? spec : "", softnic::devices()) ? 0 : EINVAL;
}

extern "C" int loom_softnic_set_port_state(const char* device, int port, int active) {
  for (softnic::Device* dev : softnic::devices()) {
    if (dev->name != device) continue;
    if (port < 1 || port > dev->numPorts) return EINVAL;
    softnic::setPortState(dev, port, active != 0);
    return 0;
  }
  return ENODEV;
}
