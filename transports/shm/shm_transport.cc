#include "transports/shm/shm_transport.h"

#include <cstring>
#include <new>
#include <optional>

#include "src/base/env.h"
#include "src/base/error.h"
#include "src/base/logging.h"
#include "src/mem/region_registry.h"
#include "transports/shm/device_mapping.h"
#include "transports/shm/direct_read.h"
#include "transports/shm/ll_connection.h"
#include "transports/shm/registered_read.h"
#include "transports/shm/ring_control.h"
#include "transports/shm/shm_segment.h"
#include "transports/slot_ring.h"

namespace loom::transport {
namespace {

using shm::kRingDataOffset;
using shm::RingControl;

constexpr uint32_t kBlobMagic = 0x4c4d5348;  // "LMSH"
constexpr uint32_t kAckMagic = 0x4c4d5341;   // "LMSA"

// Phase 1 blob: where the receiver's ring is and how it is laid out.
struct ShmBlob {
  uint32_t magic = kBlobMagic;
  uint32_t slots = kSlots;
  uint64_t slotBytes = 0;
  uint64_t segmentBytes = 0;
  shm::SegmentHandle segment;  // how the sender imports the ring
  shm::ProcessIdentity receiver = {};
};

// Phase 2: the sender attached, and chose how the receiver may read its buffers directly.
struct ShmAck {
  uint32_t magic = kAckMagic;
  uint8_t directMode = 0;  // shm::DirectMode
  uint8_t marked = 0;      // the sender holds its lock byte of the ring (shm_segment.h)
  shm::ProcessIdentity sender = {};
};

// Below this a same-process or registered step is copied through the ring: the copy costs less
// than making the sender wait, before its call returns, for the peer to have read its buffer.
constexpr size_t kDirectMin = 8192;

size_t segmentBytesFor(size_t slotBytes) { return kRingDataOffset + kSlots * slotBytes; }

// The ring inside a mapped segment.
struct RingView {
  RingControl* control;
  uint8_t* data;
  size_t slotBytes;

  uint8_t* slot(uint64_t step) const { return data + (step % kSlots) * slotBytes; }

  // The plain view of the ring (connection_view.h). The counters are std::atomic<uint64_t>,
  // lock-free and laid out as a uint64_t (static_assert below), so code that cannot use
  // std::atomic (a kernel) reads and writes them as plain words with its own ordering.
  ConnectionView view() const {
    ConnectionView v;
    v.protocol = Protocol::kSimple;
    v.simple.slots = data;
    v.simple.slotBytes = slotBytes;
    v.simple.nslots = kSlots;
    v.simple.tail = reinterpret_cast<uint64_t*>(&control->tail);
    v.simple.head = reinterpret_cast<uint64_t*>(&control->head);
    v.simple.words = control->bytes;
    v.simple.direct = control->direct;
    v.simple.region = control->region;
    return v;
  }
};
static_assert(sizeof(std::atomic<uint64_t>) == sizeof(uint64_t));

class ShmSendConnection final : public SendConnection {
 public:
  ShmSendConnection(shm::ShmSegment segment, shm::DeviceMapping mapping, size_t slotBytes, int peer,
                    shm::DirectMode direct)
      : segment_(std::move(segment)),
        mapping_(std::move(mapping)),
        ring_{static_cast<RingControl*>(segment_.data()),
              static_cast<uint8_t*>(segment_.data()) + kRingDataOffset, slotBytes},
        view_(mapping_.deviceView(ring_.view())),
        peer_(peer),
        direct_(direct),
        cmaMin_(shm::hasMode(direct, shm::DirectMode::kCma) ? shm::cmaThreshold() : 0) {}

  bool acceptsStep(const StepMemory& step) const override {
    if (direct_ == shm::DirectMode::kNone || step.bytes > ring_.slotBytes) return false;
    if (direct_ == shm::DirectMode::kSameProcess) return step.bytes >= kDirectMin;
    if (takesRegion(step)) return true;
    if (!step.mayPull || !shm::hasMode(direct_, shm::DirectMode::kCma) || step.bytes < cmaMin_)
      return false;
    if (cmaVerdict_ == 0) cmaVerdict_ = ring_.control->cmaVerdict.load(std::memory_order_acquire);
    return cmaVerdict_ == 1;
  }

