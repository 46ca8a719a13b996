#include "src/exec/cuda/sim_executor.h"

#include "src/base/error.h"
#include "src/cuda/runtime.h"

namespace loom {

struct SimCudaExecutor::Work {
  SimCudaExecutor* self;
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

void SimCudaExecutor::enqueue(std::vector<CollOp> ops) {
  void* stream = ops.front().deviceStream;
  auto* work = new Work{this, std::move(ops)};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++inFlight_;
  }
  try {
    cuda::deviceRuntime().launchHostFunc(stream, &SimCudaExecutor::runWork, work);
  } catch (...) {
    delete work;
    std::lock_guard<std::mutex> lock(mutex_);
    --inFlight_;
    idle_.notify_all();
    throw;
  }
}

// On the stream's thread. The ops hold their communicator, which may be the last reference:
// they are destroyed only after this executor is no longer touched.
void SimCudaExecutor::runWork(void* raw) {
  std::unique_ptr<Work> work(static_cast<Work*>(raw));
  SimCudaExecutor& self = *work->self;
  std::vector<CollOp> ops = std::move(work->ops);
  std::string failure;
  try {
    self.cpu_.run(ops);
  } catch (const Error& e) {
    failure = strCat(describeCall(ops.front()), " on its CUDA stream: ", e.what());
    ops.front().comm->setLastError(failure);
    ops.front().comm->markFailed(e.code());
  } catch (const std::exception& e) {
    failure = strCat(describeCall(ops.front()), " on its CUDA stream: ", e.what());
    ops.front().comm->setLastError(failure);
    ops.front().comm->markFailed(loomInternalError);
  }
  {
    std::lock_guard<std::mutex> lock(self.mutex_);
    --self.inFlight_;
    self.idle_.notify_all();
  }
  ops.clear();
  if (!failure.empty()) throw CudaError(failure);
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
