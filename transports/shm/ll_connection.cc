#include "transports/shm/ll_connection.h"

#include <atomic>
#include <cstring>
#include <new>

#include "src/base/error.h"
#include "transports/shm/shm_segment.h"
#include "transports/wait.h"

namespace loom::transport::shm {
namespace {

constexpr uint32_t kLLBlobMagic = 0x4c4d4c4c;  // "LMLL"
constexpr uint32_t kLLAckMagic = 0x4c4d4c41;   // "LMLA"
constexpr size_t kWordsPerSlot = kLLSlotRawBytes / 8;
constexpr size_t kHeaderWords = kLLHeaderBytes / 8;
constexpr size_t kDataWords = kLLSlotBytes / 4;
// A refresh round (post()) must start at slot 0 and write each slot once.
static_assert(kLLRefreshSteps % kSlots == 0 && kLLRefreshSteps < (uint64_t{1} << 32));

struct LLBlob {
  uint32_t magic = kLLBlobMagic;
  uint32_t slots = kSlots;
  uint64_t slotBytes = kLLSlotBytes;
  uint64_t segmentBytes = kLLSegmentBytes;
  char name[64] = {};
};

struct LLAck {
  uint32_t magic = kLLAckMagic;
};

// The only counter: the sender never publishes a tail, its flags do that.
struct LLControl {
  alignas(kCacheLine) std::atomic<uint64_t> head{0};  // written by the receiver only
  alignas(kCacheLine) Doorbell dataBell;              // the receiver sleeps on it (wait.h)
  alignas(kCacheLine) Doorbell spaceBell;             // the sender sleeps on it
};
static_assert(sizeof(LLControl) <= kPageBytes);

using Word = std::atomic<uint64_t>;
static_assert(Word::is_always_lock_free && sizeof(Word) == 8);

struct LLView {
  explicit LLView(void* base)
      : control(static_cast<LLControl*>(base)),
        words(reinterpret_cast<Word*>(static_cast<uint8_t*>(base) + kPageBytes)) {}
  Word* slot(uint64_t step) const { return words + (step % kSlots) * kWordsPerSlot; }

  LLControl* control;
  Word* words;
};

uint32_t flagOf(uint64_t step) { return static_cast<uint32_t>(step + 1); }
uint64_t pack(uint32_t flag, uint32_t payload) { return (uint64_t{flag} << 32) | payload; }
uint32_t flagIn(uint64_t word) { return static_cast<uint32_t>(word >> 32); }

class LLSendConnection final : public SendConnection {
 public:
  LLSendConnection(ShmSegment segment, int peer)
      : segment_(std::move(segment)), view_(segment_.data()), staging_(kLLSlotBytes), peer_(peer) {}

  void* tryAcquire() override {
    // As in Simple: head only grows, so reload it only when the cached value says "full".
    if (tail_ - head_ >= kSlots) {
      head_ = view_.control->head.load(std::memory_order_acquire);
      if (tail_ - head_ >= kSlots) return nullptr;
    }
    acquired_ = true;
    return staging_.data();
  }

  void post(size_t bytes, uint32_t tag = 0) override {
    LOOM_ENFORCE(acquired_, InternalError, "shm LL post() to rank ", peer_,
                 " without a slot from tryAcquire()");
    LOOM_ENFORCE(bytes <= kLLSlotBytes, InvalidArgument, "post of ", bytes,
                 " bytes into an LL slot of ", kLLSlotBytes);
    acquired_ = false;
    Word* slot = view_.slot(tail_);
    const uint32_t flag = flagOf(tail_);
    // Normally only the words that carry data; on the first kSlots steps of every
    // kLLRefreshSteps all of them, so no word's flag is ever 2^32 steps old (ll_connection.h).
    size_t words = (bytes + 3) / 4;
    if (tail_ % kLLRefreshSteps < kSlots) words = kDataWords;
    const uint8_t* src = staging_.data();  // slotBytes long, so whole words are readable
    for (size_t w = 0; w < words; ++w) {
      uint32_t v;
      std::memcpy(&v, src + 4 * w, 4);
      slot[kHeaderWords + w].store(pack(flag, v), std::memory_order_relaxed);
    }
    // The header last: on TSO CPUs the data has landed by the time the receiver sees it, so it
    // rarely finds a word missing; elsewhere it just checks each word's flag.
    slot[1].store(pack(flag, tag), std::memory_order_relaxed);
    slot[0].store(pack(flag, static_cast<uint32_t>(bytes)), std::memory_order_relaxed);
    ++tail_;
    ringDoorbell(view_.control->dataBell);
  }

  WaitArm armWait(WaitSet& set, bool drain) override {
    if (drain) return WaitArm::kReady;  // post() copied the data out already
    set.arm(view_.control->spaceBell);
    head_ = view_.control->head.load(std::memory_order_acquire);
    return tail_ - head_ < kSlots ? WaitArm::kReady : WaitArm::kArmed;
  }

  bool progress() override { return false; }      // the stores are the transfer
  bool drained() const override { return true; }  // post copied the staging buffer out
  size_t slotBytes() const override { return kLLSlotBytes; }
  void checkPeer() const override { checkPeerHolds(segment_, peer_); }

 private:
  ShmSegment segment_;
  LLView view_;
  PrivateMemory staging_;
  int peer_;
  uint64_t tail_ = 0;  // steps posted (private: the flags publish them)
  uint64_t head_ = 0;  // the receiver's head as last seen
  bool acquired_ = false;
};

class LLRecvConnection final : public RecvConnection {
 public:
  LLRecvConnection(ShmSegment segment, int peer)
      : segment_(std::move(segment)), view_(segment_.data()), staging_(kLLSlotBytes), peer_(peer) {}

