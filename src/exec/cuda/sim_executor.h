// The executor of a CUDA communicator under the simulated runtime (LOOM_CUDA_SIM=1): the first
// device executor, for tests. It runs the communicator's calls as the device program
// (device_program.h: the same plans, walker and per-element math, one host thread per task;
// calls over wire connections through the CPU executor's code) on the simulated device
// memory, which is host memory, and it gives them CUDA's stream semantics: a call is enqueued
// on its cudaStream_t through the device-runtime seam and returns at once, runs after the
// work before it on that stream, and the work after it waits for it.
//
// Each call runs on its stream's thread, so ranks must not share a stream (the legacy default
// stream is one stream per process): a rank's call waits for its peers, whose calls would queue
// behind it. A group (loomGroupStart/End) runs once, as one item on the stream of its first call,
// with the group's other streams joined to it by events; so one thread may drive several ranks
// in a group, as with CPU communicators. A failure of a call marks the communicator failed
// (loomCommGetAsyncError) and is the stream's error at its next synchronize.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "src/exec/cpu/executor.h"
#include "src/exec/device_executor.h"

namespace loom {

class SimCudaExecutor final : public Executor {
 public:
  explicit SimCudaExecutor(const Comm& comm) : cpu_(comm) {}
  ~SimCudaExecutor() override { waitIdle(); }

  const char* device() const override { return "cuda"; }
  bool hostStreams() const override { return false; }
  CpuExecutor* hostExecutor() override { return &cpu_; }
  void run(std::vector<CollOp>& ops) override;
  void runOne(CollOp&& op) override;
  void quiesce() override;
  void resume() override { cpu_.resume(); }
  void drain() override;

  // Calls and groups run so far with the device program, and with the CPU executor's code.
  uint64_t deviceLaunches() const { return deviceLaunches_; }
  uint64_t cpuRuns() const { return cpuRuns_; }

 private:
  struct Work;
  static void runWork(void* work);
  static void runOps(Work& work, std::vector<CollOp>& ops);
  void enqueue(std::vector<CollOp> ops);
  void waitIdle();
  void addInFlight(int delta);

  CpuExecutor cpu_;
  std::mutex mutex_;
  std::condition_variable idle_;
  int inFlight_ = 0;
  std::mutex runMutex_;  // held while a call or group of this communicator runs
  std::atomic<uint64_t> deviceLaunches_{0}, cpuRuns_{0};
};

}  // namespace loom
