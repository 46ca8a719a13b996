// The rendezvous root: collects one registration per rank (its rank, nranks and the address of
// its own bootstrap listener), then tells every rank the addresses of all ranks. It runs on a
// thread of the process that called loomGetUniqueId (or of rank 0 with LOOM_COMM_ID).
//
// It is also where "who is missing" is known, so it is the root that reports: a rank that never
// arrives (loomTimeout, naming the missing ranks), a rank that disconnects before everyone
// arrived (loomRemoteError), ranks disagreeing about nranks or claiming the same rank
// (loomInvalidArgument). The ranks wait a little longer than the root so its verdict reaches
// them before their own deadline does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/bootstrap/unique_id.h"
#include "src/net/socket.h"

namespace loom {

// What a rank sends the root with its registration, and what the root answers.
struct RootRegistration {
  SocketAddress listener;  // where this rank accepts bootstrap connections
  int64_t timeoutMs = 0;   // the rank's deadline; the root uses the first rank's
};
struct RootReply {
  loomResult_t status = loomSuccess;
  std::string message;                   // why, when status is not loomSuccess
  std::vector<SocketAddress> listeners;  // every rank's, when status is loomSuccess
};

// Bounds the root checks registrations against (a job larger than this is not a bootstrap over
// one root's TCP listener; a timeout beyond it would overflow deadline arithmetic).
inline constexpr int kMaxRootRanks = 1 << 20;
inline constexpr int64_t kMaxRootTimeoutMs = int64_t{1} << 42;  // about 139 years

std::vector<char> encodeRegistration(const RootRegistration& registration);
RootRegistration decodeRegistration(const std::vector<char>& bytes);
std::vector<char> encodeReply(const RootReply& reply);
// Reads a reply from `socket`; throws what the transfer throws.
RootReply receiveReply(Socket& socket, Deadline deadline, AbortFlag abort);
// Decodes a reply's body (what follows its 4-byte size); throws RemoteError when malformed.
RootReply decodeReplyBody(const std::vector<char>& body);

// Extra time ranks wait beyond their own deadline, for the root's verdict.
inline constexpr int kRootGraceMs = 3000;

// Starts the root listening on `address` (port 0 picks one) on a detached thread; returns the
// address it listens on. Throws if it cannot listen there.
SocketAddress startBootstrapRoot(const SocketAddress& address, const Secret& secret);

}  // namespace loom
