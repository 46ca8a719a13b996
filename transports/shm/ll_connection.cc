#include "transports/shm/ll_connection.h"

#include <atomic>
#include <cstring>
#include <new>

#include "src/base/error.h"
#include "src/kernels/ll_words.h"
#include "transports/shm/device_mapping.h"
#include "transports/shm/shm_segment.h"
#include "transports/wait.h"

namespace loom::transport::shm {
namespace {

constexpr uint32_t kLLBlobMagic = 0x4c4d4c4c;  // "LMLL"
constexpr uint32_t kLLAckMagic = 0x4c4d4c41;   // "LMLA"
constexpr size_t kWordsPerSlot = kLLSlotRawBytes / 8;
constexpr size_t kDataWords = kLLSlotBytes / kLLBytesPerWord;

struct LLBlob {
  uint32_t magic = kLLBlobMagic;
  uint32_t slots = kSlots;
  uint64_t slotBytes = kLLSlotBytes;
  uint64_t segmentBytes = kLLSegmentBytes;
  SegmentHandle segment;  // how the sender imports the ring
};

struct LLAck {
  uint32_t magic = kLLAckMagic;
  uint8_t marked = 0;  // the sender holds its lock byte of the ring (shm_segment.h)
};

// The only counter: the sender never publishes a tail, its flags do that.
struct LLControl {
  alignas(kCacheLine) std::atomic<uint64_t> head{0};  // written by the receiver only
  // Each side's next step (LLRingView::step), each on its own line and touched by its side
  // only. In the segment rather than in the connection object because a GPU rank's device
  // program advances it through the segment's device mapping (device_mapping.h).
  alignas(kCacheLine) uint64_t senderStep = 0;
  alignas(kCacheLine) uint64_t receiverStep = 0;
  alignas(kCacheLine) Doorbell dataBell;   // the receiver sleeps on it (wait.h)
  alignas(kCacheLine) Doorbell spaceBell;  // the sender sleeps on it
};
static_assert(sizeof(LLControl) <= kPageBytes);
// The view shows head as a plain word (connection_view.h has no std::atomic).
static_assert(std::atomic<uint64_t>::is_always_lock_free &&
              sizeof(std::atomic<uint64_t>) == sizeof(uint64_t));

// The words are plain uint64_t, every access one relaxed 64-bit load or store (ll_words.h).
uint64_t* wordsOf(void* base) {
  return reinterpret_cast<uint64_t*>(static_cast<uint8_t*>(base) + kPageBytes);
}

// The segment as the primitives see it; `step` is the side's own counter.
ConnectionView makeView(void* base, uint64_t* step) {
  return llRingView(wordsOf(base),
                    reinterpret_cast<const uint64_t*>(&static_cast<LLControl*>(base)->head), step,
                    MemoryKind::kHost);
}

class LLSendConnection final : public SendConnection {
 public:
  LLSendConnection(ShmSegment segment, DeviceMapping mapping, int peer)
      : segment_(std::move(segment)),
        mapping_(std::move(mapping)),
        control_(static_cast<LLControl*>(segment_.data())),
        tail_(control_->senderStep),
        view_(makeView(segment_.data(), &tail_)),
        published_(mapping_.deviceView(view_)),
        staging_(kLLSlotBytes),
        peer_(peer) {}

  void* tryAcquire() override {
    // As in Simple: head only grows, so reload it only when the cached value says "full".
    if (tail_ - head_ >= kSlots) {
      head_ = control_->head.load(std::memory_order_acquire);
      if (tail_ - head_ >= kSlots) return nullptr;
    }
    acquired_ = true;
    return staging_.data();
  }

  // For callers that fill plain bytes: packs the staging buffer into the slot.
  void post(size_t bytes, uint32_t tag = 0) override {
    checkPost(bytes);
    llPack(llDataWords(view_.ll, tail_), staging_.data(), bytes, llFlag(tail_));
    publish(bytes, tag);
  }

  void postWritten(size_t bytes, uint32_t tag) override {
    checkPost(bytes);
    publish(bytes, tag);
  }

  WaitArm armWait(WaitSet& set, bool drain) override {
    if (drain) return WaitArm::kReady;  // post() copied the data out already
    set.arm(control_->spaceBell);
    head_ = control_->head.load(std::memory_order_acquire);
    return tail_ - head_ < kSlots ? WaitArm::kReady : WaitArm::kArmed;
  }

