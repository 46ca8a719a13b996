// Registrations of user memory with the RDMA devices, so large steps go to the wire straight
// from the caller's buffer (zero-copy) instead of through the ring.
//
// Which memory. Regions from loomMemAlloc (src/mem/region_registry.h) are registered on first
// use and stay registered until loomMemFree; buffers the user registers explicitly
// (loomCommRegister) until loomCommDeregister. Registering pins pages and costs far more
// than a step, so it happens once per buffer and device, never per step; other memory is
// copied through the ring. The cache is process-wide like the devices' protection domains.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "src/mem/region_registry.h"

namespace loom::transport::ib {

// The lkey of a registration on device `device` (IbDevices index) that covers
// [data, data + bytes): a loomMemAlloc region (`region`, registered now if it is not yet) or an
// explicit registration. nullopt when neither covers it or the device refuses.
std::optional<uint32_t> lkeyFor(int device, const void* data, size_t bytes,
                                const MemRegion* region);

// loomCommRegister: makes [data, data + size) zero-copy on every device used from now on.
// Returns the handle loomCommDeregister takes; registering the same buffer again counts.
void* registerBuffer(const void* data, size_t size);
// Throws InvalidArgument for a handle registerBuffer did not return (or already released).
void deregisterBuffer(void* handle);

// loomMemFree: drops the registrations of the region starting at `base`.
void forgetRegion(const void* base);

// How many memory registrations of user buffers exist now (for tests).
size_t liveRegistrations();

}  // namespace loom::transport::ib