  void postStep(const StepMemory& step, uint32_t tag) override {
    const uint64_t i = tail_ % kSlots;
    const bool region = takesRegion(step);
    LOOM_ENFORCE(acquired_ && acceptsStep(step), InternalError, "shm postStep() of ", step.bytes,
                 " bytes to rank ", peer_,
                 " without a slot or on a connection that does not take it");
    if (region) {
      ring_.control->region[i] = step.region->id;
      ring_.control->regionFd[i] = step.region->fd;
      ring_.control->direct[i] = reinterpret_cast<uintptr_t>(step.data) - step.region->base;
    } else {
      ring_.control->region[i] = 0;
      ring_.control->direct[i] = reinterpret_cast<uint64_t>(step.data);
    }
    directUntil_ = tail_ + 1;  // drained once the receiver released this step
    publish(step.bytes, tag);
  }

  bool drained() const override {
    if (head_ >= directUntil_) return true;
    head_ = ring_.control->head.load(std::memory_order_acquire);
    return head_ >= directUntil_;
  }

  void* tryAcquire() override {
    // head only grows, so a cached value that says "free" is still right; reload it (one
    // acquire load, a shared cache line) only when the cache says the ring is full.
    if (tail_ - head_ >= kSlots) {
      head_ = ring_.control->head.load(std::memory_order_acquire);
      if (tail_ - head_ >= kSlots) return nullptr;
    }
    acquired_ = true;
    return ring_.slot(tail_);
  }

  void post(size_t bytes, uint32_t tag = 0) override {
    LOOM_ENFORCE(acquired_, InternalError, "shm post() to rank ", peer_,
                 " without a slot from tryAcquire()");
    LOOM_ENFORCE(bytes <= ring_.slotBytes, InvalidArgument, "post of ", bytes,
                 " bytes into a slot of ", ring_.slotBytes);
    ring_.control->direct[tail_ % kSlots] = 0;
    ring_.control->region[tail_ % kSlots] = 0;
    publish(bytes, tag);
  }

  WaitArm armWait(WaitSet& set, bool drain) override {
    set.arm(ring_.control->spaceBell);
    head_ = ring_.control->head.load(std::memory_order_acquire);
    const bool ready = drain ? head_ >= directUntil_ : tail_ - head_ < kSlots;
    return ready ? WaitArm::kReady : WaitArm::kArmed;
  }

  bool progress() override { return false; }  // posting already made the data visible
  size_t slotBytes() const override { return ring_.slotBytes; }
  void checkPeer() const override { shm::checkPeerHolds(segment_, peer_); }
  const ConnectionView* view() const override { return &view_; }
  void resync() override {
    tail_ = ring_.control->tail.load(std::memory_order_acquire);
    head_ = ring_.control->head.load(std::memory_order_acquire);
  }

 private:
  // Whether the step goes as (region, offset): it lies in a host region, and the receiver maps
  // our regions (its verdict, written once at setup, is cached after the first look).
  bool takesRegion(const StepMemory& step) const {
    if (step.region == nullptr || step.region->kind != MemoryKind::kHost) return false;
    if (!shm::hasMode(direct_, shm::DirectMode::kRegistered) || step.bytes < kDirectMin)
      return false;
    if (verdict_ == 0) verdict_ = ring_.control->registeredVerdict.load(std::memory_order_acquire);
    return verdict_ == 1;
  }

  void publish(size_t bytes, uint32_t tag) {
    acquired_ = false;
    // Slots are at most 1 GiB (slot_ring.h): the tag rides in the count's upper half.
    ring_.control->bytes[tail_ % kSlots] = bytes | (static_cast<uint64_t>(tag) << 32);
    ++tail_;
    ring_.control->tail.store(tail_, std::memory_order_release);  // data and bytes before tail
    ringDoorbell(ring_.control->dataBell);
  }

