// The host's side of a device launch (device_plan.h): a call's or a group's plans bound to the
// plain views of their connections, and the words its tasks share. The CUDA executor builds one
// per call or group, copies it to device memory (launch_memory.h) and launches the device
// program (device_program.h) on it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "src/exec/cuda/device_plan.h"
#include "src/plan/coll.h"
#include "src/plan/plan.h"

namespace loom {

namespace transport {
class SendConnection;
class RecvConnection;
}  // namespace transport

struct HostLaunch {
  std::vector<DeviceTask> tasks;
  std::vector<DeviceCall> calls;
  std::vector<uint64_t> stepsDone, done;
  DeviceError error;
  uint64_t failed = 0;
  uint64_t timeoutNs = 0;
  // Per call: its op (for messages and its type and reduction). Per task: its label.
  std::vector<const CollOp*> ops;
  std::vector<TaskLabel> labels;
  // Every connection a task steps on: their host objects resync after the launch.
  std::vector<transport::SendConnection*> sends;
  std::vector<transport::RecvConnection*> recvs;
  // Those a host thread must drive while the kernel runs (needsHostProgress: a wire connection
  // behind a proxy ring), each with its communicator, whose proxy thread drives it (a group's
  // launch may hold several ranks). Empty for a launch over memory transports only.
  struct HostDriven {
    const Comm* comm;
    transport::SendConnection* send;  // one of the two
    transport::RecvConnection* recv;
  };
  std::vector<HostDriven> hostDriven;
  // The copies of sends to oneself (executor.h, planSelfCopies), which `ops` points into.
  std::vector<CollOp> selfCopies;
  std::vector<unsigned char> llStage;  // DeviceTask::llStage points into it

  DeviceLaunch view() {
    DeviceLaunch l;
    l.ntasks = static_cast<int>(tasks.size());
    l.tasks = tasks.data();
    l.calls = calls.data();
    l.stepsDone = stepsDone.data();
    l.done = done.data();
    l.error = &error;
    l.failed = &failed;
    l.timeoutNs = timeoutNs;
    return l;
  }
};

// Makes the connections `ops` lack, each communicator on its own thread as the CPU executor
// does: a group may hold several ranks, whose setups wait for each other, so a group split
// into several launches connects all of them first.
void connectLaunch(const std::vector<CollOp>& ops);

// Connects what `ops` need (connectLaunch) and builds their launch into `out`. Returns false, with
// `out` unspecified, when the device program cannot run them, saying why in `why`: a connection
// without a ring in memory (a wire transport not behind a proxy ring). Throws InvalidUsage for
// sends to oneself without matching receives, and for a send and a receive of one group whose
// buffers overlap at different offsets.
bool buildLaunch(std::vector<CollOp>& ops, HostLaunch& out, std::string* why);

// After a launch ran: the host objects of its connections take their counters from the
// shared rings again (the device program moved them), then, if a task failed, throws what the
// CPU executor throws for the same failure (TimeoutError, RemoteError, the abort's error).
void finishLaunch(HostLaunch& launch);

}  // namespace loom
