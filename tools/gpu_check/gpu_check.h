// loom_gpu_check: the checks of the CUDA data path that tools/gpu_check.sh runs, one phase per
// subcommand, each printing its own result lines and ending with a "RESULT <phase> PASS|FAIL|
// SKIP <summary>" line that the script gathers into its table. It reaches the device through
// loom's device-runtime seam (src/cuda/runtime.h), so the same binary runs on a GPU and on the
// simulated runtime (LOOM_CUDA_SIM=1, a test double whose results say nothing about GPUs);
// phases that only mean something on a GPU (the kernels' exactness and bandwidth) say SKIP
// there.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "src/cuda/runtime.h"

namespace loom::gpucheck {

// A phase's verdict, printed as the last line of its output.
enum class Verdict { kPass, kFail, kSkip };
int report(const char* phase, Verdict verdict, const std::string& summary);

// The options every phase reads (main.cc parses them).
struct Options {
  std::vector<int> ranks{2};                  // collectives: rank counts, threads sharing device 0
  std::vector<size_t> counts{0, 1, 7, 4097};  // collectives: element counts of the full matrix
  std::vector<size_t> largeCounts;            // collectives: float32/bfloat16-only counts
  std::vector<size_t> bandwidthMiB{256, 1024};
  int iters = 20;    // bandwidth: timed launches per size
  std::string self;  // argv[0], for the child processes
};

cuda::DeviceRuntime& runtime();
bool simulated();

int probe(const Options& options);
int ipcChild(const std::string& handleHex);  // the probe's second process
int kernels(const Options& options);
int bandwidth(const Options& options);
int collectives(const Options& options);
int processes(const Options& options);
int stream(const Options& options);
int faults(const Options& options);
int processRank(const std::string& idsHex, int rank, const Options& options);  // a child

// Device kernels of the stream phase (device_kernels.cu), with host twins for the simulated
// runtime registered by registerKernelTwins(): fill writes value * (1 + i % 8) to data[i];
// verify adds to *errors the elements that differ from expect * (1 + i % 8).
void registerKernelTwins();
void launchFill(float* data, size_t count, float value, cuda::Stream stream);
void launchVerify(const float* data, size_t count, float expect, unsigned* errors,
                  cuda::Stream stream);

}  // namespace loom::gpucheck
