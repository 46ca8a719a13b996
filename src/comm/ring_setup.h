// The communicator's ring at init: ranks of one host contiguous, as few host crossings as
// possible (algorithms/ring_order.h), the same order on every rank and every channel.
#pragma once

#include <vector>

#include "transports/peers.h"

namespace loom {

// The node (host) index of every rank, numbered in order of first appearance.
std::vector<int> nodesOf(const std::vector<RankInfo>& infos);

// The ring order for `infos`, logged at LOOM_DEBUG=INFO as "ring 0: 0 2 4 1 3 5". Returns
// `rank`'s position in it.
int buildRing(const std::vector<RankInfo>& infos, int rank, std::vector<int>& order);

}  // namespace loom
