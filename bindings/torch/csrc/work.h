// The Work that loom_torch returns, and the Lane that completes it.
//
// A Lane is one loom host stream of the communicator plus a completion thread. An operation is
// enqueued on the stream (loom runs it asynchronously to the caller), an event is recorded
// behind it, and the Work goes to the completion thread, which waits for the events in order
// and finishes each Work: its future completes without anyone calling wait(), as DDP's comm
// hooks need. Work::wait() waits for the same event itself, which lets loom run a not yet
// started operation on the waiting thread instead of waking the stream's worker.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

#include "loom/loom.h"

namespace loom_torch {

class LoomWork : public c10d::Work {
 public:
  // `onTimeout` runs when wait(timeout) gives up (it aborts the communicator).
  LoomWork(int rank, c10d::OpType type, const char* name, std::vector<at::Tensor> outputs,
           uint64_t seq, std::function<void(const std::string&)> onTimeout);
  ~LoomWork() override;

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override { return outputs_; }
  // Returns once the operation finished; throws its error. A timeout of 0 waits until loom's
  // own deadline (the group's timeout) reports the ranks that did not arrive.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void synchronize() override {}
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  uint64_t getSequencenumber() const override { return seq_; }

  // Whether the Lane's completion thread finishes it. Not for the works of blocking calls
  // (asyncOp false): their caller waits at once, and a second thread waiting beside it only
  // takes a core from the ranks' own threads.
  bool watched() const { return watched_; }
  void setWatched(bool watched) { watched_ = watched; }
  // Called by the Lane when the work is enqueued.
  void attach(loomEvent_t event, loomComm_t comm) {
    event_ = event;
    comm_ = comm;
  }
  void addOutputs(std::vector<at::Tensor> more) {
    for (auto& t : more) outputs_.push_back(std::move(t));
  }
  // Kept alive until the operation finished (contiguous copies, flat buffers).
  void keep(at::Tensor t) { keepAlive_.push_back(std::move(t)); }
  // Runs on completion before the future is marked (copies out of flat or contiguous buffers).
  void then(std::function<void()> f) { after_.push_back(std::move(f)); }
  // Waits for the event (any thread) and finishes the work once.
  void complete();
  // Finishes with `error` unless finished already.
  void fail(std::exception_ptr error);

 private:
  void finishOnce(std::exception_ptr error);

  const char* name_;
  std::vector<at::Tensor> outputs_;
  std::vector<at::Tensor> keepAlive_;
  std::vector<std::function<void()>> after_;
  uint64_t seq_;
  std::function<void(const std::string&)> onTimeout_;
  loomEvent_t event_ = nullptr;
  loomComm_t comm_ = nullptr;
  std::atomic<bool> finishing_{false};
  bool watched_ = true;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

class Lane {
 public:
  Lane(loomComm_t comm, std::string name);
  ~Lane();  // waits for the queued operations, then stops
  Lane(const Lane&) = delete;
  Lane& operator=(const Lane&) = delete;

  // Calls `launch(stream)` (which enqueues loom calls on the stream), records an event behind
  // them and hands `work` to the completion thread. A launch that throws leaves nothing queued.
  void submit(const c10::intrusive_ptr<LoomWork>& work,
              const std::function<void(loomStream_t)>& launch);
  // Returns once every submitted work has finished, copy-outs included.
  void drain();

 private:
  void completeLoop();

  loomComm_t comm_;
  std::string name_;
  loomStream_t stream_ = nullptr;
  std::mutex mutex_;
  std::condition_variable added_;
  std::condition_variable drained_;
  std::deque<c10::intrusive_ptr<LoomWork>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace loom_torch
