// The two ends of an ib-transport connection: one RC queue pair per connection and direction.
//
// Memory. Each side keeps a private slot ring registered with the device (at setup). A slot
// is kHeaderRoom bytes of which the last sizeof(IbSlotHeader) = 16 hold its header, then
// slotBytes of data. The receiver's ring is the target of the sender's RDMA writes: slot i of
// one ring lies at the same offset as slot i of the other, so a step travels as one write of
// header and data, from the sender's slot (or, zero-copy, the header from the slot and the
// data from the caller's registered buffer: two pieces) into the receiver's slot.
//
// A GPU rank's side may instead have a GPUDirect ring (ib_gdr.h): data slots in device memory,
// stepped by the device program, and a control page in pinned host memory. The connection then
// has a view, and the proxy thread drives it (needsHostProgress). A receiver with such a ring
// is "split": its sender writes each step's word (bytes | tag << 32) into the receiver's
// control page, then the data with immediate into its device slot, two writes that RC keeps in
// order. A sender with such a ring writes its steps' headers from its control page.
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
#include <exception>
#include <memory>
#include <string>

#include "transports/ib/ib_qp.h"
#include "transports/slot_ring.h"
#include "transports/transport.h"

namespace loom::transport::ib {

class GdrRing;

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
  // Where step `step`'s header lies in a ring of `slotBytes` slots (the peer's ring too).
  static size_t offset(uint64_t step, size_t slotBytes) {
    return (step % kSlots) * (kHeaderRoom + slotBytes) + kHeaderRoom - sizeof(IbSlotHeader);
  }
  size_t offset(uint64_t step) const { return offset(step, slotBytes_); }
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

// The receiver's ring as its sender writes it: an IbRing (joined) or a GdrRing (split: data
// slots back to back at `address`, words at `words`).
struct RemoteRing {
  uint64_t address = 0;
  uint32_t rkey = 0;
  uint32_t wordsRkey = 0;
  uint64_t words = 0;  // 0 when joined
  bool split() const { return words != 0; }
};

class IbSendConnection final : public SendConnection {
 public:
  // Exactly one of `ring` (host) and `gdr` (GPUDirect) is given.
  IbSendConnection(std::unique_ptr<QueuePair> qp, std::unique_ptr<IbRing> ring,
                   std::unique_ptr<GdrRing> gdr, int device, RemoteRing remote, int peer);
  ~IbSendConnection() override;
  void* tryAcquire() override;
  void post(size_t bytes, uint32_t tag = 0) override;
  bool progress() override;
  bool drained() const override;
  size_t slotBytes() const override;
  WaitArm armWait(WaitSet& set, bool drain) override;
  bool acceptsStep(const StepMemory& step) const override;
  void postStep(const StepMemory& step, uint32_t tag) override;
  void dropPostedSteps() override;
  void checkPeer() const override { qp_->checkFatal(peer_); }
  const ConnectionView* view() const override;
  bool needsHostProgress() const override { return gdr_ != nullptr; }
  bool readsByAddress(const StepMemory& buffer) const override;

 private:
  // Below this a copy into the slot costs less than a second scatter piece.
  static constexpr size_t kDirectMinBytes = 16384;
  void writeHeader(size_t bytes, uint32_t tag);
  IbSlotHeader* header(uint64_t step) const;
  uint32_t headerLkey() const;
  ibv_sge dataPiece(uint64_t step, uint32_t bytes) const;
  void importPosted();
  bool pollCompletions();
  void sendReady();
  std::unique_ptr<QueuePair> qp_;
  std::unique_ptr<IbRing> ring_;
  std::unique_ptr<GdrRing> gdr_;
  int device_;
  RemoteRing remote_;
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

// With a GPUDirect ring, progress() publishes arrived steps to the device program and returns
// the slots it released as credits. Reading ahead, it may meet the end of a peer that has sent
// all it will (proxy_connection.h says why that looks like a death): the error is kept and
// raised by checkPeer only when no step is left, and a kernel learns of a real death through
// the control channel. A fault of this side's own (failedHere) is raised at once.
class IbRecvConnection final : public RecvConnection {
 public:
  // Exactly one of `ring` (host) and `gdr` (GPUDirect) is given.
  IbRecvConnection(std::unique_ptr<QueuePair> qp, std::unique_ptr<IbRing> ring,
                   std::unique_ptr<GdrRing> gdr, int peer);
  ~IbRecvConnection() override;
  const void* tryReceive(size_t* bytes, uint32_t* tag = nullptr) override;
  void release() override;
  bool progress() override;
  size_t slotBytes() const override;
  WaitArm armWait(WaitSet& set) override;
  void checkPeer() const override;
  const ConnectionView* view() const override;
  bool needsHostProgress() const override { return gdr_ != nullptr; }
  bool failedHere() const override { return qp_->failedHere(); }
  // Phase 3: the sender is ready to receive; grant it the first kSlots.
  void grantFirstCredits();

 private:
  bool pollCompletions();
  void sendCredits();
  bool progressGdr();
  bool gdrEmpty() const;
  std::unique_ptr<QueuePair> qp_;
  std::unique_ptr<IbRing> ring_;
  std::unique_ptr<GdrRing> gdr_;
  int peer_;
  uint64_t published_ = 0;     // GPUDirect: tail published to the device program
  std::exception_ptr broken_;  // GPUDirect: the error progress() met
  uint64_t head_ = 0;          // steps released
  uint64_t arrived_ = 0;       // steps whose writes arrived
  uint64_t credited_ = 0;      // head last sent to the sender
  int creditsInFlight_ = 0;    // credit writes not yet completed
  bool received_ = false;
};

}  // namespace loom::transport::ib
