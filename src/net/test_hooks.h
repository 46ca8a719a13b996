// Observation points for tests (fault injection and attack tests need to know where loom
// listens and when it reaches a stage of init). Process-wide by necessity: they are set before
// any communicator exists. Unset hooks cost one relaxed atomic load.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "src/net/socket.h"

namespace loom::testing {

// Called with the address of every bootstrap listener (root and rank) right after it opens.
using ListenerHook = std::function<void(const SocketAddress&)>;
void setListenerHook(ListenerHook hook);
void notifyListenerCreated(const SocketAddress& address);

// Called by init with (rank, stage) at "root_registered" (the root has this rank's hello) and
// "bootstrap_ready" (the rank ring is connected).
using InitStageHook = std::function<void(int rank, const std::string& stage)>;
void setInitStageHook(InitStageHook hook);
void notifyInitStage(int rank, const std::string& stage);

// A pause (ms) after each control frame that goes to several ranks (a failure's relay, a
// LEAVING): a loaded machine's scheduling delay, made deterministic. 0: none.
void setControlRelayPauseMs(int ms);
int controlRelayPauseMs();

// Connections refused for not proving the secret (or malformed), in this process.
void countRefusedConnection();
uint64_t refusedConnectionCount();

}  // namespace loom::testing
