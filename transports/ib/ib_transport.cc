#include "transports/ib/ib_transport.h"

#include "src/base/error.h"
#include "transports/ib/ib_connection.h"
#include "transports/ib/ib_devices.h"

namespace loom::transport::ib {
namespace {

constexpr uint32_t kBlobMagic = 0x4c4d4942;  // "LMIB"
constexpr uint32_t kAckMagic = 0x4c4d4941;   // "LMIA"

// Phase 1: how the sender reaches the receiver's QP and ring.
struct IbBlob {
  uint32_t magic = kBlobMagic;
  uint32_t slots = kSlots;
  uint64_t slotBytes = 0;
  uint64_t ring = 0;  // address of the receiver's registered ring
  uint32_t rkey = 0;
  uint32_t reserved = 0;
  QpAddress qp;
};

// Phase 2: how the receiver reaches the sender's QP.
struct IbAck {
  uint32_t magic = kAckMagic;
  uint32_t reserved = 0;
  QpAddress qp;
};

const IbPort& portFor(const SetupContext& ctx) {
  const IbDevices& devs = IbDevices::instance();
  LOOM_ENFORCE(devs.usable(), InvalidArgument, "the ib transport cannot connect rank ",
               ctx.peers.rank(), " and rank ", ctx.peer, ": ", devs.reason());
  const topo::Nic* nic = ctx.peers.localNic();
  return devs.ports()[choosePort(devs.ports(), nic != nullptr ? nic->name : "", ctx.peers.rank())];
}

class IbPendingRecv final : public PendingRecv {
 public:
  IbPendingRecv(const SetupContext& ctx, std::unique_ptr<QueuePair> qp,
                std::unique_ptr<IbRing> ring)
      : peer_(ctx.peer), qp_(std::move(qp)), ring_(std::move(ring)) {}

  std::unique_ptr<RecvConnection> finish(const ConnectBlob& ackBlob) override {
    const auto ack = fromBlob<IbAck>(ackBlob);
    LOOM_ENFORCE(ack.magic == kAckMagic, RemoteError, "rank ", peer_,
                 " sent a malformed ib acknowledgement (is it the same loom version?)");
    qp_->toRtr(ack.qp);
    qp_->toRts();
    auto conn = std::make_unique<IbRecvConnection>(std::move(qp_), std::move(ring_), peer_);
    conn->grantFirstCredits();
    return conn;
  }

 private:
  int peer_;
  std::unique_ptr<QueuePair> qp_;
  std::unique_ptr<IbRing> ring_;
};

}  // namespace

bool IbTransport::canConnect(const PeerPair&) const { return IbDevices::instance().usable(); }

std::string IbTransport::whyNot(const PeerPair&) const { return IbDevices::instance().reason(); }

std::unique_ptr<PendingRecv> IbTransport::setupRecv(const SetupContext& ctx, ConnectBlob* blob) {
  const IbPort& port = portFor(ctx);
  const std::string link = linkText(ctx.peer, ctx.peers.rank(), ctx.channel);
  auto ring = std::make_unique<IbRing>(port.device, ctx.slotBytes,
                                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, link);
  auto qp = std::make_unique<QueuePair>(port, kSendDepth, kRecvDepth, link);
  qp->toInit();
  qp->postReceives(kRecvDepth);
  IbBlob b;
  b.slotBytes = ctx.slotBytes;
  b.ring = ring->address();
  b.rkey = ring->rkey();
  b.qp = qp->address();
  toBlob(b, blob);
  return std::make_unique<IbPendingRecv>(ctx, std::move(qp), std::move(ring));
}

std::unique_ptr<SendConnection> IbTransport::connectSend(const SetupContext& ctx,
                                                         const ConnectBlob& blob,
                                                         ConnectBlob* ack) {
  const auto b = fromBlob<IbBlob>(blob);
  LOOM_ENFORCE(b.magic == kBlobMagic && b.slots == kSlots && b.slotBytes > 0 &&
                   b.slotBytes % kPageBytes == 0 && b.slotBytes <= (size_t{1} << 30),
               RemoteError, "rank ", ctx.peer,
               " sent a malformed ib connection blob (is it the same loom version?)");
  const IbPort& port = portFor(ctx);
  const std::string link = linkText(ctx.peers.rank(), ctx.peer, ctx.channel);
  auto ring = std::make_unique<IbRing>(port.device, b.slotBytes, IBV_ACCESS_LOCAL_WRITE, link);
  auto qp = std::make_unique<QueuePair>(port, kSendDepth, kRecvDepth, link);
  qp->toInit();
  qp->postReceives(kRecvDepth);
  qp->toRtr(b.qp);
  qp->toRts();
  IbAck a;
  a.qp = qp->address();
  toBlob(a, ack);
  return std::make_unique<IbSendConnection>(std::move(qp), std::move(ring), port.device, b.ring,
                                            b.rkey, ctx.peer);
}

}  // namespace loom::transport::ib
