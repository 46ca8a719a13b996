#include "src/exec/cpu/bind_plan.h"

#include "src/comm/comm.h"
#include "src/plan/planner.h"

namespace loom {

TaskLinks bindLinks(const CollOp& op, const PlanLinks& links) {
  Comm& c = *op.comm;
  TaskLinks out;
  for (int k = 0; k < links.nsend; ++k)
    out.addSend(c.sendConnection(links.sendPeer[k], links.key), links.sendPeer[k]);
  for (int k = 0; k < links.nrecv; ++k)
    out.addRecv(c.recvConnection(links.recvPeer[k], links.key), links.recvPeer[k]);
  return out;
}

void bindPlan(const CollOp& op, const Plan& plan, std::vector<std::unique_ptr<PrimTask>>& tasks) {
  const size_t first = tasks.size();
  for (const TaskPlan& t : plan.tasks) {
    const TaskLinks links = bindLinks(op, t.links);
    const PrimTask* gate = t.gate >= 0 ? tasks[first + static_cast<size_t>(t.gate)].get() : nullptr;
    tasks.push_back(std::make_unique<PrimTask>(op, t.program, links, t.label, gate, t.input));
    if (t.inputPosition >= 0) tasks.back()->setInputPosition(t.inputPosition);
    if (t.copyInput) tasks.back()->setCopyInput();
    if (t.stagesSends) tasks.back()->setStagesSends();
  }
}

void planOp(const CollOp& op, uint64_t number, std::vector<std::unique_ptr<PrimTask>>& tasks) {
  thread_local Plan plan;  // reused: once warm, planning allocates only its PrimTasks
  buildPlan(op, number, plan);
  bindPlan(op, plan, tasks);
}

bool exchangeTaskLinks(const CollOp& op, int channel, TaskLinks& out, TaskLinks& in,
                       size_t& chunk) {
  PlanLinks send, recv;
  if (!exchangeLinks(op, channel, send, recv, chunk)) return false;
  out = bindLinks(op, send);
  in = bindLinks(op, recv);
  return true;
}

}  // namespace loom
