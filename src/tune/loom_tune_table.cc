// loom-tune-table: prints the tuner's AllReduce decisions for simulated clusters, to see where
// the choices switch and check they make sense before a cluster exists.
//
//   loom-tune-table                      the 4xH100 + 4 NIC server at 1, 2, 8, 64, 1024 nodes
//   loom-tune-table gpu NODES...         that server at the given node counts
//   loom-tune-table host NODES RANKS MBPS [CHANNELS]
//                                        CPU ranks over shared memory, TCP at MBPS between hosts
//   loom-tune-table predict NODES RANKS MBPS BYTES...
//                                        that cluster's predicted time of every algorithm and
//                                        protocol at each size, to compare with measurements
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "src/tune/cost_model.h"
#include "src/tune/decision_table.h"

int main(int argc, char** argv) {
  using namespace loom::tune;
  const std::string mode = argc > 1 ? argv[1] : "gpu";
  if (mode == "host" && (argc == 5 || argc == 6)) {
    const int channels = argc == 6 ? std::atoi(argv[5]) : 1;
    printDecisionTable(
        defaultModel(std::atoi(argv[2]), std::atoi(argv[3]), std::atof(argv[4]) / 8000.0, channels),
        std::cout);
    return 0;
  }
  if (mode == "predict" && argc >= 6) {
    const ClusterModel m =
        defaultModel(std::atoi(argv[2]), std::atoi(argv[3]), std::atof(argv[4]) / 8000.0, 1);
    for (int i = 5; i < argc; ++i) {
      const double bytes = std::atof(argv[i]);
      const Choice c = best(m, bytes);
      std::printf("%.0f B: tuner picks %s/%s %.1f us (busbw %.4f GB/s);", bytes, algoName(c.algo),
                  protoName(c.proto), c.timeUs, c.busGBs());
      for (Algo a : {Algo::kRing, Algo::kTree, Algo::kHier}) {
        if (!applies(m, a)) continue;
        for (Proto p : {Proto::kSimple, Proto::kLL})
          std::printf(" %s/%s %.1f", algoName(a), protoName(p), predictUs(m, a, p, 1, bytes));
      }
      std::printf("\n");
    }
    return 0;
  }
  if (mode != "gpu") {
    std::fprintf(
        stderr,
        "usage: %s [gpu NODES... | host NODES RANKS MBPS [CHANNELS] | predict NODES RANKS MBPS "
        "BYTES...]\n",
        argv[0]);
    return 2;
  }
  if (argc <= 2) {
    for (int nodes : {1, 2, 8, 64, 1024}) {
      printDecisionTable(gpuServerModel(nodes), std::cout);
      std::cout << "\n";
    }
    return 0;
  }
  for (int i = 2; i < argc; ++i) {
    printDecisionTable(gpuServerModel(std::atoi(argv[i])), std::cout);
    std::cout << "\n";
  }
  return 0;
}
