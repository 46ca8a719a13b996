#include "src/api/comm_layers.h"

#include <memory>

#include "src/exec/device_executor.h"
#include "src/plan/planner_state.h"

namespace loom {

void attachLayers(Comm& comm) {
  comm.setLayer(CommLayer::kPlan, std::make_unique<PlannerState>(comm));
  comm.setLayer(CommLayer::kExec, makeExecutor(comm));
}

}  // namespace loom