  bool progress() override { return false; }      // the stores are the transfer
  bool drained() const override { return true; }  // the data words are in the slot already
  size_t slotBytes() const override { return kLLSlotBytes; }
  void checkPeer() const override { checkPeerHolds(segment_, peer_); }
  const ConnectionView* view() const override { return &published_; }

 private:
  void checkPost(size_t bytes) {
    LOOM_ENFORCE(acquired_, InternalError, "shm LL post() to rank ", peer_,
                 " without a slot from tryAcquire()");
    LOOM_ENFORCE(bytes <= kLLSlotBytes, InvalidArgument, "post of ", bytes,
                 " bytes into an LL slot of ", kLLSlotBytes);
    acquired_ = false;
  }

  // The data words of step tail_ are in the slot: the refresh rule's extra words, then the
  // header (ll_words.h), then the receiver may wake.
  void publish(size_t bytes, uint32_t tag) {
    uint64_t* slot = llSlot(view_.ll, tail_);
    const uint32_t flag = llFlag(tail_);
    const size_t words = llWordsFor(bytes);
    const size_t all = llWordsToWrite(tail_, bytes, kSlots, kDataWords, kLLRefreshSteps);
    for (size_t w = words; w < all; ++w) llStore(slot + kLLHeaderWords + w, llWord(flag, 0));
    llWriteHeader(slot, flag, static_cast<uint32_t>(bytes), tag);
    ++tail_;
    ringDoorbell(control_->dataBell);
  }

  ShmSegment segment_;
  DeviceMapping mapping_;
  LLControl* control_;
  uint64_t& tail_;       // steps posted (ours alone: the flags publish them); view_ points here
  ConnectionView view_;  // in this process's addresses, for the calls below
  ConnectionView published_;  // view(): the device's addresses on a GPU rank, else view_
  PrivateMemory staging_;
  int peer_;
  uint64_t head_ = 0;  // the receiver's head as last seen
  bool acquired_ = false;
};

class LLRecvConnection final : public RecvConnection {
 public:
  LLRecvConnection(ShmSegment segment, DeviceMapping mapping, int peer)
      : segment_(std::move(segment)),
        mapping_(std::move(mapping)),
        control_(static_cast<LLControl*>(segment_.data())),
        head_(control_->receiverStep),
        view_(makeView(segment_.data(), &head_)),
        published_(mapping_.deviceView(view_)),
        staging_(kLLSlotBytes),
        peer_(peer) {}

  // Never spins: a word that has not landed yet returns nullptr, and the next call resumes
  // at that word (a sender that dies mid-step leaves the executor's deadline to report it).
  const void* tryReceive(size_t* bytes, uint32_t* tag = nullptr) override {
    if (!landed(/*copy=*/true)) return nullptr;
    *bytes = bytes_;
    if (tag != nullptr) *tag = tag_;
    return staging_.data();
  }

  const void* tryReceiveInView(size_t* bytes, uint32_t* tag = nullptr) override {
    if (!landed(/*copy=*/false)) return nullptr;
    *bytes = bytes_;
    if (tag != nullptr) *tag = tag_;
    return llDataWords(view_.ll, head_);
  }

  void release() override {
    LOOM_ENFORCE(landed_ == kLanded, InternalError, "shm LL release() from rank ", peer_,
                 " without a slot from tryReceive()");
    landed_ = kNoHeader;
    ++head_;
    control_->head.store(head_, std::memory_order_release);  // done reading before head
    ringDoorbell(control_->spaceBell);
  }

  WaitArm armWait(WaitSet& set) override {
    set.arm(control_->dataBell);
    // The sender stores every word before it rings: all landed words are visible now.
    return landed(/*copy=*/false) ? WaitArm::kReady : WaitArm::kArmed;
  }

  bool progress() override { return false; }
  size_t slotBytes() const override { return kLLSlotBytes; }
  void checkPeer() const override { checkPeerHolds(segment_, peer_); }
  const ConnectionView* view() const override { return &published_; }

