// The system view of a communicator: which node (host) each rank is on, where on that node
// (NUMA node, socket, GPU, NIC), and the path class, bandwidth and latency of every pair of
// ranks. Built from every rank's description (system_exchange.h gathers them at init).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/topo/node_topology.h"
#include "src/topo/path_class.h"

namespace loom::topo {

// What one rank tells the others about itself.
struct RankDescription {
  uint64_t hostHash = 0;  // RankInfo::hostHash: equal for ranks of one node
  int32_t pid = 0;
  int32_t device = -1;  // CUDA ordinal, or < 0 for a CPU communicator
  int32_t gpu = -1;     // index into node.gpus of that device (gpuForCudaDevice), -1 if none
  int32_t numa = -1;    // index into node.numaNodes where the process is bound / runs
  NodeTopology node;
};

struct RankPlace {
  int node = 0;
  int pid = 0;
  int numa = -1;     // index into the node's numaNodes
  int package = -1;  // index into the node's packages
  int gpu = -1;      // index into the node's gpus, -1 for a CPU rank
  int nic = -1;      // the NIC this rank's traffic leaves by (paired with its GPU, or nearest)
};

class System {
 public:
  System() = default;
  // Ranks with equal host hashes form a node, described by its lowest rank.
  explicit System(const std::vector<RankDescription>& ranks);

  int nranks() const { return static_cast<int>(ranks_.size()); }
  const std::vector<NodeTopology>& nodes() const { return nodes_; }
  const std::vector<RankPlace>& ranks() const { return ranks_; }
  const RankPlace& rank(int r) const { return ranks_.at(r); }
  int nodeOf(int r) const { return ranks_.at(r).node; }
  const Link& link(int a, int b) const {
    return links_.at(static_cast<size_t>(a) * ranks_.size() + b);
  }
  PathClass pathClass(int a, int b) const { return link(a, b).cls; }

  // Nodes, ranks and the path-class matrix, for logs, dumps and loom-topo.
  std::string describe() const;

 private:
  Link rankLink(int a, int b) const;
  int nearestNic(const NodeTopology& node, int numa, int package) const;

  std::vector<NodeTopology> nodes_;
  std::vector<RankPlace> ranks_;
  std::vector<Link> links_;  // nranks^2, row-major
};

// Text table helper shared with loom-topo: rows x columns of labels, first column left.
std::string formatMatrix(const std::vector<std::string>& names,
                         const std::vector<std::vector<std::string>>& cells);

}  // namespace loom::topo
