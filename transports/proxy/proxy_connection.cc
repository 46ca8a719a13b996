#include "transports/proxy/proxy_connection.h"

#include <atomic>
#include <cstring>
#include <exception>
#include <new>
#include <utility>

#include "src/base/error.h"
#include "src/base/logging.h"
#include "src/cuda/runtime.h"
#include "transports/mapped_ring.h"
#include "transports/slot_ring.h"

namespace loom::transport {
namespace {

// The proxy ring's counters and per-slot words, on the first page of its memory.
using ProxyControl = MappedRingControl;
static_assert(sizeof(ProxyControl) <= kPageBytes);

// Pinned host memory mapped into `device`: the control page, then kSlots slots.
class ProxyRing {
 public:
  ProxyRing(size_t slotBytes, int device) : slotBytes_(slotBytes) {
    cuda::DeviceRuntime& rt = cuda::deviceRuntime();
    cuda::CurrentDeviceScope scope(device);
    const size_t bytes = kPageBytes + kSlots * slotBytes;
    host_ = static_cast<uint8_t*>(rt.hostAlloc(bytes, cuda::kHostMapped | cuda::kHostPortable));
    try {
      std::memset(host_, 0, bytes);  // touched once here, never per step
      control_ = new (host_) ProxyControl;
      auto* device = static_cast<uint8_t*>(rt.hostDevicePointer(host_));
      view_ = mappedSimpleView(MemoryKind::kHostMapped, device + kPageBytes, slotBytes, control_,
                               host_, device);
    } catch (...) {
      rt.freeHost(host_);
      throw;
    }
  }
  ~ProxyRing() {
    try {
      cuda::deviceRuntime().freeHost(host_);
    } catch (const std::exception& e) {
      LOOM_WARN(kLogNet, "freeing a proxy ring's pinned memory failed: ", e.what());
    }
  }
  ProxyRing(const ProxyRing&) = delete;
  ProxyRing& operator=(const ProxyRing&) = delete;

  ProxyControl& control() const { return *control_; }
  uint8_t* slot(uint64_t step) const { return host_ + kPageBytes + (step % kSlots) * slotBytes_; }
  size_t slotBytes() const { return slotBytes_; }
  const ConnectionView* view() const { return &view_; }

  // The byte count and tag of step `step`, as its sender wrote them.
  size_t bytes(uint64_t step) const { return control_->words[step % kSlots] & 0xffffffffu; }
  uint32_t tag(uint64_t step) const {
    return static_cast<uint32_t>(control_->words[step % kSlots] >> 32);
  }
  // Writes step `step`'s byte count and tag, then publishes it: tail = step + 1.
  void publish(uint64_t step, size_t bytes, uint32_t tag) {
    control_->words[step % kSlots] = bytes | (static_cast<uint64_t>(tag) << 32);
    control_->direct[step % kSlots] = 0;
    control_->region[step % kSlots] = 0;
    control_->tail.store(step + 1, std::memory_order_release);  // data and words before tail
  }

 private:
  uint8_t* host_ = nullptr;
  ProxyControl* control_ = nullptr;
  size_t slotBytes_;
  ConnectionView view_;
};

class ProxySendConnection final : public SendConnection {
 public:
  ProxySendConnection(std::unique_ptr<SendConnection> wire, int device)
      : wire_(std::move(wire)), ring_(wire_->slotBytes(), device) {}

  void* tryAcquire() override {
    ProxyControl& c = ring_.control();
    const uint64_t tail = c.tail.load(std::memory_order_relaxed);
    if (tail - c.head.load(std::memory_order_acquire) >= kSlots) return nullptr;
    return ring_.slot(tail);
  }
  void post(size_t bytes, uint32_t tag) override {
    LOOM_ENFORCE(bytes <= ring_.slotBytes(), InvalidArgument, "post of ", bytes,
                 " bytes into a slot of ", ring_.slotBytes());
    ring_.publish(ring_.control().tail.load(std::memory_order_relaxed), bytes, tag);
  }
  // Forwards every posted step the wire has room for, then lets the wire move.
  bool progress() override {
    ProxyControl& c = ring_.control();
    const uint64_t posted = c.tail.load(std::memory_order_acquire);
    bool moved = false;
    while (forwarded_ < posted) {
      void* slot = wire_->tryAcquire();
      if (slot == nullptr) break;
      const size_t bytes = ring_.bytes(forwarded_);
      LOOM_ENFORCE(bytes <= wire_->slotBytes(), InternalError, "a proxy ring's step of ", bytes,
                   " bytes is larger than its slot (", wire_->slotBytes(), ")");
      std::memcpy(slot, ring_.slot(forwarded_), bytes);
      wire_->post(bytes, ring_.tag(forwarded_));
      ++forwarded_;
      c.head.store(forwarded_, std::memory_order_release);  // the slot is free again
      moved = true;
    }
    return wire_->progress() || moved;
  }
  bool drained() const override {
    return forwarded_ == ring_.control().tail.load(std::memory_order_acquire) && wire_->drained();
  }
  size_t slotBytes() const override { return ring_.slotBytes(); }
  // Host-side waits: a free proxy slot comes from forwarding, which the waiter's own
  // progress() does once the wire has room; so wait as the wire does.
  WaitArm armWait(WaitSet& set, bool drain) override {
    ProxyControl& c = ring_.control();
    const uint64_t tail = c.tail.load(std::memory_order_relaxed);
    if (!drain && tail - c.head.load(std::memory_order_acquire) < kSlots) return WaitArm::kReady;
    if (forwarded_ < tail) return wire_->armWait(set, false);
    return wire_->armWait(set, drain);
  }
  void checkPeer() const override { wire_->checkPeer(); }
  const ConnectionView* view() const override { return ring_.view(); }
  bool needsHostProgress() const override { return true; }

