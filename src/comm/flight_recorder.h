// The flight recorder: a communicator's last calls, kept so that a failure or a hang can say
// what each rank was doing, and so that the dumps of all ranks can be lined up
// (`loom-trace-merge`, docs/debugging.md).
//
// How it works. A fixed ring of LOOM_TRACE_BUFFER slots, indexed by the call's sequence number
// (the communicator's op counter, Comm::nextOpNumber), so a call finds its own slot again
// without a lookup. The C API records a call when it is issued, when it starts to run (at once
// on the NULL stream; later on a host stream or at loomGroupEnd) and when it ends. Recording
// takes no lock and allocates nothing: each slot is a seqlock of plain words, written by the
// thread that owns the call and read, rarely, by the thread that dumps. A slot's `word` holds
// the call's sequence number and state; the issuer sets it to "writing", fills the fields and
// publishes it with one release store; start and end set their time, then move the state on
// with a compare-and-swap that fails when N later calls have since taken the slot. A reader
// keeps a slot only when `word` did not change while it read the fields.
//
// Slots keep times in ticks of the CPU's counter (ticks()); a dump turns them into steady-clock
// nanoseconds and carries an anchor (steady and wall clock read together) so that the dumps of
// several hosts can be put on one time line.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "loom/loom.h"

namespace loom {

// What a call is, as the C API saw it. The names are static strings (collName, dataTypeName,
// reduceOpKindName): the recorder sits below the layers that own those enums and keeps the
// pointers.
struct CallShape {
  const char* kind = "?";    // "AllReduce", ..., "Send", "Recv"
  const char* type = "?";    // "float32", ...
  const char* op = nullptr;  // "sum", ...; reductions only
  uint64_t count = 0;
  int root = -1;         // Broadcast, Reduce; -1 otherwise
  int peer = -1;         // Send, Recv; -1 otherwise
  bool grouped = false;  // issued between loomGroupStart and loomGroupEnd
};

enum class CallState : uint8_t {
  kEmpty = 0,    // slot never used
  kWriting = 1,  // being filled (a reader skips it)
  kIssued = 2,   // queued on a host stream or in a group
  kRunning = 3,
  kCompleted = 4,
  kFailed = 5,
};
// "issued", "running", "completed", "failed".
const char* callStateName(CallState state);
// "loomRemoteError", ...: the enumerator's name.
const char* resultName(loomResult_t result);

// One recorded call, as a dump reads it.
struct FlightEntry {
  uint64_t seq = 0;
  CallShape shape;
  CallState state = CallState::kEmpty;
  loomResult_t error = loomSuccess;  // kFailed: the code the call failed with
  int64_t issuedNs = 0;              // steady-clock nanoseconds; 0: not reached yet
  int64_t startedNs = 0;
  int64_t endedNs = 0;
};

class FlightRecorder {
 public:
  struct Config {
    std::string comm = "loom";  // the communicator's name (loomConfig_t.name)
    int rank = 0;
    int nranks = 1;
    size_t capacity = 64;   // calls kept; 0: off
    std::string debugFile;  // LOOM_DEBUG_FILE pattern (%h host, %p pid); empty: stderr
  };
  explicit FlightRecorder(Config config);
  // The capacity from LOOM_TRACE_BUFFER and the file from LOOM_DEBUG_FILE. Throws
  // InvalidArgument on a bad LOOM_TRACE_BUFFER.
  FlightRecorder(std::string comm, int rank, int nranks);
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  bool enabled() const { return capacity_ != 0; }
  size_t capacity() const { return capacity_; }

