#include "perf/harness/device.h"

#include <algorithm>
#include <cstring>
#include <exception>

#include "perf/harness/job.h"
#include "src/cuda/runtime.h"

namespace loomperf {
namespace {

loom::cuda::DeviceRuntime& rt() { return *loomInternalDeviceRuntime(); }

void* cudaStream(loomStream_t s) { return static_cast<void*>(s); }

// Runs one seam call; its CudaError (or any other) ends the run with the call's name.
template <typename Call>
auto guard(const char* what, Call call) -> decltype(call()) {
  try {
    return call();
  } catch (const std::exception& e) {
    fail(what, e.what());
  }
}

}  // namespace

CudaProbe probeCuda() {
  CudaProbe p;
  try {
    loom::cuda::DeviceRuntime& r = rt();
    p.simulated = std::strcmp(r.name(), "sim") == 0;
    p.devices = r.deviceCount();
  } catch (const std::exception& e) {
    p.error = std::string("--device cuda: the CUDA runtime cannot be used: ") + e.what();
    return p;
  }
  if (p.devices == 0)
    p.error =
        "--device cuda: no CUDA device found (no NVIDIA driver, or no GPU visible to this "
        "process: check nvidia-smi and CUDA_VISIBLE_DEVICES). Run on a machine with a GPU, or "
        "set LOOM_CUDA_SIM=1 for loom's simulated devices, a test double on the CPU whose "
        "times say nothing about GPUs.";
  return p;
}

std::string validateCudaOptions(const Options& o, int ranksPerProcess) {
  if (o.cudaGraphLaunches > 0)
    return "-G " + std::to_string(o.cudaGraphLaunches) +
           ": CUDA graph capture is not supported with --device cuda; run without -G (or -G 0)";
  if (o.streamNull && ranksPerProcess > 1)
    return "-y 1 with " + std::to_string(ranksPerProcess) +
           " ranks in one process: the ranks would share the process's legacy default stream, "
           "where each rank's collective waits for its peers' queued behind it. Use -y 0 (a "
           "stream per rank), or one rank per process";
  return "";
}

int cudaDeviceOfRank(int localProc, int ranksPerProcess, int index, int deviceCount) {
  return (localProc * ranksPerProcess + index) % std::max(deviceCount, 1);
}

std::string cudaRankInfo(bool simulated) {
  return simulated ? "loom CUDA communicator, simulated device (LOOM_CUDA_SIM=1, a test double)"
                   : "loom CUDA communicator, device memory";
}

std::string cudaBusId(int device) {
  return guard("cudaDeviceGetPCIBusId", [&] { return std::string(rt().identity(device).busId); });
}

void cudaRankSetup(Job& job, Rank& r) {
  const Options& o = job.o;
  // At least a byte each, so every buffer is a real allocation even for -e 0.
  const size_t bytes = std::max<size_t>(o.maxBytes, 1);
  cudaUse(r.device);
  r.memAlloc = o.localRegister != 0;
  for (char** buf : {&r.send, &r.recv}) {
    if (r.memAlloc) {
      void* p = nullptr;
      check(loomMemAlloc(&p, bytes), r.comm, "loomMemAlloc");
      *buf = static_cast<char*>(p);
    } else {
      *buf = static_cast<char*>(guard("cudaMalloc", [&] { return rt().malloc(bytes); }));
    }
  }
  if (!o.streamNull)
    r.stream =
        static_cast<loomStream_t>(guard("cudaStreamCreate", [] { return rt().streamCreate(); }));
  // Zeroed once, so nothing of the allocation is left to first use in a measured loop.
  cudaFill(r.send, 0, bytes, r.stream);
  cudaFill(r.recv, 0, bytes, r.stream);
  r.stage = static_cast<char*>(
      guard("cudaHostAlloc", [&] { return rt().hostAlloc(bytes, loom::cuda::kHostDefault); }));
  std::memset(r.stage, 0, bytes);
  r.timedStart = guard("cudaEventCreate", [] { return rt().eventCreate(true); });
  r.timedEnd = guard("cudaEventCreate", [] { return rt().eventCreate(true); });
  cudaSync(r.stream, r.comm);
}

void cudaRankTeardown(Rank& r) {
  cudaUse(r.device);
  cudaSync(r.stream, r.comm);
  guard("cudaEventDestroy", [&] {
    rt().eventDestroy(r.timedStart);
    rt().eventDestroy(r.timedEnd);
  });
  guard("cudaFreeHost", [&] { rt().freeHost(r.stage); });
  for (char* buf : {r.send, r.recv}) {
    if (r.memAlloc)
      check(loomMemFree(buf), nullptr, "loomMemFree");
    else
      guard("cudaFree", [&] { rt().free(buf); });
  }
  if (r.stream != nullptr)
    guard("cudaStreamDestroy", [&] { rt().streamDestroy(cudaStream(r.stream)); });
  r.send = r.recv = r.stage = nullptr;
  r.memAlloc = false;
  r.stream = nullptr;
  r.timedStart = r.timedEnd = nullptr;
}

void cudaUse(int device) {
  guard("cudaSetDevice", [&] { rt().setDevice(device); });
}

void cudaFill(void* dst, int byte, size_t bytes, loomStream_t stream) {
  guard("cudaMemsetAsync", [&] { rt().memsetAsync(dst, byte, bytes, cudaStream(stream)); });
}

void cudaCopy(void* dst, const void* src, size_t bytes, loomStream_t stream) {
  guard("cudaMemcpyAsync", [&] { rt().memcpyAsync(dst, src, bytes, cudaStream(stream)); });
}

void cudaRecord(void* event, loomStream_t stream) {
  guard("cudaEventRecord", [&] { rt().eventRecord(event, cudaStream(stream)); });
}

void cudaSync(loomStream_t stream, loomComm_t comm) {
  try {
    rt().streamSynchronize(cudaStream(stream));
  } catch (const std::exception& e) {
    // A failed collective is the stream's error; the communicator says what went wrong.
    loomResult_t async = loomSuccess;
    if (comm != nullptr) loomCommGetAsyncError(comm, &async);
    std::string msg = e.what();
    if (async != loomSuccess)
      msg += std::string(" (communicator: ") + loomGetErrorString(async) + " : " +
             loomGetLastError(comm) + ")";
    fail("cudaStreamSynchronize", msg);
  }
}

double cudaElapsed(void* start, void* end) {
  return guard("cudaEventElapsedTime", [&] { return rt().eventElapsedMs(start, end); }) / 1e3;
}

}  // namespace loomperf