 private:
  // True once the header and every data word of step head_ carry its flag; each call resumes
  // at the first word the last one found missing. With `copy`, the words also go to staging_
  // (tryReceive), checked and copied in one pass.
  bool landed(bool copy) {
    const uint64_t* slot = llSlot(view_.ll, head_);
    const uint32_t flag = llFlag(head_);
    if (landed_ == kNoHeader) {
      uint32_t count = 0;
      if (!llReadHeader(slot, flag, &count, &tag_)) return false;
      // The peer shares our memory but not our address space: never trust a count blindly.
      LOOM_ENFORCE(count <= kLLSlotBytes, RemoteError, "rank ", peer_, " posted ", count,
                   " bytes into shm LL slots of ", kLLSlotBytes, " (corrupt ring)");
      bytes_ = count;
      landedWords_ = 0;
      copiedWords_ = 0;
      landed_ = kHeader;
    }
    const size_t words = llWordsFor(bytes_);
    const uint64_t* data = slot + kLLHeaderWords;
    if (copy && copiedWords_ < words) {
      // Words checked without a copy (armWait) are checked again here: they have landed.
      landedWords_ = copiedWords_ =
          llUnpackLanded(staging_.data(), data, copiedWords_, words, flag);
    } else if (landedWords_ < words) {
      landedWords_ = llLanded(data, landedWords_, words, flag);
    }
    if (landedWords_ < words) return false;
    landed_ = kLanded;
    return true;
  }

  enum Landed : uint8_t { kNoHeader, kHeader, kLanded };

  ShmSegment segment_;
  DeviceMapping mapping_;
  LLControl* control_;
  uint64_t& head_;            // steps released (only we write head); view_ points here
  ConnectionView view_;       // in this process's addresses, for the calls below
  ConnectionView published_;  // view(): the device's addresses on a GPU rank, else view_
  PrivateMemory staging_;
  int peer_;
  Landed landed_ = kNoHeader;  // of step head_
  size_t landedWords_ = 0;     // data words of step head_ known to have landed
  size_t copiedWords_ = 0;     // of those, the ones in staging_ (tryReceive)
  size_t bytes_ = 0;
  uint32_t tag_ = 0;
};

class LLPendingRecv final : public PendingRecv {
 public:
  LLPendingRecv(ShmSegment segment, int peer, int device)
      : segment_(std::move(segment)), peer_(peer), device_(device) {}

  std::unique_ptr<RecvConnection> finish(const ConnectBlob& ack) override {
    const auto a = fromBlob<LLAck>(ack);
    LOOM_ENFORCE(a.magic == kLLAckMagic, RemoteError, "rank ", peer_,
                 " sent a malformed shm LL acknowledgement");
    segment_.peerAttached(a.marked != 0);  // the sender has the ring: withdraw the fd's offer
    DeviceMapping mapping = deviceMappingFor(segment_, device_);
    return std::make_unique<LLRecvConnection>(std::move(segment_), std::move(mapping), peer_);
  }

 private:
  ShmSegment segment_;
  int peer_;
  int device_;
};

}  // namespace

std::unique_ptr<PendingRecv> setupLLRecv(const SetupContext& ctx, ConnectBlob* blob) {
  ShmSegment segment = ShmSegment::create(kLLSegmentBytes);
  auto* base = static_cast<uint8_t*>(segment.data());
  new (base) LLControl();
  // Every word starts as 0, a flag no step uses (ll_words.h).
  uint64_t* words = wordsOf(base);
  for (size_t i = 0; i < kSlots * kWordsPerSlot; ++i) llStore(words + i, 0);
  LLBlob b;
  b.segment = segment.handle();
  toBlob(b, blob);
  return std::make_unique<LLPendingRecv>(std::move(segment), ctx.peer, ctx.device);
}

std::unique_ptr<SendConnection> connectLLSend(const SetupContext& ctx, const ConnectBlob& blob,
                                              ConnectBlob* ack) {
  auto b = fromBlob<LLBlob>(blob);
  // The layout is fixed, so both sides must have the same constants (the same loom build).
  LOOM_ENFORCE(b.magic == kLLBlobMagic && b.slots == kSlots && b.slotBytes == kLLSlotBytes &&
                   b.segmentBytes == kLLSegmentBytes,
               RemoteError, "rank ", ctx.peer,
               " sent a malformed shm LL connection blob (is it the same loom version?)");
  ShmSegment segment = ShmSegment::attach(b.segment, b.segmentBytes, ctx.peer);
  LLAck a;
  a.marked = segment.marked() ? 1 : 0;
  toBlob(a, ack);
  DeviceMapping mapping = deviceMappingFor(segment, ctx.device);
  return std::make_unique<LLSendConnection>(std::move(segment), std::move(mapping), ctx.peer);
}

}  // namespace loom::transport::shm
