#include "src/exec/cuda/cuda_executor.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <string_view>
#include <thread>
#include <utility>

#include "src/base/error.h"
#include "src/base/logging.h"
#include "src/cuda/runtime.h"
#include "src/exec/cpu/executor.h"
#include "src/exec/cuda/device_kernels.h"
#include "src/exec/cuda/device_launch.h"
#include "src/exec/cuda/launch_memory.h"
#include "src/exec/cuda/sim_launch.h"

namespace loom {

// A launch in flight.
struct CudaExecutor::Work {
  explicit Work(cuda::DeviceRuntime& runtime) : rt(runtime), memory(runtime) {}
  ~Work() {
    try {
      if (start != nullptr) rt.eventDestroy(start);
      if (end != nullptr) rt.eventDestroy(end);
    } catch (const std::exception&) {
      // A destructor cannot report; a dead context has freed the events anyway.
    }
  }

  cuda::DeviceRuntime& rt;
  std::vector<CudaExecutor*> executors;  // each communicator it has calls of; [0] owns it
  std::vector<CollOp> ops;               // their communicators by non-owning pointers
  HostLaunch launch;
  LaunchMemory memory;
  cuda::Event start = nullptr, end = nullptr;
  bool held = false;       // its proxied connections are held by their proxies
  bool started = false;    // the stream reached it (the flight recorder knows)
  bool finishing = false;  // a thread is finishing it
  bool abandoned = false;  // its enqueue failed and the caller got the error
};

namespace {

bool isReduction(CollKind k) {
  return k == CollKind::kAllReduce || k == CollKind::kReduce || k == CollKind::kReduceScatter;
}

// A kernel runs on one device and reduces one type with one op (device_kernels.h): the ops of
// a group become one launch per device and (type, op) of its reductions, in the order they
// first appear, each on the stream of its first op; the calls that do not reduce go with
// their device's first launch.
std::vector<std::vector<CollOp>> splitByKernel(std::vector<CollOp> ops) {
  struct Kind {
    int device;
    bool reduces;
    loomDataType_t type;
    ReduceOpKind op;
  };
  std::vector<std::vector<CollOp>> launches;
  std::vector<Kind> kinds;
  for (CollOp& op : ops) {
    const int device = op.comm->device();
    const bool reduces = isReduction(op.kind);
    size_t at = launches.size();
    for (size_t k = 0; k < kinds.size() && at == launches.size(); ++k) {
      Kind& kind = kinds[k];
      if (kind.device != device) continue;
      if (!reduces) {
        at = k;  // the device's first launch
      } else if (!kind.reduces) {
        kind = Kind{device, true, op.type, op.reduce};  // it takes this reduction's kernel
        at = k;
      } else if (kind.type == op.type && kind.op == op.reduce) {
        at = k;
      }
    }
    if (at == launches.size()) {
      launches.emplace_back();
      kinds.push_back(Kind{device, reduces, op.type, op.reduce});
    }
    launches[at].push_back(std::move(op));
  }
  return launches;
}

// The kernel of a launch: its reduction's, or any for a launch that only copies.
const void* kernelFor(const std::vector<CollOp>& ops) {
  const CollOp* pick = &ops.front();
  for (const CollOp& op : ops)
    if (isReduction(op.kind)) pick = &op;
  const void* kernel = deviceProgramKernelFor(pick->type, pick->reduce);
  LOOM_ENFORCE(kernel != nullptr, InternalError, "no device program for ", describeCall(*pick));
  return kernel;
}

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

bool isSimulated(cuda::DeviceRuntime& rt) { return std::string_view(rt.name()) == "sim"; }

// The connections of `launch` that `comm`'s proxy thread drives.
void hostDrivenOf(const HostLaunch& launch, const Comm& comm,
                  std::vector<transport::SendConnection*>& sends,
                  std::vector<transport::RecvConnection*>& recvs) {
  sends.clear();
  recvs.clear();
  for (const HostLaunch::HostDriven& c : launch.hostDriven) {
    if (c.comm != &comm) continue;
    if (c.send != nullptr) sends.push_back(c.send);
    if (c.recv != nullptr) recvs.push_back(c.recv);
  }
}

}  // namespace

// One thread per process: it finishes the launches whose end has passed and tells the kernels
// of aborted communicators to stop, every millisecond while any launch is in flight.
class CudaWatchdog {
 public:
  static CudaWatchdog& get() {
    static auto* watchdog = new CudaWatchdog;  // never destroyed: its thread outlives main's
    return *watchdog;
  }
  void add(CudaExecutor* e) {
    std::lock_guard<std::mutex> lock(mutex_);
    executors_.push_back(e);
  }
  void remove(CudaExecutor* e) {
    std::lock_guard<std::mutex> lock(mutex_);
    executors_.erase(std::find(executors_.begin(), executors_.end(), e));
  }
  void wake() {
    std::lock_guard<std::mutex> lock(mutex_);
    busy_ = true;
    wake_.notify_one();
  }

