// The table of live communicator handles. Every API call looks its handle up here, so a
// destroyed, aborted or made-up handle is reported (loomInvalidArgument) instead of crashing,
// and a communicator stays alive while any call still uses it.
#pragma once

#include <memory>

#include "src/comm/comm.h"

namespace loom {

loomComm* registerComm(std::shared_ptr<Comm> comm);
// Throws InvalidArgument when the handle is NULL or not live.
std::shared_ptr<Comm> findComm(const loomComm* handle);
// Removes and returns the communicator; throws as findComm.
std::shared_ptr<Comm> unregisterComm(const loomComm* handle);
// nullptr instead of throwing.
std::shared_ptr<Comm> findCommOrNull(const loomComm* handle);

}  // namespace loom
