// The LL ring's layout, one definition for every memory transport (shm in shared host memory,
// cuda_ipc in device memory): the planner cuts LL steps to one slot size, and the device
// program reads every LL ring through the same view (src/kernels/connection_view.h), so all
// memory transports must lay their LL rings out alike.
//
// kSlots slots of kLLSlotRawBytes: one header line (word 0: byte count, word 1: tag; the LL
// word rules are in src/kernels/ll_words.h), then kLLSlotBytes / 4 data words of 8 bytes. The
// size is fixed, not LOOM_BUFFSIZE: LL only pays off for messages this small, so larger ones
// belong on Simple (the planner's choice, not the transport's).
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/kernels/connection_view.h"
#include "src/kernels/ll_words.h"
#include "transports/slot_ring.h"

namespace loom::transport {

inline constexpr size_t kLLSlotBytes = 4096;          // payload per step
inline constexpr size_t kLLHeaderBytes = kCacheLine;  // words 0 and 1, then padding
inline constexpr size_t kLLSlotRawBytes = kLLHeaderBytes + 2 * kLLSlotBytes;
inline constexpr size_t kLLRingBytes = kSlots * kLLSlotRawBytes;
inline constexpr uint64_t kLLRefreshSteps = uint64_t{1} << 30;
static_assert(kLLHeaderBytes == kLLHeaderWords * 8);
// A refresh round (ll_words.h) must start at slot 0 and write each slot once.
static_assert(kLLRefreshSteps % kSlots == 0 && kLLRefreshSteps < (uint64_t{1} << 32));

// The view of an LL ring whose kSlots slots start at `slots` (every word 0 before the first
// step: a flag no step uses); `head` is the receiver's released steps, `step` this side's
// next step (connection_view.h).
inline ConnectionView llRingView(uint64_t* slots, const uint64_t* head, uint64_t* step,
                                 MemoryKind memory) {
  ConnectionView v;
  v.protocol = Protocol::kLL;
  v.memory = memory;
  v.ll.slots = slots;
  v.ll.nslots = kSlots;
  v.ll.slotStrideWords = kLLSlotRawBytes / 8;
  v.ll.headerWords = kLLHeaderWords;
  v.ll.dataWords = kLLSlotBytes / kLLBytesPerWord;
  v.ll.refreshSteps = kLLRefreshSteps;
  v.ll.head = head;
  v.ll.step = step;
  return v;
}

}  // namespace loom::transport
