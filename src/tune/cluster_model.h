// What the tuner knows about a cluster: how many nodes, how many ranks each, and what the two
// kinds of link (inside a node, between nodes) cost. A plain struct, so the same model is
// filled from a running communicator (comm_topology.h), from hwloc discovery (loom-topo
// --tune), or by hand for a cluster that does not exist yet (loom-tune-table).
//
// Units: microseconds and GB/s (1e9 bytes per second).
#pragma once

namespace loom::tune {

// One protocol over one kind of link.
struct ProtoCost {
  double latencyUs = 0;   // per hop: a slot posted by one rank is seen and consumed by the next
  double channelGBs = 0;  // the rate one rank reaches over this link with one channel
};

struct LinkParams {
  ProtoCost simple;
  ProtoCost ll;         // over the network LL is Simple's twin (it only changes shared memory)
  double totalGBs = 0;  // what the link allows per node, all ranks and channels together
  // The share of totalGBs that carries LL's payload: over shared memory half of every word
  // is flag, so LL moves twice the bytes through the memory system.
  double llShare = 1.0;
};

struct ClusterModel {
  int nodes = 1;
  int ranksPerNode = 1;
  bool uniform = true;  // every node has ranksPerNode ranks (hierarchical AllReduce needs it)
  LinkParams intra;
  LinkParams inter;
  int channelsMin = 1;  // the channel counts the tuner may pick from
  int channelsMax = 1;
  double opOverheadUs = 0;       // fixed cost of any call (planning, task setup)
  double channelOverheadUs = 0;  // per channel: its own tasks and connections to drive
  int nranks() const { return nodes * ranksPerNode; }
};

// The constants measured on the reference machine (docs: src/tune/README.md): shared memory
// between ranks of one host, and TCP at `netGBs` per node between hosts.
ClusterModel defaultModel(int nodes, int ranksPerNode, double netGBs, int channels);

// The simulated "4xH100 + 4 NIC" server of the issue: NVLink ~300 GB/s inside a node, four
// 50 GB/s NICs between nodes, up to 16 channels. Nominal figures, not measured here.
ClusterModel gpuServerModel(int nodes);

}  // namespace loom::tune