  shm::ShmSegment segment_;
  shm::DeviceMapping mapping_;  // a GPU rank's: view_ is then in the device's addresses
  RingView ring_;
  ConnectionView view_;
  int peer_;
  shm::DirectMode direct_;
  size_t cmaMin_;                    // smallest step pulled with CMA
  mutable uint32_t verdict_ = 0;     // RingControl::registeredVerdict as last seen
  mutable uint32_t cmaVerdict_ = 0;  // RingControl::cmaVerdict as last seen
  uint64_t tail_ = 0;                // our own copy: only we write tail
  mutable uint64_t head_ = 0;        // the receiver's head as last seen
  uint64_t directUntil_ = 0;         // steps before this one include every direct post
  bool acquired_ = false;
};

class ShmRecvConnection final : public RecvConnection {
 public:
  ShmRecvConnection(shm::ShmSegment segment, shm::DeviceMapping mapping, size_t slotBytes, int peer,
                    shm::DirectMode direct, int32_t senderPid,
                    std::shared_ptr<shm::PeerRegions> regions)
      : segment_(std::move(segment)),
        mapping_(std::move(mapping)),
        ring_{static_cast<RingControl*>(segment_.data()),
              static_cast<uint8_t*>(segment_.data()) + kRingDataOffset, slotBytes},
        view_(mapping_.deviceView(ring_.view())),
        peer_(peer),
        direct_(direct),
        senderPid_(senderPid),
        regions_(std::move(regions)) {}

  const void* tryReceive(size_t* bytes, uint32_t* tag = nullptr) override {
    if (head_ == tail_) {
      tail_ = ring_.control->tail.load(std::memory_order_acquire);
      if (head_ == tail_) return nullptr;
    }
    const uint64_t word = ring_.control->bytes[head_ % kSlots];
    const uint64_t n = word & 0xffffffffu;
    if (tag != nullptr) *tag = static_cast<uint32_t>(word >> 32);
    // The peer shares our memory but not our address space: never trust a count blindly.
    LOOM_ENFORCE(n <= ring_.slotBytes, RemoteError, "rank ", peer_, " posted a slot of ", n,
                 " bytes into shm slots of ", ring_.slotBytes, " (corrupt ring)");
    *bytes = static_cast<size_t>(n);
    received_ = true;
    const uint64_t address = ring_.control->direct[head_ % kSlots];
    const uint64_t region = ring_.control->region[head_ % kSlots];
    if (region != 0) return registered(region, address, n);
    if (address == 0) return ring_.slot(head_);
    LOOM_ENFORCE(
        direct_ == shm::DirectMode::kSameProcess || shm::hasMode(direct_, shm::DirectMode::kCma),
        RemoteError, "rank ", peer_,
        " posted a direct step on a connection set up without them (corrupt ring)");
    if (direct_ == shm::DirectMode::kSameProcess) return reinterpret_cast<const void*>(address);
    // CMA: one kernel copy, once per step, into the caller's destination when it offered one
    // (offerDestination) or else into our slot (the sender left it unused).
    if (pulled_ != head_ + 1) {
      pulledTo_ = dest_.data != nullptr && n <= dest_.bytes ? dest_.data : ring_.slot(head_);
      shm::cmaRead(senderPid_, reinterpret_cast<const void*>(address), pulledTo_, n, peer_);
      pulled_ = head_ + 1;
    }
    return pulledTo_;
  }

  void offerDestination(const StepDestination& dst) override { dest_ = dst; }

  void release() override {
    LOOM_ENFORCE(received_, InternalError, "shm release() from rank ", peer_,
                 " without a slot from tryReceive()");
    received_ = false;
    dest_ = StepDestination{};
    if (registeredStep_) shm::countRegisteredStep();
    registeredStep_ = false;
    ++head_;
    ring_.control->head.store(head_, std::memory_order_release);  // done reading before head
    ringDoorbell(ring_.control->spaceBell);
  }

  WaitArm armWait(WaitSet& set) override {
    set.arm(ring_.control->dataBell);
    tail_ = ring_.control->tail.load(std::memory_order_acquire);
    return head_ != tail_ ? WaitArm::kReady : WaitArm::kArmed;
  }

  bool progress() override { return false; }
  size_t slotBytes() const override { return ring_.slotBytes; }
  void checkPeer() const override { shm::checkPeerHolds(segment_, peer_); }
  const ConnectionView* view() const override { return &view_; }
  void resync() override {
    head_ = ring_.control->head.load(std::memory_order_acquire);
    tail_ = ring_.control->tail.load(std::memory_order_acquire);
  }

