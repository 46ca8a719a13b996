// TEST DOUBLE: loom_softnic_lookup, the soft NIC's functions by their libibverbs names.
#include <cstring>

#include "softnic_api.h"
#include "verbs_impl.h"

namespace softnic {
namespace {

struct Entry {
  const char* name;
  void* fn;
};

template <class F>
void* fnPtr(F* f) {
  return reinterpret_cast<void*>(f);
}

const Entry kEntries[] = {
    {"ibv_get_device_list", fnPtr(getDeviceList)},
    {"ibv_free_device_list", fnPtr(freeDeviceList)},
    {"ibv_get_device_name", fnPtr(getDeviceName)},
    {"ibv_get_device_guid", fnPtr(getDeviceGuid)},
    {"ibv_open_device", fnPtr(openDevice)},
    {"ibv_close_device", fnPtr(closeDevice)},
    {"ibv_query_device", fnPtr(queryDevice)},
    {"ibv_query_port", fnPtr(queryPortCompat)},
    {"ibv_query_gid", fnPtr(queryGid)},
    {"ibv_alloc_pd", fnPtr(allocPd)},
    {"ibv_dealloc_pd", fnPtr(deallocPd)},
    {"ibv_reg_mr", fnPtr(regMr)},
    {"ibv_reg_mr_iova", fnPtr(regMrIova)},
    {"ibv_reg_mr_iova2", fnPtr(regMrIova2)},
    {"ibv_reg_dmabuf_mr", fnPtr(regDmabufMr)},
    {"ibv_dereg_mr", fnPtr(deregMr)},
    {"ibv_create_comp_channel", fnPtr(createCompChannel)},
    {"ibv_destroy_comp_channel", fnPtr(destroyCompChannel)},
    {"ibv_create_cq", fnPtr(createCq)},
    {"ibv_destroy_cq", fnPtr(destroyCq)},
    {"ibv_get_cq_event", fnPtr(getCqEvent)},
    {"ibv_ack_cq_events", fnPtr(ackCqEvents)},
    {"ibv_create_qp", fnPtr(createQp)},
    {"ibv_modify_qp", fnPtr(modifyQp)},
    {"ibv_query_qp", fnPtr(queryQp)},
    {"ibv_destroy_qp", fnPtr(destroyQp)},
    {"ibv_get_async_event", fnPtr(getAsyncEvent)},
    {"ibv_ack_async_event", fnPtr(ackAsyncEvent)},
    {"ibv_wc_status_str", fnPtr(wcStatusStr)},
    {"ibv_event_type_str", fnPtr(eventTypeStr)},
    {"ibv_port_state_str", fnPtr(portStateStr)},
    {"_ibv_query_gid_ex", fnPtr(queryGidEx)},
    {"ibv_fork_init", fnPtr(forkInit)},
    {"ibv_post_send", fnPtr(postSend)},
    {"ibv_post_recv", fnPtr(postRecv)},
    {"ibv_poll_cq", fnPtr(pollCq)},
    {"ibv_req_notify_cq", fnPtr(reqNotifyCq)},
    {"loom_softnic_inject", fnPtr(loom_softnic_inject)},
    {"loom_softnic_set_port_state", fnPtr(loom_softnic_set_port_state)},
};

}  // namespace
}  // namespace softnic

extern "C" void* loom_softnic_lookup(const char* name) {
  if (name == nullptr) return nullptr;
  for (const auto& e : softnic::kEntries)
    if (std::strcmp(e.name, name) == 0) return e.fn;
  return nullptr;
}
