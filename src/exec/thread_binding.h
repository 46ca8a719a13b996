// Where loom's own threads run (docs/architecture.md, "Threads and where they run"). A host
// stream's worker is bound to the CPUs of its rank's NUMA node (from the topology discovery),
// intersected with the process's allowed CPUs, so the copies and reductions it runs touch
// memory local to that node. LOOM_BIND_THREADS=0 leaves placement to the OS; a rank whose NUMA
// node is unknown, or whose CPUs the process may not use, is left alone too.
#pragma once

#include <sched.h>

#include <string>

namespace loom {

class Comm;

// Parses an hwloc-style CPU list ("0-13,112-125", "3", "") into `set`; false if malformed.
bool parseCpuList(const std::string& list, cpu_set_t* set);

// The CPUs the calling thread should run on for `comm`'s rank, or false when it should stay
// where it is (binding off, NUMA node unknown, or no overlap with `allowed`).
bool rankCpus(const Comm& comm, const cpu_set_t& allowed, cpu_set_t* out);

// Binds the calling thread as rankCpus says; logs at INFO what it did. Never throws.
void bindThreadNearRank(const Comm& comm);

}  // namespace loom
