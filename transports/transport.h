// The transport interface: how bytes of one direction of one (peer, channel) connection move.
//
// How it works. Every connection, whatever carries it, looks the same to the primitives: a ring
// of kSlots slots of slotBytes each, with two counters (step-based flow control, identical for
// every transport: docs/architecture.md, "Transports").
//   - The sender asks for a free slot (tryAcquire), fills it (possibly by a fused reduceCopy
//     writing straight into it), and posts it with its byte count: tail += 1.
//   - The receiver asks for the next full slot (tryReceive), consumes it (again possibly by a
//     fused reduceCopy reading straight from it), and releases it: head += 1.
//   - A slot is free for the sender while tail - head < kSlots.
// shm keeps the slot ring in memory both processes map, so posting is a store and there is no
// copy beyond the one reduceCopy does. socket keeps one ring on each side and moves posted
// slots over TCP in progress() (called by the executor while it waits), so the primitives
// never learn which transport they use. Nothing here blocks: waiting belongs to the executor,
// which owns deadlines, abort checks and the spin/yield/sleep policy.
//
// Connection setup goes through the communicator's bootstrap, in three phases per batch so no
// rank waits on a peer that is itself waiting (connectAll in registry.h):
//   1. every receiver creates its side and sends a ConnectBlob to the sender;
//   2. every sender receives the blob, attaches, and sends an acknowledgement blob back;
//   3. every receiver receives the acknowledgement and finishes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "src/kernels/connection_view.h"
#include "src/mem/region_registry.h"
#include "transports/wait.h"

