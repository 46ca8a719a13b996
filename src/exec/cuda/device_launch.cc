#include "src/exec/cuda/device_launch.h"

#include <algorithm>
#include <map>

#include "src/base/error.h"
#include "src/base/interrupt.h"
#include "src/comm/comm.h"
#include "src/exec/cpu/executor.h"
#include "src/exec/cpu/prim_task.h"
#include "src/exec/cpu/task_loop.h"
#include "src/kernels/datatype_traits.h"
#include "src/plan/planner.h"
#include "transports/transport.h"

namespace loom {
namespace {

// The ring behind a connection as the device program reads it: a memory transport's Simple or
// LL ring. False for a connection without a view (a wire transport a CPU rank uses; a GPU
// rank's is behind a proxy ring, transports/proxy/proxy_connection.h).
template <typename Connection>
bool deviceLink(const Connection* c, int peer, DeviceLink* link) {
  if (c == nullptr) return false;
  const transport::ConnectionView* v = c->view();
  if (v == nullptr) return false;
  link->protocol = v->protocol;
  link->peer = peer;
  if (v->protocol == transport::Protocol::kLL) {
    link->ll = v->ll;
    return v->ll.slots != nullptr && v->ll.step != nullptr &&
           v->ll.dataWords * 4 <= kDeviceLLStageBytes;
  }
  link->ring = v->simple;
  return v->simple.slots != nullptr;
}

bool isSelf(const CollOp& op) {
  return (op.kind == CollKind::kSend || op.kind == CollKind::kRecv) && op.peer == op.comm->rank();
}

bool isReduction(CollKind k) {
  return k == CollKind::kAllReduce || k == CollKind::kReduce || k == CollKind::kReduceScatter;
}

// A rank's input or output buffer: a block per rank for AllGather's output, ReduceScatter's
// input and both of AllToAll's.
transport::StepMemory callBuffer(const CollOp& op, bool output) {
  const bool perRank =
      op.kind == CollKind::kAlltoAll ||
      (output ? op.kind == CollKind::kAllGather : op.kind == CollKind::kReduceScatter);
  const size_t blocks = perRank ? static_cast<size_t>(op.comm->nranks()) : 1;
  transport::StepMemory m;
  m.data = output ? op.recvbuff : op.sendbuff;
  m.bytes = m.data == nullptr ? 0 : op.count * dataTypeSize(op.type) * blocks;
  return m;
}

// Appends the tasks of one op's plan; false when a connection has no Simple view.
bool addPlan(const CollOp& op, int callIndex, const Plan& plan, HostLaunch& out,
             std::map<const void*, int>& lastUser, std::string* why) {
  Comm& comm = *op.comm;
  const int first = static_cast<int>(out.tasks.size());
  for (const TaskPlan& tp : plan.tasks) {
    DeviceTask t;
    t.program = tp.program;
    t.call = callIndex;
    t.gate = tp.gate >= 0 ? first + tp.gate : -1;
    t.inputFromOutput = tp.input.fromOutput;
    t.copiesOnly = tp.input.copiesOnly;
    t.inputPosition = tp.inputPosition;
    const int index = static_cast<int>(out.tasks.size());
    auto orderAfter = [&](const void* connection) {
      auto [it, fresh] = lastUser.emplace(connection, index);
      if (fresh) return;
      const int previous = it->second;
      it->second = index;
      if (std::find(t.before, t.before + t.nbefore, previous) == t.before + t.nbefore)
        t.before[t.nbefore++] = previous;
    };
    for (int k = 0; k < tp.links.nsend; ++k) {
      transport::SendConnection* c = comm.sendConnection(tp.links.sendPeer[k], tp.links.key);
      DeviceLink& link = t.send[t.nsend++];
      if (!deviceLink(c, tp.links.sendPeer[k], &link)) {
        *why = strCat("its connection to rank ", tp.links.sendPeer[k], " has no ring in memory");
        return false;
      }
      const transport::StepMemory output = callBuffer(op, true);
      link.inputByAddress = c->readsByAddress(t.inputFromOutput ? output : callBuffer(op, false));
      link.outputByAddress = c->readsByAddress(output);
      orderAfter(c);
      out.sends.push_back(c);
      if (c->needsHostProgress()) out.hostDriven.push_back({&comm, c, nullptr});
    }
    for (int k = 0; k < tp.links.nrecv; ++k) {
      transport::RecvConnection* c = comm.recvConnection(tp.links.recvPeer[k], tp.links.key);
      if (!deviceLink(c, tp.links.recvPeer[k], &t.recv[t.nrecv++])) {
        *why = strCat("its connection from rank ", tp.links.recvPeer[k], " has no ring in memory");
        return false;
      }
      orderAfter(c);
      out.recvs.push_back(c);
      if (c->needsHostProgress()) out.hostDriven.push_back({&comm, nullptr, c});
    }
    out.tasks.push_back(t);
    out.labels.push_back(tp.label);
  }
  return true;
}

}  // namespace

void connectLaunch(const std::vector<CollOp>& ops) {
  std::map<Comm*, std::vector<LinkRequest>> wanted;
  for (const CollOp& op : ops) wantedConnections(op, wanted[op.comm.get()]);
  connectComms(wanted);
}

bool buildLaunch(std::vector<CollOp>& ops, HostLaunch& out, std::string* why) {
  // In-place send/receive pairs: refused unless they start at the same address; the receive's
  // task is then gated on the send's below (the send's steps are copied into slots, never
  // posted by address).
  std::vector<RecvInterval> received;
  std::vector<SendRecvOverlap> overlaps;
  pairOverwrittenInputs(ops, received, overlaps);
  connectLaunch(ops);
  out = HostLaunch{};
  std::vector<Comm*> comms;
  for (const CollOp& op : ops)
    if (std::find(comms.begin(), comms.end(), op.comm.get()) == comms.end())
      comms.push_back(op.comm.get());
  out.timeoutNs = static_cast<uint64_t>(callTimeout(comms).count()) * 1000000u;
  std::map<const void*, int> lastUser;  // connection -> the last task that uses it
  Plan plan;
  std::vector<int> firstTask(ops.size(), -1);
  for (const CollOp& op : ops) {
    if (isSelf(op)) continue;  // a local copy, below
    firstTask[static_cast<size_t>(&op - ops.data())] = static_cast<int>(out.tasks.size());
    std::unique_lock<std::mutex> lock = op.comm->lockConnections();
    buildPlan(op, op.seq, plan);
    DeviceCall call;
    call.sendbuff = op.sendbuff;
    call.recvbuff = op.recvbuff;
    call.scalar = op.scalar;
    call.signature = collSignature(op);
    call.elemSize = static_cast<uint32_t>(dataTypeSize(op.type));
    call.isReduction = isReduction(op.kind);
    call.reduce = op.reduce;
    out.calls.push_back(call);
    out.ops.push_back(&op);
    if (!addPlan(op, static_cast<int>(out.calls.size()) - 1, plan, out, lastUser, why))
      return false;
  }
  for (const SendRecvOverlap& o : overlaps) {
    const int send = firstTask[o.send], recv = firstTask[o.recv];
    if (send < 0 || recv < 0) continue;  // to oneself: the copy reads before it writes
    out.tasks[static_cast<size_t>(recv)].gate = send;
  }
  // A gate's steps count as done once posted; a step posted by address is read later, so a
  // task that gates another (which may overwrite what it sends) copies every step instead.
  for (const DeviceTask& t : out.tasks) {
    if (t.gate < 0) continue;
    DeviceTask& gate = out.tasks[static_cast<size_t>(t.gate)];
    for (int k = 0; k < gate.nsend; ++k)
      gate.send[k].inputByAddress = gate.send[k].outputByAddress = false;
  }
  // Sends to oneself: a copy task each, without connections (as the CPU executor's).
  planSelfCopies(ops, out.selfCopies);
  for (const CollOp& copy : out.selfCopies) {
    DeviceCall call;
    call.sendbuff = copy.sendbuff;
    call.recvbuff = copy.recvbuff;
    call.elemSize = static_cast<uint32_t>(dataTypeSize(copy.type));
    out.calls.push_back(call);
    out.ops.push_back(&copy);
    DeviceTask t;
    t.program = algo::pipeProgram(algo::Prim::kCopy, 0, 0, copy.count, size_t{1} << 18, false);
    t.call = static_cast<int>(out.calls.size()) - 1;
    out.tasks.push_back(t);
    out.labels.push_back(TaskLabel{"copy to self"});
  }
  // LL staging: a buffer per receive link and one for what the task sends.
  auto usesLL = [](const DeviceTask& t) {
    return (t.nsend > 0 && t.send[0].protocol == transport::Protocol::kLL) ||
           (t.nrecv > 0 && t.recv[0].protocol == transport::Protocol::kLL);
  };
  size_t stageBytes = 0;
  for (const DeviceTask& t : out.tasks)
    if (usesLL(t)) stageBytes += (t.nrecv + 1) * kDeviceLLStageBytes;
  out.llStage.assign(stageBytes, 0);
  stageBytes = 0;
  for (DeviceTask& t : out.tasks) {
    if (!usesLL(t)) continue;
    t.llStage = out.llStage.data() + stageBytes;
    stageBytes += (t.nrecv + 1) * kDeviceLLStageBytes;
  }
  out.stepsDone.assign(out.tasks.size(), 0);
  out.done.assign(out.tasks.size(), 0);
  return true;
}

void finishLaunch(HostLaunch& launch) {
  for (transport::SendConnection* c : launch.sends) c->resync();
  for (transport::RecvConnection* c : launch.recvs) c->resync();
  const DeviceError& e = launch.error;
  const auto fault = static_cast<DeviceFault>(e.fault);
  if (fault == DeviceFault::kNone) return;
  const TaskLabel& label = launch.labels.at(static_cast<size_t>(e.task));
  const CollOp& op = *launch.ops.at(static_cast<size_t>(launch.tasks[e.task].call));
  switch (fault) {
    case DeviceFault::kTag:
    case DeviceFault::kSize:
      checkReceived(label, op, e.peer, e.gotTag, collSignature(op), e.gotBytes, e.expectedBytes);
      break;
    case DeviceFault::kCorrupt:
      throw RemoteError(strCat(label.str(), ": rank ", e.peer, " posted a step of ", e.gotBytes,
                               " bytes that is not in its slot, or larger than a slot (corrupt "
                               "ring)"));
    case DeviceFault::kAborted:
      throwIfAborted(op.comm->abortFlag(), describeCall(op).c_str());
      throw InvalidUsage(strCat(label.str(), ": the communicator was aborted"));
    case DeviceFault::kTimeout: {
      std::string waiting = strCat("\n  ", label.str(), ": ");
      waiting += e.peer < 0         ? std::string("its own earlier phase")
                 : e.waitingForData ? strCat("data from rank ", e.peer)
                                    : strCat("a free slot toward rank ", e.peer);
      throwStalled(std::chrono::milliseconds(launch.timeoutNs / 1000000u), waiting);
    }
    case DeviceFault::kNone:
      break;
  }
  throw InternalError(strCat(label.str(), ": the device program failed (fault ", e.fault, ")"));
}

}  // namespace loom
