// Turns operations into PrimTasks for one rank: which algorithm (ring, chain, double binary
// tree, pairwise), which connections (peer, channel, direction), and the step walk of each task.
//
// Protocol: LL (data and flag in one 8-byte word: one cache line to poll instead of a counter
// and the data) or Simple, as the tuner (src/tune/cost_model.h) predicts cheaper for the
// call's size on this communicator's nodes; LOOM_PROTO forces one, LOOM_LL_THRESHOLD
// restores a fixed size threshold.
// Algorithm: AllReduce takes the tuner's cheapest of ring, double binary tree (over nodes,
// chains inside) and hierarchical (several hosts); LOOM_ALGO forces one, LOOM_TREE_THRESHOLD
// restores a fixed tree/ring threshold. AllGather and ReduceScatter use the ring; Broadcast
// and Reduce a pipelined chain along the ring; AlltoAll and Send/Recv direct connections.
// Rings follow the topology order (src/tune/comm_topology.h: nodes contiguous).
#pragma once

#include <memory>
#include <vector>

#include "algorithms/slicing.h"
#include "src/core/coll.h"
#include "src/core/comm.h"
#include "src/core/prim_task.h"

namespace loom {

const char* algorithmName(Algorithm a);
// Sets op.algorithm and op.protocol (one lookup in the communicator's PlannerState): the
// algorithm from the size and LOOM_ALGO; Simple, or LL for small messages (LOOM_PROTO
// overrides; by default LL up to LOOM_LL_THRESHOLD bytes per rank - LL only changes anything
// over shared memory).
void choosePlan(CollOp& op);

// Connection channel ids: rings use 0..15, trees 32 + 16 * tree + channel, Send/Recv 64, and
// the collectives that talk to peers directly (AlltoAll, the exchange and doubling AllReduce)
// 65: Send/Recv on one stream and a collective on another may run at once, in any order
// relative to each other, so they must not share connections (whose slots match in order).
// The LL protocol uses the same ids plus kLLChannelOffset (its own connections: the memory
// layout differs).
inline constexpr int kTreeChannelBase = 32;
inline constexpr int kP2pChannel = 64;
inline constexpr int kCollP2pChannel = 65;
// Hierarchical AllReduce: inter-node rings on 80 + channel, intra-node rings on 96 + channel.
inline constexpr int kHierInterChannelBase = 80;
inline constexpr int kHierIntraChannelBase = 96;
inline constexpr int kLLChannelOffset = 128;

// Rings and chains (and hierarchical AllReduce's rings): two connections per rank and channel,
// given LOOM_BUFFSIZE; trees, point-to-point and AlltoAll (up to one per peer) LOOM_P2P_BUFFSIZE.
inline constexpr bool isRingChannel(int channel) {
  const int base = channel % kLLChannelOffset;
  return base < kTreeChannelBase || base >= kHierInterChannelBase;
}

// The connections `op` needs on this rank (the peers' requests match them).
void wantedConnections(const CollOp& op, std::vector<Comm::ConnectionKey>& out);

// Appends the tasks of `op` (connections must exist). `number` labels them in messages.
void planOp(const CollOp& op, uint64_t number, std::vector<std::unique_ptr<PrimTask>>& tasks);

// The exchange AllReduce, per channel: two tasks, a send of this rank's slice of the input
// to every other rank and a fold of all ranks' slices. Two ranks spread the data over the
// ring's channels and connections, more ranks use one set of point-to-point connections. The
// planner makes these tasks; the executor's fast path for one small call (exchange_now.cc)
// does the same steps without them. Both take the pieces from here, so they agree on the wire.
int exchangeChannelCount(const CollOp& op);
algo::Range exchangeSlice(const CollOp& op, int channel);
// This rank's links on `channel` to every other rank, in rank order (the fold's source order),
// and the elements one step carries; false when a connection is not made yet.
bool exchangeLinks(const CollOp& op, int channel, TaskLinks& out, TaskLinks& in, size_t& chunk);
TaskLabel exchangeLabel(const CollOp& op, uint64_t number, int channel, const char* part);
// Wires a channel's two tasks once made: ranks fold in rank order (the same bits everywhere);
// in place, the fold overwrites the input the send reads, so the send copies it out (never
// posts it by address) and the fold's step i waits for the send's step i.
void linkExchangeTasks(const CollOp& op, PrimTask& send, PrimTask& fold);

}  // namespace loom
