// Why a separate path: at 8 B the general one (plan the tasks on the heap, order them by
// connection, pump them in a loop) spent several times longer on bookkeeping than the data
// takes to cross between cores. Here the exchange is three straight phases on the stack:
// send this rank's slice to every peer, receive every peer's, fold them in rank order.
#include "src/exec/cpu/exchange_now.h"

#include "src/base/error.h"
#include "src/comm/comm.h"
#include "src/exec/cpu/backoff.h"
#include "src/exec/cpu/bind_plan.h"
#include "src/exec/cpu/executor.h"
#include "src/exec/cpu/progress_engine.h"
#include "src/exec/cpu/task_loop.h"
#include "src/kernels/datatype_traits.h"
#include "src/kernels/reduce_copy_dispatch.h"
#include "src/kernels/step_operands.h"
#include "src/plan/planner.h"
#include "src/plan/planner_state.h"

namespace loom {
namespace {

thread_local uint64_t tlsFastCalls = 0;

using Lane = ExchangeNowPlan::Lane;

class ExchangeNow {
 public:
  ExchangeNow(const CollOp& op, const ExchangeNowPlan& plan, const TaskLabel* labels)
      : op_(op),
        comm_(op.comm.get()),
        lanes_(plan.lanes),
        labels_(labels),
        nlanes_(plan.nlanes),
        elem_(dataTypeSize(op.type)),
        signature_(plan.signature),
        timeout_(callTimeout(std::span(&comm_, 1))) {
    backoff_.yieldAtOnce(plannerState(*comm_).oversubscribed());
  }

  void run() {
    for (int l = 0; l < nlanes_; ++l) send(lanes_[l], labels_[l]);
    for (int l = 0; l < nlanes_; ++l) fold(lanes_[l], labels_[l]);
    for (int l = 0; l < nlanes_; ++l) {
      for (int k = 0; k < lanes_[l].out.nsend; ++k) {
        transport::SendConnection* s = lanes_[l].out.send[k];
        waitUntil([&] { return s->progress(), s->drained(); },
                  [&](transport::WaitSet& set) { return s->armWait(set, /*drain=*/true); },
                  [&] {
                    return strCat(labels_[l].str(), ": draining toward rank ",
                                  lanes_[l].out.sendPeer[k]);
                  });
      }
    }
  }

 private:
  // The input slice, pre-op applied as the planner's send task does, into every peer's slot.
  void send(const Lane& lane, const TaskLabel& label) {
    void* slots[kMaxTaskPeers];
    for (int k = 0; k < lane.out.nsend; ++k) {
      transport::SendConnection* s = lane.out.send[k];
      waitUntil(
          [&] { return (slots[k] = s->tryAcquire()) != nullptr; },
          [&](transport::WaitSet& set) { return s->armWait(set, /*drain=*/false); },
          [&] { return strCat(label.str(), ": a free slot toward rank ", lane.out.sendPeer[k]); });
    }
    StepBuffers buffers;
    buffers.input = static_cast<const char*>(op_.sendbuff) + lane.slice.offset * elem_;
    buffers.slots = slots;
    buffers.nslots = lane.out.nsend;
    reduceCopyStep(algo::Prim::kSend, /*final=*/false, buffers, lane.slice.count);
    const size_t bytes = lane.slice.count * elem_;
    for (int k = 0; k < lane.out.nsend; ++k) lane.out.send[k]->post(bytes, signature_);
  }

  // Every rank's slice in rank order (this rank's input at its own place), post-op applied.
  void fold(const Lane& lane, const TaskLabel& label) {
    const void* received[kMaxTaskPeers];
    const size_t bytes = lane.slice.count * elem_;
    for (int k = 0; k < lane.in.nrecv; ++k) {
      transport::RecvConnection* r = lane.in.recv[k];
      size_t got = 0;
      uint32_t tag = 0;
      waitUntil([&] { return (received[k] = r->tryReceive(&got, &tag)) != nullptr; },
                [&](transport::WaitSet& set) { return r->armWait(set); },
                [&] { return strCat(label.str(), ": data from rank ", lane.in.recvPeer[k]); });
      checkReceived(label, op_, lane.in.recvPeer[k], tag, signature_, got, bytes);
    }
    StepBuffers buffers;
    buffers.input = static_cast<const char*>(op_.sendbuff) + lane.slice.offset * elem_;
    buffers.inputPosition = comm_->rank();
    buffers.received = received;
    buffers.nrecv = lane.in.nrecv;
    buffers.output = static_cast<char*>(op_.recvbuff) + lane.slice.offset * elem_;
    reduceCopyStep(algo::Prim::kRecvReduceCopy, /*final=*/true, buffers, lane.slice.count);
    for (int k = 0; k < lane.in.nrecv; ++k) lane.in.recv[k]->release();
  }

