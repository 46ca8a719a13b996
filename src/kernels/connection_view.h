// A plain view of a memory transport's connection: where the peer-visible words of its steps
// live and how they are laid out, so a primitive that must write and read the protocol's
// layout itself (a GPU kernel's threads) can do so instead of going through the connection's
// staging copies (docs/architecture.md, "Protocols: Simple and LL").
//
// Plain data only: no virtual calls, no owning pointers, no std::atomic, so the same struct
// can be copied into device memory and read by device code (C++17, no host-only includes).
// The rules for the words themselves (flags, header order, refresh) are in
// src/kernels/ll_words.h, the one place both the connection and the primitive take them from.
//
// Who does what on a connection with a view (transport.h):
//   - flow control, publishing and waking stay with the connection's calls: tryAcquire() says
//     a slot is free, postWritten() publishes a step the caller wrote through the view,
//     tryReceiveInView() says every word of the next step has landed, release() frees it;
//   - the caller writes (sender) or reads (receiver) the data words of step `*step` through
//     the view between those calls.
#pragma once

#include <stdint.h>

#include "src/mem/memory_kind.h"

namespace loom::transport {

// How a connection's bytes are laid out in the shared memory (docs/architecture.md, "Protocols:
// Simple and LL"). kSimple: bulk slots published by head/tail counters with release/acquire (the
// only protocol the socket transport has). kLL: every 8-byte word carries 4 bytes of data and
// a 4-byte flag, so the receiver sees data as soon as each word lands, with no fence and no
// counter round trip; small slots, for small messages (shm/ll_connection.h). Both look the
// same through SendConnection/RecvConnection, so primitives never have to know which they use.
enum class Protocol : uint8_t { kSimple = 0, kLL = 1 };

// Where the view's words are says which kind of code may touch them directly.
using loom::MemoryKind;

// An LL ring: nslots slots, slot i at `slots + i * slotStrideWords`; each slot is headerWords
// header words (ll_words.h says which is which) then dataWords data words. Step s uses slot
// s % nslots with flag llFlag(s).
struct LLRingView {
  uint64_t* slots = nullptr;
  uint32_t nslots = 0;
  uint32_t slotStrideWords = 0;
  uint32_t headerWords = 0;
  uint32_t dataWords = 0;  // 4 payload bytes each
  // Every word of a slot is rewritten on the first nslots steps of each refreshSteps steps
  // (ll_words.h, llWordsToWrite).
  uint64_t refreshSteps = 0;
  // The receiver's released steps, in the shared memory (written by the receiver only); the
  // sender is at most nslots steps ahead of it.
  const uint64_t* head = nullptr;
  // This side's next step: the one to post (sender) or to receive (receiver). Private to the
  // side; the connection advances it in postWritten() and release(), and a device program
  // that posts and releases through the view without the connection advances it itself
  // (src/exec/cuda/device_program.h).
  uint64_t* step = nullptr;
};

// A Simple ring (transports/shm/ring_control.h): nslots slots of slotBytes at `slots`, step s
// in slot s % nslots. The sender writes the slot, then words[s % nslots] (the byte count, with
// the call's tag in the upper 32 bits) and zeroes direct/region there (the data is in the
// slot), then publishes tail = s + 1 with release; the receiver reads tail with acquire, then
// the slot, and publishes head = s + 1 with release once it has read it. Each side writes only
// its own counter, so its value is also that side's next step: no private copy is needed,
// and a kernel resumes where the last call left off.
struct SimpleRingView {
  uint8_t* slots = nullptr;
  uint64_t slotBytes = 0;
  uint32_t nslots = 0;
  uint64_t* tail = nullptr;    // written by the sender only
  uint64_t* head = nullptr;    // written by the receiver only
  uint64_t* words = nullptr;   // nslots: bytes | tag << 32
  uint64_t* direct = nullptr;  // nslots: 0 when the step is in its slot
  uint64_t* region = nullptr;  // nslots: 0 when the step is in its slot
};

struct ConnectionView {
  Protocol protocol = Protocol::kSimple;
  MemoryKind memory = MemoryKind::kHost;
  LLRingView ll;          // protocol == kLL
  SimpleRingView simple;  // protocol == kSimple, a memory transport
};

}  // namespace loom::transport
