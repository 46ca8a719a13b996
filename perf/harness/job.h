// A benchmark job: the options, the launch (threads, mpirun or env), this process's ranks with
// their communicators, streams and buffers, and the threads that drive them. runJob does the
// setup and teardown every benchmark shares; the benchmark supplies what each thread runs.
#ifndef LOOM_PERF_HARNESS_JOB_H_
#define LOOM_PERF_HARNESS_JOB_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "loom/loom.h"
#include "perf/harness/launch.h"
#include "perf/harness/options.h"
#include "perf/harness/report.h"
#include "perf/harness/team.h"
#include "perf/harness/watchdog.h"

namespace loomperf {

struct Rank {
  int rank = 0;
  loomComm_t comm = nullptr;
  loomComm_t ctrl = nullptr;  // env launches: one rank per process, for the results
  loomStream_t stream = nullptr;
  char* send = nullptr;
  char* recv = nullptr;
  char* want = nullptr;
  bool memAlloc = false;  // send and recv come from loomMemAlloc (-R)
  bool checked = false;   // whether `want` holds an expectation for the current run
  // --device cuda (device.h): the rank's device, `send` and `recv` are device memory, `stage`
  // pinned host memory that fills and checks go through, `stream` a cudaStream_t, and the
  // events bracket the timed calls.
  int device = LOOM_DEVICE_CPU;
  char* stage = nullptr;
  void* timedStart = nullptr;
  void* timedEnd = nullptr;
};

struct Job {
  std::string program;
  Options o;
  Launch launch;
  int nranks = 1;
  bool isMain = false;     // process 0: the one that prints
  bool cuda = false;       // --device cuda
  bool simulated = false;  // ... on the simulated runtime (LOOM_CUDA_SIM=1)
  int deviceCount = 0;
  std::vector<Rank> ranks;  // this process's, nThreads * nGpus of them
  ThreadTeam* team = nullptr;
  Reporter* reporter = nullptr;
  Watchdog* dog = nullptr;
};

struct JobHooks {
  // Refuses option combinations the benchmark cannot run (returns a message, empty if fine).
  std::function<std::string(const Options&)> validate;
  // After the preamble, before the threads start (on the main thread).
  std::function<void(Job&)> begin;
  // On each benchmark thread; returns that thread's count of failed checks (summed by the
  // team, so every thread returns the total).
  std::function<int64_t(Job&, int thread)> thread;
  // After the threads joined; prints the footer. Gets the total of failed checks.
  std::function<void(Job&, int64_t errors)> end;
};

// Parses argv, launches, runs the hooks and tears down; returns the exit status (0 ok, 1 wrong
// results or failed calls, 2 bad usage).
int runJob(int argc, char** argv, const std::string& program, const JobHooks& hooks);

// Fails like nccl-tests' NCCLCHECK: waits out loomInProgress (non-blocking communicators),
// then on an error prints it, aborts every communicator of the process and exits 1.
void check(loomResult_t r, loomComm_t comm, const char* what);
// The same for a failure outside loom's C API (a device-runtime call): prints `what` and
// `message`, aborts every communicator of the process and exits 1.
[[noreturn]] void fail(const char* what, const std::string& message);

// `bytes` (at least one page) of page-aligned memory, allocated and touched once so first-touch
// page faults stay out of measured loops; exits with a message when it cannot be had. With
// `hugePages`, 2 MiB-aligned and advised MADV_HUGEPAGE (transparent huge pages in madvise mode:
// the kernel backs it with 2 MiB pages where it can, as a tuned application's allocator would).
char* allocTouched(size_t bytes, bool hugePages);
// The same from loomMemAlloc (-R): memory peer processes map, so steps move with one copy.
char* memAllocTouched(size_t bytes);

}  // namespace loomperf

#endif  // LOOM_PERF_HARNESS_JOB_H_
