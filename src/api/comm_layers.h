// Makes the per-communicator state of the layers above the communicator: the planner's, then
// the executor's (which reads the planner's). The communicator cannot include those layers, so
// the C API, which sees every layer, hands it this function in CommOptions::attachLayers, and
// the communicator calls it once it is ready (src/comm/comm.h, CommLayerState).
#pragma once

#include "src/comm/comm.h"

namespace loom {

void attachLayers(Comm& comm);

}  // namespace loom
