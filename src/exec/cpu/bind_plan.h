// The CPU executor's side of a plan (src/plan/plan.h): the connections its keys name, and a
// PrimTask per task.
#pragma once

#include <memory>
#include <vector>

#include "src/exec/cpu/prim_task.h"
#include "src/plan/coll.h"
#include "src/plan/plan.h"

namespace loom {

// The connections `links` names on `op`'s communicator; they must exist.
TaskLinks bindLinks(const CollOp& op, const PlanLinks& links);
// Appends a PrimTask per task of `plan`, on the connections its keys name; gates refer to the
// tasks appended by the same call.
void bindPlan(const CollOp& op, const Plan& plan, std::vector<std::unique_ptr<PrimTask>>& tasks);
// Both: the CPU executor's way to run a call.
void planOp(const CollOp& op, uint64_t number, std::vector<std::unique_ptr<PrimTask>>& tasks);
// The exchange's links on `channel` (planner.h, exchangeLinks) bound to their connections;
// false when a connection is not made yet.
bool exchangeTaskLinks(const CollOp& op, int channel, TaskLinks& out, TaskLinks& in, size_t& chunk);

}  // namespace loom
