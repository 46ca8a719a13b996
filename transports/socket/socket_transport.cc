#include "transports/socket/socket_transport.h"

#include "src/base/env.h"
#include "src/base/error.h"
#include "transports/socket/socket_connection.h"
#include "transports/tags.h"

namespace loom::transport {
namespace {

constexpr uint32_t kBlobMagic = 0x4c4d534f;  // "LMSO"
constexpr uint32_t kAckMagic = 0x4c4d5341;   // "LMSA"

// Phase 1 blob: the receiver's ring shape and stream count, which the sender adopts.
struct SocketBlob {
  uint32_t magic = kBlobMagic;
  uint32_t slots = kSlots;
  uint64_t slotBytes = 0;
  uint32_t streams = 0;
};

// Phase 2 acknowledgement: the streams are open (connected and their Hellos sent).
struct SocketAck {
  uint32_t magic = kAckMagic;
  uint32_t streams = 0;
};

int streamsFromEnv() {
  int64_t n = envInt(EnvVar::LOOM_SOCKET_NSTREAMS);
  LOOM_ENFORCE(n >= 1 && n <= kMaxStreams, InvalidArgument, "LOOM_SOCKET_NSTREAMS=", n,
               " is out of range: give 1 to ", kMaxStreams, " TCP streams per connection");
  return static_cast<int>(n);
}

class SocketPendingRecv final : public PendingRecv {
 public:
  SocketPendingRecv(const SetupContext& ctx, int streams, size_t slotBytes)
      : ctx_(ctx), streams_(streams), ring_(slotBytes) {}

  std::unique_ptr<RecvConnection> finish(const ConnectBlob& ackBlob) override {
    auto ack = fromBlob<SocketAck>(ackBlob);
    LOOM_ENFORCE(ack.magic == kAckMagic && ack.streams == static_cast<uint32_t>(streams_),
                 RemoteError, "rank ", ctx_.peer, " sent a malformed socket acknowledgement");
    std::vector<Socket> sockets;
    sockets.reserve(streams_);
    for (int s = 0; s < streams_; ++s)
      sockets.push_back(ctx_.peers.acceptData(ctx_.peer, dataTag(ctx_.batchTag, ctx_.channel, s)));
    LinkName link{ctx_.peer, ctx_.peers.rank(), ctx_.channel};
    return std::make_unique<SocketRecvConnection>(std::move(sockets), std::move(ring_), link);
  }

 private:
  SetupContext ctx_;
  int streams_;
  PrivateRing ring_;
};

}  // namespace

std::unique_ptr<PendingRecv> SocketTransport::setupRecv(const SetupContext& ctx,
                                                        ConnectBlob* blob) {
  SocketBlob b;
  b.slotBytes = ctx.slotBytes;
  b.streams = static_cast<uint32_t>(streamsFromEnv());
  auto pending = std::make_unique<SocketPendingRecv>(ctx, static_cast<int>(b.streams), b.slotBytes);
  toBlob(b, blob);
  return pending;
}

std::unique_ptr<SendConnection> SocketTransport::connectSend(const SetupContext& ctx,
                                                             const ConnectBlob& blob,
                                                             ConnectBlob* ack) {
  auto b = fromBlob<SocketBlob>(blob);
  LOOM_ENFORCE(b.magic == kBlobMagic && b.slots == kSlots && b.slotBytes > 0 &&
                   b.slotBytes % kPageBytes == 0 && b.slotBytes <= (size_t{1} << 30) &&
                   b.streams >= 1 && b.streams <= static_cast<uint32_t>(kMaxStreams),
               RemoteError, "rank ", ctx.peer,
               " sent a malformed socket connection blob (is it the same loom version?)");
  std::vector<Socket> sockets;
  sockets.reserve(b.streams);
  for (uint32_t s = 0; s < b.streams; ++s)
    sockets.push_back(
        ctx.peers.connectData(ctx.peer, dataTag(ctx.batchTag, ctx.channel, static_cast<int>(s))));
  toBlob(SocketAck{kAckMagic, b.streams}, ack);
  LinkName link{ctx.peers.rank(), ctx.peer, ctx.channel};
  return std::make_unique<SocketSendConnection>(std::move(sockets), b.slotBytes, link);
}

}  // namespace loom::transport
