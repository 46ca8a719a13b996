// --device cuda: the benchmarks' device buffers, streams and event timing. Everything goes
// through loom's device-runtime seam (src/cuda/runtime.h), the one the library's CUDA
// communicators use, so the same binaries run on a GPU with the CUDA runtime and here under
// LOOM_CUDA_SIM=1, where the seam's simulated devices are a test double on the CPU: their
// results are checked as on a GPU, their times say nothing about GPUs.
//
// The host path (--device cpu) calls nothing here. A failing call prints what failed, aborts
// every communicator of the process and exits 1, as check() does for loom calls.
#ifndef LOOM_PERF_HARNESS_DEVICE_H_
#define LOOM_PERF_HARNESS_DEVICE_H_

#include <cstddef>
#include <string>

#include "loom/loom.h"
#include "perf/harness/options.h"

namespace loomperf {

struct Job;
struct Rank;

struct CudaProbe {
  int devices = 0;
  bool simulated = false;  // LOOM_CUDA_SIM=1: the seam's test double
  std::string error;       // why --device cuda cannot run; empty when it can
};
// Whether CUDA devices can be used (never exits; no device is an error message, not a crash).
CudaProbe probeCuda();

// Refuses flags --device cuda cannot honour (empty when fine). ranksPerProcess: -t x -g.
std::string validateCudaOptions(const Options& o, int ranksPerProcess);

// The rank's device, as nccl-tests spreads ranks: the process's ranks in turn, starting after
// those of the processes before it on the host; several ranks share a device when there are
// more ranks than devices.
int cudaDeviceOfRank(int localProc, int ranksPerProcess, int index, int deviceCount);

// "device memory" or the simulated runtime's note, for the rank lines.
std::string cudaRankInfo(bool simulated);
// The device's PCI bus id, as the rank lines print it.
std::string cudaBusId(int device);

// On the rank's init thread, after its communicator exists (loomMemAlloc, for -R, gives memory
// of the current device's live CUDA communicator): device send/recv buffers, a pinned staging
// buffer for fills and checks, the stream (unless -y 1) and the timing events.
void cudaRankSetup(Job& job, Rank& r);
// Before the communicator goes: waits for the stream, frees what cudaRankSetup made.
void cudaRankTeardown(Rank& r);

// The calling thread's current device.
void cudaUse(int device);
// In order with the stream's other work; `stream` may be NULL (the legacy default stream).
void cudaFill(void* dst, int byte, size_t bytes, loomStream_t stream);
void cudaCopy(void* dst, const void* src, size_t bytes, loomStream_t stream);
void cudaRecord(void* event, loomStream_t stream);
void cudaSync(loomStream_t stream, loomComm_t comm);
// Seconds between two completed events.
double cudaElapsed(void* start, void* end);

}  // namespace loomperf

#endif  // LOOM_PERF_HARNESS_DEVICE_H_
