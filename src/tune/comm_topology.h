// A communicator's topology as the planner and the tuner use it, derived from what every rank
// told the others at init (RankInfo): which ranks share a node, the ring order, and the
// ClusterModel that the tuner prices choices on. Every rank computes the same answers from
// the same exchanged data, so every rank makes the same choices without talking.
//
// Nodes come from RankInfo::hostHash (LOOM_HOSTID fakes them); the link classes inside them
// from the topology exchange (src/topo, Comm::system()).
#pragma once

#include <vector>

#include "algorithms/tree.h"
#include "src/comm/comm.h"
#include "src/tune/cluster_model.h"

namespace loom::tune {

struct NodeLayout {
  std::vector<int> nodeOf;              // node index of every rank
  std::vector<std::vector<int>> ranks;  // each node's ranks in ring order
  int ranksPerNode = 1;                 // the largest node
  bool uniform = true;                  // every node has ranksPerNode ranks
  int nodes() const { return static_cast<int>(ranks.size()); }
};
NodeLayout nodeLayout(const Comm& comm);

// Links of `rank` in tree `tree` of the double binary tree over nodes (chains inside).
algo::TreeLinks treeLinks(const NodeLayout& layout, int tree, int rank);

// The model of this communicator's cluster: its node layout, shared memory inside a node (the
// GPU links of gpu_model.h when every rank drives a GPU), TCP at LOOM_TUNE_NET_MBPS between
// nodes, its channel count.
ClusterModel clusterModel(const Comm& comm, const NodeLayout& layout);

}  // namespace loom::tune
