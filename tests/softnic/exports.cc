// TEST DOUBLE: the libibverbs ABI of libloom_softnic.so. Each ibv_* function forwards to the soft
// NIC; softnic.map gives them libibverbs' symbol versions, so dlsym and dlvsym find the same
// entries they find in libibverbs.so.1. Only the shared library has these names: the static
// library stays linkable next to the real libibverbs.
#include "softnic_api.h"
#include "verbs_impl.h"

// verbs.h turns these names into inline wrappers; the library exports the real functions.
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

using namespace softnic;

extern "C" {

ibv_device** ibv_get_device_list(int* num) { return getDeviceList(num); }
void ibv_free_device_list(ibv_device** list) { freeDeviceList(list); }
const char* ibv_get_device_name(ibv_device* device) { return getDeviceName(device); }
__be64 ibv_get_device_guid(ibv_device* device) { return getDeviceGuid(device); }
ibv_context* ibv_open_device(ibv_device* device) { return openDevice(device); }
int ibv_close_device(ibv_context* context) { return closeDevice(context); }
int ibv_query_device(ibv_context* context, ibv_device_attr* attr) {
  return queryDevice(context, attr);
}
int ibv_query_port(ibv_context* context, uint8_t port, _compat_ibv_port_attr* attr) {
  return queryPortCompat(context, port, attr);
}
int ibv_query_gid(ibv_context* context, uint8_t port, int index, ibv_gid* gid) {
  return queryGid(context, port, index, gid);
}
ibv_pd* ibv_alloc_pd(ibv_context* context) { return allocPd(context); }
int ibv_dealloc_pd(ibv_pd* pd) { return deallocPd(pd); }
ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  return regMr(pd, addr, length, access);
}
ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t length, uint64_t iova, int access) {
  return regMrIova(pd, addr, length, iova, access);
}
ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                         unsigned int access) {
  return regMrIova2(pd, addr, length, iova, access);
}
ibv_mr* ibv_reg_dmabuf_mr(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd,
                          int access) {
  return regDmabufMr(pd, offset, length, iova, fd, access);
}
int ibv_dereg_mr(ibv_mr* mr) { return deregMr(mr); }
ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) {
  return createCompChannel(context);
}
int ibv_destroy_comp_channel(ibv_comp_channel* channel) { return destroyCompChannel(channel); }
ibv_cq* ibv_create_cq(ibv_context* context, int cqe, void* cqContext, ibv_comp_channel* channel,
                      int vector) {
  return createCq(context, cqe, cqContext, channel, vector);
}
int ibv_destroy_cq(ibv_cq* cq) { return destroyCq(cq); }
int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cqContext) {
  return getCqEvent(channel, cq, cqContext);
}
void ibv_ack_cq_events(ibv_cq* cq, unsigned int count) { ackCqEvents(cq, count); }
ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* init) { return createQp(pd, init); }
int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) { return modifyQp(qp, attr, mask); }
int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask, ibv_qp_init_attr* init) {
  return queryQp(qp, attr, mask, init);
}
int ibv_destroy_qp(ibv_qp* qp) { return destroyQp(qp); }
int ibv_get_async_event(ibv_context* context, ibv_async_event* event) {
  return getAsyncEvent(context, event);
}
void ibv_ack_async_event(ibv_async_event* event) { ackAsyncEvent(event); }
const char* ibv_wc_status_str(ibv_wc_status status) { return wcStatusStr(status); }
const char* ibv_event_type_str(ibv_event_type event) { return eventTypeStr(event); }
const char* ibv_port_state_str(ibv_port_state state) { return portStateStr(state); }
int _ibv_query_gid_ex(ibv_context* context, uint32_t port, uint32_t index, ibv_gid_entry* entry,
                      uint32_t flags, size_t entrySize) {
  return queryGidEx(context, port, index, entry, flags, entrySize);
}
int ibv_fork_init() { return forkInit(); }

}  // extern "C"
