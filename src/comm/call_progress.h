// What a hang report needs to know about one rank on one communicator: the number of the last
// call it issued and of the last one it completed, and what the last issued call was (kind,
// count, datatype, root or peer). The API records each call as it is issued and completed; the
// control thread reads a snapshot when a peer asks (bootstrap/control_channel.h), even while
// this rank is idle outside any loom call. Only the latest call is kept: the flight recorder
// keeps the history.
//
// Recording is on every call's path, so it takes no lock and reads the flight recorder's cheap
// clock (FlightRecorder::ticks()); the rare reader converts ticks to milliseconds with a rate
// measured between this object's creation and the read. Fields are written one by one, so a
// reader racing a new call may see parts of two calls: good enough for a report, never used for
// a decision.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>

#include "src/bootstrap/control_channel.h"
#include "src/comm/flight_recorder.h"

namespace loom {

class CallProgress {
 public:
  using Clock = std::chrono::steady_clock;

  CallProgress() : createdTicks_(FlightRecorder::ticks()), createdAt_(Clock::now()) {}

  // `call` is the call's number on its communicator (CollOp::seq, from Comm::nextOpNumber): the
  // same numbers on every rank that issues the same calls, and the ones the flight recorder and
  // the executor's messages use. `kind` is a string literal.
  void issue(uint64_t call, const char* kind, uint64_t count, int datatype, int root,
             uint64_t ticks = FlightRecorder::ticks()) {
    kind_.store(kind, std::memory_order_relaxed);
    count_.store(count, std::memory_order_relaxed);
    datatype_.store(datatype, std::memory_order_relaxed);
    root_.store(root, std::memory_order_relaxed);
    issuedTicks_.store(ticks, std::memory_order_relaxed);
    issued_.store(call, std::memory_order_release);
  }
  void complete(uint64_t call, uint64_t ticks = FlightRecorder::ticks()) {
    completedTicks_.store(ticks, std::memory_order_relaxed);
    uint64_t done = completed_.load(std::memory_order_relaxed);
    while (call > done && !completed_.compare_exchange_weak(done, call, std::memory_order_release,
                                                            std::memory_order_relaxed)) {
    }
  }
  RankProgress snapshot() const {
    RankProgress p;
    p.issued = issued_.load(std::memory_order_acquire);
    p.completed = completed_.load(std::memory_order_acquire);
    p.count = count_.load(std::memory_order_relaxed);
    p.datatype = datatype_.load(std::memory_order_relaxed);
    p.root = root_.load(std::memory_order_relaxed);
    if (const char* kind = kind_.load(std::memory_order_relaxed))
      std::strncpy(p.kind, kind, sizeof(p.kind) - 1);
    const Rate rate = measureRate();
    p.msSinceIssued = p.issued > 0 ? msSince(issuedTicks_.load(std::memory_order_relaxed), rate)
                                   : RankProgress::kNever;
    p.msSinceCompleted = p.completed > 0
                             ? msSince(completedTicks_.load(std::memory_order_relaxed), rate)
                             : RankProgress::kNever;
    p.answered = true;
    return p;
  }
  // The call in flight (issued, not completed) and how long ago it was issued; 0 when none.
  uint64_t inFlight(Clock::duration* age) const {
    const uint64_t issued = issued_.load(std::memory_order_acquire);
    if (issued == completed_.load(std::memory_order_acquire)) return 0;
    if (age != nullptr)
      *age = std::chrono::milliseconds(
          msSince(issuedTicks_.load(std::memory_order_relaxed), measureRate()));
    return issued;
  }

 private:
  struct Rate {
    uint64_t nowTicks;
    double nsPerTick;
  };
  Rate measureRate() const {
    const uint64_t now = FlightRecorder::ticks();
    const auto ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - createdAt_).count();
    const uint64_t span = now - createdTicks_;
    return {now, span > 0 && ns > 0 ? static_cast<double>(ns) / static_cast<double>(span) : 1.0};
  }
  static uint32_t msSince(uint64_t then, const Rate& rate) {
    if (rate.nowTicks <= then) return 0;
    const double ms = static_cast<double>(rate.nowTicks - then) * rate.nsPerTick / 1e6;
    return ms >= RankProgress::kNever - 1 ? RankProgress::kNever - 1 : static_cast<uint32_t>(ms);
  }

  const uint64_t createdTicks_;
  const Clock::time_point createdAt_;
  std::atomic<uint64_t> issued_{0};
  std::atomic<uint64_t> completed_{0};
  std::atomic<const char*> kind_{nullptr};
  std::atomic<uint64_t> count_{0};
  std::atomic<int32_t> datatype_{-1};
  std::atomic<int32_t> root_{-1};
  std::atomic<uint64_t> issuedTicks_{0};
  std::atomic<uint64_t> completedTicks_{0};
};

}  // namespace loom
