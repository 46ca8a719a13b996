// Bootstrap tags of transport setup. Bootstrap tags are uint32; transport setup owns every tag
// with bit 31 set, laid out as
//
//   bit 31      1 (transport setup)
//   bits 30-12  batch tag (19 bits: the caller numbers its connectAll batches)
//   bits 11-4   channel (8 bits)
//   bits 3-0    for messages (HelloKind::kMessage): 0 the receiver's blob, 1 the sender's
//               acknowledgement; for data connections (HelloKind::kData): the stream index
//
// A message is matched on (sending rank, tag), so the direction of a connection needs no bit:
// for the pair (A, B) on channel c, A's listener sees B's blob of A -> B and B's ack of B -> A,
// which the kind field tells apart. Data connections are a different Hello kind, so their tags
// may reuse the message values. Two batches, or two channels of one batch, never share a tag,
// so ranks that are a batch apart cannot take each other's messages. The wire protocol
// (Simple or LL) has no bits here: callers give LL connections their own channel ids
// (registry.h), which keeps every channel's tags unique without shrinking the batch field.
#pragma once

#include <cstdint>

#include "src/base/error.h"

namespace loom::transport {

inline constexpr uint32_t kTagSetupBit = 1u << 31;
inline constexpr uint32_t kMaxBatchTag = (1u << 19) - 1;
inline constexpr int kMaxChannels = 1 << 8;
inline constexpr int kMaxStreams = 1 << 4;

enum class SetupMessage : uint32_t { kBlob = 0, kAck = 1 };

inline void checkTagFields(uint32_t batchTag, int channel) {
  LOOM_ENFORCE(batchTag <= kMaxBatchTag, InvalidArgument, "transport batch tag ", batchTag,
               " is out of range (at most ", kMaxBatchTag, "); wrap it around");
  LOOM_ENFORCE(channel >= 0 && channel < kMaxChannels, InvalidArgument, "channel ", channel,
               " is out of range: transports support channels 0 to ", kMaxChannels - 1);
}

inline uint32_t setupTag(uint32_t batchTag, int channel, uint32_t low) {
  return kTagSetupBit | (batchTag << 12) | (static_cast<uint32_t>(channel) << 4) | low;
}

inline uint32_t messageTag(uint32_t batchTag, int channel, SetupMessage kind) {
  return setupTag(batchTag, channel, static_cast<uint32_t>(kind));
}

inline uint32_t dataTag(uint32_t batchTag, int channel, int stream) {
  return setupTag(batchTag, channel, static_cast<uint32_t>(stream));
}

}  // namespace loom::transport
