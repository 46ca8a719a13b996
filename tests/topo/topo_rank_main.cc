// One rank of the multi-process topology test (process_topo_test.cc):
//
//   loom_topo_rank NRANKS RANK ID
//
// Inits with the hex unique id, prints what its communicator's system view says, one fact a
// line ("nodes 2", "node 1 gpus 8", "class 0 2 NET"), then "ok"; on failure "fail <message>".
#include <cstdio>
#include <cstdlib>
#include <string>

#include "loom/loom.h"
#include "src/comm/comm.h"
#include "tests/test_util.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: loom_topo_rank NRANKS RANK ID\n");
    return 2;
  }
  int nranks = std::atoi(argv[1]);
  int rank = std::atoi(argv[2]);
  loomUniqueId id = loom::test::idFromHex(argv[3]);
  loomComm_t comm = nullptr;
  loomResult_t r = loomCommInitRank(&comm, nranks, id, rank);
  if (r != loomSuccess) {
    std::printf("fail init: %s\n", loomGetLastError(comm));
    return 10 + static_cast<int>(r);
  }
  const loom::topo::System& system = static_cast<loom::Comm*>(comm)->system();
  std::printf("nodes %zu\n", system.nodes().size());
  for (size_t n = 0; n < system.nodes().size(); ++n)
    std::printf("node %zu gpus %zu nics %zu\n", n, system.nodes()[n].gpus.size(),
                system.nodes()[n].nics.size());
  for (int a = 0; a < nranks; ++a) {
    std::printf("rank %d node %d\n", a, system.nodeOf(a));
    for (int b = 0; b < nranks; ++b)
      std::printf("class %d %d %s\n", a, b, loom::topo::pathClassLabel(system.pathClass(a, b)));
  }
  loomCommFinalize(comm);
  loomCommDestroy(comm);
  std::printf("ok\n");
  std::fflush(stdout);
  return 0;
}