  // The step's reduceCopy, as the planner's tasks do it (step_operands.h).
  void reduceCopyStep(algo::Prim prim, bool final, const StepBuffers& buffers, size_t count) {
    ReduceCopyArgs args;
    stepOperands(prim, final, buffers, args);
    args.count = count;
    args.scalar = op_.scalar;
    reduceCopy(op_.type, op_.reduce, args);
  }

  // Polls `ready`, pumping every connection of the call (TCP moves data only then), and
  // waits with the executor's Backoff while nothing moves; `what` names the wait in a timeout.
  template <typename Ready, typename Arm, typename What>
  void waitUntil(Ready&& ready, Arm&& arm, What&& what) {
    backoff_.reset();
    while (!ready()) {
      bool moved = false;
      for (int l = 0; l < nlanes_; ++l) {
        for (int k = 0; k < lanes_[l].out.nsend; ++k) moved |= lanes_[l].out.send[k]->progress();
        for (int k = 0; k < lanes_[l].in.nrecv; ++k) moved |= lanes_[l].in.recv[k]->progress();
      }
      if (moved) {
        backoff_.reset();
        continue;
      }
      throwIfAborted(comm_->abortFlag(), "a collective");
      if (timeout_.count() > 0 && backoff_.waited() > timeout_)
        throwStalled(timeout_, "\n  " + what());
      if (backoff_.peerCheckDue()) {
        for (int l = 0; l < nlanes_; ++l) {
          for (int k = 0; k < lanes_[l].out.nsend; ++k) lanes_[l].out.send[k]->checkPeer();
          for (int k = 0; k < lanes_[l].in.nrecv; ++k) lanes_[l].in.recv[k]->checkPeer();
        }
      }
      backoff_.idle(arm);
    }
  }

  const CollOp& op_;
  Comm* comm_;
  const Lane* lanes_;
  const TaskLabel* labels_;
  int nlanes_;
  size_t elem_;
  uint32_t signature_;
  std::chrono::milliseconds timeout_;
  Backoff backoff_;
};

// Works out `plan` for `op`; false (plan left invalid) when the fast path does not apply.
bool makePlan(const CollOp& op, ExchangeNowPlan& plan) {
  plan.valid = false;
  plan.nlanes = 0;
  for (int ch = 0; ch < exchangeChannelCount(op); ++ch) {
    const algo::Range slice = exchangeSlice(op, ch);
    if (slice.count == 0) continue;  // no data on this channel: both paths skip it
    if (plan.nlanes == kMaxExchangeNowLanes) return false;
    Lane& lane = plan.lanes[plan.nlanes++];
    lane.out = TaskLinks{};
    lane.in = TaskLinks{};
    size_t chunk = 0;
    if (!exchangeTaskLinks(op, ch, lane.out, lane.in, chunk))
      return false;                         // the general path connects
    if (slice.count > chunk) return false;  // several steps: the general path pipelines them
    lane.slice = slice;
    lane.channel = ch;
  }
  plan.count = op.count;
  plan.type = op.type;
  plan.reduce = op.reduce;
  plan.protocol = op.protocol;
  plan.signature = collSignature(op);
  plan.valid = true;
  return true;
}

}  // namespace

bool runExchangeNow(CollOp& op) {
  Comm& c = *op.comm;
  if (op.algorithm != Algorithm::kExchange || op.count == 0 || c.nranks() == 1) return false;
  // Only alone: beside other runs the general path keeps the order on shared connections.
  CpuExecutor& executor = cpuExecutorOf(c);
  ProgressEngine& engine = executor.engine();
  if (!engine.tryExclusive()) return false;
  struct EndExclusive {
    ProgressEngine& engine;
    ~EndExclusive() { engine.endExclusive(); }
  } endExclusive{engine};
  ExchangeNowPlan& plan = executor.exchangeNowPlan();
  if (!plan.matches(op)) {
    std::unique_lock<std::mutex> connections = c.lockConnections();
    if (!makePlan(op, plan)) return false;
  }
  const uint64_t number = op.seq;
  ++tlsFastCalls;
  TaskLabel labels[kMaxExchangeNowLanes];
  for (int l = 0; l < plan.nlanes; ++l)
    labels[l] = exchangeLabel(op, number, plan.lanes[l].channel, "fold");
  try {
    ExchangeNow(op, plan, labels).run();
  } catch (const Error& e) {
    c.setLastError(e.what());
    c.markFailed(e.code());
    throw;
  }
  return true;
}

namespace testing {
uint64_t exchangeNowCallsOnThisThread() { return tlsFastCalls; }
}  // namespace testing

}  // namespace loom
