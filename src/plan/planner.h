// Turns operations into plans (plan.h) for one rank: which algorithm (ring, chain, double binary
// tree, pairwise), which connections (peer, key, direction), and the step program of each task.
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
#include "src/comm/comm.h"
#include "src/plan/coll.h"
#include "src/plan/plan.h"

namespace loom {

const char* algorithmName(Algorithm a);
// Sets op.algorithm and op.protocol (one lookup in the communicator's PlannerState): the
// algorithm from the size and LOOM_ALGO; Simple, or LL for small messages (LOOM_PROTO
// overrides; by default LL up to LOOM_LL_THRESHOLD bytes per rank - LL only changes anything
// over shared memory).
void choosePlan(CollOp& op);

// The connections `op` needs on this rank (the peers' requests match them).
void wantedConnections(const CollOp& op, std::vector<LinkRequest>& out);

// The plan of `op` on this rank (plan.h), replacing what `plan` held. Connections must exist:
// the pieces a step carries follow their slot sizes. `number` labels the tasks in messages.
void buildPlan(const CollOp& op, uint64_t number, Plan& plan);
// The exchange AllReduce, per channel: two tasks, a send of this rank's slice of the input
// to every other rank and a fold of all ranks' slices. Two ranks spread the data over the
// ring's channels and connections, more ranks use one set of point-to-point connections. The
// planner makes these tasks; the executor's fast path for one small call (exchange_now.cc)
// does the same steps without them. Both take the pieces from here, so they agree on the wire.
int exchangeChannelCount(const CollOp& op);
algo::Range exchangeSlice(const CollOp& op, int channel);
// This rank's links on `channel` to every other rank, in rank order (the fold's source order),
// and the elements one step carries; false when a connection is not made yet.
bool exchangeLinks(const CollOp& op, int channel, PlanLinks& out, PlanLinks& in, size_t& chunk);
TaskLabel exchangeLabel(const CollOp& op, uint64_t number, int channel, const char* part);
// Wires a channel's two tasks once made: ranks fold in rank order (the same bits everywhere);
// in place, the fold overwrites the input the send reads, so the send copies it out (never
// posts it by address) and the fold's step i waits for the send's step i.
void linkExchangeTasks(const CollOp& op, TaskPlan& send, TaskPlan& fold, int sendIndex);
// The connections of the exchange's channel `channel`.
ConnectionKey exchangeKey(const CollOp& op, int channel);

}  // namespace loom
