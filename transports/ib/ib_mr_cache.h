// Registrations of user memory with the RDMA devices, so large steps go to the wire straight
// from the caller's buffer (zero-copy) instead of through the ring.
//
// Which memory. Regions from loomMemAlloc (src/mem/region_registry.h, and its device memory)
// are registered on first use and stay registered until loomMemFree; buffers the user
// registers explicitly (loomCommRegister) until loomCommDeregister. Registering pins pages and
// costs far more than a step, so it happens once per buffer and device, never per step; other
// memory is copied through the ring. GPU memory is registered by dma-buf or nvidia-peermem
// (ib_gdr.h), for GPUDirect connections whose device program posts steps by address. The
// cache is process-wide like the devices' protection domains.
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

// loomMemAlloc of device memory: [base, base + size) is registered (by dma-buf or
// nvidia-peermem) on first use, as a host region is, until loomMemFree.
void rememberDeviceAllocation(const void* base, size_t size);

// loomMemFree: drops the registrations of the region starting at `base`.
void forgetRegion(const void* base);

// How many memory registrations of user buffers exist now (for tests).
size_t liveRegistrations();

}  // namespace loom::transport::ib
