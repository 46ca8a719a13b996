#include "transports/ib/ib_async.h"

#include <fcntl.h>

#include <map>
#include <mutex>
#include <utility>

#include "src/base/logging.h"
#include "transports/ib/ib_devices.h"
#include "transports/ib/ib_verbs.h"

namespace loom::transport::ib {
namespace {

struct Events {
  std::mutex mutex;
  bool nonBlocking = false;  // the devices' async fds were switched to O_NONBLOCK
  std::map<uint32_t, std::string> qps;
  std::map<std::pair<int, int>, std::string> ports;  // (device, port)
  std::map<int, std::string> devices;
};
Events& events() {
  static Events e;
  return e;
}

}  // namespace

void pollAsyncEvents() {
  const IbDevices& devs = IbDevices::instance();
  if (!devs.usable()) return;
  Events& e = events();
  std::unique_lock<std::mutex> lock(e.mutex, std::try_to_lock);
  if (!lock.owns_lock()) return;  // another thread reads them now
  const Verbs& v = verbs();
  for (size_t d = 0; d < devs.devices().size(); ++d) {
    ibv_context* context = devs.devices()[d].context;
    if (!e.nonBlocking) {
      const int flags = fcntl(context->async_fd, F_GETFL);
      fcntl(context->async_fd, F_SETFL, flags | O_NONBLOCK);
    }
    ibv_async_event event;
    while (v.getAsyncEvent(context, &event) == 0) {
      const std::string text = v.eventText(event.event_type);
      const std::string& name = devs.devices()[d].name;
      switch (event.event_type) {
        case IBV_EVENT_QP_FATAL:
        case IBV_EVENT_QP_REQ_ERR:
        case IBV_EVENT_QP_ACCESS_ERR:
          e.qps[event.element.qp->qp_num] = strCat(text, " on QP ", event.element.qp->qp_num);
          break;
        case IBV_EVENT_PORT_ERR:
          e.ports[{static_cast<int>(d), event.element.port_num}] =
              strCat(text, " on ", name, ":", event.element.port_num);
          break;
        case IBV_EVENT_PORT_ACTIVE:
          e.ports.erase({static_cast<int>(d), event.element.port_num});
          break;
        case IBV_EVENT_DEVICE_FATAL:
          e.devices[static_cast<int>(d)] = strCat(text, " on ", name);
          break;
        default:
          break;
      }
      LOOM_INFO(kLogNet, "ib: ", name, ": ", text);
      v.ackAsyncEvent(&event);
    }
  }
  e.nonBlocking = true;
}

std::string fatalEventFor(uint32_t qpn, int device, int port) {
  Events& e = events();
  std::lock_guard<std::mutex> lock(e.mutex);
  if (auto it = e.devices.find(device); it != e.devices.end()) return it->second;
  if (auto it = e.ports.find({device, port}); it != e.ports.end()) return it->second;
  if (auto it = e.qps.find(qpn); it != e.qps.end()) return it->second;
  return "";
}

void forgetQp(uint32_t qpn) {
  Events& e = events();
  std::lock_guard<std::mutex> lock(e.mutex);
  e.qps.erase(qpn);
}

}  // namespace loom::transport::ib
