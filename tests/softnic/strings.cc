// TEST DOUBLE: the soft NIC's small helpers from libibverbs' ABI that a transport uses around
// the verbs proper: status and event names for messages, the extended GID query (GID type), and
// ibv_fork_init, which the soft NIC needs nothing for.
#include <cerrno>
#include <cstring>

#include "softnic.h"
#include "verbs_impl.h"

namespace softnic {

const char* wcStatusStr(ibv_wc_status status) {
  static const char* const kNames[] = {"success",
                                       "local length error",
                                       "local QP operation error",
                                       "local EE context operation error",
                                       "local protection error",
                                       "Work Request Flushed Error",
                                       "memory management operation error",
                                       "bad response error",
                                       "local access error",
                                       "remote invalid request error",
                                       "remote access error",
                                       "remote operation error",
                                       "transport retry counter exceeded",
                                       "RNR retry counter exceeded",
                                       "local RDD violation error",
                                       "remote invalid RD request",
                                       "aborted error",
                                       "invalid EE context number",
                                       "invalid EE context state",
                                       "fatal error",
                                       "response timeout error",
                                       "general error",
                                       "TM error",
                                       "TM rendezvous error"};
  unsigned i = unsigned(status);
  return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : "unknown";
}

const char* eventTypeStr(ibv_event_type event) {
  static const char* const kNames[] = {"CQ error",
                                       "local work queue catastrophic error",
                                       "invalid request local work queue error",
                                       "local access violation work queue error",
                                       "communication established",
                                       "send queue drained",
                                       "path migrated",
                                       "path migration request error",
                                       "local catastrophic error",
                                       "port active",
                                       "port error",
                                       "LID change",
                                       "P_Key change",
                                       "SM change",
                                       "SRQ catastrophic error",
                                       "SRQ limit reached",
                                       "last WQE reached",
                                       "client reregistration",
                                       "GID table change",
                                       "WQ fatal"};
  unsigned i = unsigned(event);
  return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : "unknown";
}

const char* portStateStr(ibv_port_state state) {
  static const char* const kNames[] = {"PORT_NOP",   "PORT_DOWN",   "PORT_INIT",
                                       "PORT_ARMED", "PORT_ACTIVE", "PORT_ACTIVE_DEFER"};
  unsigned i = unsigned(state);
  return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : "invalid state";
}

int queryGidEx(ibv_context* context, uint32_t port, uint32_t index, ibv_gid_entry* entry,
               uint32_t flags, size_t entrySize) {
  if (flags != 0 || entrySize < sizeof(ibv_gid_entry)) return EINVAL;
  ibv_gid_entry e{};
  if (int rc = queryGid(context, uint8_t(port), int(index), &e.gid)) return rc;
  e.gid_index = index;
  e.port_num = port;
  e.gid_type = IBV_GID_TYPE_ROCE_V2;
  e.ndev_ifindex = 0;  // no netdev behind a soft NIC
  std::memcpy(entry, &e, sizeof(e));
  return 0;
}

int forkInit() { return 0; }

}  // namespace softnic
