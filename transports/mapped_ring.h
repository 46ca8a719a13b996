// The control of a Simple ring that a GPU steps while a host thread (a proxy) moves its steps:
// counters and per-slot words in pinned host memory mapped into the GPU, which both sides poll
// across PCIe. The proxy ring (proxy/proxy_connection.h) has its slots in that host memory
// too; a GPUDirect RDMA ring (ib/ib_gdr.h) has them in device memory, where the NIC reaches
// them. Either way the device program steps it like a memory transport's Simple ring
// (src/kernels/connection_view.h).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "src/kernels/connection_view.h"
#include "transports/slot_ring.h"

namespace loom::transport {

// At the start of the mapped page; the counters on their own lines.
struct MappedRingControl {
  alignas(kCacheLine) std::atomic<uint64_t> tail{0};  // written by the sending side only
  alignas(kCacheLine) std::atomic<uint64_t> head{0};  // written by the receiving side only
  alignas(kCacheLine) uint64_t words[kSlots] = {};    // bytes | tag << 32
  uint64_t direct[kSlots] = {};                       // always 0: steps are in their slots
  uint64_t region[kSlots] = {};                       // always 0
};
static_assert(sizeof(std::atomic<uint64_t>) == sizeof(uint64_t));

// The device's view of a ring whose kSlots slots of `slotBytes` start at the device address
// `slots` and whose control lies in host memory at `control`, inside a mapping that starts at
// `host` on the host and at `mapped` on the device.
inline ConnectionView mappedSimpleView(MemoryKind memory, uint8_t* slots, size_t slotBytes,
                                       const MappedRingControl* control, const void* host,
                                       void* mapped) {
  auto onDevice = [&](const void* p) {
    return reinterpret_cast<uint64_t*>(
        static_cast<uint8_t*>(mapped) +
        (static_cast<const uint8_t*>(p) - static_cast<const uint8_t*>(host)));
  };
  ConnectionView v;
  v.protocol = Protocol::kSimple;
  v.memory = memory;
  v.simple.slots = slots;
  v.simple.slotBytes = slotBytes;
  v.simple.nslots = kSlots;
  v.simple.tail = onDevice(&control->tail);
  v.simple.head = onDevice(&control->head);
  v.simple.words = onDevice(control->words);
  v.simple.direct = onDevice(control->direct);
  v.simple.region = onDevice(control->region);
  return v;
}

}  // namespace loom::transport
