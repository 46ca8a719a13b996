#include "transports/ib/ib_verbs.h"

#include <dlfcn.h>

#include <mutex>
#include <optional>

#include "src/base/env.h"
#include "src/base/strings.h"

namespace loom::transport::ib {
namespace {

// The inline data-path functions of verbs.h, as plain functions: each goes through the ops
// the provider put in the context, exactly as ibv_post_send() and friends do.
int opsPostSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  return qp->context->ops.post_send(qp, wr, bad);
}
int opsPostRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  return qp->context->ops.post_recv(qp, wr, bad);
}
int opsPollCq(ibv_cq* cq, int num, ibv_wc* wc) { return cq->context->ops.poll_cq(cq, num, wc); }
int opsReqNotifyCq(ibv_cq* cq, int solicitedOnly) {
  return cq->context->ops.req_notify_cq(cq, solicitedOnly);
}

template <typename Fn>
void fill(Fn& slot, const SymbolResolver& resolve, const char* name, const char* version,
          std::string* missing) {
  slot = reinterpret_cast<Fn>(resolve(name, version));
  if (slot == nullptr && missing != nullptr) *missing += strCat(missing->empty() ? "" : ", ", name);
}

struct Process {
  std::mutex mutex;
  std::optional<Verbs> table;
};
Process& process() {
  static Process p;
  return p;
}

}  // namespace

std::string Verbs::statusText(ibv_wc_status status) const {
  const char* text = wcStatusStr != nullptr ? wcStatusStr(status) : nullptr;
  return strCat(text != nullptr ? text : "work completion error", " (status ",
                static_cast<int>(status), ")");
}

std::string Verbs::eventText(ibv_event_type type) const {
  const char* text = eventTypeStr != nullptr ? eventTypeStr(type) : nullptr;
  return strCat(text != nullptr ? text : "async event", " (event ", static_cast<int>(type), ")");
}

Verbs fillVerbs(const SymbolResolver& resolve, std::string source) {
  Verbs v;
  v.source = std::move(source);
  std::string missing;
  fill(v.getDeviceList, resolve, "ibv_get_device_list", nullptr, &missing);
  fill(v.freeDeviceList, resolve, "ibv_free_device_list", nullptr, &missing);
  fill(v.getDeviceName, resolve, "ibv_get_device_name", nullptr, &missing);
  fill(v.openDevice, resolve, "ibv_open_device", nullptr, &missing);
  fill(v.closeDevice, resolve, "ibv_close_device", nullptr, &missing);
  fill(v.queryDevice, resolve, "ibv_query_device", nullptr, &missing);
  fill(v.queryPort, resolve, "ibv_query_port", nullptr, &missing);
  fill(v.queryGid, resolve, "ibv_query_gid", nullptr, &missing);
  fill(v.allocPd, resolve, "ibv_alloc_pd", nullptr, &missing);
  fill(v.deallocPd, resolve, "ibv_dealloc_pd", nullptr, &missing);
  fill(v.regMr, resolve, "ibv_reg_mr", nullptr, &missing);
  fill(v.deregMr, resolve, "ibv_dereg_mr", nullptr, &missing);
  fill(v.createCompChannel, resolve, "ibv_create_comp_channel", nullptr, &missing);
  fill(v.destroyCompChannel, resolve, "ibv_destroy_comp_channel", nullptr, &missing);
  fill(v.createCq, resolve, "ibv_create_cq", nullptr, &missing);
  fill(v.destroyCq, resolve, "ibv_destroy_cq", nullptr, &missing);
  fill(v.getCqEvent, resolve, "ibv_get_cq_event", nullptr, &missing);
  fill(v.ackCqEvents, resolve, "ibv_ack_cq_events", nullptr, &missing);
  fill(v.createQp, resolve, "ibv_create_qp", nullptr, &missing);
  fill(v.modifyQp, resolve, "ibv_modify_qp", nullptr, &missing);
  fill(v.destroyQp, resolve, "ibv_destroy_qp", nullptr, &missing);
  fill(v.getAsyncEvent, resolve, "ibv_get_async_event", nullptr, &missing);
  fill(v.ackAsyncEvent, resolve, "ibv_ack_async_event", nullptr, &missing);
  fill(v.regMrIova2, resolve, "ibv_reg_mr_iova2", "IBVERBS_1.8", nullptr);
  fill(v.regDmabufMr, resolve, "ibv_reg_dmabuf_mr", "IBVERBS_1.12", nullptr);
  fill(v.wcStatusStr, resolve, "ibv_wc_status_str", nullptr, nullptr);
  fill(v.eventTypeStr, resolve, "ibv_event_type_str", nullptr, nullptr);
  v.postSend = opsPostSend;
  v.postRecv = opsPostRecv;
  v.pollCq = opsPollCq;
  v.reqNotifyCq = opsReqNotifyCq;
  if (!missing.empty())
    v.error =
        strCat(v.source, " lacks required verbs (", missing, "); it is not a usable libibverbs");
  return v;
}

Verbs loadVerbs(const std::string& library) {
  // RTLD_LOCAL keeps its symbols out of the global namespace, so a second verbs library (the
  // software NIC beside a real libibverbs) never resolves into the other.
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    Verbs v;
    v.source = library;
    v.error = strCat("cannot load ", library, " (", why != nullptr ? why : "unknown error",
                     "); install rdma-core's libibverbs or point LOOM_IBVERBS_LIB at it");
    return v;
  }
  // Versioned lookups find the optional entries only where the library really provides that
  // ABI; libraries without symbol versions (a test double) answer the plain lookup.
  return fillVerbs(
      [handle](const char* name, const char* version) -> void* {
        void* sym = version != nullptr ? dlvsym(handle, name, version) : nullptr;
        return sym != nullptr ? sym : dlsym(handle, name);
      },
      library);
}

const Verbs& verbs() {
  Process& p = process();
  std::lock_guard<std::mutex> lock(p.mutex);
  if (!p.table) {
    std::string library = envString(EnvVar::LOOM_IBVERBS_LIB);
    p.table = loadVerbs(library.empty() ? "libibverbs.so.1" : library);
  }
  return *p.table;
}

void useVerbsForTest(Verbs table) {
  Process& p = process();
  std::lock_guard<std::mutex> lock(p.mutex);
  p.table = std::move(table);
}

}  // namespace loom::transport::ib
