// The executor of a CUDA communicator: it launches the device program (device_program.h) as
// CUDA kernels on the calls' streams, with NCCL's stream semantics. The simulated runtime
// (LOOM_CUDA_SIM=1) runs the same launches through host twins of the kernels (sim_launch.h),
// so everything here but the kernels' own code is proven without a GPU.
//
// A call, or a group of calls, on the calling thread:
//   1. its connections are made (they may call CUDA, which a stream's host function must not),
//      and its plans are bound to them (device_launch.h);
//   2. the launch is copied to device memory (launch_memory.h) on the call's stream;
//   3. the stream waits for the communicator's previous launch (a communicator's launches share
//      its connections, so they run one after the other, whatever their streams) and for the
//      group's other streams;
//   4. the kernel is launched, one block per task, and an event marks its end; the call
//      returns. Work enqueued on the stream later runs after the kernel.
// A launch runs on one device and holds calls of one element type and reduction: a group
// becomes one launch per device and per kind of reduction, in order, each on the stream of its
// first call.
//
// What a kernel found (a mismatch, a timeout, the abort) is in its host-mapped record. Once
// the end event has passed, the executor turns it into the CPU executor's error
// (loomCommGetAsyncError, loomGetLastError) and ends the calls in the flight recorder. That
// happens on the next call, on loomCommGetAsyncError, and on the executor's watchdog thread,
// which also tells running kernels of an aborted or failed communicator to stop. A kernel
// never waits forever on a peer unless LOOM_TIMEOUT is 0: every wait checks the abort word and
// the deadline.
//
// A wire connection (a peer on another host, or any pair under LOOM_TRANSPORT=socket) is a
// GPUDirect RDMA ring (transports/ib/ib_gdr.h) or a proxy ring in pinned host memory mapped
// into the GPU (transports/proxy/proxy_connection.h); the kernel steps either like a memory
// transport's ring, and the communicator's proxy thread (proxy_thread.h) posts its steps on
// the wire (copying them, for a proxy ring) while a launch runs, and until what it sent has
// left. A wire error it meets stops the kernels that step that connection and becomes
// their calls' error.

#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "src/exec/cuda/proxy_thread.h"
#include "src/exec/device_executor.h"

namespace loom {

class CudaExecutor final : public Executor {
 public:
  explicit CudaExecutor(const Comm& comm);
  ~CudaExecutor() override;

  const char* device() const override { return "cuda"; }
  bool hostStreams() const override { return false; }
  void run(std::vector<CollOp>& ops) override;
  void runOne(CollOp& op) override;
  void quiesce() override;
  void resume() override;
  void drain() override;
  void collect() override;

  // Launches of the device program so far.
  uint64_t deviceLaunches() const { return deviceLaunches_; }

  struct Work;  // a launch in flight (cuda_executor.cc)

 private:
  friend class CudaWatchdog;
  void enqueue(std::vector<CollOp> ops);
  static void refuseStreamCapture(const std::vector<CollOp>& ops);
  static void enqueueLocked(std::vector<CollOp> ops);
  static void track(std::unique_ptr<Work> work);
  static void finish(Work& work);
  void waitIdle();
  // Tells this communicator's running kernels to stop when its abort flag is up, and those
  // that step a connection its proxy found broken.
  void stopKernelsIfAborted();
  // What `work` steps of this communicator's connections that need its proxy.
  void holdProxied(Work& work);

  const Comm& comm_;
  std::mutex enqueueMutex_;      // held while a launch of this communicator is enqueued
  void* order_ = nullptr;        // recorded after each launch: the next one waits for it
  std::mutex mutex_;             // guards the lists below
  std::vector<Work*> inFlight_;  // launches this communicator is part of
  std::vector<std::unique_ptr<Work>> owned_;  // those it enqueued, until they are finished
  std::vector<std::unique_ptr<Work>> spare_;  // finished ones, reused with their memory
  int finishing_ = 0;                         // launches being finished by some thread
  std::condition_variable finished_;
  std::atomic<uint64_t> deviceLaunches_{0};
  ProxyThread proxy_;  // drives this communicator's wire connections while kernels step them
};

}  // namespace loom