namespace loom::transport {

// Slots in flight per connection: enough to pipeline a reduceCopy with the transfer of the
// previous steps without letting a slow receiver pin much memory.
inline constexpr int kSlots = 8;

// Protocol (Simple or LL) is declared in connection_view.h, beside the view of its layout.

inline const char* protocolName(Protocol p) { return p == Protocol::kLL ? "LL" : "Simple"; }

// A step's bytes that stay unchanged in this process until the connection is drained(),
// offered to a connection in place of a filled slot (single-copy steps: shm/direct_read.h,
// shm/registered_read.h, socket zero-copy sends).
struct StepMemory {
  const void* data = nullptr;
  size_t bytes = 0;
  // The registered region that holds them (src/mem/region_registry.h), or null. The executor
  // looks it up; a peer that imports the region reads the step in place at its offset
  // (data - region->base), whatever memory kind it is.
  const MemRegion* region = nullptr;
  // The call lets the receiver pull memory outside any region with a system call (CMA); the
  // CPU executor's way policy decides per call (src/exec/cpu/shm_way_policy.h).
  bool mayPull = false;
};

// Where a step's bytes end up on the receiving side, offered to a receive connection before the
// step arrives (RecvConnection::offerDestination): the receiver's counterpart of StepMemory.
struct StepDestination {
  void* data = nullptr;
  size_t bytes = 0;  // room there: at least the step's size
  // The registered region that holds it (src/mem/region_registry.h), or null: a transport
  // that writes into registered memory (a NIC's receive) needs it.
  const MemRegion* region = nullptr;
};

// Fixed-size opaque setup message (bootstrap messages have exact sizes).
struct ConnectBlob {
  uint8_t bytes[256] = {};
};

class SendConnection {
 public:
  virtual ~SendConnection() = default;
  // The next slot to fill (slotBytes() bytes), or nullptr while all kSlots are in flight.
  virtual void* tryAcquire() = 0;
  // Publishes the slot returned by the last tryAcquire with `bytes` (<= slotBytes()) of data.
  // `tag` travels with the slot untouched: the executor stamps each slot with a signature of
  // the call, so ranks that disagree about it are caught instead of mixing data.
  virtual void post(size_t bytes, uint32_t tag = 0) = 0;
  // Moves posted data toward the peer without blocking; true if anything moved. Throws
  // RemoteError when the peer is gone.
  virtual bool progress() = 0;
  // True when every posted slot has left this side (its memory may be reused or freed).
  virtual bool drained() const = 0;
  virtual size_t slotBytes() const = 0;
  // Before the executor sleeps because tryAcquire() found no free slot (`drain` false) or
  // drained() is false (`drain` true): adds what to sleep on to `set` and re-checks (wait.h).
  // kReady: what the caller waits for is there now, do not sleep. kUnsupported: this
  // connection cannot wake a sleeper; nap briefly instead.
  virtual WaitArm armWait(WaitSet& set, bool drain) = 0;
  // Single-copy posting. True if `step` may be posted as it lies instead of copied into a
  // slot: then, after tryAcquire(), postStep() replaces filling the slot and post(). A
  // connection takes what its peer can read: the address in a process it shares, a
  // registered region it imports, memory it may pull (step.mayPull).
  virtual bool acceptsStep(const StepMemory& step) const {
    (void)step;
    return false;
  }
  virtual void postStep(const StepMemory& step, uint32_t tag) { (void)step, (void)tag; }
  // The call that posted steps with postStep() failed and is about to return: its memory may
  // be freed at once, so nothing may be read from it from now on. Steps that wholly left stay
  // sent. A connection that still had to read a step's bytes cannot finish that step, so it
  // cannot keep its wire in order either: it sends nothing more, reports drained(), and fails
  // every later use (progress() throws RemoteError). Never waits. Called by the thread that
  // drives the connection.
  virtual void dropPostedSteps() {}
  // Throws RemoteError when the peer's process is gone. The executor asks every so often
  // during a long wait on this connection (a system call; never per poll). Connections that
  // notice by themselves in progress() (a socket's EOF) need nothing here.
  virtual void checkPeer() const {}
  // A plain view of the slots for primitives that write the protocol's layout themselves
  // (connection_view.h), or nullptr. Stable for the connection's life.
  virtual const ConnectionView* view() const { return nullptr; }
  // Publishes a step the caller wrote through view() (into the slot of step *view()->ll.step)
  // after tryAcquire() found it free, instead of filling the returned slot and post(). Without
  // a view the slot tryAcquire() returns is the step's memory, so this is post().
  virtual void postWritten(size_t bytes, uint32_t tag) { post(bytes, tag); }
  // Steps were posted through view() without this object (a device program writes the ring's
  // counters itself): take the counters from the shared ring again before the next use.
  virtual void resync() {}
  // Whether a host thread must call progress() while a device program steps view(): a wire
  // connection behind a proxy ring (proxy/proxy_connection.h). A memory transport's ring needs
  // no one between the device and the peer.
  virtual bool needsHostProgress() const { return false; }
  // Whether a device program may post steps whose bytes lie in `buffer` by address, writing the
  // address into the view's direct word instead of the bytes into the slot: a GPUDirect RDMA
  // connection whose NIC has `buffer` registered reads it itself (ib/ib_gdr.h). The program
  // then keeps the buffer unchanged until head has passed the step.
  virtual bool readsByAddress(const StepMemory& buffer) const {
    (void)buffer;
    return false;
  }
};

class RecvConnection {
 public:
  virtual ~RecvConnection() = default;
  // The next full slot, its byte count and its tag (when `tag` is not null), or nullptr while
  // none has arrived.
  virtual const void* tryReceive(size_t* bytes, uint32_t* tag = nullptr) = 0;
  // Returns the slot from the last tryReceive to the sender.
  virtual void release() = 0;
  // Where the next step's bytes end up: the caller copies them, unchanged, to `dst`. A
  // connection that places arriving bytes itself (shm pulling a step with CMA; a wire transport
  // receiving into user memory) may put them there and return dst.data from tryReceive, which
  // saves the caller's copy (it then runs in place). Holds until release(); a connection that
  // cannot use it ignores it.
  virtual void offerDestination(const StepDestination& dst) { (void)dst; }
  // Moves arriving data into slots without blocking; true if anything moved. Throws
  // RemoteError when the peer is gone.
  virtual bool progress() = 0;
  virtual size_t slotBytes() const = 0;
  // As SendConnection::armWait, for a tryReceive() that found no data.
  virtual WaitArm armWait(WaitSet& set) = 0;
  // As SendConnection::checkPeer.
  virtual void checkPeer() const {}
  // As SendConnection::view.
  virtual const ConnectionView* view() const { return nullptr; }
  // As tryReceive, but the data stays where view() says, in its layout (for LL: the data words
  // of step *view()->ll.step, every one of which has landed), for a primitive that reads the
  // layout itself; release() as after tryReceive. Without a view the slot is plain bytes.
  // After progress() threw: whether the failure is this side's own (a local NIC fault), which
  // no peer's exit explains. A receiver that reads ahead of its consumer keeps other errors
  // until a step is asked for (proxy/proxy_connection.h), but raises these at once: a kernel
  // waiting on the connection would not ask, and a sender waiting for credits would not fail.
  virtual bool failedHere() const { return false; }
  virtual const void* tryReceiveInView(size_t* bytes, uint32_t* tag = nullptr) {
    return tryReceive(bytes, tag);
  }
  // As SendConnection::resync.
  virtual void resync() {}
  // As SendConnection::needsHostProgress.
  virtual bool needsHostProgress() const { return false; }
};

}  // namespace loom::transport
