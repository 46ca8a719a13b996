// How this process learns its place in the job: ranks as threads of one process (-t), one
// process per rank under mpirun, or one process per rank from torchrun's or Slurm's
// variables with LOOM_COMM_ID giving every rank the same unique id.
#ifndef LOOM_PERF_HARNESS_LAUNCH_H_
#define LOOM_PERF_HARNESS_LAUNCH_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "perf/harness/team.h"

namespace loomperf {

enum class LaunchMode { kThreads, kEnv, kMpi };

struct Launch {
  LaunchMode mode = LaunchMode::kThreads;
  int nprocs = 1, proc = 0, localProc = 0;
  std::string source;  // "threads", "mpirun", "torchrun", "slurm", "open mpi variables"
};

using EnvLookup = std::function<const char*(const char*)>;

// Decides the launch mode from the environment. mpiBuilt says whether this binary can use
// MPI; without it an mpirun launch is still accepted through Open MPI's variables (then
// LOOM_COMM_ID is needed, as for torchrun). Returns false with *error on inconsistent values.
bool detectLaunch(const EnvLookup& env, bool mpiBuilt, Launch* launch, std::string* error);

// MPI (compiled in when CMake finds it; the stubs say so otherwise).
bool mpiBuilt();
// MPI_Init and a process group over MPI_COMM_WORLD; fills nprocs/proc/localProc.
std::unique_ptr<ProcessGroup> mpiStart(int* argc, char*** argv, Launch* launch);
// Copies process 0's bytes to every process.
void mpiBroadcast(void* data, size_t bytes);
void mpiFinish();

}  // namespace loomperf

#endif  // LOOM_PERF_HARNESS_LAUNCH_H_
