// The simulated runtime's streams and events (sim_runtime.h).
//
// A stream is a host thread that runs its work in the order it was enqueued, as a CUDA stream
// runs kernels and copies. An event is two counters: how many times it was recorded, and the
// latest record its stream has reached. A query or synchronize looks at the latest record only,
// and a stream told to wait for an event waits for the record that was latest when it was told,
// which is what CUDA does.
#pragma once

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace loom::cuda {

class SimStream {
 public:
  explicit SimStream(int device);
  ~SimStream();  // runs what is enqueued, then ends the thread
  SimStream(const SimStream&) = delete;
  SimStream& operator=(const SimStream&) = delete;

  int device() const { return device_; }
  // The process whose thread runs this stream (a fork's child has none of its own).
  pid_t pid() const { return pid_; }
  void enqueue(std::function<void()> work);
  // Waits until everything enqueued so far has run. A failure of that work (an exception of a
  // host kernel) is rethrown here once, as CudaError, like a sticky launch failure.
  void synchronize();
  bool idle();

 private:
  void loop();

  const int device_;
  const pid_t pid_ = ::getpid();
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::deque<std::function<void()>> queue_;
  uint64_t enqueued_ = 0, finished_ = 0;
  bool stop_ = false;
  std::string error_;
  std::thread thread_;
};

// Held by shared_ptr: work enqueued by record() and waiter() keeps it alive, so an event may be
// destroyed while a record is pending, as CUDA allows.
class SimEvent : public std::enable_shared_from_this<SimEvent> {
 public:
  explicit SimEvent(bool timing) : timing_(timing) {}
  bool timing() const { return timing_; }
  // Records on a stream: the new record completes when the stream reaches it.
  void record(SimStream& stream);
  bool query();
  void synchronize();
  // Work that waits, on a stream thread, for the record that is the latest now.
  std::function<void()> waiter();
  // When the latest record completed; the event must be complete.
  std::chrono::steady_clock::time_point completedAt();

 private:
  void waitFor(uint64_t record);

  const bool timing_;
  std::mutex mutex_;
  std::condition_variable reached_;
  uint64_t recorded_ = 0, completed_ = 0;
  std::chrono::steady_clock::time_point completedAt_{};
};

}  // namespace loom::cuda