  // ---- Recording (the hot path: inline, no lock, no allocation) ----
  // A call numbered `seq` was issued at `t`; `running` when it starts at once (the NULL
  // stream). The C API passes the one reading of the clock it also gives CallProgress.
  void issue(uint64_t seq, const CallShape& shape, bool running, uint64_t t = ticks()) {
    if (capacity_ == 0) return;
    Slot& s = slot(seq);
    s.word.store(pack(seq, CallState::kWriting), std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    s.kind.store(shape.kind, std::memory_order_relaxed);
    s.type.store(shape.type, std::memory_order_relaxed);
    s.op.store(shape.op, std::memory_order_relaxed);
    s.count.store(shape.count, std::memory_order_relaxed);
    s.place.store(static_cast<uint32_t>(shape.root) |
                      static_cast<uint64_t>(static_cast<uint32_t>(shape.peer)) << 32,
                  std::memory_order_relaxed);
    s.flags.store(shape.grouped ? kGrouped : 0, std::memory_order_relaxed);
    s.issued.store(t, std::memory_order_relaxed);
    s.started.store(running ? t : 0, std::memory_order_relaxed);
    s.word.store(pack(seq, running ? CallState::kRunning : CallState::kIssued),
                 std::memory_order_release);
  }
  // An issued call starts to run.
  void start(uint64_t seq) {
    if (capacity_ == 0) return;
    Slot& s = slot(seq);
    uint64_t w = s.word.load(std::memory_order_relaxed);
    if (w != pack(seq, CallState::kIssued)) return;  // the slot holds a later call
    s.started.store(ticks(), std::memory_order_relaxed);
    s.word.compare_exchange_strong(w, pack(seq, CallState::kRunning), std::memory_order_release,
                                   std::memory_order_relaxed);
  }
  // A call ended: completed when `result` is loomSuccess, else failed with it.
  void finish(uint64_t seq, loomResult_t result, uint64_t t = ticks()) {
    if (capacity_ == 0) return;
    Slot& s = slot(seq);
    uint64_t w = s.word.load(std::memory_order_relaxed);
    if (w != pack(seq, CallState::kRunning) && w != pack(seq, CallState::kIssued)) return;
    s.ended.store(t, std::memory_order_relaxed);
    s.error.store(static_cast<int32_t>(result), std::memory_order_relaxed);
    s.word.compare_exchange_strong(
        w, pack(seq, result == loomSuccess ? CallState::kCompleted : CallState::kFailed),
        std::memory_order_release, std::memory_order_relaxed);
  }

  // The recorder's clock: the CPU's time-stamp counter where there is a constant-rate one
  // (a third of the cost of reading the steady clock), else the steady clock. Dumps convert it
  // to steady-clock nanoseconds (Anchor).
  static uint64_t ticks() {
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_ia32_rdtsc();
#elif defined(__aarch64__)
    uint64_t v;
    asm volatile("mrs %0, cntvct_el0" : "=r"(v));
    return v;
#else
    return static_cast<uint64_t>(steadyNs());
#endif
  }
  static int64_t steadyNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  // An id that every rank of the communicator computes alike from what the ranks told each
  // other at init (mixId over each rank's host and pid), so that tools tell apart the dumps of
  // different jobs and communicators in one log. 0 (unknown) until set.
  void setCommId(uint64_t id) { commId_.store(id, std::memory_order_relaxed); }
  static uint64_t mixId(uint64_t id, uint64_t value) {
    id = (id ^ value) * 0xff51afd7ed558ccdull;
    return id ^ (id >> 32);
  }

  // ---- Reading (any thread, any time) ----
  // The recorded calls, oldest first.
  std::vector<FlightEntry> snapshot() const;
  // The dump as text (a header line, then one line per call) and as one JSON line.
  std::string text(std::string_view reason) const;
  std::string json(std::string_view reason) const;
  // Writes text and JSON to LOOM_DEBUG_FILE (appended) or stderr. Nothing when off.
  void dump(std::string_view reason) const;
  // dump() for the automatic triggers (abort, a remote error, a timeout): only the first one
  // of a communicator writes. Returns whether this one did.
  bool dumpOnce(std::string_view reason);

 private:
  static constexpr uint8_t kGrouped = 1;
  struct Slot {
    std::atomic<uint64_t> word{0};  // seq << 8 | CallState
    std::atomic<const char*> kind{nullptr};
    std::atomic<const char*> type{nullptr};
    std::atomic<const char*> op{nullptr};
    std::atomic<uint64_t> count{0};
    std::atomic<uint64_t> place{0};  // root (low 32 bits), peer (high 32 bits)
    std::atomic<int32_t> error{0};
    std::atomic<uint8_t> flags{0};
    std::atomic<uint64_t> issued{0};  // ticks()
    std::atomic<uint64_t> started{0};
    std::atomic<uint64_t> ended{0};
  };
  static uint64_t pack(uint64_t seq, CallState state) {
    return seq << 8 | static_cast<uint64_t>(state);
  }
  Slot& slot(uint64_t seq) const { return slots_[mask_ != 0 ? (seq & mask_) : (seq % capacity_)]; }
  // The recorder's clock, the steady clock and the wall clock read together. Two anchors (the
  // recorder's creation and a dump) give the rate of ticks(); steady(t) maps a tick to
  // steady-clock nanoseconds, and wall = wallNs + (steady - steadyNs) to the wall clock.
  struct Anchor {
    uint64_t ticks = 0;
    int64_t steadyNs = 0;
    int64_t wallNs = 0;
    double nsPerTick = 1;
    static Anchor now(const Anchor* first);
    int64_t steady(uint64_t t) const {
      const auto back = static_cast<int64_t>(ticks - t);  // negative for a tick after the anchor
      return steadyNs - static_cast<int64_t>(static_cast<double>(back) * nsPerTick);
    }
    int64_t wall(int64_t steady) const { return wallNs + (steady - steadyNs); }
  };
  // The fields of one slot if a reader got them whole (it retries a few times).
  bool read(const Slot& s, const Anchor& anchor, FlightEntry& out) const;
  std::vector<FlightEntry> snapshot(const Anchor& anchor) const;
  std::string commIdText() const;  // 16 hex digits
  std::string formatText(std::string_view reason, const std::vector<FlightEntry>& entries,
                         const Anchor& anchor) const;
  std::string formatJson(std::string_view reason, const std::vector<FlightEntry>& entries,
                         const Anchor& anchor) const;

  const Config config_;
  const size_t capacity_;
  const uint64_t mask_;  // capacity - 1 when a power of two, else 0
  std::unique_ptr<Slot[]> slots_;
  const Anchor created_;
  std::atomic<uint64_t> commId_{0};
  std::atomic<bool> dumped_{false};
};

}  // namespace loom
