// The hang report: from every rank's progress on a communicator (control_channel.h), which
// ranks have not arrived at the call this rank waits in, and what they did last.
#pragma once

#include <string>
#include <vector>

#include "src/bootstrap/control_channel.h"

namespace loom {

// "AllReduce #21 (count 675920, float32): ranks 0-2 are waiting; rank 3 has not called it. Its
// last call was AllGather #20, completed 5.0 s ago." Empty when rank `me` has no call in flight.
std::string formatHangReport(int me, const std::vector<RankProgress>& table);

// "AllReduce #21 (count 675920, float32)": the call of a progress record, with the root or
// peer where it matters.
std::string describeCall(const RankProgress& p);

// "rank 3", "ranks 0-2", "ranks 0, 2, 5-7".
std::string describeRanks(const std::vector<int>& ranks);

}  // namespace loom
