// A launch of the device program (device_program.h): the tasks of one call or group as plain
// data, bound to the plain views of their connections, with the words the tasks share while
// they run. Built on the host from the planner's Plan (device_launch.h) and read as it is by
// the device program, on the simulated runtime's threads or, copied to device memory, by a
// CUDA kernel with one block per task. C++17, no std:: types: nvcc compiles it.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "algorithms/walker.h"
#include "loom/loom.h"
#include "src/kernels/connection_view.h"
#include "src/kernels/reduce_copy_args.h"

namespace loom {

// As src/plan/plan.h's kMaxTaskPeers (a task's peers on each side).
inline constexpr int kDeviceTaskPeers = 7;
// An LL step's payload at most (transports/shm/ll_connection.h, kLLSlotBytes).
inline constexpr size_t kDeviceLLStageBytes = 4096;
// Tasks of the launch that use one of a task's connections before it (at most one per link).
inline constexpr int kDeviceTaskBefore = 2 * kDeviceTaskPeers;

// One call of the launch: its buffers and reduction. Calls of one launch share (type, op).
struct DeviceCall {
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  ReduceScalar scalar;
  uint32_t signature = 0;  // collSignature: stamped on every slot, checked on receipt
  uint32_t elemSize = 1;
  bool isReduction = false;
  ReduceOpKind reduce = ReduceOpKind::kSum;
};

// One connection of a task: a Simple ring, or an LL ring with the side's own step counter
// (connection_view.h).
struct DeviceLink {
  transport::Protocol protocol = transport::Protocol::kSimple;
  transport::SimpleRingView ring;
  transport::LLRingView ll;
  int peer = -1;
  // A send link whose connection reads the task's input (output) buffer itself
  // (SendConnection::readsByAddress: GPUDirect RDMA from a registered buffer): a step that
  // only copies from it is posted by address instead of copied into the slot.
  bool inputByAddress = false;
  bool outputByAddress = false;
};

struct DeviceTask {
  algo::StepProgram program;
  int call = 0;
  int nsend = 0;
  int nrecv = 0;
  DeviceLink send[kDeviceTaskPeers];
  DeviceLink recv[kDeviceTaskPeers];
  // Step i runs only once task `gate` finished i + 1 steps (plan.h); -1: none.
  int gate = -1;
  // Tasks that must be done before this one starts: the earlier users of its connections.
  int nbefore = 0;
  int before[kDeviceTaskBefore] = {};
  // LL links: where a received step is unpacked (one buffer per receive link) and where a
  // step to send is written before it is packed into the send links' slots, each
  // kDeviceLLStageBytes.
  unsigned char* llStage = nullptr;
  bool inputFromOutput = false;  // TaskInput::fromOutput: the input carries the pre-op
  bool copiesOnly = false;       // TaskInput::copiesOnly
  int inputPosition = -1;
};

// Why a launch stopped early: written once (the first failure wins), by the task that failed.
enum class DeviceFault : uint32_t {
  kNone = 0,
  kTag = 1,      // a slot carried another call's signature
  kSize = 2,     // a slot carried another byte count than the step expects
  kCorrupt = 3,  // a slot that is not in the ring, or larger than a slot
  kAborted = 4,  // the communicator was aborted
  kTimeout = 5,  // a wait outlasted the timeout
};

struct DeviceError {
  uint32_t fault = 0;  // DeviceFault; claimed with a compare-and-swap from kNone, then set
  int task = -1;
  int peer = -1;
  int waitingForData = 0;  // kTimeout / kAborted: 1 waiting for data, 0 for a free slot
  uint32_t gotTag = 0;
  uint64_t gotBytes = 0;
  uint64_t expectedBytes = 0;
};

struct DeviceLaunch {
  int ntasks = 0;
  const DeviceTask* tasks = nullptr;
  const DeviceCall* calls = nullptr;
  // Per task, written by that task only: steps finished, and 1 once it is done.
  uint64_t* stepsDone = nullptr;
  uint64_t* done = nullptr;
  DeviceError* error = nullptr;
  uint64_t* failed = nullptr;  // 1 once `error` holds the launch's failure
  uint64_t timeoutNs = 0;      // 0: wait forever
};

}  // namespace loom