 private:
  CudaWatchdog() {
    std::thread([this] { loop(); }).detach();
  }
  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      if (busy_) {
        wake_.wait_for(lock, std::chrono::milliseconds(1));
      } else {
        wake_.wait(lock, [&] { return busy_; });
      }
      busy_ = false;
      for (CudaExecutor* e : executors_) {
        try {
          e->stopKernelsIfAborted();
          e->collect();
        } catch (const std::exception& err) {
          LOOM_LOG(LogLevel::kWarn, kLogColl, "CUDA watchdog: ", err.what());
        }
        std::lock_guard<std::mutex> inFlight(e->mutex_);
        busy_ = busy_ || !e->inFlight_.empty();
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<CudaExecutor*> executors_;
  bool busy_ = false;
};

CudaExecutor::CudaExecutor(const Comm& comm)
    : comm_(comm), proxy_([] { CudaWatchdog::get().wake(); }) {
  cuda::DeviceRuntime& rt = cuda::deviceRuntime();
  if (isSimulated(rt)) registerDeviceProgramTwins(rt);
  CudaWatchdog::get().add(this);
}

CudaExecutor::~CudaExecutor() {
  waitIdle();
  CudaWatchdog::get().remove(this);
  spare_.clear();
  if (order_ != nullptr) {
    try {
      cuda::deviceRuntime().eventDestroy(order_);
    } catch (const std::exception&) {
      // A destructor cannot report; a dead context has freed the event anyway.
    }
  }
}

void CudaExecutor::run(std::vector<CollOp>& ops) {
  if (ops.empty()) return;
  enqueue(std::move(ops));
  ops.clear();
}

void CudaExecutor::runOne(CollOp& op) {
  std::vector<CollOp> one;
  one.push_back(op);
  enqueue(std::move(one));
}

void CudaExecutor::enqueue(std::vector<CollOp> ops) {
  refuseStreamCapture(ops);
  std::vector<CudaExecutor*> executors;
  for (const CollOp& op : ops) {
    auto* e = static_cast<CudaExecutor*>(&executorOf(*op.comm));  // a group has one device
    if (std::find(executors.begin(), executors.end(), e) == executors.end()) executors.push_back(e);
  }
  for (CudaExecutor* e : executors) e->collect();  // their finished launches' memory is free
  std::sort(executors.begin(), executors.end());
  std::vector<std::unique_lock<std::mutex>> locks;
  for (CudaExecutor* e : executors) locks.emplace_back(e->enqueueMutex_);
  connectLaunch(ops);  // the whole group: its launches' ranks wait for each other's setup
  for (std::vector<CollOp>& launch : splitByKernel(std::move(ops)))
    enqueueLocked(std::move(launch));
  CudaWatchdog::get().wake();
}

// A launch takes its memory from a pool, and its end becomes the calls' errors and flight
// records, once per enqueue: a graph that replayed it would reuse memory a later launch owns
// and report nothing. So calls on a capturing stream are refused, before anything is done.
void CudaExecutor::refuseStreamCapture(const std::vector<CollOp>& ops) {
  cuda::DeviceRuntime& rt = cuda::deviceRuntime();
  for (const CollOp& op : ops) {
    cuda::CurrentDeviceScope device(op.comm->device());
    if (!rt.streamIsCapturing(op.deviceStream)) continue;
    throw InvalidUsage(strCat(
        describeCall(op),
        ": its CUDA stream is capturing a graph, and loom cannot be captured "
        "into CUDA graphs yet. Make the call outside the capture (before cudaStreamBeginCapture "
        "or after cudaStreamEndCapture)",
        op.deviceStream == nullptr
            ? "; the legacy default stream counts as capturing while another stream captures "
              "in global mode"
            : ""));
  }
}

// With the enqueue locks of every communicator of `ops` held.
void CudaExecutor::enqueueLocked(std::vector<CollOp> ops) {
  cuda::DeviceRuntime& rt = cuda::deviceRuntime();
  std::vector<CudaExecutor*> executors;
  for (const CollOp& op : ops) {
    auto* e = static_cast<CudaExecutor*>(&executorOf(*op.comm));
    if (std::find(executors.begin(), executors.end(), e) == executors.end()) executors.push_back(e);
  }
  CudaExecutor& owner = *executors.front();
  std::unique_ptr<Work> work;
  {
    std::lock_guard<std::mutex> lock(owner.mutex_);
    if (!owner.spare_.empty()) {
      work = std::move(owner.spare_.back());
      owner.spare_.pop_back();
    }
  }
  if (!work) work = std::make_unique<Work>(rt);
  work->executors = executors;
  work->ops = std::move(ops);
  work->started = work->finishing = work->abandoned = false;
  cuda::CurrentDeviceScope device(owner.comm_.device());
  std::string why;
  if (!buildLaunch(work->ops, work->launch, &why))  // connects first
    throw InvalidUsage(
        strCat(describeCall(work->ops.front()), " on a CUDA communicator: ", why,
               ". A kernel reaches only rings in memory: CUDA IPC, shm mapped into the GPU, or the "
               "pinned proxy ring of a wire connection"));
  // The communicators outlive the launch (destroy and abort wait for it), and the launch must
  // never be what destroys one: its finishing may run on the watchdog's thread.
  for (CollOp& op : work->ops)
    op.comm = std::shared_ptr<Comm>(std::shared_ptr<Comm>(), op.comm.get());
  for (CollOp& op : work->launch.selfCopies)
    op.comm = std::shared_ptr<Comm>(std::shared_ptr<Comm>(), op.comm.get());

  void* stream = work->ops.front().deviceStream;
  std::vector<void*> others;
  for (const CollOp& op : work->ops)
    if (op.deviceStream != stream &&
        std::find(others.begin(), others.end(), op.deviceStream) == others.end())
      others.push_back(op.deviceStream);
  if (work->start == nullptr) work->start = rt.eventCreate(false);
  if (work->end == nullptr) work->end = rt.eventCreate(false);
  for (CudaExecutor* e : executors)
    if (e->order_ == nullptr) e->order_ = rt.eventCreate(false);
  for (void* other : others) joinStreams(rt, other, stream);
  try {
    // After the communicators' previous launches, which step the same rings.
    for (CudaExecutor* e : executors) rt.streamWaitEvent(stream, e->order_);
    rt.eventRecord(work->start, stream);
    if (!work->launch.tasks.empty()) {
      DeviceLaunch view = work->memory.upload(work->launch, stream);
      if (!work->launch.hostDriven.empty()) {
        for (CudaExecutor* e : executors) e->holdProxied(*work);
        work->held = true;
      }
      const volatile uint32_t* abort = work->memory.abortOnDevice();
      void* args[] = {&view, &abort};
      rt.launchKernel(kernelFor(work->ops), cuda::Dim3{static_cast<unsigned>(view.ntasks)},
                      cuda::Dim3{kDeviceProgramThreads}, args, 0, stream);
    }
    rt.eventRecord(work->end, stream);
    for (CudaExecutor* e : executors) rt.eventRecord(e->order_, stream);
    for (void* other : others) joinStreams(rt, stream, other);
  } catch (...) {
    // What was enqueued may still read the launch's memory: it stays in flight until the
    // stream passes it, without reporting (the caller gets this error).
    work->abandoned = true;
    try {
      rt.eventRecord(work->end, stream);
    } catch (const std::exception&) {
      // An unrecorded event counts as passed.
    }
    track(std::move(work));
    throw;
  }
  for (CudaExecutor* e : executors) e->deviceLaunches_++;
  track(std::move(work));
}

void CudaExecutor::holdProxied(Work& work) {
  std::vector<transport::SendConnection*> sends;
  std::vector<transport::RecvConnection*> recvs;
  hostDrivenOf(work.launch, comm_, sends, recvs);
  proxy_.hold(sends, recvs);
}

// Puts an enqueued launch in flight on every communicator it has calls of; its first one owns
// it until it is finished.
void CudaExecutor::track(std::unique_ptr<Work> work) {
  for (CudaExecutor* e : work->executors) {
    std::lock_guard<std::mutex> lock(e->mutex_);
    e->inFlight_.push_back(work.get());
  }
  CudaExecutor& owner = *work->executors.front();
  std::lock_guard<std::mutex> lock(owner.mutex_);
  owner.owned_.push_back(std::move(work));
}

void CudaExecutor::collect() {
  cuda::DeviceRuntime& rt = cuda::deviceRuntime();
  std::vector<Work*> done;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const std::unique_ptr<Work>& w : owned_) {
      if (w->finishing) continue;
      if (!w->started && !w->abandoned && rt.eventQuery(w->start)) {
        w->started = true;
        for (const CollOp& op : w->ops) op.comm->flightRecorder().start(op.seq);
      }
      if (rt.eventQuery(w->end)) {
        w->finishing = true;
        done.push_back(w.get());
      }
    }
    finishing_ += static_cast<int>(done.size());
  }
  for (Work* w : done) finish(*w);
  // Launches another thread took to finish: done when this returns, so that what the caller
  // reads next (loomCommGetAsyncError) includes every launch whose end had passed.
  std::unique_lock<std::mutex> lock(mutex_);
  finishing_ -= static_cast<int>(done.size());
  if (finishing_ == 0) finished_.notify_all();
  finished_.wait(lock, [&] { return finishing_ == 0; });
}

