#include "src/exec/thread_binding.h"

#include <pthread.h>

#include <cstdlib>

#include "src/base/env.h"
#include "src/base/logging.h"
#include "src/comm/comm.h"

namespace loom {

bool parseCpuList(const std::string& list, cpu_set_t* set) {
  CPU_ZERO(set);
  size_t i = 0;
  while (i < list.size()) {
    char* end = nullptr;
    const long first = std::strtol(list.c_str() + i, &end, 10);
    size_t next = static_cast<size_t>(end - list.c_str());
    if (next == i || first < 0) return false;
    long last = first;
    if (next < list.size() && list[next] == '-') {
      const size_t from = next + 1;
      last = std::strtol(list.c_str() + from, &end, 10);
      next = static_cast<size_t>(end - list.c_str());
      if (next == from || last < first) return false;
    }
    for (long cpu = first; cpu <= last && cpu < CPU_SETSIZE; ++cpu) CPU_SET(cpu, set);
    if (next < list.size() && list[next] != ',') return false;
    i = next + 1;
  }
  return true;
}

bool rankCpus(const Comm& comm, const cpu_set_t& allowed, cpu_set_t* out) {
  if (envInt(EnvVar::LOOM_BIND_THREADS) == 0) return false;
  const topo::System& system = comm.system();
  if (comm.rank() >= system.nranks()) return false;
  const topo::RankPlace& place = system.rank(comm.rank());
  if (place.numa < 0 || place.node >= static_cast<int>(system.nodes().size())) return false;
  const topo::NodeTopology& node = system.nodes()[place.node];
  if (place.numa >= static_cast<int>(node.numaNodes.size())) return false;
  cpu_set_t numa;
  if (!parseCpuList(node.numaNodes[place.numa].cpuset, &numa)) return false;
  CPU_AND(out, &numa, &allowed);
  return CPU_COUNT(out) > 0;
}

void bindThreadNearRank(const Comm& comm) {
  try {
    cpu_set_t allowed, cpus;
    if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return;
    if (!rankCpus(comm, allowed, &cpus)) return;
    if (pthread_setaffinity_np(pthread_self(), sizeof(cpus), &cpus) == 0) {
      LOOM_INFO(kLogInit, "rank ", comm.rank(), ": stream thread bound to ", CPU_COUNT(&cpus),
                " CPU(s) of its NUMA node (LOOM_BIND_THREADS=0 turns this off)");
    }
  } catch (const std::exception& e) {
    LOOM_INFO(kLogInit, "stream thread not bound: ", e.what());
  }
}

}  // namespace loom
