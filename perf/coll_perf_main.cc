// Every nccl-tests-style binary (all_reduce_perf, broadcast_perf...) is this file built with
// LOOM_PERF_COLL naming its collective; the harness does the rest.
#include <cstdio>

#include "perf/harness/collectives.h"
#include "perf/harness/runner.h"

int main(int argc, char** argv) {
  const loomperf::CollSpec* spec = loomperf::collSpecByName(LOOM_PERF_COLL);
  if (spec == nullptr) {
    std::fprintf(stderr, "unknown collective %s\n", LOOM_PERF_COLL);
    return 2;
  }
  return loomperf::benchMain(argc, argv, *spec);
}