// Turns what a finished launch found into its communicators' errors and ends its calls, then
// takes it out of every list; its owner keeps it, with its memory, for a later launch.
void CudaExecutor::finish(Work& work) {
  if (!work.abandoned) {
    std::string failure;
    loomResult_t code = loomSuccess;
    {
      work.launch.error = work.memory.record().error;
      try {
        finishLaunch(work.launch);
      } catch (const Error& e) {
        failure = e.what();
        code = e.code();
      } catch (const std::exception& e) {
        failure = e.what();
        code = loomInternalError;
      }
      // A broken wire is why a kernel that failed stopped (it reports the abort, or a
      // timeout). A launch that completed did not need what broke after it.
      for (CudaExecutor* e : work.executors) {
        if (code == loomSuccess) break;
        const ProxyThread::Failure wire = e->proxy_.failureOf(work.launch.sends, work.launch.recvs);
        if (wire.code == loomSuccess) continue;
        failure = wire.what;
        code = wire.code;
        break;
      }
    }
    if (!work.started)
      for (const CollOp& op : work.ops) op.comm->flightRecorder().start(op.seq);
    if (code != loomSuccess) {
      failure = strCat(describeCall(work.ops.front()), " on its CUDA stream: ", failure);
      std::vector<Comm*> failed;
      for (const CollOp& op : work.ops) {
        if (std::find(failed.begin(), failed.end(), op.comm.get()) != failed.end()) continue;
        failed.push_back(op.comm.get());
        op.comm->setLastError(failure);
        op.comm->markFailed(code);
      }
    }
    for (const CollOp& op : work.ops) op.comm->finishCall(op.seq, code);
  }
  if (work.held) {
    std::vector<transport::SendConnection*> sends;
    std::vector<transport::RecvConnection*> recvs;
    for (CudaExecutor* e : work.executors) {
      hostDrivenOf(work.launch, e->comm_, sends, recvs);
      e->proxy_.release(sends, recvs);
    }
    work.held = false;
  }
  work.ops.clear();
  work.launch.selfCopies.clear();
  CudaExecutor* owner = work.executors.front();
  for (CudaExecutor* e : work.executors) {
    std::lock_guard<std::mutex> lock(e->mutex_);
    e->inFlight_.erase(std::find(e->inFlight_.begin(), e->inFlight_.end(), &work));
    if (e != owner) continue;
    auto it = std::find_if(owner->owned_.begin(), owner->owned_.end(),
                           [&](const std::unique_ptr<Work>& w) { return w.get() == &work; });
    owner->spare_.push_back(std::move(*it));
    owner->owned_.erase(it);
  }
}

