// The verbs interface: every libibverbs function loom calls, as one table of function pointers.
//
// Why a table. libibverbs is optional at run time (one loom binary runs where it is absent),
// so it is never linked: the table is filled by dlopen("libibverbs.so.1") (LOOM_IBVERBS_LIB
// names another library, such as the software NIC the tests use) or, in tests, by a symbol
// lookup function (the software NIC's loom_softnic_lookup). One fill routine serves both
// sources. No other file calls an ibv_ function (the ib_verbs_only_in_table test checks it),
// so what the transport needs of a NIC is this list and nothing more.
//
// The data-path calls (post_send, post_recv, poll_cq, req_notify_cq) are static inline in
// verbs.h: they jump through context->ops, which the provider filled. They are entries here
// too, as small functions doing exactly that, so a caller never tells the two kinds apart.
//
// Optional entries: ibv_reg_mr_iova2 (IBVERBS_1.8) and ibv_reg_dmabuf_mr (IBVERBS_1.12) are
// looked up by version and may be null; ibv_wc_status_str and ibv_event_type_str only make
// messages nicer.
#pragma once

#include <infiniband/verbs.h>

#include <functional>
#include <string>

namespace loom::transport::ib {

struct Verbs {
  // Required.
  ibv_device** (*getDeviceList)(int* num) = nullptr;
  void (*freeDeviceList)(ibv_device** list) = nullptr;
  const char* (*getDeviceName)(ibv_device* device) = nullptr;
  ibv_context* (*openDevice)(ibv_device* device) = nullptr;
  int (*closeDevice)(ibv_context* context) = nullptr;
  int (*queryDevice)(ibv_context* context, ibv_device_attr* attr) = nullptr;
  int (*queryPort)(ibv_context* context, uint8_t port, ibv_port_attr* attr) = nullptr;
  int (*queryGid)(ibv_context* context, uint8_t port, int index, ibv_gid* gid) = nullptr;
  ibv_pd* (*allocPd)(ibv_context* context) = nullptr;
  int (*deallocPd)(ibv_pd* pd) = nullptr;
  ibv_mr* (*regMr)(ibv_pd* pd, void* addr, size_t length, int access) = nullptr;
  int (*deregMr)(ibv_mr* mr) = nullptr;
  ibv_comp_channel* (*createCompChannel)(ibv_context* context) = nullptr;
  int (*destroyCompChannel)(ibv_comp_channel* channel) = nullptr;
  ibv_cq* (*createCq)(ibv_context* context, int cqe, void* cqContext, ibv_comp_channel* channel,
                      int compVector) = nullptr;
  int (*destroyCq)(ibv_cq* cq) = nullptr;
  int (*getCqEvent)(ibv_comp_channel* channel, ibv_cq** cq, void** cqContext) = nullptr;
  void (*ackCqEvents)(ibv_cq* cq, unsigned int nevents) = nullptr;
  ibv_qp* (*createQp)(ibv_pd* pd, ibv_qp_init_attr* attr) = nullptr;
  int (*modifyQp)(ibv_qp* qp, ibv_qp_attr* attr, int mask) = nullptr;
  int (*destroyQp)(ibv_qp* qp) = nullptr;
  int (*getAsyncEvent)(ibv_context* context, ibv_async_event* event) = nullptr;
  void (*ackAsyncEvent)(ibv_async_event* event) = nullptr;
  // Optional (null when the library lacks them).
  ibv_mr* (*regMrIova2)(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                        unsigned int access) = nullptr;
  ibv_mr* (*regDmabufMr)(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd,
                         int access) = nullptr;
  const char* (*wcStatusStr)(ibv_wc_status status) = nullptr;
  const char* (*eventTypeStr)(ibv_event_type type) = nullptr;
  // The data path: context->ops, as verbs.h's inline functions call it.
  int (*postSend)(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) = nullptr;
  int (*postRecv)(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) = nullptr;
  int (*pollCq)(ibv_cq* cq, int num, ibv_wc* wc) = nullptr;
  int (*reqNotifyCq)(ibv_cq* cq, int solicitedOnly) = nullptr;

  // Where the table came from ("libibverbs.so.1", "in-process lookup"), for messages.
  std::string source;
  // Empty when every required entry is filled; else why the table is unusable.
  std::string error;
  bool usable() const { return error.empty(); }

  // Texts for messages, with or without the library's own helpers.
  std::string statusText(ibv_wc_status status) const;
  std::string eventText(ibv_event_type type) const;
};

// Looks up one symbol: by name, or by name and version ("IBVERBS_1.12"; null version: any).
// Returns null when the source lacks it.
using SymbolResolver = std::function<void*(const char* name, const char* version)>;

// Fills a table from `resolve`; a missing required symbol leaves Verbs::error saying which.
Verbs fillVerbs(const SymbolResolver& resolve, std::string source);

// dlopen()s `library` (kept open for the process's life) and fills the table from it. A
// library that does not load gives a table whose error quotes dlerror().
Verbs loadVerbs(const std::string& library);

// The process's table: LOOM_IBVERBS_LIB, else libibverbs.so.1, loaded on first use. Tests
// may install another one first (useVerbsForTest); the table then stays for the process.
const Verbs& verbs();
void useVerbsForTest(Verbs table);

}  // namespace loom::transport::ib
