// The alpha-beta cost model of AllReduce: predicted time of every algorithm x protocol x
// channel count on a ClusterModel, and the cheapest choice.
//
// How it works (NCCL's tuner shape): time = overhead + latency x hops + bytes / bandwidth,
// where hops and bytes per rank depend on the algorithm, and latency and bandwidth on the
// protocol, the channel count and which links the algorithm crosses. With S bytes, n = N x L
// ranks (N nodes of L), c channels:
//   ring   hops 2(n-1), of which a fraction N/n cross the network (the ring crosses each node
//          boundary once); bytes 2(n-1)/n x S at the rate of its slowest link: the network
//          hop's c channels share the node's NICs.
//   tree   hops 2 x depth, depth = log2(N) over nodes + (L-1) along the chain (log2(n) on one
//          node); bytes ~S per rank at half the link rate (each interior rank sends its
//          children what it got from its parent, twice the ring's per-byte work).
//   hier   reduce-scatter inside the node (L-1 hops, (L-1)/L x S), AllReduce of S/L across
//          nodes (2(N-1) hops, L rings sharing the NICs), all-gather inside (as the first);
//          the phases run one after the other.
// The bandwidth of one flow with c channels is min(c x channelGBs, totalGBs / flows sharing
// the link). Each channel adds a fixed overhead (its own tasks and connections), so small
// calls stay on few channels. The model is coarse on purpose: it only has to order the candidates
// right.
#pragma once

#include <string>
#include <vector>

#include "src/tune/cluster_model.h"

namespace loom::tune {

enum class Algo { kRing, kTree, kHier };
enum class Proto { kSimple, kLL };

const char* algoName(Algo a);
const char* protoName(Proto p);

struct Choice {
  Algo algo = Algo::kRing;
  Proto proto = Proto::kSimple;
  int channels = 1;
  double timeUs = 0;
  // AllReduce bus bandwidth, NCCL's convention: 2(n-1)/n x S / time (GB/s).
  double busGBs() const;
  double bytes = 0;
  int nranks = 1;
};

// Predicted time of one AllReduce of `bytes` bytes per rank; infinity where the algorithm does
// not apply (hier on one node or uneven nodes).
double predictUs(const ClusterModel& m, Algo a, Proto p, int channels, double bytes);

// Whether `a` can run on the cluster (ring always; tree with more than 2 ranks; hier with
// several uniform nodes of more than one rank).
bool applies(const ClusterModel& m, Algo a);

// The cheapest applicable choice; `allowed` restricts algorithms / protocols (empty: all).
Choice best(const ClusterModel& m, double bytes, const std::vector<Algo>& algos = {},
            const std::vector<Proto>& protos = {});

}  // namespace loom::tune
