#include "transports/ib/ib_connection.h"

#include <cerrno>

#include "src/base/error.h"
#include "transports/ib/ib_mr_cache.h"
#include "transports/ib/ib_verbs.h"

namespace loom::transport::ib {
namespace {

constexpr uint64_t kCreditWr = ~uint64_t{0};  // wr_id of a credit write (data writes: the step)

// The 64-bit counter the 32-bit immediate `imm` continues, given the last value `known`.
uint64_t extend(uint64_t known, uint32_t imm) {
  return known + static_cast<uint32_t>(imm - static_cast<uint32_t>(known));
}

}  // namespace

std::string linkText(int sender, int receiver, int channel) {
  return strCat("ib transport rank ", sender, " -> rank ", receiver, " channel ", channel);
}

IbRing::IbRing(int device, size_t slotBytes, int access, const std::string& link)
    : memory_(kSlots * (kHeaderRoom + slotBytes)), slotBytes_(slotBytes) {
  const IbDevice& dev = IbDevices::instance().devices().at(device);
  mr_ = verbs().regMr(dev.pd, memory_.data(), memory_.size(), access);
  if (mr_ == nullptr)
    throwSystemError(strCat(link, ": registering a ring of ", memory_.size(), " bytes with ",
                            dev.name, " (is the locked-memory limit, ulimit -l, too low?)"),
                     errno);
}

IbRing::~IbRing() {
  if (mr_ != nullptr) verbs().deregMr(mr_);
}

uint32_t IbRing::lkey() const { return mr_->lkey; }
uint32_t IbRing::rkey() const { return mr_->rkey; }

// ---- Sender -------------------------------------------------------------------------------

IbSendConnection::IbSendConnection(std::unique_ptr<QueuePair> qp, std::unique_ptr<IbRing> ring,
                                   int device, uint64_t remoteRing, uint32_t rkey, int peer)
    : qp_(std::move(qp)),
      ring_(std::move(ring)),
      device_(device),
      remoteRing_(remoteRing),
      rkey_(rkey),
      peer_(peer) {}

void* IbSendConnection::tryAcquire() {
  if (tail_ - done_ >= kSlots) return nullptr;  // progress() frees slots as writes complete
  acquired_ = true;
  return ring_->data(tail_);
}

void IbSendConnection::writeHeader(size_t bytes, uint32_t tag) {
  LOOM_ENFORCE(acquired_, InternalError, qp_->link(), ": post() without a slot from tryAcquire()");
  LOOM_ENFORCE(bytes <= ring_->slotBytes(), InvalidArgument, qp_->link(), ": post of ", bytes,
               " bytes into a slot of ", ring_->slotBytes());
  acquired_ = false;
  *ring_->header(tail_) = IbSlotHeader{tail_, static_cast<uint32_t>(bytes), tag};
}

void IbSendConnection::post(size_t bytes, uint32_t tag) {
  writeHeader(bytes, tag);
  direct_[tail_ % kSlots] = Direct{};
  ++tail_;
  sendReady();
}

bool IbSendConnection::acceptsStep(const StepMemory& step) const {
  if (step.bytes < kDirectMinBytes || step.bytes > ring_->slotBytes()) return false;
  return lkeyFor(device_, step.data, step.bytes, step.region).has_value();
}

void IbSendConnection::postStep(const StepMemory& step, uint32_t tag) {
  const auto lkey = lkeyFor(device_, step.data, step.bytes, step.region);
  LOOM_ENFORCE(lkey.has_value(), InternalError, qp_->link(),
               ": postStep() of memory acceptsStep() refused");
  writeHeader(step.bytes, tag);
  direct_[tail_ % kSlots] = Direct{static_cast<const uint8_t*>(step.data), *lkey};
  ++tail_;
  sendReady();
}

void IbSendConnection::dropPostedSteps() {
  // A step read from the caller's memory that the NIC has not finished with may still be read
  // after the caller frees it: stop the QP, which ends every write in flight.
  for (uint64_t s = done_; s < tail_; ++s)
    if (direct_[s % kSlots].data != nullptr) dropped_ = true;
  if (dropped_) {
    qp_->toError();
    direct_.fill(Direct{});
  }
}

// Hands the NIC every posted step the receiver has room for.
void IbSendConnection::sendReady() {
  if (dropped_) return;
  const uint64_t limit = std::min(tail_, granted_);
  for (; sent_ < limit; ++sent_) {
    const IbSlotHeader& h = *ring_->header(sent_);
    const Direct& d = direct_[sent_ % kSlots];
    ibv_sge sge[2];
    int n = 0;
    if (d.data == nullptr) {
      sge[n++] = {reinterpret_cast<uintptr_t>(ring_->header(sent_)),
                  static_cast<uint32_t>(sizeof(IbSlotHeader) + h.bytes), ring_->lkey()};
    } else {
      sge[n++] = {reinterpret_cast<uintptr_t>(ring_->header(sent_)),
                  static_cast<uint32_t>(sizeof(IbSlotHeader)), ring_->lkey()};
      sge[n++] = {reinterpret_cast<uintptr_t>(d.data), h.bytes, d.lkey};
    }
    qp_->writeWithImm(sge, n, remoteRing_ + ring_->offset(sent_), rkey_,
                      static_cast<uint32_t>(sent_), sent_);
  }
}

bool IbSendConnection::pollCompletions() {
  ibv_wc wc[16];
  bool any = false;
  int got;
  while ((got = qp_->poll(wc, 16, peer_)) > 0) {
    any = true;
    for (int i = 0; i < got; ++i) {
      if (wc[i].opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
        // A credit: the receiver has released `head` steps.
        const uint64_t head = extend(granted_ - (credited_ ? kSlots : 0), wc[i].imm_data);
        granted_ = head + kSlots;
        credited_ = true;
        qp_->postReceives(1);
      } else {
        ++done_;  // RC completes the writes in order
      }
    }
  }
  return any;
}

bool IbSendConnection::progress() {
  LOOM_ENFORCE(!dropped_, RemoteError, qp_->link(),
               ": unusable since a failed call dropped the steps it had posted from its own "
               "buffers; destroy the communicator and create a new one");
  const uint64_t before = sent_;
  const bool polled = pollCompletions();
  sendReady();
  return polled || sent_ != before;
}

WaitArm IbSendConnection::armWait(WaitSet& set, bool /*drain*/) {
  if (dropped_) return WaitArm::kReady;  // progress() reports it
  qp_->armNotify(set);
  // A completion that came before the request raises no event: look once more.
  if (pollCompletions()) return WaitArm::kReady;
  return WaitArm::kArmed;
}

// ---- Receiver -----------------------------------------------------------------------------

IbRecvConnection::IbRecvConnection(std::unique_ptr<QueuePair> qp, std::unique_ptr<IbRing> ring,
                                   int peer)
    : qp_(std::move(qp)), ring_(std::move(ring)), peer_(peer) {}

void IbRecvConnection::grantFirstCredits() {
  ibv_sge none{};
  qp_->writeWithImm(&none, 0, 0, 0, 0, kCreditWr);
  ++creditsInFlight_;
}

const void* IbRecvConnection::tryReceive(size_t* bytes, uint32_t* tag) {
  if (head_ == arrived_) return nullptr;
  const IbSlotHeader& h = *ring_->header(head_);
  LOOM_ENFORCE(h.step == head_ && h.bytes <= ring_->slotBytes(), RemoteError, qp_->link(),
               ": corrupt slot (header of step ", h.step, " with ", h.bytes, " bytes where step ",
               head_, " of at most ", ring_->slotBytes(), " bytes was due)");
  *bytes = h.bytes;
  if (tag != nullptr) *tag = h.tag;
  received_ = true;
  return ring_->data(head_);
}

void IbRecvConnection::release() {
  LOOM_ENFORCE(received_, InternalError, qp_->link(),
               ": release() without a slot from tryReceive()");
  received_ = false;
  ++head_;
  sendCredits();
}

// Tells the sender how far the receiver has released, unless the send queue is full of
// earlier updates (the next completion makes room, and one update covers them all).
void IbRecvConnection::sendCredits() {
  if (credited_ == head_ || creditsInFlight_ >= kSendDepth) return;
  ibv_sge none{};
  qp_->writeWithImm(&none, 0, 0, 0, static_cast<uint32_t>(head_), kCreditWr);
  credited_ = head_;
  ++creditsInFlight_;
}

bool IbRecvConnection::pollCompletions() {
  ibv_wc wc[16];
  bool any = false;
  int got;
  while ((got = qp_->poll(wc, 16, peer_)) > 0) {
    any = true;
    for (int i = 0; i < got; ++i) {
      if (wc[i].opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
        ++arrived_;
        qp_->postReceives(1);
      } else {
        --creditsInFlight_;
      }
    }
  }
  return any;
}

bool IbRecvConnection::progress() {
  const bool polled = pollCompletions();
  sendCredits();
  return polled;
}

WaitArm IbRecvConnection::armWait(WaitSet& set) {
  if (head_ != arrived_) return WaitArm::kReady;
  qp_->armNotify(set);
  // A completion that came before the request raises no event: look once more. Credits the
  // full send queue held back go now, or the sender would wait for them as long as we sleep.
  pollCompletions();
  sendCredits();
  return head_ != arrived_ ? WaitArm::kReady : WaitArm::kArmed;
}

}  // namespace loom::transport::ib
