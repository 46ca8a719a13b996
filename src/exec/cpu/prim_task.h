// The CPU executor's unit of work: one rank's walk through the steps of one collective on one
// channel (or one point-to-point transfer), driven without blocking.
//
// How it works. The task walks a step program (algorithms/walker.h: a primitive and the element
// ranges it touches in the input and output buffers, step by step) with the one walker that
// every executor and the schedule simulator share. PrimTask runs a step once every
// connection the step needs is ready - a full slot from the peer it receives from, a free slot
// toward the peer it sends to - as ONE reduceCopy: sources are the received slot and/or the
// local input, destinations the local output and/or the send slot (docs/architecture.md,
// "Primitives: one fused pass"). Then it releases and posts the slots and moves on. progress()
// never waits; the executor interleaves all tasks of a group and owns waiting, deadlines and
// aborts.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "algorithms/primitives.h"
#include "algorithms/walker.h"
#include "src/kernels/reduce_copy_dispatch.h"
#include "src/mem/region_registry.h"
#include "src/plan/coll.h"
#include "src/plan/plan.h"
#include "transports/transport.h"

namespace loom {

// The connections a task steps on, bound from its PlanLinks.
struct TaskLinks {
  int nsend = 0;
  int nrecv = 0;
  transport::SendConnection* send[kMaxTaskPeers] = {};
  transport::RecvConnection* recv[kMaxTaskPeers] = {};
  int sendPeer[kMaxTaskPeers] = {-1, -1, -1, -1, -1, -1, -1};
  int recvPeer[kMaxTaskPeers] = {-1, -1, -1, -1, -1, -1, -1};
  void addSend(transport::SendConnection* c, int peer) {
    send[nsend] = c;
    sendPeer[nsend++] = peer;
  }
  void addRecv(transport::RecvConnection* c, int peer) {
    recv[nrecv] = c;
    recvPeer[nrecv++] = peer;
  }
};

// Throws RemoteError unless a slot received from `peer` carries this call's signature
// (collSignature) and the step's size.
void checkReceived(const TaskLabel& label, const CollOp& op, int peer, uint32_t tag,
                   uint32_t signature, size_t got, size_t expected);

// What the CPU executor decides for a call's host steps, beside its plan.
struct CpuCallFlags {
  // Steps between processes may be pulled with CMA (shm_way_policy.h).
  bool mayPull = false;
  // Steps write the output and the peers' slots with non-temporal stores: large calls
  // (LOOM_STREAM_STORE_THRESHOLD), whose data would only evict the caches.
  bool streamStores = false;
  // Steps write the slots a peer on another core reads with non-temporal stores, where
  // that measured faster (shm_way_policy.h: the streamed ring).
  bool streamSlots = false;
  // Copies out of and into shared-memory slots use crossCoreCopy (cross_core_copy.h), and
  // reductions that read or write them walk 8 pages at once too (ReduceCopyArgs::crossCorePages),
  // where the call's way walks (ShmWayPolicy::walks) and every rank of this host has a CPU of
  // its own, so a slot's other end is another core. Not with more ranks than CPUs, where a peer
  // often runs on this core and the lines are local.
  bool crossCoreCopies = false;
  // Where a task that stages its sends (TaskPlan::stagesSends) copies them: a registered region
  // of at least the call's input bytes, which peers map (staging.h); null: it fills slots.
  const MemRegion* staging = nullptr;
};

class PrimTask {
 public:
  // `label` names the task in timeout messages ("AllReduce #12 channel 0"). With `gate`, step
  // i runs only after the gate task finished i + 1 steps (a tree root sends a piece down only
  // once it has reduced it).
  PrimTask(const CollOp& op, const algo::StepProgram& program, const TaskLinks& links,
           const TaskLabel& label, const PrimTask* gate = nullptr, TaskInput input = {});