 private:
  // A registered step: read in place from our mapping of the sender's region. The mapping of
  // the last region stays held, so steps in one region skip the cache (and its lock).
  const void* registered(uint64_t region, uint64_t offset, uint64_t bytes) {
    LOOM_ENFORCE(regions_ != nullptr, RemoteError, "rank ", peer_,
                 " posted a registered step on a connection set up without them (corrupt ring)");
    registeredStep_ = true;
    if (held_ == nullptr || held_->id != region || offset > held_->size ||
        bytes > held_->size - offset) {
      held_ = regions_->map(region, ring_.control->regionFd[head_ % kSlots], offset, bytes);
    }
    return held_->data + offset;
  }

  shm::ShmSegment segment_;
  shm::DeviceMapping mapping_;  // a GPU rank's: view_ is then in the device's addresses
  RingView ring_;
  ConnectionView view_;
  int peer_;
  shm::DirectMode direct_;
  int32_t senderPid_;
  std::shared_ptr<shm::PeerRegions> regions_;     // null unless we map the sender's regions
  std::shared_ptr<const shm::PeerMapping> held_;  // the region of the last registered step
  bool registeredStep_ = false;                   // the step from tryReceive() is one
  uint64_t head_ = 0;                             // our own copy: only we write head
  uint64_t tail_ = 0;                             // the sender's tail as last seen
  uint64_t pulled_ = 0;       // 1 + the step whose direct data is pulled already
  void* pulledTo_ = nullptr;  // where it went
  StepDestination dest_;      // offered for the current step
  bool received_ = false;
};

class ShmPendingRecv final : public PendingRecv {
 public:
  ShmPendingRecv(shm::ShmSegment segment, size_t slotBytes, int peer, int device)
      : segment_(std::move(segment)), slotBytes_(slotBytes), peer_(peer), device_(device) {}

  std::unique_ptr<RecvConnection> finish(const ConnectBlob& ack) override {
    const auto a = fromBlob<ShmAck>(ack);
    LOOM_ENFORCE(a.magic == kAckMagic && shm::validDirectMode(a.directMode), RemoteError, "rank ",
                 peer_, " sent a malformed shm acknowledgement");
    // The sender has the ring: withdraw its fd's offer; watch the sender's lock byte.
    segment_.peerAttached(a.marked != 0);
    const auto mode = static_cast<shm::DirectMode>(a.directMode);
    std::shared_ptr<shm::PeerRegions> regions;
    if (shm::hasMode(mode, shm::DirectMode::kRegistered)) {
      // The sender posts registered steps only once it sees our verdict; until then (and for
      // good when we may not map its memory) it copies through the ring.
      regions = shm::PeerRegions::open(a.sender, peer_);
      static_cast<RingControl*>(segment_.data())
          ->registeredVerdict.store(regions != nullptr ? 1 : 2, std::memory_order_release);
    }
    if (shm::hasMode(mode, shm::DirectMode::kCma)) {
      // Likewise for CMA: the sender pulls nothing by address until we proved we may read it.
      const bool may = shm::mayPullFrom(a.sender);
      if (may)
        LOOM_INFO(kLogShm, "rank ", peer_, " -> this rank: single-copy steps from ",
                  shm::cmaThreshold(), " bytes (this rank pulls with CMA)");
      else
        LOOM_INFO(kLogShm, "rank ", peer_,
                  " -> this rank: may not read its memory with "
                  "process_vm_readv (ptrace rules); steps copy through the shared ring");
      static_cast<RingControl*>(segment_.data())
          ->cmaVerdict.store(may ? 1 : 2, std::memory_order_release);
    }
    shm::DeviceMapping mapping = shm::deviceMappingFor(segment_, device_);
    return std::make_unique<ShmRecvConnection>(std::move(segment_), std::move(mapping), slotBytes_,
                                               peer_, mode, a.sender.pid, std::move(regions));
  }

