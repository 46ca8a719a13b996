#include "transports/ib/ib_connection.h"

#include <cerrno>

#include "src/base/error.h"
#include "src/cuda/runtime.h"
#include "transports/ib/ib_gdr.h"
#include "transports/ib/ib_mr_cache.h"
#include "transports/ib/ib_verbs.h"

namespace loom::transport::ib {
namespace {

constexpr uint64_t kCreditWr = ~uint64_t{0};  // wr_id of a credit write (data writes: the step)

// The 64-bit counter the 32-bit immediate `imm` continues, given the last value `known`.
uint64_t extend(uint64_t known, uint32_t imm) {
  return known + static_cast<uint32_t>(imm - static_cast<uint32_t>(known));
}

[[noreturn]] void writtenByTheGpu(const std::string& link) {
  throw InternalError(strCat(link,
                             ": the steps of a GPUDirect connection are written and read "
                             "by its GPU's kernels, not by host code"));
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
                                   std::unique_ptr<GdrRing> gdr, int device, RemoteRing remote,
                                   int peer)
    : qp_(std::move(qp)),
      ring_(std::move(ring)),
      gdr_(std::move(gdr)),
      device_(device),
      remote_(remote),
      peer_(peer) {}

// The QP goes first: no write in flight may outlive the memory it reads.
IbSendConnection::~IbSendConnection() { qp_.reset(); }

size_t IbSendConnection::slotBytes() const { return gdr_ ? gdr_->slotBytes() : ring_->slotBytes(); }

const ConnectionView* IbSendConnection::view() const { return gdr_ ? gdr_->view() : nullptr; }

bool IbSendConnection::drained() const {
  if (dropped_) return true;
  if (gdr_ && gdr_->control().tail.load(std::memory_order_acquire) != tail_) return false;
  return done_ == tail_;
}

IbSlotHeader* IbSendConnection::header(uint64_t step) const {
  return gdr_ ? &gdr_->control().headers[step % kSlots] : ring_->header(step);
}

uint32_t IbSendConnection::headerLkey() const { return gdr_ ? gdr_->controlLkey() : ring_->lkey(); }

// Where step `step`'s data is read from: the caller's buffer (zero-copy), the host slot or
// the GPU slot.
ibv_sge IbSendConnection::dataPiece(uint64_t step, uint32_t bytes) const {
  const Direct& d = direct_[step % kSlots];
  if (d.data != nullptr) return {reinterpret_cast<uintptr_t>(d.data), bytes, d.lkey};
  if (gdr_) return {reinterpret_cast<uintptr_t>(gdr_->data(step)), bytes, gdr_->dataLkey()};
  return {reinterpret_cast<uintptr_t>(ring_->data(step)), bytes, ring_->lkey()};
}

void* IbSendConnection::tryAcquire() {
  if (gdr_) writtenByTheGpu(qp_->link());
  if (tail_ - done_ >= kSlots) return nullptr;  // progress() frees slots as writes complete
  acquired_ = true;
  return ring_->data(tail_);
}

void IbSendConnection::writeHeader(size_t bytes, uint32_t tag) {
  if (gdr_) writtenByTheGpu(qp_->link());
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
  if (gdr_ || step.bytes < kDirectMinBytes || step.bytes > ring_->slotBytes()) return false;
  return lkeyFor(device_, step.data, step.bytes, step.region).has_value();
}

bool IbSendConnection::readsByAddress(const StepMemory& buffer) const {
  return gdr_ != nullptr && buffer.bytes > 0 &&
         lkeyFor(device_, buffer.data, buffer.bytes, buffer.region).has_value();
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

// Hands the NIC every posted step the receiver has room for. A joined receiver takes each step
// as one write of header and data; a split one as the header's word, then the data.
void IbSendConnection::sendReady() {
  if (dropped_) return;
  const uint64_t limit = std::min(tail_, granted_);
  const size_t bytesPerSlot = slotBytes();
  for (; sent_ < limit; ++sent_) {
    IbSlotHeader* h = header(sent_);
    ibv_sge data = dataPiece(sent_, h->bytes);
    const auto imm = static_cast<uint32_t>(sent_);
    if (remote_.split()) {
      ibv_sge word{reinterpret_cast<uintptr_t>(&h->bytes), sizeof(uint64_t), headerLkey()};
      qp_->write(&word, 1, remote_.words + (sent_ % kSlots) * sizeof(uint64_t), remote_.wordsRkey);
      qp_->writeWithImm(&data, h->bytes > 0 ? 1 : 0,
                        remote_.address + (sent_ % kSlots) * bytesPerSlot, remote_.rkey, imm,
                        sent_);
      continue;
    }
    ibv_sge sge[2];
    int n = 0;
    sge[n++] = {reinterpret_cast<uintptr_t>(h), static_cast<uint32_t>(sizeof(IbSlotHeader)),
                headerLkey()};
    if (data.addr == sge[0].addr + sge[0].length && data.lkey == sge[0].lkey)
      sge[0].length += data.length;  // the host slot: header and data are one piece
    else if (data.length > 0)
      sge[n++] = data;
    qp_->writeWithImm(sge, n, remote_.address + IbRing::offset(sent_, bytesPerSlot), remote_.rkey,
                      imm, sent_);
  }
}

// A GPUDirect ring: takes the steps its device program posted, with their headers from the
// words the kernel wrote; a step it posted by address (readsByAddress) goes from there.
void IbSendConnection::importPosted() {
  GdrControl& c = gdr_->control();
  const uint64_t posted = c.tail.load(std::memory_order_acquire);
  for (; tail_ < posted; ++tail_) {
    const uint64_t slot = tail_ % kSlots;
    const uint64_t word = c.words[slot];
    const auto bytes = static_cast<uint32_t>(word);
    LOOM_ENFORCE(bytes <= gdr_->slotBytes(), InternalError, qp_->link(), ": the GPU posted ", bytes,
                 " bytes into a slot of ", gdr_->slotBytes());
    c.headers[slot] = IbSlotHeader{tail_, bytes, static_cast<uint32_t>(word >> 32)};
    direct_[slot] = Direct{};
    if (c.direct[slot] != 0) {
      const auto* data = reinterpret_cast<const uint8_t*>(static_cast<uintptr_t>(c.direct[slot]));
      const auto lkey = lkeyFor(device_, data, bytes, nullptr);
      LOOM_ENFORCE(lkey.has_value(), InternalError, qp_->link(), ": the GPU posted ", bytes,
                   " bytes at ", static_cast<const void*>(data),
                   " by address, in memory the NIC has not registered");
      direct_[slot] = Direct{data, *lkey};
      countStepByAddress();
    }
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
  const uint64_t doneBefore = done_;
  if (gdr_) importPosted();
  const bool polled = pollCompletions();
  sendReady();
  // The device program may reuse a slot once the NIC has read it.
  if (gdr_ && done_ != doneBefore) gdr_->control().head.store(done_, std::memory_order_release);
  return polled || sent_ != before;
}

WaitArm IbSendConnection::armWait(WaitSet& set, bool /*drain*/) {
  if (dropped_) return WaitArm::kReady;  // progress() reports it
  if (gdr_ && gdr_->control().tail.load(std::memory_order_acquire) != tail_) return WaitArm::kReady;
  qp_->armNotify(set);
  // A completion that came before the request raises no event: look once more.
  if (pollCompletions()) return WaitArm::kReady;
  return WaitArm::kArmed;
}

// ---- Receiver -----------------------------------------------------------------------------

IbRecvConnection::IbRecvConnection(std::unique_ptr<QueuePair> qp, std::unique_ptr<IbRing> ring,
                                   std::unique_ptr<GdrRing> gdr, int peer)
    : qp_(std::move(qp)), ring_(std::move(ring)), gdr_(std::move(gdr)), peer_(peer) {}

// The QP goes first: no write may land in the ring after it is freed.
IbRecvConnection::~IbRecvConnection() { qp_.reset(); }

size_t IbRecvConnection::slotBytes() const { return gdr_ ? gdr_->slotBytes() : ring_->slotBytes(); }

const ConnectionView* IbRecvConnection::view() const { return gdr_ ? gdr_->view() : nullptr; }

bool IbRecvConnection::gdrEmpty() const {
  const GdrControl& c = gdr_->control();
  return c.head.load(std::memory_order_acquire) == c.tail.load(std::memory_order_relaxed);
}

void IbRecvConnection::checkPeer() const {
  if (broken_) {
    if (gdrEmpty()) std::rethrow_exception(broken_);
    return;
  }
  qp_->checkFatal(peer_);
}

void IbRecvConnection::grantFirstCredits() {
  ibv_sge none{};
  qp_->writeWithImm(&none, 0, 0, 0, 0, kCreditWr);
  ++creditsInFlight_;
}

const void* IbRecvConnection::tryReceive(size_t* bytes, uint32_t* tag) {
  if (gdr_) writtenByTheGpu(qp_->link());
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
  if (gdr_) writtenByTheGpu(qp_->link());
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
        LOOM_ENFORCE(!gdr_ || wc[i].imm_data == static_cast<uint32_t>(arrived_), RemoteError,
                     qp_->link(), ": step ", wc[i].imm_data, " arrived where step ",
                     static_cast<uint32_t>(arrived_), " was due");
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
  if (gdr_) return progressGdr();
  const bool polled = pollCompletions();
  sendCredits();
  return polled;
}

// Publishes the steps that arrived (after the NIC's writes are visible to the GPU) and returns
// the slots the device program released to the sender.
bool IbRecvConnection::progressGdr() {
  if (broken_) return false;
  try {
    bool moved = pollCompletions();
    GdrControl& c = gdr_->control();
    if (published_ != arrived_) {
      for (uint64_t s = published_; s < arrived_; ++s)
        LOOM_ENFORCE((c.words[s % kSlots] & 0xffffffffu) <= gdr_->slotBytes(), RemoteError,
                     qp_->link(), ": step ", s, " says ", c.words[s % kSlots] & 0xffffffffu,
                     " bytes, more than a slot of ", gdr_->slotBytes());
      cuda::deviceRuntime().flushRdmaWrites(gdr_->gpu());
      c.tail.store(arrived_, std::memory_order_release);
      published_ = arrived_;
      moved = true;
    }
    const uint64_t head = c.head.load(std::memory_order_acquire);
    if (head != head_) {
      head_ = head;
      moved = true;
    }
    sendCredits();
    return moved;
  } catch (const Error&) {
    if (qp_->failedHere()) throw;  // this side's fault: no peer's end explains it
    broken_ = std::current_exception();
    return false;
  }
}

WaitArm IbRecvConnection::armWait(WaitSet& set) {
  if (gdr_) {  // ready when a step waits for the device program, or progress() has work
    if (broken_ || !gdrEmpty() || published_ != arrived_) return WaitArm::kReady;
    qp_->armNotify(set);
    return progressGdr() ? WaitArm::kReady : WaitArm::kArmed;
  }
  if (head_ != arrived_) return WaitArm::kReady;
  qp_->armNotify(set);
  // A completion that came before the request raises no event: look once more. Credits the
  // full send queue held back go now, or the sender would wait for them as long as we sleep.
  pollCompletions();
  sendCredits();
  return head_ != arrived_ ? WaitArm::kReady : WaitArm::kArmed;
}

}  // namespace loom::transport::ib
