// Host streams and events for CPU communicators (loom.h: "Host streams and events").
//
// A stream is an in-order queue served by its own thread: enqueue() returns at once, the thread
// runs the work items one after another. A thread that waits for the stream (synchronize, an
// event) and finds the next item not yet started runs it itself: the worker is often asleep
// after an idle gap, and waking it costs more than a small collective (tens of us), while
// the waiter is on a CPU already. Items still run one at a time and in order. The first item that
// fails records its error; later items are dropped (their results would be built on a failed one)
// and every query reports that error, as a CUDA stream with a sticky error does. Events remember a
// stream and a position in it (the number of items enqueued when recorded).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "loom/loom.h"

struct loomStream {};
struct loomEvent {};

namespace loom {

class Comm;

class HostStream : public loomStream {
 public:
  explicit HostStream(std::shared_ptr<Comm> comm);
  ~HostStream();  // finishes the queue, then stops the thread
  HostStream(const HostStream&) = delete;
  HostStream& operator=(const HostStream&) = delete;

  Comm& comm() const { return *comm_; }
  // Appends work; returns its position (1-based). Throws if the stream already failed.
  uint64_t enqueue(std::function<void()> work);
  uint64_t enqueued() const;
  // loomSuccess when items up to `position` finished, loomInProgress before, or the error.
  loomResult_t query(uint64_t position) const;
  // Runs items itself while the worker has not started them (see the top of this file).
  loomResult_t wait(uint64_t position);
  // The failed item's message ("" when none failed).
  std::string errorMessage() const;

 private:
  void serve();
  // Runs the head item (the caller holds `lock` on mutex_, the queue is not empty and no item is
  // running); returns with the lock held again.
  void runHead(std::unique_lock<std::mutex>& lock);

  std::shared_ptr<Comm> comm_;
  mutable std::mutex mutex_;
  std::condition_variable workAdded_;             // the worker waits for work on it
  mutable std::condition_variable workFinished_;  // waiters wait for a position on it
  // The lowest position a blocked waiter waits for: the worker wakes waiters only once that is
  // reached, not after every item (each wake-up would steal a core from the collectives).
  mutable uint64_t wakeAt_ = UINT64_MAX;
  std::deque<std::function<void()>> queue_;
  bool running_ = false;  // an item is executing, on the worker or on a waiting thread
  uint64_t enqueued_ = 0;
  uint64_t completed_ = 0;
  // Copies of enqueued_ and completed_ (written under mutex_) that the worker and waiters spin
  // on before they block: a condition variable wake-up costs more than a small collective.
  std::atomic<uint64_t> enqueuedSeen_{0};
  std::atomic<uint64_t> completedSeen_{0};
  std::atomic<bool> stoppingSeen_{false};
  loomResult_t error_ = loomSuccess;
  std::string errorMessage_;
  bool stopping_ = false;
  std::thread worker_;
};

class HostEvent : public loomEvent {
 public:
  void record(std::shared_ptr<HostStream> stream);
  loomResult_t query() const;
  loomResult_t wait() const;

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<HostStream> stream_;
  uint64_t position_ = 0;
};

// Handle tables (see handle_registry.h).
loomStream* registerStream(std::shared_ptr<HostStream> stream);
std::shared_ptr<HostStream> findStream(const loomStream* handle);
std::shared_ptr<HostStream> unregisterStream(const loomStream* handle);
loomEvent* registerEvent(std::shared_ptr<HostEvent> event);
std::shared_ptr<HostEvent> findEvent(const loomEvent* handle);
std::shared_ptr<HostEvent> unregisterEvent(const loomEvent* handle);

}  // namespace loom
