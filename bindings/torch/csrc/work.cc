#include "work.h"

#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

#include "wire.h"

namespace loom_torch {

LoomWork::LoomWork(int rank, c10d::OpType type, const char* name, std::vector<at::Tensor> outputs,
                   uint64_t seq, std::function<void(const std::string&)> onTimeout)
    : c10d::Work(rank, type),
      name_(name),
      outputs_(std::move(outputs)),
      seq_(seq),
      onTimeout_(std::move(onTimeout)),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
}

LoomWork::~LoomWork() {
  if (event_ != nullptr) loomEventDestroy(event_);
}

bool LoomWork::isCompleted() {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_;
}

bool LoomWork::isSuccess() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ && !exception_;
}

std::exception_ptr LoomWork::exception() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return exception_;
}

void LoomWork::finishOnce(std::exception_ptr error) {
  if (!error) {
    try {
      for (auto& f : after_) f();
    } catch (...) {
      error = std::current_exception();
    }
  }
  // Tensors of flat buffers and contiguous copies are no longer needed.
  keepAlive_.clear();
  finish(error);
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

void LoomWork::complete() {
  loomResult_t r = event_ == nullptr ? loomSuccess : loomEventSynchronize(event_);
  std::exception_ptr error;
  if (r != loomSuccess) error = loomError(r, comm_, name_);
  if (!finishing_.exchange(true)) {
    finishOnce(error);
    return;
  }
  // Another thread finishes it: return when it has.
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return completed_; });
}

void LoomWork::fail(std::exception_ptr error) {
  if (!finishing_.exchange(true)) finishOnce(error);
}

bool LoomWork::wait(std::chrono::milliseconds timeout) {
  if (timeout == kNoTimeout) {
    complete();
  } else {
    if (!watched_) {
      // No completion thread finishes it: poll its event up to the deadline.
      const auto deadline = std::chrono::steady_clock::now() + timeout;
      while (loomEventQuery(event_) == loomInProgress &&
             std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      if (loomEventQuery(event_) != loomInProgress) complete();
    }
    std::unique_lock<std::mutex> lock(mutex_);
    if (!cv_.wait_for(lock, timeout, [&] { return completed_; })) {
      lock.unlock();
      std::string message = c10::str("loom: ", name_, " (sequence number ", seq_, ") on rank ",
                                     rank_, " did not finish within wait(timeout=", timeout.count(),
                                     " ms); the communicator is aborted");
      // Claim the work before aborting: the abort makes the operation fail at once, and its
      // error must not replace the reason.
      if (!finishing_.exchange(true)) {
        onTimeout_(message);
        finishOnce(backendError(message));
      }
      lock.lock();
      cv_.wait(lock, [&] { return completed_; });
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

Lane::Lane(loomComm_t comm, std::string name) : comm_(comm), name_(std::move(name)) {
  check(loomStreamCreate(comm, &stream_), comm, "loomStreamCreate");
  thread_ = std::thread([this] { completeLoop(); });
}

Lane::~Lane() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  added_.notify_one();
  thread_.join();
  loomStreamDestroy(stream_);
}

void Lane::submit(const c10::intrusive_ptr<LoomWork>& work,
                  const std::function<void(loomStream_t)>& launch) {
  loomEvent_t event = nullptr;
  check(loomEventCreate(&event), comm_, "loomEventCreate");
  try {
    launch(stream_);
    check(loomEventRecord(event, stream_), comm_, "loomEventRecord");
  } catch (...) {
    loomEventDestroy(event);
    throw;
  }
  work->attach(event, comm_);
  if (!work->watched()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(work);
  }
  added_.notify_one();
}

void Lane::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  drained_.wait(lock, [&] { return queue_.empty(); });
}

void Lane::completeLoop() {
  for (;;) {
    c10::intrusive_ptr<LoomWork> work;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      added_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything is finished
      work = queue_.front();
    }
    work->complete();
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.pop_front();
    if (queue_.empty()) drained_.notify_all();
  }
}

}  // namespace loom_torch
