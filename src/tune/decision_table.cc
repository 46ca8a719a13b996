#include "src/tune/decision_table.h"

#include <cstdio>
#include <string>

#include "src/tune/cost_model.h"

namespace loom::tune {
namespace {

std::string sizeName(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (bytes >= 1024 && u < 3) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.0f %s", bytes, units[u]);
  return buf;
}

}  // namespace

void printDecisionTable(const ClusterModel& m, std::ostream& out) {
  char line[160];
  std::snprintf(
      line, sizeof(line),
      "# AllReduce on %d node(s) x %d rank(s), intra %.0f GB/s, inter %.1f GB/s per node, "
      "channels %d-%d\n",
      m.nodes, m.ranksPerNode, m.intra.totalGBs, m.inter.totalGBs, m.channelsMin, m.channelsMax);
  out << line;
  std::snprintf(line, sizeof(line), "%10s  %-5s %-7s %3s %12s %10s   %s\n", "size", "algo", "proto",
                "ch", "time(us)", "busbw(GB/s)", "ring/simple(us)");
  out << line;
  for (double bytes = 8; bytes <= double(1ull << 32); bytes *= 4) {
    const Choice c = best(m, bytes);
    const Choice ring = best(m, bytes, {Algo::kRing}, {Proto::kSimple});
    std::snprintf(line, sizeof(line), "%10s  %-5s %-7s %3d %12.1f %10.2f   %12.1f\n",
                  sizeName(bytes).c_str(), algoName(c.algo), protoName(c.proto), c.channels,
                  c.timeUs, c.busGBs(), ring.timeUs);
    out << line;
  }
}

}  // namespace loom::tune
