#include "src/exec/host_stream.h"

#include <algorithm>

#include "src/base/error.h"
#include "src/base/handle_registry.h"
#include "src/base/logging.h"
#include "src/base/spin_wait.h"
#include "src/comm/comm.h"
#include "src/exec/thread_binding.h"

namespace loom {

HostStream::HostStream(std::shared_ptr<Comm> comm) : comm_(std::move(comm)) {
  worker_ = std::thread([this] {
    bindThreadNearRank(*comm_);
    serve();
  });
}

HostStream::~HostStream() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    stoppingSeen_ = true;
  }
  workAdded_.notify_all();
  worker_.join();
}

uint64_t HostStream::enqueue(std::function<void()> work) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (error_ != loomSuccess)
    throw Error(error_, strCat("the stream failed earlier and accepts no more work: ",
                               errorMessage_, ". Destroy it and create a new one"));
  queue_.push_back(std::move(work));
  ++enqueued_;
  enqueuedSeen_.store(enqueued_, std::memory_order_release);
  workAdded_.notify_one();
  return enqueued_;
}

uint64_t HostStream::enqueued() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return enqueued_;
}

void HostStream::serve() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (queue_.empty() && !stopping_) {
      // Spin a little for the next item before blocking (spin_wait.h).
      const uint64_t taken = completed_;
      lock.unlock();
      spinUntil([&] {
        return enqueuedSeen_.load(std::memory_order_acquire) > taken ||
               stoppingSeen_.load(std::memory_order_relaxed);
      });
      lock.lock();
    }
    // A waiting thread may be running items itself (wait()); it wakes us when it stops.
    workAdded_.wait(lock,
                    [&] { return (stopping_ && !running_) || (!queue_.empty() && !running_); });
    if (queue_.empty()) return;  // stopping, and everything enqueued has run
    runHead(lock);
  }
}

void HostStream::runHead(std::unique_lock<std::mutex>& lock) {
  std::function<void()> work = std::move(queue_.front());
  queue_.pop_front();
  running_ = true;
  bool failed = error_ != loomSuccess;
  lock.unlock();
  loomResult_t code = loomSuccess;
  std::string message;
  if (!failed) {
    try {
      work();
    } catch (const Error& e) {
      code = e.code();
      message = e.what();
    } catch (const std::exception& e) {
      code = loomInternalError;
      message = e.what();
    }
  }
  work = nullptr;  // release what the item captured before reporting completion
  lock.lock();
  running_ = false;
  if (code != loomSuccess && error_ == loomSuccess) {
    error_ = code;
    errorMessage_ = message;
    comm_->setLastError(message);
    LOOM_WARN(kLogColl, "stream operation failed: ", message);
  }
  ++completed_;
  completedSeen_.store(completed_, std::memory_order_release);
  if (completed_ >= wakeAt_ || error_ != loomSuccess) {
    wakeAt_ = UINT64_MAX;
    workFinished_.notify_all();  // waiters still short of their position register again
  }
}

loomResult_t HostStream::query(uint64_t position) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (error_ != loomSuccess) return error_;
  return completed_ >= position ? loomSuccess : loomInProgress;
}

loomResult_t HostStream::wait(uint64_t position) {
  std::unique_lock<std::mutex> lock(mutex_);
  // Run what the worker has not started, in order, up to our position. Items after it stay
  // with the worker (another thread may be waiting to enqueue behind them).
  bool helped = false;
  while (completed_ < position && !running_ && !queue_.empty()) {
    runHead(lock);
    helped = true;
  }
  if (helped && !queue_.empty()) workAdded_.notify_one();  // the rest is the worker's again
  if (completed_ < position) {
    // The worker runs an item we need: spin briefly, then sleep until our position is done.
    lock.unlock();
    spinUntil([&] { return completedSeen_.load(std::memory_order_acquire) >= position; });
    lock.lock();
    while (completed_ < position) {
      wakeAt_ = std::min(wakeAt_, position);
      workFinished_.wait(lock);
    }
  }
  return error_;
}

std::string HostStream::errorMessage() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return errorMessage_;
}

void HostEvent::record(std::shared_ptr<HostStream> stream) {
  uint64_t position = stream->enqueued();
  std::lock_guard<std::mutex> lock(mutex_);
  stream_ = std::move(stream);
  position_ = position;
}

loomResult_t HostEvent::query() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stream_ ? stream_->query(position_) : loomSuccess;
}

loomResult_t HostEvent::wait() const {
  std::shared_ptr<HostStream> stream;
  uint64_t position;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stream = stream_;
    position = position_;
  }
  return stream ? stream->wait(position) : loomSuccess;
}

namespace {

HandleRegistry<loomStream, HostStream>& streams() {
  static auto* table = new HandleRegistry<loomStream, HostStream>("stream");
  return *table;
}
HandleRegistry<loomEvent, HostEvent>& events() {
  static auto* table = new HandleRegistry<loomEvent, HostEvent>("event");
  return *table;
}

}  // namespace

loomStream* registerStream(std::shared_ptr<HostStream> s) { return streams().add(std::move(s)); }
std::shared_ptr<HostStream> findStream(const loomStream* h) { return streams().find(h); }
std::shared_ptr<HostStream> unregisterStream(const loomStream* h) { return streams().remove(h); }
loomEvent* registerEvent(std::shared_ptr<HostEvent> e) { return events().add(std::move(e)); }
std::shared_ptr<HostEvent> findEvent(const loomEvent* h) { return events().find(h); }
std::shared_ptr<HostEvent> unregisterEvent(const loomEvent* h) { return events().remove(h); }

}  // namespace loom
