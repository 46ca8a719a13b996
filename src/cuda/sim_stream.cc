#include "src/cuda/sim_stream.h"

#include <exception>

#include "src/base/error.h"
#include "src/cuda/sim_runtime.h"

namespace loom::cuda {

SimStream::SimStream(int device) : device_(device), thread_([this] { loop(); }) {}

SimStream::~SimStream() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void SimStream::enqueue(std::function<void()> work) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(work));
    ++enqueued_;
  }
  wake_.notify_one();
}

void SimStream::synchronize() {
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t target = enqueued_;
  done_.wait(lock, [&] { return finished_ >= target; });
  if (!error_.empty()) {
    std::string error = std::move(error_);
    error_.clear();
    throw CudaError(strCat("work on a simulated stream failed: ", error));
  }
}

bool SimStream::idle() {
  std::lock_guard<std::mutex> lock(mutex_);
  return finished_ == enqueued_;
}

void SimStream::loop() {
  // Work on this thread runs on the stream's device, as a kernel runs on its stream's.
  simSetThreadDevice(device_);
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_, and nothing left to run
    std::function<void()> work = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    std::string failure;
    try {
      work();
    } catch (const std::exception& e) {
      failure = e.what();
    }
    work = nullptr;  // drop what it held before anyone is told it finished
    lock.lock();
    if (!failure.empty() && error_.empty()) error_ = std::move(failure);
    ++finished_;
    done_.notify_all();
  }
}

void SimEvent::record(SimStream& stream) {
  uint64_t record;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    record = ++recorded_;
  }
  stream.enqueue([self = shared_from_this(), this, record] {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (record > completed_) {
        completed_ = record;
        completedAt_ = std::chrono::steady_clock::now();
      }
    }
    reached_.notify_all();
  });
}

bool SimEvent::query() {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ >= recorded_;
}

void SimEvent::synchronize() {
  uint64_t target;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    target = recorded_;
  }
  waitFor(target);
}

std::function<void()> SimEvent::waiter() {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t target = recorded_;
  return [self = shared_from_this(), this, target] { waitFor(target); };
}

std::chrono::steady_clock::time_point SimEvent::completedAt() {
  std::lock_guard<std::mutex> lock(mutex_);
  return completedAt_;
}

void SimEvent::waitFor(uint64_t record) {
  std::unique_lock<std::mutex> lock(mutex_);
  reached_.wait(lock, [&] { return completed_ >= record; });
}

}  // namespace loom::cuda
