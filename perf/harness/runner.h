// The benchmark driver shared by every *_perf binary: nccl-tests' main loop (warm-up, timed
// iterations, checked runs, one table row per size) around one CollSpec.
#ifndef LOOM_PERF_HARNESS_RUNNER_H_
#define LOOM_PERF_HARNESS_RUNNER_H_

#include "perf/harness/collectives.h"

namespace loomperf {

// Parses the command line, launches the ranks (threads, mpirun or env), runs the sweep and
// returns the process exit status: 0 when every checked result was right, 1 when some were
// wrong or a call failed, 2 on bad usage.
int benchMain(int argc, char** argv, const CollSpec& spec);

}  // namespace loomperf

#endif  // LOOM_PERF_HARNESS_RUNNER_H_
