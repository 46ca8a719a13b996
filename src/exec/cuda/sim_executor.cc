#include "src/exec/cuda/sim_executor.h"

#include <algorithm>

#include "src/base/error.h"
#include "src/base/logging.h"
#include "src/cuda/runtime.h"
#include "src/exec/cuda/device_launch.h"
#include "src/exec/cuda/sim_launch.h"

namespace loom {
namespace {

// Makes `waiter`'s later work wait for the work queued on `done` so far.
void joinStreams(cuda::DeviceRuntime& rt, void* done, void* waiter) {
  cuda::Event event = rt.eventCreate(/*timing=*/false);
  try {
    rt.eventRecord(event, done);
    rt.streamWaitEvent(waiter, event);
  } catch (...) {
    rt.eventDestroy(event);
    throw;
  }
  rt.eventDestroy(event);
}

}  // namespace

// A call or a group in flight: it counts as in flight on the executor of every communicator it
// has a call of (a group may hold the calls of several ranks).
struct SimCudaExecutor::Work {
  std::vector<SimCudaExecutor*> executors;
  std::vector<CollOp> ops;
};

void SimCudaExecutor::run(std::vector<CollOp>& ops) {
  if (ops.empty()) return;
  enqueue(std::move(ops));
  ops.clear();
}

void SimCudaExecutor::runOne(CollOp&& op) {
  std::vector<CollOp> one;
  one.push_back(std::move(op));
  enqueue(std::move(one));
}

// A group runs once, on the stream of its first call, as NCCL launches a group: that stream
// first waits for the work already queued on the group's other streams, and they wait for the
// group before their later work.
void SimCudaExecutor::enqueue(std::vector<CollOp> ops) {
  cuda::DeviceRuntime& rt = cuda::deviceRuntime();
  void* stream = ops.front().deviceStream;
  std::vector<void*> others;
  for (const CollOp& op : ops)
    if (op.deviceStream != stream &&
        std::find(others.begin(), others.end(), op.deviceStream) == others.end())
      others.push_back(op.deviceStream);
  for (void* other : others) joinStreams(rt, other, stream);
  auto work = std::make_unique<Work>();
  for (const CollOp& op : ops) {
    auto* executor = static_cast<SimCudaExecutor*>(&executorOf(*op.comm));  // one device
    if (std::find(work->executors.begin(), work->executors.end(), executor) ==
        work->executors.end())
      work->executors.push_back(executor);
  }
  work->ops = std::move(ops);
  for (SimCudaExecutor* executor : work->executors) executor->addInFlight(+1);
  try {
    rt.launchHostFunc(stream, &SimCudaExecutor::runWork, work.get());
    work.release();  // runWork owns it now
  } catch (...) {
    for (SimCudaExecutor* executor : work->executors) executor->addInFlight(-1);
    throw;
  }
  for (void* other : others) joinStreams(rt, stream, other);
}

// Runs a call or group with the device program on host threads (sim_launch.h) when it can,
// else with the CPU executor's code. One at a time per communicator: the two ways share the
// connections, and a launch's tasks must not meet another call's on them.
void SimCudaExecutor::runOps(Work& work, std::vector<CollOp>& ops) {
  std::vector<SimCudaExecutor*> executors = work.executors;
  std::sort(executors.begin(), executors.end());
  std::vector<std::unique_lock<std::mutex>> locks;
  for (SimCudaExecutor* executor : executors) locks.emplace_back(executor->runMutex_);
  HostLaunch launch;
  std::string why;
  if (buildLaunch(ops, launch, &why)) {
    runLaunchOnHost(launch);
    for (SimCudaExecutor* executor : executors) ++executor->deviceLaunches_;
    finishLaunch(launch);
    return;
  }
  LOOM_LOG(LogLevel::kInfo, kLogColl, describeCall(ops.front()),
           " runs through the CPU executor's code: ", why);
  for (SimCudaExecutor* executor : executors) ++executor->cpuRuns_;
  work.executors.front()->cpu_.run(ops);
}

// On the stream's thread. The ops hold their communicator, which may be the last reference:
// they are destroyed only after this executor is no longer touched.
void SimCudaExecutor::runWork(void* raw) {
  std::unique_ptr<Work> work(static_cast<Work*>(raw));
  std::vector<CollOp> ops = std::move(work->ops);
  std::vector<std::pair<Comm*, uint64_t>> calls;  // the ops hold their communicators
  for (const CollOp& op : ops) {
    op.comm->flightRecorder().start(op.seq);  // the stream reached the call
    calls.emplace_back(op.comm.get(), op.seq);
  }
  std::string failure;
  loomResult_t code = loomSuccess;
  try {
    runOps(*work, ops);
  } catch (const Error& e) {
    failure = strCat(describeCall(ops.front()), " on its CUDA stream: ", e.what());
    code = e.code();
  } catch (const std::exception& e) {
    failure = strCat(describeCall(ops.front()), " on its CUDA stream: ", e.what());
    code = loomInternalError;
  }
  if (code != loomSuccess) {
    std::vector<Comm*> failed;
    for (const CollOp& op : ops) {
      if (std::find(failed.begin(), failed.end(), op.comm.get()) != failed.end()) continue;
      failed.push_back(op.comm.get());
      op.comm->setLastError(failure);
      op.comm->markFailed(code);
    }
  }
  for (const auto& [comm, seq] : calls) comm->finishCall(seq, code);
  for (SimCudaExecutor* executor : work->executors) executor->addInFlight(-1);
  ops.clear();
  if (!failure.empty()) throw CudaError(failure);
}

void SimCudaExecutor::addInFlight(int delta) {
  std::lock_guard<std::mutex> lock(mutex_);
  inFlight_ += delta;
  if (inFlight_ == 0) idle_.notify_all();
}

void SimCudaExecutor::waitIdle() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [&] { return inFlight_ == 0; });
}

void SimCudaExecutor::quiesce() {
  waitIdle();
  cpu_.quiesce();
}

void SimCudaExecutor::drain() {
  waitIdle();
  cpu_.drain();
}

}  // namespace loom
