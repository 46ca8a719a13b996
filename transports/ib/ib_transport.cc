#include "transports/ib/ib_transport.h"

#include "src/base/error.h"
#include "src/base/logging.h"
#include "transports/ib/ib_connection.h"
#include "transports/ib/ib_devices.h"
#include "transports/ib/ib_gdr.h"

namespace loom::transport::ib {
namespace {

constexpr uint32_t kBlobMagic = 0x4c4d4942;  // "LMIB"
constexpr uint32_t kAckMagic = 0x4c4d4941;   // "LMIA"

// Phase 1: how the sender reaches the receiver's QP and ring.
struct IbBlob {
  uint32_t magic = kBlobMagic;
  uint32_t slots = kSlots;
  uint64_t slotBytes = 0;
  uint64_t ring = 0;  // address of the receiver's registered ring (a GdrRing's data slots)
  uint32_t rkey = 0;
  uint32_t wordsRkey = 0;
  uint64_t words = 0;  // a GdrRing's words, in its control page; 0 for a host ring
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

// A GPU rank's ring: GPUDirect where it can be registered (ib_gdr.h), else nullptr, and the
// registry stages the connection through the proxy. Either way the choice is logged.
std::unique_ptr<GdrRing> gdrRingFor(const SetupContext& ctx, const IbPort& port, size_t slotBytes,
                                    int access, const std::string& link) {
  if (ctx.device < 0) return nullptr;
  std::string why;
  auto gdr = tryGdrRing(port.device, ctx.device, slotBytes, access, link, &why);
  if (gdr != nullptr)
    LOOM_INFO(kLogNet, link, ": GPUDirect RDMA (", gdr->how(), ") between GPU ", ctx.device,
              " and ", port.deviceName);
  else
    LOOM_INFO(kLogNet, link, ": no GPUDirect RDMA between GPU ", ctx.device, " and ",
              port.deviceName, " (", why, "); steps are staged through pinned host memory");
  return gdr;
}

class IbPendingRecv final : public PendingRecv {
 public:
  IbPendingRecv(const SetupContext& ctx, std::unique_ptr<QueuePair> qp,
                std::unique_ptr<IbRing> ring, std::unique_ptr<GdrRing> gdr)
      : peer_(ctx.peer), qp_(std::move(qp)), ring_(std::move(ring)), gdr_(std::move(gdr)) {}

  std::unique_ptr<RecvConnection> finish(const ConnectBlob& ackBlob) override {
    const auto ack = fromBlob<IbAck>(ackBlob);
    LOOM_ENFORCE(ack.magic == kAckMagic, RemoteError, "rank ", peer_,
                 " sent a malformed ib acknowledgement (is it the same loom version?)");
    qp_->toRtr(ack.qp);
    qp_->toRts();
    auto conn = std::make_unique<IbRecvConnection>(std::move(qp_), std::move(ring_),
                                                   std::move(gdr_), peer_);
    conn->grantFirstCredits();
    return conn;
  }

 private:
  int peer_;
  std::unique_ptr<QueuePair> qp_;
  std::unique_ptr<IbRing> ring_;
  std::unique_ptr<GdrRing> gdr_;
};

}  // namespace

bool IbTransport::canConnect(const PeerPair&) const { return IbDevices::instance().usable(); }

std::string IbTransport::whyNot(const PeerPair&) const { return IbDevices::instance().reason(); }

std::unique_ptr<PendingRecv> IbTransport::setupRecv(const SetupContext& ctx, ConnectBlob* blob) {
  const IbPort& port = portFor(ctx);
  const std::string link = linkText(ctx.peer, ctx.peers.rank(), ctx.channel);
  constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  IbBlob b;
  b.slotBytes = ctx.slotBytes;
  std::unique_ptr<IbRing> ring;
  auto gdr = gdrRingFor(ctx, port, ctx.slotBytes, kAccess, link);
  if (gdr != nullptr) {
    b.ring = gdr->dataAddress();
    b.rkey = gdr->dataRkey();
    b.words = gdr->wordsAddress();
    b.wordsRkey = gdr->controlRkey();
  } else {
    ring = std::make_unique<IbRing>(port.device, ctx.slotBytes, kAccess, link);
    b.ring = ring->address();
    b.rkey = ring->rkey();
  }
  auto qp = std::make_unique<QueuePair>(port, kSendDepth, kRecvDepth, link);
  qp->toInit();
  qp->postReceives(kRecvDepth);
  b.qp = qp->address();
  toBlob(b, blob);
  return std::make_unique<IbPendingRecv>(ctx, std::move(qp), std::move(ring), std::move(gdr));
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
  std::unique_ptr<IbRing> ring;
  auto gdr = gdrRingFor(ctx, port, b.slotBytes, IBV_ACCESS_LOCAL_WRITE, link);
  if (gdr == nullptr)
    ring = std::make_unique<IbRing>(port.device, b.slotBytes, IBV_ACCESS_LOCAL_WRITE, link);
  auto qp = std::make_unique<QueuePair>(port, kSendDepth, kRecvDepth, link);
  qp->toInit();
  qp->postReceives(kRecvDepth);
  qp->toRtr(b.qp);
  qp->toRts();
  IbAck a;
  a.qp = qp->address();
  toBlob(a, ack);
  const RemoteRing remote{b.ring, b.rkey, b.wordsRkey, b.words};
  return std::make_unique<IbSendConnection>(std::move(qp), std::move(ring), std::move(gdr),
                                            port.device, remote, ctx.peer);
}

}  // namespace loom::transport::ib
