// Command-line options of the benchmarks: nccl-tests' flags (2.19), their defaults and their
// meaning, plus --device and --huge_pages.
#ifndef LOOM_PERF_HARNESS_OPTIONS_H_
#define LOOM_PERF_HARNESS_OPTIONS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "loom/loom.h"
#include "perf/harness/datatypes.h"

namespace loomperf {

struct Options {
  int nThreads = 1;  // -t: threads per process, each driving nGpus ranks
  int nGpus = 1;     // -g: ranks ("devices") per thread
  size_t minBytes = 32 << 20, maxBytes = 32 << 20;    // -b, -e
  size_t stepBytes = 1 << 20;                         // -i
  size_t stepFactor = 1;                              // -f (> 1 multiplies instead of adding)
  int iters = 20;                                     // -n
  int warmupIters = 5;                                // -w
  int aggIters = 1;                                   // -m: calls per group
  int runCycles = 1;                                  // -N: sweeps (0: forever)
  int check = 1;                                      // -c: checked runs per size (0: no check)
  std::vector<Op> ops = {Op::kSum};                   // -o (all: every op)
  std::vector<loomDataType_t> types = {loomFloat32};  // -d (all: every type)
  int root = 0;                                       // -r (-1: every root in turn)
  int blocking = 0;            // -z: 1 = blocking communicators, sync and barrier after each call
  int streamNull = 0;          // -y: 1 = NULL stream (each call synchronous)
  int timeoutSec = 0;          // -T: abort a wait longer than this (0: never)
  int average = 1;             // -a: time reported: 0 rank 0, 1 mean, 2 min, 3 max
  int reportCputime = 0;       // -C: report time to enqueue instead of time to complete
  int localRegister = 0;       // -R: 1 or 2 = send/recv buffers from loomMemAlloc
  int hugePages = 0;           // --huge_pages 1: malloc'd buffers asked for huge pages (THP)
  int parallelInit = 0;        // -p: accepted for compatibility; ranks always init in parallel
  int cudaGraphLaunches = 0;   // -G: nccl-tests' CUDA graph launches (ignored on the CPU)
  std::string jsonPath;        // -J: write nccl-tests' JSON report here
  std::string device = "cpu";  // --device cpu|cuda
};

enum class ParseStatus { kRun, kHelp, kError };

// nccl-tests' size syntax: a number with an optional K, M or G suffix (powers of 1024);
// "1.5K" is 1536. Returns -1 when the text is not a size.
double parseSize(const char* text);

// Parses argv into *opts. On kError, *error says which flag was wrong and why.
ParseStatus parseOptions(int argc, char** argv, Options* opts, std::string* error);

std::string usage(const char* program);

}  // namespace loomperf

#endif  // LOOM_PERF_HARNESS_OPTIONS_H_
