// From what hwloc says about one server to the tuner's model of a cluster of them: the glue
// behind `loom-topo --tune`, so decision tables can be reviewed for real servers (or their
// hwloc XML) at any node count without the hardware.
#pragma once

#include "src/topo/path_class.h"
#include "src/tune/cluster_model.h"

namespace loom::tune {

// A node with GPUs: one rank per GPU, the slowest GPU pair's bandwidth and latency inside
// (NVLink or PCIe, from the path classes), the node's NICs between nodes (their PCIe link, or
// NCCL's nominal rate). A node without GPUs: `cpuRanksPerNode` CPU ranks over shared memory
// (the constants measured here) and its NICs, or 10 GbE when it has none.
ClusterModel modelForNode(const topo::NodeLinkSummary& node, int nodes, int cpuRanksPerNode);

}  // namespace loom::tune
