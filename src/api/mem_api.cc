// The C API of loomMemAlloc's regions (src/mem/region_registry.h holds the registry itself) and
// of explicit buffer registration (transports/ib/ib_mr_cache.h holds the RDMA registrations).
#include "loom/loom.h"
#include "src/api/api_guard.h"
#include "src/base/error.h"
#include "src/base/logging.h"
#include "src/comm/comm_registry.h"
#include "src/comm/device.h"
#include "src/mem/region_registry.h"
#if LOOM_HAVE_IBVERBS
#include "transports/ib/ib_mr_cache.h"
#endif

using namespace loom;

extern "C" {

LOOM_API loomResult_t loomMemAlloc(void** ptr, size_t size) {
  return guarded("loomMemAlloc", nullptr, [&] {
    LOOM_ENFORCE(ptr != nullptr, InvalidArgument, "ptr is NULL; pass the address of a void*");
    *ptr = nullptr;
    // On the current device of a live CUDA communicator: device memory, as ncclMemAlloc.
    if (void* device = allocCommDeviceMemory(size)) {
      *ptr = device;
#if LOOM_HAVE_IBVERBS
      transport::ib::rememberDeviceAllocation(device, size);  // GPUDirect reads it in place
#endif
      LOOM_INFO(kLogShm, "loomMemAlloc: ", size, " bytes of device memory at ", *ptr);
      return loomSuccess;
    }
    const MemRegion region = allocRegion(size);
    *ptr = reinterpret_cast<void*>(region.base);
    LOOM_INFO(kLogShm, "loomMemAlloc: region ", region.id, " of ", region.size, " bytes at ", *ptr);
    return loomSuccess;
  });
}

LOOM_API loomResult_t loomMemFree(void* ptr) {
  return guarded("loomMemFree", nullptr, [&] {
#if LOOM_HAVE_IBVERBS
    transport::ib::forgetRegion(ptr);  // before the pages go: nothing stays pinned
#endif
    if (freeCommDeviceMemory(ptr)) return loomSuccess;
    freeRegion(ptr);
    return loomSuccess;
  });
}

LOOM_API loomResult_t loomCommRegister(const loomComm_t comm, void* buff, size_t size,
                                       void** handle) {
  return guarded("loomCommRegister", comm, [&] {
    LOOM_ENFORCE(handle != nullptr, InvalidArgument, "handle is NULL; pass the address of a void*");
    *handle = nullptr;
    findComm(comm);  // throws for an unknown communicator
    LOOM_ENFORCE(buff != nullptr && size > 0, InvalidArgument, "loomCommRegister of ", size,
                 " bytes at ", buff, ": give a non-NULL buffer of at least one byte");
#if LOOM_HAVE_IBVERBS
    *handle = transport::ib::registerBuffer(buff, size);
#else
    *handle = new char(0);  // a handle loomCommDeregister accepts; no transport needs more
#endif
    LOOM_INFO(kLogNet, "loomCommRegister: ", size, " bytes at ", buff);
    return loomSuccess;
  });
}

LOOM_API loomResult_t loomCommDeregister(const loomComm_t comm, void* handle) {
  return guarded("loomCommDeregister", comm, [&] {
    findComm(comm);
    LOOM_ENFORCE(handle != nullptr, InvalidArgument, "handle is NULL");
#if LOOM_HAVE_IBVERBS
    transport::ib::deregisterBuffer(handle);
#else
    delete static_cast<char*>(handle);
#endif
    return loomSuccess;
  });
}

}  // extern "C"
