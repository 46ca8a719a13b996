// The two ends of an ib-transport connection: one RC queue pair per connection and direction.
//
// Memory. Each side keeps a private slot ring registered with the device (at setup). A slot
// is kHeaderRoom bytes of which the last sizeof(IbSlotHeader) = 16 hold its header, then
// slotBytes of data. The receiver's ring is the target of the sender's RDMA writes: slot i of
// one ring lies at the same offset as slot i of the other, so a step travels as one write of
// header and data, from the sender's slot (or, zero-copy, the header from the slot and the
// data from the caller's registered buffer: two pieces) into the receiver's slot.
//
// Flow control is the ring's (transport.h), carried by immediates:
//   - data: RDMA WRITE with immediate = the step number (low 32 bits). Its arrival consumes a
//     posted receive and yields a completion, so the receiver learns of it without polling
//     memory; RC delivers the writes in order, so completions count the arrived steps.
//   - credits: when the receiver releases slots it sends a zero-byte RDMA WRITE with immediate
//     = head (slots released so far, low 32 bits). The sender may send step s while
//     s < head + kSlots.
//   - the sender starts with no credits; the receiver grants the first kSlots (immediate 0)
//     once its queue pair is ready to receive (setup phase 3), so nothing is written before
//     the receiver is RTR.
// The sender's slot is free again when its write completes locally (every write is signaled).
//
// Waiting. Completions are polled in progress(). Before the executor sleeps, armWait asks the
// completion queue for an event and gives the executor the completion channel's fd, so an idle
// rank sleeps in poll() until the NIC completes something.
//
// Errors. A failed work completion (the peer's QP is gone, retries exceeded, a flush after a
// fatal QP event) and a fatal asynchronous event of the QP, its port or device become a
// RemoteError naming the link, the peer and the status.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "transports/ib/ib_qp.h"
#include "transports/slot_ring.h"
#include "transports/transport.h"

namespace loom::transport::ib {

struct IbSlotHeader {
  uint64_t step;
  uint32_t bytes;
  uint32_t tag;  // the sender's post() tag, passed through
};
inline constexpr size_t kHeaderRoom = kCacheLine;

// Receives kept posted on each queue pair: every write with immediate the peer may have in
// flight (kSlots steps or up to kSlots + 1 credit updates) finds one.
inline constexpr int kRecvDepth = 2 * kSlots + 2;
inline constexpr int kSendDepth = 2 * kSlots + 2;

// A registered private ring.
class IbRing {
 public:
  IbRing(int device, size_t slotBytes, int access, const std::string& link);
  ~IbRing();
  IbRing(const IbRing&) = delete;
  IbRing& operator=(const IbRing&) = delete;
  size_t offset(uint64_t step) const {
    return (step % kSlots) * (kHeaderRoom + slotBytes_) + kHeaderRoom - sizeof(IbSlotHeader);
  }
  IbSlotHeader* header(uint64_t step) const {
    return reinterpret_cast<IbSlotHeader*>(memory_.data() + offset(step));
  }
  uint8_t* data(uint64_t step) const {
    return memory_.data() + offset(step) + sizeof(IbSlotHeader);
  }
  uint64_t address() const { return reinterpret_cast<uintptr_t>(memory_.data()); }
  uint32_t lkey() const;
  uint32_t rkey() const;
  size_t slotBytes() const { return slotBytes_; }
  size_t bytes() const { return memory_.size(); }

 private:
  PrivateMemory memory_;
  size_t slotBytes_;
  ibv_mr* mr_ = nullptr;
};

// Who is at either end, for messages.
std::string linkText(int sender, int receiver, int channel);

class IbSendConnection final : public SendConnection {
 public:
  IbSendConnection(std::unique_ptr<QueuePair> qp, std::unique_ptr<IbRing> ring, int device,
                   uint64_t remoteRing, uint32_t rkey, int peer);
  void* tryAcquire() override;
  void post(size_t bytes, uint32_t tag = 0) override;
  bool progress() override;
  bool drained() const override { return done_ == tail_ || dropped_; }
  size_t slotBytes() const override { return ring_->slotBytes(); }
  WaitArm armWait(WaitSet& set, bool drain) override;
  bool acceptsStep(const StepMemory& step) const override;
  void postStep(const StepMemory& step, uint32_t tag) override;
  void dropPostedSteps() override;
  void checkPeer() const override { qp_->checkFatal(peer_); }

 private:
  // Below this a copy into the slot costs less than a second scatter piece.
  static constexpr size_t kDirectMinBytes = 16384;
  void writeHeader(size_t bytes, uint32_t tag);
  bool pollCompletions();
  void sendReady();
  std::unique_ptr<QueuePair> qp_;
  std::unique_ptr<IbRing> ring_;
  int device_;
  uint64_t remoteRing_;
  uint32_t rkey_;
  int peer_;
  uint64_t tail_ = 0;      // steps posted by the caller
  uint64_t sent_ = 0;      // steps handed to the NIC
  uint64_t done_ = 0;      // steps whose writes completed (their slots are free)
  uint64_t granted_ = 0;   // steps the receiver has room for (head + kSlots)
  bool credited_ = false;  // the receiver's first credit arrived
  bool acquired_ = false;
  struct Direct {
    const uint8_t* data = nullptr;  // the step's data when not in its slot
    uint32_t lkey = 0;
  };
  std::array<Direct, kSlots> direct_{};
  bool dropped_ = false;
};

class IbRecvConnection final : public RecvConnection {
 public:
  IbRecvConnection(std::unique_ptr<QueuePair> qp, std::unique_ptr<IbRing> ring, int peer);
  const void* tryReceive(size_t* bytes, uint32_t* tag = nullptr) override;
  void release() override;
  bool progress() override;
  size_t slotBytes() const override { return ring_->slotBytes(); }
  WaitArm armWait(WaitSet& set) override;
  void checkPeer() const override { qp_->checkFatal(peer_); }
  // Phase 3: the sender is ready to receive; grant it the first kSlots.
  void grantFirstCredits();

 private:
  bool pollCompletions();
  void sendCredits();
  std::unique_ptr<QueuePair> qp_;
  std::unique_ptr<IbRing> ring_;
  int peer_;
  uint64_t head_ = 0;        // steps released
  uint64_t arrived_ = 0;     // steps whose writes arrived
  uint64_t credited_ = 0;    // head last sent to the sender
  int creditsInFlight_ = 0;  // credit writes not yet completed
  bool received_ = false;
};

}  // namespace loom::transport::ib
