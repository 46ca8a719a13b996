// TEST DOUBLE: the soft NIC's implementation of each libibverbs entry point. exports.cc gives
// them their ibv_* names in libloom_softnic.so; loom_softnic_lookup() hands them out by name.
// Each follows libibverbs' convention: pointers are NULL with errno set, ints are 0 or an errno
// (ibv_get_cq_event and ibv_get_async_event return -1 like the real library).
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>

struct _compat_ibv_port_attr;

namespace softnic {

ibv_device** getDeviceList(int* num);
void freeDeviceList(ibv_device** list);
const char* getDeviceName(ibv_device* device);
__be64 getDeviceGuid(ibv_device* device);
ibv_context* openDevice(ibv_device* device);
int closeDevice(ibv_context* context);
int queryDevice(ibv_context* context, ibv_device_attr* attr);
// The exported ibv_query_port fills the compat prefix of ibv_port_attr, as libibverbs 1.1 does;
// verbs.h's inline ibv_query_port goes through verbs_context::query_port (fillPort) instead.
int queryPortCompat(ibv_context* context, uint8_t port, _compat_ibv_port_attr* attr);
int queryPortFull(ibv_context* context, uint8_t port, ibv_port_attr* attr, size_t len);
int queryGid(ibv_context* context, uint8_t port, int index, ibv_gid* gid);
ibv_pd* allocPd(ibv_context* context);
int deallocPd(ibv_pd* pd);
ibv_mr* regMr(ibv_pd* pd, void* addr, size_t length, int access);
ibv_mr* regMrIova(ibv_pd* pd, void* addr, size_t length, uint64_t iova, int access);
ibv_mr* regMrIova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned access);
ibv_mr* regDmabufMr(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access);
int deregMr(ibv_mr* mr);
ibv_comp_channel* createCompChannel(ibv_context* context);
int destroyCompChannel(ibv_comp_channel* channel);
ibv_cq* createCq(ibv_context* context, int cqe, void* cqContext, ibv_comp_channel* channel,
                 int vector);
int destroyCq(ibv_cq* cq);
int getCqEvent(ibv_comp_channel* channel, ibv_cq** cq, void** cqContext);
void ackCqEvents(ibv_cq* cq, unsigned count);
int pollCq(ibv_cq* cq, int num, ibv_wc* wc);
int reqNotifyCq(ibv_cq* cq, int solicitedOnly);
ibv_qp* createQp(ibv_pd* pd, ibv_qp_init_attr* init);
int modifyQp(ibv_qp* qp, ibv_qp_attr* attr, int mask);
int queryQp(ibv_qp* qp, ibv_qp_attr* attr, int mask, ibv_qp_init_attr* init);
int destroyQp(ibv_qp* qp);
int postSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
int postRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);
const char* wcStatusStr(ibv_wc_status status);
const char* eventTypeStr(ibv_event_type event);
const char* portStateStr(ibv_port_state state);
int queryGidEx(ibv_context* context, uint32_t port, uint32_t index, ibv_gid_entry* entry,
               uint32_t flags, size_t entrySize);
int forkInit();
int getAsyncEvent(ibv_context* context, ibv_async_event* event);
void ackAsyncEvent(ibv_async_event* event);

}  // namespace softnic
