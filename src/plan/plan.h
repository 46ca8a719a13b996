// A plan: what one rank does for one call, as plain data.
//
// Planning a call (planner.h) yields one TaskPlan per channel and phase (or per peer, for
// point-to-point and AlltoAll). Each says which step program to walk (algorithms/walker.h),
// which connections it uses (a ConnectionKey and the peers on each side), which other task
// of the plan gates it, and where the rank's own input goes among the received data. A plan
// holds no connection pointers, no virtual calls and no owned heap objects beside its list of
// tasks, so an executor can cache it, copy it to device memory, and bind it to the
// connections it runs on (the CPU executor makes a PrimTask of each).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/walker.h"
#include "src/comm/connection_key.h"

namespace loom {

// The peers a task exchanges with: a ring or chain step has at most one of each, a tree node
// receives from (up) or sends to (down) up to two children, an exchange AllReduce sends to and
// receives from every other rank (up to kMaxExchangeRanks - 1).
inline constexpr int kMaxExchangeRanks = 8;
inline constexpr int kMaxTaskPeers = kMaxExchangeRanks - 1;

// Names a task in timeout messages ("AllReduce #12 (tree 1) channel 0 up", "AlltoAll #3 to
// rank 2"). Plain fields, formatted only when a message needs it: planning a call builds no
// strings.
struct TaskLabel {
  const char* what = "";  // the collective's name, or a whole label ("copy to self")
  uint64_t number = 0;    // the operation's number on its communicator; 0: none
  const char* algo = nullptr;
  int tree = -1;
  int channel = -1;
  const char* part = nullptr;  // "up", "local reduce-scatter", ...
  int toRank = -1;
  int fromRank = -1;
  std::string str() const;
};

// Which buffer a task reads as its input, and whether it reduces. Later phases of hierarchical
// and doubling AllReduce read the partial results in the output buffer: they already carry the
// pre-op (PreMulSum's multiply), which must not apply twice.
struct TaskInput {
  bool fromOutput = false;
  bool copiesOnly = false;  // moves finished values only (hierarchical's all-gather phase)
};

// The connections of a task: every link has the same key, to a different peer.
struct PlanLinks {
  ConnectionKey key;
  int nsend = 0;
  int nrecv = 0;
  int sendPeer[kMaxTaskPeers] = {-1, -1, -1, -1, -1, -1, -1};
  int recvPeer[kMaxTaskPeers] = {-1, -1, -1, -1, -1, -1, -1};
  void addSend(int peer) { sendPeer[nsend++] = peer; }
  void addRecv(int peer) { recvPeer[nrecv++] = peer; }
};

struct TaskPlan {
  algo::StepProgram program;
  PlanLinks links;
  TaskLabel label;
  // Step i runs only after task `gate` of the same plan finished i + 1 steps; -1: no gate.
  int gate = -1;
  TaskInput input;
  // Where the local input goes among the received sources (-1: after them), so ranks that
  // reduce the same inputs do it in the same order and get the same bits.
  int inputPosition = -1;
  // Never posts the input by address (something of this rank overwrites it meanwhile).
  bool copyInput = false;
  // A step this task sends to several peers, from a buffer none of them can read in place,
  // is copied once into memory that every peer maps and posted from there to each: one copy
  // for all peers, where filling each peer's slot takes one per peer. An executor without such
  // memory fills the slots.
  bool stagesSends = false;
};

struct Plan {
  std::vector<TaskPlan> tasks;
};

}  // namespace loom
