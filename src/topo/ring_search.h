// The ring a topology suggests: which rank follows which, so that the ring's slowest hop is as
// fast as the links allow (NVLink over PCIe P2P over the CPU's interconnect), and the ranks of
// one GPU, or of one NUMA node, sit next to each other.
//
// How it works. Nodes are visited in order of their lowest rank (one crossing into each, the
// minimum). Inside a node, ranks are grouped by place: their GPU for GPU ranks, their NUMA node
// for CPU ranks; a group keeps rank order (its ranks talk through the same GPU or memory, the
// fastest hop there is). The groups are then ordered by search: every order (the group of the
// lowest rank fixed first) for up to 9 groups, nearest-neighbour beyond. An order is better
// when its slowest hop is faster; then when it has fewer hops at that speed; then when its hops
// add up to more bandwidth; ties keep the first order found (lexicographic), so every rank
// computes the same ring from the same System. On the V100 hybrid cube-mesh this finds the
// ring of double NVLinks (50 GB/s every hop) where rank order would cross a socket.
#pragma once

#include <vector>

#include "src/topo/system.h"

namespace loom::topo {

// All ranks of the system, in ring order.
std::vector<int> searchRing(const System& system);

// The ranks of one node (given in any order) in ring order.
std::vector<int> searchNodeRing(const System& system, const std::vector<int>& ranks);

// The slowest hop of a ring over `order` (wrapping), counting only hops inside a node; the
// fastest class with no bandwidth (same process) when the ring has fewer than 2 ranks per node.
Link slowestIntraNodeHop(const System& system, const std::vector<int>& order);

}  // namespace loom::topo
