// The communicator's ring at init: ranks of one host contiguous, as few host crossings as
// possible (algorithms/ring_order.h), the same order on every rank and every channel. Where
// ranks sit on GPUs the topology knows, the order inside a host is the topology's search
// (topo/ring_search.h): the ranks of one GPU together, the slowest GPU-to-GPU hop as fast as
// the links allow. CPU ranks keep rank order inside a host.
#pragma once

#include <vector>

#include "src/topo/system.h"
#include "transports/peers.h"

namespace loom {

// The node (host) index of every rank, numbered in order of first appearance.
std::vector<int> nodesOf(const std::vector<RankInfo>& infos);

// The ring order for the ranks of `infos`, placed in `system` (the same on every rank).
std::vector<int> ringOrderFor(const std::vector<RankInfo>& infos, const topo::System& system);

// ringOrderFor, logged at LOOM_DEBUG=INFO as "ring 0: 0 2 4 1 3 5". Returns `rank`'s position
// in it.
int buildRing(const std::vector<RankInfo>& infos, const topo::System& system, int rank,
              std::vector<int>& order);

}  // namespace loom
