// The two ends of a socket-transport connection. Each side keeps a private slot ring (the
// primitives see the same ring as with shm); progress() moves whole posted slots from the
// sender's ring over TCP into the receiver's ring.
//
// Wire format. A connection has N TCP streams (LOOM_SOCKET_NSTREAMS). Slots go round-robin over
// the streams, whole: step s travels on stream s % N as a 24-byte header (SlotHeader: step,
// byte count, magic, the sender's tag, reserved) followed by its bytes. Whole slots rather than
// stripes because big messages still use every stream at once (kSlots > N slots are in flight),
// while small ones cost one send and one receive instead of N of each. Each stream is in order,
// so the receiver knows which step comes next on it and checks the header against that.
//
// Reading ahead. The receiver does not know a step's size before its header is in, so every
// read asks for the rest of the current step into its slot and for up to kCarryBytes more into
// the stream's carry buffer, which later steps take from before the socket is read again: a
// small step's header and data come in one read (reading the header alone cost a second
// system call per step), and a read that returns less than asked shows the socket is empty,
// so no read is made just to learn that. A waiting receiver reads (and polls) only the stream
// that carries its next step, and the others while that one delivers.
//
// Flow control. The sender frees a slot once all its bytes are in the kernel; the receiver
// reads step s only when ring slot s % kSlots is free (s < head + kSlots). Until then it
// leaves the data in the kernel, and TCP's own window stops the sender: no credits needed.
// Steps may complete out of order across streams; the receiver hands them out in order.
//
// No allocation per message: the rings are mapped and touched at setup, every per-stream and
// per-slot state is a fixed array or a vector sized at setup, the header sits in the ring
// right before its slot's data (so header and data leave in one send), and nothing on the
// data path builds a string or a container. Only errors allocate (their messages).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "src/net/socket.h"
#include "transports/slot_ring.h"
#include "transports/transport.h"

namespace loom::transport {

// Where the slots of a private ring lie: each slot is kSlotHeaderRoom bytes of which the last
// sizeof(SlotHeader) = 24 hold its wire header, then slotBytes of data (64-byte aligned,
// since slotBytes is whole pages).
struct SlotHeader {
  uint64_t step;
  uint32_t bytes;
  uint32_t magic;
  uint32_t tag;  // the sender's post() tag, passed through
  uint32_t reserved;
};
inline constexpr uint32_t kSlotMagic = 0x4c4d5354;  // "LMST"
inline constexpr size_t kSlotHeaderRoom = kCacheLine;

struct PrivateRing {
  PrivateRing() = default;
  explicit PrivateRing(size_t slotBytes)
      : memory(kSlots * (kSlotHeaderRoom + slotBytes)), slotBytes(slotBytes) {}
  uint8_t* data(uint64_t step) const {
    return memory.data() + (step % kSlots) * (kSlotHeaderRoom + slotBytes) + kSlotHeaderRoom;
  }
  // The wire bytes of a slot start at its header.
  uint8_t* wire(uint64_t step) const { return data(step) - sizeof(SlotHeader); }
  SlotHeader* header(uint64_t step) const { return reinterpret_cast<SlotHeader*>(wire(step)); }

  PrivateMemory memory;
  size_t slotBytes = 0;
};

// Who is at either end, for error messages ("rank 0 -> rank 1 channel 2").
struct LinkName {
  int sender;
  int receiver;
  int channel;
  std::string describe() const;
};

class SocketSendConnection final : public SendConnection {
 public:
  SocketSendConnection(std::vector<Socket> streams, size_t slotBytes, LinkName link);
  void* tryAcquire() override;
  void post(size_t bytes, uint32_t tag = 0) override;
  bool progress() override;
  bool drained() const override { return done_ == tail_ || dropped_; }
  size_t slotBytes() const override { return ring_.slotBytes; }
  WaitArm armWait(WaitSet& set, bool drain) override;
  // Zero-copy sends: the data goes to the kernel straight from the caller's buffer (the
  // header still comes from the slot), saving the copy into the slot. The buffer stays
  // untouched until drained(), which the executor waits for before the call returns.
  bool acceptsStep(const StepMemory& step) const override {
    return step.bytes >= kDirectMinBytes && step.bytes <= ring_.slotBytes;
  }
  void postStep(const StepMemory& step, uint32_t tag) override;
  void dropPostedSteps() override;

 private:
  // Below this a copy into the slot costs less than the bookkeeping.
  static constexpr size_t kDirectMinBytes = 4096;
  void writeHeader(size_t bytes, uint32_t tag);
  struct Stream {
    Socket socket;
    uint64_t next;      // the step this stream sends now (or next, once posted)
    size_t offset = 0;  // wire bytes of it already sent
  };
  std::vector<Stream> streams_;
  PrivateRing ring_;
  LinkName link_;
  uint64_t tail_ = 0;  // steps posted
  uint64_t done_ = 0;  // steps before this one are all in the kernel
  bool acquired_ = false;
  std::array<const uint8_t*, kSlots> direct_{};  // a step's data when not in its slot
  bool dropped_ = false;  // dropPostedSteps() cut a step short: nothing is sent any more
};

class SocketRecvConnection final : public RecvConnection {
 public:
  SocketRecvConnection(std::vector<Socket> streams, PrivateRing ring, LinkName link);
  const void* tryReceive(size_t* bytes, uint32_t* tag = nullptr) override;
  void release() override;
  bool progress() override;
  size_t slotBytes() const override { return ring_.slotBytes; }
  WaitArm armWait(WaitSet& set) override;

 private:
  static constexpr size_t kCarryBytes = 4096;
  struct Stream {
    Stream(Socket s, uint64_t first) : socket(std::move(s)), next(first), carry(kCarryBytes) {}
    Socket socket;
    uint64_t next;        // the step this stream delivers next
    size_t offset = 0;    // wire bytes of it already received
    bool closed = false;  // the sender closed it after its last whole step
    // Bytes read ahead of step `next`'s slot: carry[carried, carryEnd) come first.
    std::vector<uint8_t> carry;
    size_t carried = 0;
    size_t carryEnd = 0;
    bool carrying() const { return carried < carryEnd; }
  };
  bool receive(Stream& stream);
  void checkHeader(const Stream& stream) const;
  std::vector<Stream> streams_;
  PrivateRing ring_;
  LinkName link_;
  uint64_t head_ = 0;                      // steps released
  uint64_t arrived_ = 0;                   // steps before this one have all arrived
  std::array<uint64_t, kSlots> complete_;  // the step whose bytes fill each slot
  bool received_ = false;
};

}  // namespace loom::transport