 private:
  std::unique_ptr<SendConnection> wire_;
  ProxyRing ring_;
  uint64_t forwarded_ = 0;  // steps of the proxy ring posted on the wire
};

class ProxyRecvConnection final : public RecvConnection {
 public:
  ProxyRecvConnection(std::unique_ptr<RecvConnection> wire, int device)
      : wire_(std::move(wire)), ring_(wire_->slotBytes(), device) {}

  const void* tryReceive(size_t* bytes, uint32_t* tag) override {
    ProxyControl& c = ring_.control();
    const uint64_t head = c.head.load(std::memory_order_relaxed);
    if (head == c.tail.load(std::memory_order_acquire)) {
      if (broken_) std::rethrow_exception(broken_);  // the step asked for cannot come
      return nullptr;
    }
    *bytes = ring_.bytes(head);
    if (tag != nullptr) *tag = ring_.tag(head);
    return ring_.slot(head);
  }
  void release() override {
    ProxyControl& c = ring_.control();
    c.head.store(c.head.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }
  // Lets the wire move, then copies every step it received into a free proxy slot. Reading
  // ahead, the wire may meet the end of a peer that has sent all it will: that is kept, not
  // thrown, until someone asks for a step the ring does not have (tryReceive, checkPeer).
  bool progress() override {
    if (broken_) return false;
    bool moved = false;
    try {
      moved = wire_->progress();
      ProxyControl& c = ring_.control();
      while (filled_ - c.head.load(std::memory_order_acquire) < kSlots) {
        size_t bytes = 0;
        uint32_t tag = 0;
        const void* data = wire_->tryReceive(&bytes, &tag);
        if (data == nullptr) break;
        LOOM_ENFORCE(bytes <= ring_.slotBytes(), RemoteError, "a step of ", bytes,
                     " bytes arrived for a slot of ", ring_.slotBytes());
        std::memcpy(ring_.slot(filled_), data, bytes);
        wire_->release();
        ring_.publish(filled_, bytes, tag);
        ++filled_;
        moved = true;
      }
    } catch (const Error&) {
      if (wire_->failedHere()) throw;  // this side's fault: no peer's end explains it
      broken_ = std::current_exception();
    }
    return moved;
  }
  size_t slotBytes() const override { return ring_.slotBytes(); }
  WaitArm armWait(WaitSet& set) override {
    if (!empty() || broken_) return WaitArm::kReady;  // tryReceive has a step, or the error
    return wire_->armWait(set);
  }
  void checkPeer() const override {
    if (broken_ && empty()) std::rethrow_exception(broken_);
    if (!broken_) wire_->checkPeer();
  }
  const ConnectionView* view() const override { return ring_.view(); }
  bool needsHostProgress() const override { return true; }

 private:
  bool empty() const {
    ProxyControl& c = ring_.control();
    return c.head.load(std::memory_order_relaxed) == c.tail.load(std::memory_order_acquire);
  }

  std::unique_ptr<RecvConnection> wire_;
  ProxyRing ring_;
  uint64_t filled_ = 0;        // steps of the wire copied into the proxy ring
  std::exception_ptr broken_;  // the wire's error, once it failed
};

}  // namespace

std::unique_ptr<SendConnection> proxySend(std::unique_ptr<SendConnection> wire, int device) {
  return std::make_unique<ProxySendConnection>(std::move(wire), device);
}

std::unique_ptr<RecvConnection> proxyRecv(std::unique_ptr<RecvConnection> wire, int device) {
  return std::make_unique<ProxyRecvConnection>(std::move(wire), device);
}

}  // namespace loom::transport
