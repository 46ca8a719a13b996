// From a topology of one server to the tuner's model of a cluster of them: the glue behind
// `loom-topo --tune`, so decision tables can be reviewed for real servers (or their hwloc or
// NCCL XML) at any node count without the hardware.
#pragma once

#include "src/topo/node_topology.h"
#include "src/tune/cluster_model.h"

namespace loom::tune {

// A node with GPUs: `ranksPerGpu` ranks on each GPU, on the ring the topology search finds,
// priced by gpu_model.h (same GPU, NVLink, PCIe and the node's NICs). A node without GPUs:
// `cpuRanksPerNode` CPU ranks over shared memory (the constants measured here) and its NICs,
// or 10 GbE when it has none.
ClusterModel modelForNode(const topo::NodeTopology& node, int nodes, int cpuRanksPerNode,
                          int ranksPerGpu);

}  // namespace loom::tune
