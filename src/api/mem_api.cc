// The C API of loomMemAlloc's regions (src/mem/region_registry.h holds the registry itself).
#include "loom/loom.h"
#include "src/api/api_guard.h"
#include "src/base/error.h"
#include "src/base/logging.h"
#include "src/comm/device.h"
#include "src/mem/region_registry.h"

using namespace loom;

extern "C" {

LOOM_API loomResult_t loomMemAlloc(void** ptr, size_t size) {
  return guarded("loomMemAlloc", nullptr, [&] {
    LOOM_ENFORCE(ptr != nullptr, InvalidArgument, "ptr is NULL; pass the address of a void*");
    *ptr = nullptr;
    // On the current device of a live CUDA communicator: device memory, as ncclMemAlloc.
    if (void* device = allocCommDeviceMemory(size)) {
      *ptr = device;
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
    if (freeCommDeviceMemory(ptr)) return loomSuccess;
    freeRegion(ptr);
    return loomSuccess;
  });
}

}  // extern "C"
