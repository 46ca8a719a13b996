// The LL ("low latency") protocol over shared memory, behind the same SendConnection and
// RecvConnection as Simple (transport.h), so a primitive that knows nothing of LL still works.
//
// Why. Simple publishes a slot with a release store of tail and the receiver must load tail
// before it may touch the data: on small messages the two cache-line round trips (data, then
// counter) dominate. LL puts a 4-byte flag next to every 4 bytes of data in one 8-byte word,
// stored with a single 64-bit atomic store: a word whose flag is right carries valid data by
// itself, so the receiver needs no counter and no fence (relaxed atomics; the flag is the
// synchronisation, which also holds on weakly ordered CPUs). The price is half the memory and
// bandwidth, so LL is for small messages.
//
// Layout of the segment (created by the receiver, imported by the sender, like Simple): a
// control page whose first cache line holds head (the receiver's released steps, the only
// counter: flow control is Simple's, at most kSlots steps ahead),
// then the LL ring every memory transport lays out alike (transports/ring_views.h): kSlots
// slots, 4 KiB of payload per step.
//
// Flags, header order and refresh: the LL word rules in src/kernels/ll_words.h, shared with
// the primitives that write and read the words.
//
// Both sides expose the ring through view() (src/kernels/connection_view.h), for a primitive
// that writes its step's data words straight into the slot and publishes them with
// postWritten(), or reads a landed step straight from the slot after tryReceiveInView(). The
// CPU executor uses the other way (src/exec/cpu/prim_task.cc says why): tryAcquire hands out a
// private, pre-touched staging buffer that post() packs into the slot, and tryReceive unpacks
// a landed step into another.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "transports/ring_views.h"
#include "transports/slot_ring.h"
#include "transports/transport_setup.h"

namespace loom::transport::shm {

using transport::kLLRefreshSteps;
using transport::kLLSlotBytes;
using transport::kLLSlotRawBytes;
inline constexpr size_t kLLSegmentBytes = kPageBytes + kLLRingBytes;

// Phase 1 and phase 2 of an LL connection (ShmTransport calls them when ctx.protocol is kLL).
std::unique_ptr<PendingRecv> setupLLRecv(const SetupContext& ctx, ConnectBlob* blob);
std::unique_ptr<SendConnection> connectLLSend(const SetupContext& ctx, const ConnectBlob& blob,
                                              ConnectBlob* ack);

}  // namespace loom::transport::shm
