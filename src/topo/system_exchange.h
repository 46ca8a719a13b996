// Init-time topology for a communicator: describe this rank's node (LOOM_TOPO_FILE or
// discovery, cached per process), exchange descriptions over the bootstrap, build the System,
// and write LOOM_TOPO_DUMP_FILE. Discovery failures fall back to a minimal description; they
// never fail init (bootstrap failures still do).
#pragma once

#include <cstdint>
#include <string>

#include "src/topo/discovery.h"
#include "src/topo/system.h"

namespace loom {
class Bootstrap;
}

namespace loom::topo {

// Collective over the bootstrap: every rank calls it once at init.
System discoverSystem(Bootstrap& bootstrap, uint64_t hostHash, int device);

// This rank's NUMA node (index into node.numaNodes): the one its CPU affinity lies within, else
// the one of the CPU it runs on now; -1 when neither is in the description.
int currentNuma(const NodeTopology& node);

// A node description that works anywhere, for when discovery fails: one socket, one NUMA node
// holding every CPU, no GPUs or NICs.
NodeTopology fallbackTopology(const std::string& reason);

// What LOOM_TOPO_DUMP_FILE holds: the node's hwloc XML (loadable as LOOM_TOPO_FILE) followed
// by the system view in an XML comment (both hwloc parsers skip a trailing comment).
std::string dumpText(const LoadedTopology* loaded, const System& system);

}  // namespace loom::topo
