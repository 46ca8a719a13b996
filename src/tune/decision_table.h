// The tuner's decisions as a table, for people: for each message size, the algorithm,
// protocol and channel count it picks, with the predicted time and bus bandwidth, and the
// runner-up. loom-topo --tune prints it for the machine it runs on; loom-tune-table for
// simulated clusters.
#pragma once

#include <ostream>

#include "src/tune/cluster_model.h"

namespace loom::tune {

void printDecisionTable(const ClusterModel& model, std::ostream& out);

}  // namespace loom::tune