void CudaExecutor::stopKernelsIfAborted() {
  const AbortFlag abort = comm_.abortFlag();
  const bool aborted = abort != nullptr && abort->raised();
  if (!aborted && !proxy_.anyFailed()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  for (Work* w : inFlight_) {
    if (aborted || proxy_.failureOf(w->launch.sends, w->launch.recvs).code != loomSuccess)
      w->memory.raiseAbort();
  }
}

// Launches this communicator is part of but another owns are finished by their owner or the
// watchdog. Then what the proxy still sends leaves, for as long as a call may wait.
void CudaExecutor::waitIdle() {
  for (;;) {
    stopKernelsIfAborted();
    collect();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (inFlight_.empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  // An aborted communicator sends nothing more.
  const AbortFlag abort = comm_.abortFlag();
  const bool aborted = abort != nullptr && abort->raised();
  const std::chrono::milliseconds limit =
      aborted ? std::chrono::milliseconds(1) : comm_.options().timeout;
  if (!proxy_.flush(limit) && !aborted)
    LOOM_WARN(kLogNet, "rank ", comm_.rank(),
              ": steps to peers on the wire were still leaving "
              "after ",
              limit.count() / 1000.0, " s; a peer may not have received them");
}

void CudaExecutor::quiesce() { waitIdle(); }

void CudaExecutor::resume() {}

void CudaExecutor::drain() { waitIdle(); }

}  // namespace loom
