// One executor per communicator, chosen from its device at init (DESIGN: "one executor per
// device"). An executor interprets the plans of its communicator's calls; it never chooses
// them (planner.h does). The C API (coll_api.cc) hands every call to its communicator's
// executor before it looks at the stream argument: what a stream is belongs to the device.
//   - The CPU executor (executor.h) runs calls on host threads; streams are NULL or loom host
//     streams (host_stream.h), which the C API serves.
//   - A CUDA communicator's executor (cuda/cuda_executor.h) launches the device program
//     (cuda/device_program.h) as kernels on the calls' cudaStream_t; under the simulated
//     runtime (LOOM_CUDA_SIM=1) the kernels' host twins run it on host threads.
#pragma once

#include <memory>
#include <vector>

#include "src/comm/comm.h"
#include "src/plan/coll.h"

namespace loom {

class CpuExecutor;

class Executor : public CommLayerState {
 public:
  // "cpu", "cuda": for messages.
  virtual const char* device() const = 0;
  // Whether the streams of this communicator's calls are loom host streams (the C API queues
  // calls on them and calls run() from the stream's thread) rather than the device's own.
  virtual bool hostStreams() const = 0;
  // Runs a call, or those of a group that belong to communicators of this device, to
  // completion on the calling thread.
  virtual void run(std::vector<CollOp>& ops) = 0;
  // One call outside a group on the NULL stream: the latency-critical case. The op stays the
  // caller's, and with it the reference that keeps its communicator alive until the caller
  // has recorded the call's end: the executor copies what it keeps.
  virtual void runOne(CollOp& op) = 0;
  // The CPU executor whose code runs this communicator's plans: itself, or the one a CUDA
  // executor runs wire calls with under the simulated runtime; nullptr for one that runs none.
  virtual CpuExecutor* hostExecutor() { return nullptr; }
};

// The executor of `comm`, chosen from its device (LOOM_DEVICE_CPU or a CUDA ordinal); the
// planner's state must exist (the CPU executor reads it).
std::unique_ptr<Executor> makeExecutor(const Comm& comm);
// The executor of `comm`, made at init (src/api/comm_layers.h). Throws InvalidUsage before.
Executor& executorOf(const Comm& comm);

}  // namespace loom