  // Never spins: a word that has not landed yet returns nullptr, and the next call resumes
  // at that word (a sender that dies mid-step leaves the executor's deadline to report it).
  const void* tryReceive(size_t* bytes, uint32_t* tag = nullptr) override {
    if (!ready_ && !unpack()) return nullptr;
    *bytes = bytes_;
    if (tag != nullptr) *tag = tag_;
    return staging_.data();
  }

  void release() override {
    LOOM_ENFORCE(ready_, InternalError, "shm LL release() from rank ", peer_,
                 " without a slot from tryReceive()");
    ready_ = false;
    haveHeader_ = false;
    ++head_;
    view_.control->head.store(head_, std::memory_order_release);  // done reading before head
    ringDoorbell(view_.control->spaceBell);
  }

  WaitArm armWait(WaitSet& set) override {
    set.arm(view_.control->dataBell);
    // The sender stores every word before it rings: all landed words are visible now.
    return ready_ || unpack() ? WaitArm::kReady : WaitArm::kArmed;
  }

  bool progress() override { return false; }
  size_t slotBytes() const override { return kLLSlotBytes; }
  void checkPeer() const override { checkPeerHolds(segment_, peer_); }

 private:
  // Moves the words of step head_ that have landed into staging_; true once all have.
  bool unpack() {
    const Word* slot = view_.slot(head_);
    const uint32_t flag = flagOf(head_);
    if (!haveHeader_) {
      const uint64_t count = slot[0].load(std::memory_order_relaxed);
      const uint64_t tag = slot[1].load(std::memory_order_relaxed);
      if (flagIn(count) != flag || flagIn(tag) != flag) return false;
      // The peer shares our memory but not our address space: never trust a count blindly.
      LOOM_ENFORCE(static_cast<uint32_t>(count) <= kLLSlotBytes, RemoteError, "rank ", peer_,
                   " posted ", static_cast<uint32_t>(count), " bytes into shm LL slots of ",
                   kLLSlotBytes, " (corrupt ring)");
      bytes_ = static_cast<uint32_t>(count);
      tag_ = static_cast<uint32_t>(tag);
      haveHeader_ = true;
      unpacked_ = 0;
    }
    uint8_t* out = staging_.data();
    for (const size_t words = (bytes_ + 3) / 4; unpacked_ < words; ++unpacked_) {
      const uint64_t w = slot[kHeaderWords + unpacked_].load(std::memory_order_relaxed);
      if (flagIn(w) != flag) return false;
      const auto v = static_cast<uint32_t>(w);
      std::memcpy(out + 4 * unpacked_, &v, 4);
    }
    ready_ = true;
    return true;
  }

  ShmSegment segment_;
  LLView view_;
  PrivateMemory staging_;
  int peer_;
  uint64_t head_ = 0;        // steps released (only we write head)
  bool haveHeader_ = false;  // bytes_ and tag_ hold step head_'s header
  bool ready_ = false;       // staging_ holds all of step head_
  size_t unpacked_ = 0;      // data words of step head_ already in staging_
  size_t bytes_ = 0;
  uint32_t tag_ = 0;
};

class LLPendingRecv final : public PendingRecv {
 public:
  LLPendingRecv(ShmSegment segment, int peer) : segment_(std::move(segment)), peer_(peer) {}

  std::unique_ptr<RecvConnection> finish(const ConnectBlob& ack) override {
    LOOM_ENFORCE(fromBlob<LLAck>(ack).magic == kLLAckMagic, RemoteError, "rank ", peer_,
                 " sent a malformed shm LL acknowledgement");
    segment_.unlink();  // the sender has it mapped: a crash from now on leaves nothing behind
    return std::make_unique<LLRecvConnection>(std::move(segment_), peer_);
  }

 private:
  ShmSegment segment_;
  int peer_;
};

}  // namespace

std::unique_ptr<PendingRecv> setupLLRecv(const SetupContext& ctx, ConnectBlob* blob) {
  ShmSegment segment = ShmSegment::create(kLLSegmentBytes);
  auto* base = static_cast<uint8_t*>(segment.data());
  new (base) LLControl();
  // Every word starts as 0, a flag no step uses (ll_connection.h).
  auto* words = reinterpret_cast<Word*>(base + kPageBytes);
  for (size_t i = 0; i < kSlots * kWordsPerSlot; ++i) new (&words[i]) Word(0);
  LLBlob b;
  LOOM_ENFORCE(segment.name().size() < sizeof(b.name), InternalError, "segment name ",
               segment.name(), " is too long");
  std::memcpy(b.name, segment.name().data(), segment.name().size());
  toBlob(b, blob);
  return std::make_unique<LLPendingRecv>(std::move(segment), ctx.peer);
}

std::unique_ptr<SendConnection> connectLLSend(const SetupContext& ctx, const ConnectBlob& blob,
                                              ConnectBlob* ack) {
  auto b = fromBlob<LLBlob>(blob);
  b.name[sizeof(b.name) - 1] = '\0';
  // The layout is fixed, so both sides must have the same constants (the same loom build).
  LOOM_ENFORCE(b.magic == kLLBlobMagic && b.slots == kSlots && b.slotBytes == kLLSlotBytes &&
                   b.segmentBytes == kLLSegmentBytes,
               RemoteError, "rank ", ctx.peer,
               " sent a malformed shm LL connection blob (is it the same loom version?)");
  ShmSegment segment = ShmSegment::attach(b.name, b.segmentBytes);
  segment.unlink();  // defensive, as for Simple: the receiver may die before phase 3
  toBlob(LLAck{}, ack);
  return std::make_unique<LLSendConnection>(std::move(segment), ctx.peer);
}

}  // namespace loom::transport::shm
