// Stand-ins for builds without MPI: detectLaunch never picks MPI then.
#include <cstdio>
#include <cstdlib>

#include "perf/harness/launch.h"

namespace loomperf {

bool mpiBuilt() { return false; }

std::unique_ptr<ProcessGroup> mpiStart(int*, char***, Launch*) {
  std::fprintf(stderr, "loom perf: built without MPI\n");
  std::exit(2);
}

void mpiBroadcast(void*, size_t) {}
void mpiFinish() {}

}  // namespace loomperf