 private:
  shm::ShmSegment segment_;
  size_t slotBytes_;
  int peer_;
  int device_;
};

}  // namespace

bool shmDisabled() { return envInt(EnvVar::LOOM_SHM_DISABLE) != 0; }

size_t ShmTransport::maxSlotBytes(Protocol protocol) const {
  return protocol == Protocol::kLL ? shm::kLLSlotBytes : SIZE_MAX;
}

size_t ShmTransport::pullThreshold() const { return shm::cmaThreshold(); }

// By host identity, not path class: a topology loaded from LOOM_TOPO_FILE may describe other
// machines, but whether two processes can map one segment is a fact of this one.
bool ShmTransport::canConnect(const PeerPair& pair) const {
  return pair.self.hostHash == pair.peer.hostHash && !shmDisabled();
}

std::string ShmTransport::whyNot(const PeerPair& pair) const {
  if (pair.self.hostHash != pair.peer.hostHash) {
    return strCat("rank ", pair.self.rank, " and rank ", pair.peer.rank,
                  " are on different hosts, and shared memory only connects ranks of one host");
  }
  return "LOOM_SHM_DISABLE=1 forbids it";
}

std::unique_ptr<PendingRecv> ShmTransport::setupRecv(const SetupContext& ctx, ConnectBlob* blob) {
  if (ctx.protocol == Protocol::kLL) return shm::setupLLRecv(ctx, blob);
  size_t slotBytes = ctx.slotBytes;
  shm::ShmSegment segment = shm::ShmSegment::create(segmentBytesFor(slotBytes));
  new (segment.data()) RingControl();  // the counters start at zero; the sender only attaches
  ShmBlob b;
  b.slotBytes = slotBytes;
  b.segmentBytes = segment.size();
  b.receiver = shm::thisProcess();
  b.segment = segment.handle();
  toBlob(b, blob);
  return std::make_unique<ShmPendingRecv>(std::move(segment), slotBytes, ctx.peer, ctx.device);
}

std::unique_ptr<SendConnection> ShmTransport::connectSend(const SetupContext& ctx,
                                                          const ConnectBlob& blob,
                                                          ConnectBlob* ack) {
  if (ctx.protocol == Protocol::kLL) return shm::connectLLSend(ctx, blob, ack);
  auto b = fromBlob<ShmBlob>(blob);
  LOOM_ENFORCE(b.magic == kBlobMagic && b.slots == kSlots && b.slotBytes > 0 &&
                   b.slotBytes % kPageBytes == 0 && b.segmentBytes == segmentBytesFor(b.slotBytes),
               RemoteError, "rank ", ctx.peer,
               " sent a malformed shm connection blob (is it the same loom version?)");
  // The receiver chose the slot size (its LOOM_BUFFSIZE); we adopt it.
  shm::ShmSegment segment = shm::ShmSegment::attach(b.segment, b.segmentBytes, ctx.peer);
  ShmAck a;
  a.marked = segment.marked() ? 1 : 0;
  // A CUDA communicator's steps lie in device memory, which neither a host reader in this
  // process nor CMA reaches: they all go through the slots.
  const shm::DirectMode direct =
      ctx.device >= 0 ? shm::DirectMode::kNone : shm::chooseDirectMode(b.receiver);
  a.directMode = static_cast<uint8_t>(direct);
  a.sender = shm::thisProcess();
  toBlob(a, ack);
  if (direct == shm::DirectMode::kSameProcess) {
    LOOM_INFO(kLogShm, "rank ", ctx.peers.rank(), " -> rank ", ctx.peer, " channel ", ctx.channel,
              ": single-copy steps (receiver reads this thread's buffers)");
  }
  if (shm::hasMode(direct, shm::DirectMode::kRegistered)) {
    LOOM_INFO(kLogShm, "rank ", ctx.peers.rank(), " -> rank ", ctx.peer, " channel ", ctx.channel,
              ": single-copy steps from loomMemAlloc buffers (receiver maps them)");
  }
  if (shm::hasMode(direct, shm::DirectMode::kCma)) {
    LOOM_INFO(kLogShm, "rank ", ctx.peers.rank(), " -> rank ", ctx.peer, " channel ", ctx.channel,
              ": CMA offered from ", shm::cmaThreshold(), " bytes (the receiver checks it may)");
  }
  shm::DeviceMapping mapping = shm::deviceMappingFor(segment, ctx.device);
  return std::make_unique<ShmSendConnection>(std::move(segment), std::move(mapping), b.slotBytes,
                                             ctx.peer, direct);
}

}  // namespace loom::transport