  // Runs every step that can run now; true if anything happened. The executor pumps the
  // connections (their progress()) separately.
  bool progress() {
    bool any = false;
    while (!done_ && tryStep()) any = true;
    return any;
  }
  // Walks the program again from its first step, for `op` (the shape the task was made for,
  // new buffers) numbered `number`: a cached plan's tasks run once per call (exchange_now.h).
  // `op` must outlive the walk.
  void restart(const CollOp& op, uint64_t number) {
    op_ = &op;
    label_.number = number;
    input_ = static_cast<const char*>(inputHasPreOp_ ? op.recvbuff : op.sendbuff);
    inputRegion_ = RegionLookup{};
    outputRegion_ = RegionLookup{};
    cursor_ = firstCursor_;
    current_ = firstStep_;
    done_ = empty_;
    offered_ = false;
    stepsDone_ = 0;
    wait_ = Wait::kNothing;
  }
  // Runs the steps' reductions with `kernel` (reduceCopyKernel for the task's datatype and op)
  // instead of reduceCopy, skipping its checks: for a cached plan whose caller checked the
  // call's buffers (exchange_now.cc). Null: reduceCopy.
  void setKernel(ReduceCopyKernel kernel) { kernel_ = kernel; }
  bool done() const { return done_; }
  size_t stepsDone() const { return stepsDone_; }
  // What the task waits for, for timeout messages: "data from rank 3", "a free slot to rank 1".
  std::string waitingFor() const;
  const TaskLinks& links() const { return links_; }
  // Gates this task on another after construction (see the constructor), e.g. a receive that
  // overwrites the buffer a send of its group still reads.
  void setGate(const PrimTask* gate) { gate_ = gate; }
  // Folds the local input at source position `index` among the received data (normally
  // after all of it): ranks that each reduce the same inputs do it in the same order (rank
  // order), so they get the same bits.
  void setInputPosition(int index) { inputPosition_ = index; }
  // Never posts the input by address (something of this rank overwrites it meanwhile).
  void setCopyInput() { directInput_ = false; }
  // Stages its sends (TaskPlan::stagesSends) where the call's flags give it a staging region.
  void setStagesSends() { stagesSends_ = true; }
  bool stagesSends() const { return stagesSends_; }
  // The CPU executor's choices for the task's call; read at every step, so a choice made as
  // the task registers (the shared-memory way policy's) still applies. Not set: neither.
  void setFlags(const CpuCallFlags* flags) { flags_ = flags; }
  // Throws RemoteError when the peer of the connection this task waits on is gone
  // (Connection::checkPeer; the executor asks during long waits).
  void checkPeer() const;
  // Before the executor sleeps: arms the connection this task waits on (wait.h). kArmed with
  // nothing added when it waits on its own gate (another task of this executor).
  transport::WaitArm armWait(transport::WaitSet& set) const;

 private:
  // What the last tryStep() that could not run waited for: no string is built while polling.
  enum class Wait : uint8_t { kNothing, kGate, kData, kSlot };
  bool tryStep();
  [[gnu::noinline]] bool runStep(const void* const* received);

  // The registered region of one of the task's buffers (src/mem/region_registry.h), looked
  // up when a step first lies outside the last one found: the steps walk one buffer, so the
  // region that holds a step holds the next. Only calls of a process that has regions look.
  class RegionLookup {
   public:
    const MemRegion* find(const void* data, size_t bytes);

   private:
    std::optional<MemRegion> found_;
  };

  const CollOp* op_;
  const CpuCallFlags* flags_;
  RegionLookup inputRegion_, outputRegion_;
  ReduceCopyArgs args_;  // the current step's, filled by stepOperands
  ReduceCopyKernel kernel_ = nullptr;
  algo::StepProgram program_;
  algo::StepCursor cursor_;
  TaskLinks links_;
  TaskLabel label_;
  const PrimTask* gate_;
  size_t elemSize_;
  const char* input_;  // the buffer the steps' input offsets point into
  bool inputHasPreOp_;
  bool isReduction_;
  uint32_t signature_;
  bool directInput_;  // steps that send the input as it is may post its address
  bool stagesSends_ = false;
  int inputPosition_ = -1;  // -1: after the received data
  algo::Step current_;      // the step to run next, unless done_
  algo::StepCursor firstCursor_;
  algo::Step firstStep_;
  bool empty_ = false;    // the program has no step
  bool offered_ = false;  // the current step's destination was offered to its connection
  bool done_ = false;
  size_t stepsDone_ = 0;
  Wait wait_ = Wait::kNothing;
  int waitIndex_ = 0;  // which recv or send link
};

}  // namespace loom
