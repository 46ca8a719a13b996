#include "transports/socket/socket_connection.h"

#include <sys/uio.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "src/base/error.h"

namespace loom::transport {

std::string LinkName::describe() const {
  return strCat("socket transport rank ", sender, " -> rank ", receiver, " channel ", channel);
}

// ---- Sender -------------------------------------------------------------------------------

SocketSendConnection::SocketSendConnection(std::vector<Socket> streams, size_t slotBytes,
                                           LinkName link)
    : ring_(slotBytes), link_(link) {
  streams_.reserve(streams.size());
  for (size_t k = 0; k < streams.size(); ++k) streams_.push_back({std::move(streams[k]), k});
}

void* SocketSendConnection::tryAcquire() {
  if (tail_ - done_ >= kSlots) return nullptr;  // progress() frees slots as they leave
  acquired_ = true;
  return ring_.data(tail_);
}

void SocketSendConnection::writeHeader(size_t bytes, uint32_t tag) {
  LOOM_ENFORCE(acquired_, InternalError, link_.describe(),
               ": post() without a slot from tryAcquire()");
  LOOM_ENFORCE(bytes <= ring_.slotBytes, InvalidArgument, link_.describe(), ": post of ", bytes,
               " bytes into a slot of ", ring_.slotBytes);
  acquired_ = false;
  *ring_.header(tail_) = SlotHeader{tail_, static_cast<uint32_t>(bytes), kSlotMagic, tag, 0};
}

void SocketSendConnection::post(size_t bytes, uint32_t tag) {
  writeHeader(bytes, tag);
  direct_[tail_ % kSlots] = nullptr;
  ++tail_;
}

void SocketSendConnection::postStep(const StepMemory& step, uint32_t tag) {
  writeHeader(step.bytes, tag);
  direct_[tail_ % kSlots] = static_cast<const uint8_t*>(step.data);
  ++tail_;
}

void SocketSendConnection::dropPostedSteps() {
  // A step still in caller memory is one of a stream's unsent ones (stream k sends steps k,
  // k + N, ...); its first bytes may be in the kernel already, so the stream cannot go on.
  const uint64_t n = streams_.size();
  for (const Stream& s : streams_)
    for (uint64_t step = s.next; step < tail_; step += n)
      if (direct_[step % kSlots] != nullptr) dropped_ = true;
  if (dropped_) direct_.fill(nullptr);
}

bool SocketSendConnection::progress() {
  LOOM_ENFORCE(!dropped_, RemoteError, link_.describe(),
               ": unusable since a failed call dropped the steps it had posted from its own "
               "buffers; destroy the communicator and create a new one");
  bool moved = false;
  const uint64_t n = streams_.size();
  uint64_t done = tail_;
  for (Stream& s : streams_) {
    while (s.next < tail_) {
      const size_t total = sizeof(SlotHeader) + ring_.header(s.next)->bytes;
      const uint8_t* direct = direct_[s.next % kSlots];
      size_t sent;
      try {
        if (direct == nullptr) {
          sent = s.socket.sendSome(ring_.wire(s.next) + s.offset, total - s.offset);
        } else {
          // The header from the slot, the data from the caller's buffer, in one sendmsg.
          iovec pieces[2];
          int n = 0;
          if (s.offset < sizeof(SlotHeader))
            pieces[n++] = {ring_.wire(s.next) + s.offset, sizeof(SlotHeader) - s.offset};
          const size_t dataSent = s.offset > sizeof(SlotHeader) ? s.offset - sizeof(SlotHeader) : 0;
          pieces[n++] = {const_cast<uint8_t*>(direct) + dataSent,
                         total - sizeof(SlotHeader) - dataSent};
          sent = s.socket.sendSomeV(pieces, n);
        }
      } catch (const RemoteError& e) {
        throw RemoteError(strCat(link_.describe(), ": ", e.what()));
      }
      if (sent == 0) break;
      moved = true;
      s.offset += sent;
      if (s.offset < total) break;  // the kernel's buffer is full: another try would fail
      s.offset = 0;
      s.next += n;
    }
    done = std::min(done, s.next);  // this stream's first step not yet wholly sent
  }
  done_ = done;
  return moved;
}

// Sleeps until a stream with unsent steps can take more bytes.
WaitArm SocketSendConnection::armWait(WaitSet& set, bool /*drain*/) {
  if (dropped_) return WaitArm::kReady;  // progress() reports it
  bool pending = false;
  for (Stream& s : streams_) {
    if (s.next < tail_) {
      set.addFd(s.socket.fd(), POLLOUT);
      pending = true;
    }
  }
  return pending ? WaitArm::kArmed : WaitArm::kReady;
}

// ---- Receiver -----------------------------------------------------------------------------

SocketRecvConnection::SocketRecvConnection(std::vector<Socket> streams, PrivateRing ring,
                                           LinkName link)
    : ring_(std::move(ring)), link_(link) {
  streams_.reserve(streams.size());
  for (size_t k = 0; k < streams.size(); ++k) streams_.emplace_back(std::move(streams[k]), k);
  complete_.fill(std::numeric_limits<uint64_t>::max());
}

const void* SocketRecvConnection::tryReceive(size_t* bytes, uint32_t* tag) {
  if (head_ == arrived_) return nullptr;
  *bytes = ring_.header(head_)->bytes;
  if (tag != nullptr) *tag = ring_.header(head_)->tag;
  received_ = true;
  return ring_.data(head_);
}

void SocketRecvConnection::release() {
  LOOM_ENFORCE(received_, InternalError, link_.describe(),
               ": release() without a slot from tryReceive()");
  received_ = false;
  ++head_;
}

// Sleeps until the stream that carries the next step has bytes (or news of a close) for us.
WaitArm SocketRecvConnection::armWait(WaitSet& set) {
  if (head_ != arrived_) return WaitArm::kReady;
  // Only the stream that carries the next step can end the wait (progress() reads the others
  // once it delivers): a later step that arrives first on another stream must not wake us.
  Stream& first = streams_[arrived_ % streams_.size()];
  if (first.closed) return WaitArm::kReady;  // progress() reports it
  // Bytes read ahead wake no poll(): progress() must place them first.
  if (first.carrying()) return WaitArm::kReady;
  set.addFd(first.socket.fd(), POLLIN);
  return WaitArm::kArmed;
}

void SocketRecvConnection::checkHeader(const Stream& stream) const {
  const SlotHeader& h = *ring_.header(stream.next);
  LOOM_ENFORCE(h.magic == kSlotMagic && h.step == stream.next && h.bytes <= ring_.slotBytes,
               RemoteError, link_.describe(), ": corrupt data stream (header of step ", h.step,
               " with ", h.bytes, " bytes where step ", stream.next, " of at most ",
               ring_.slotBytes, " bytes was due)");
}

// Reads what the stream has for the steps the ring has room for; true if bytes moved.
bool SocketRecvConnection::receive(Stream& s) {
  bool moved = false;
  bool socketEmpty = false;  // a read this call returned less than it asked for
  const uint64_t n = streams_.size();
  while (s.next < head_ + kSlots) {
    uint8_t* wire = ring_.wire(s.next);
    // The rest of the header, or once it is in, the rest of the step.
    size_t want = s.offset < sizeof(SlotHeader)
                      ? sizeof(SlotHeader) - s.offset
                      : sizeof(SlotHeader) + ring_.header(s.next)->bytes - s.offset;
    if (want > 0) {
      size_t got;
      if (s.carrying()) {
        got = std::min(want, s.carryEnd - s.carried);
        std::memcpy(wire + s.offset, s.carry.data() + s.carried, got);
        s.carried += got;
      } else {
        if (socketEmpty) return moved;
        iovec pieces[2] = {{wire + s.offset, want}, {s.carry.data(), kCarryBytes}};
        const long read = s.socket.recvSomeV(pieces, 2);
        if (read < 0) {
          // Closed or reset. Between steps this may be a sender that finished; progress()
          // decides whether we still needed this stream. Within a step it died mid-send.
          LOOM_ENFORCE(s.offset == 0, RemoteError, link_.describe(), ": rank ", link_.sender,
                       " closed the connection in the middle of step ", s.next,
                       " (did it exit or crash?)");
          s.closed = true;
          return moved;
        }
        if (read == 0) return moved;
        got = std::min(static_cast<size_t>(read), want);
        s.carried = 0;
        s.carryEnd = static_cast<size_t>(read) - got;
        socketEmpty = static_cast<size_t>(read) < want + kCarryBytes;
      }
      moved = true;
      s.offset += got;
      if (s.offset == sizeof(SlotHeader)) checkHeader(s);
      if (got < want) continue;  // the carry ran out: read the socket (unless it is empty)
      if (s.offset == sizeof(SlotHeader) && ring_.header(s.next)->bytes > 0) continue;
    }
    complete_[s.next % kSlots] = s.next;
    s.offset = 0;
    s.next += n;
  }
  return moved;
}

bool SocketRecvConnection::progress() {
  // The stream that carries the next step first, the others only while it delivers: nothing
  // they hold can be handed out before that step, and a waiting rank that read every stream
  // would spend a system call per stream and round. In a large transfer the first stream keeps
  // delivering, so all are read.
  Stream& first = streams_[arrived_ % streams_.size()];
  const bool flowing = !first.closed && receive(first);
  bool moved = flowing;
  for (Stream& s : streams_) {
    if (&s == &first || s.closed || !flowing) continue;
    moved |= receive(s);
  }
  while (arrived_ < head_ + kSlots && complete_[arrived_ % kSlots] == arrived_) ++arrived_;
  // Nothing left to hand out and the stream that carries the next step is closed: it can never
  // come. (Calling progress() only while waiting for data keeps a sender that finished and
  // closed from looking dead.)
  if (arrived_ == head_ && streams_[arrived_ % streams_.size()].closed) {
    throw RemoteError(strCat(link_.describe(), ": rank ", link_.sender,
                             " closed the connection before step ", arrived_,
                             " arrived (did it exit or crash?)"));
  }
  return moved;
}

}  // namespace loom::transport
