// What the 128 opaque bytes of a loomUniqueId hold: a magic, the rendezvous root's address and
// the job's secret. Packed field by field in network order so any two builds agree.
#pragma once

#include <array>
#include <cstdint>

#include "loom/loom.h"
#include "src/core/socket.h"

namespace loom {

using Secret = std::array<uint8_t, 16>;

struct UniqueIdContents {
  SocketAddress root;
  Secret secret{};
  // Set when the id came from LOOM_COMM_ID: nobody listens yet, rank 0 starts the root in
  // loomCommInitRank.
  bool rootAtRank0 = false;
};

loomUniqueId packUniqueId(const UniqueIdContents& contents);
// Throws InvalidArgument when the bytes are not a loom id of this version.
UniqueIdContents unpackUniqueId(const loomUniqueId& id);

// A fresh random secret (getrandom).
Secret randomSecret();
// The secret every rank derives from LOOM_COMM_ID (and LOOM_COMM_SECRET when set).
Secret derivedSecret(const std::string& commId, const std::string& sharedSecret);

// Compares in constant time, so a stranger cannot learn the secret byte by byte from timing.
bool secretsEqual(const Secret& a, const Secret& b);

}  // namespace loom
